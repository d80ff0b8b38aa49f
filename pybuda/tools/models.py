"""Small reference models used by the demo, tests and benchmarks."""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


class MNISTCNN(nn.Module):
    """The MNIST CNN of the tt-xla performance guide (shared/seeds/001): two convs, max pool, two linears."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = self.dropout2(x)
        x = self.fc2(x)
        return F.log_softmax(x, dim=1)


class BertEncoderStack(nn.Module):
    """A BERT encoder stack on hidden states and an additive attention mask (0 keep, large negative drop) of one
    row per sample, broadcast over heads and query rows: the inputs of the legacy compiler's BERT netlists
    (`graph_tests__netlists__bert_base_inference.yaml`: 12 layers, hidden 768, sequence 128). Random weights."""

    def __init__(self, layers: int = 12, hidden: int = 768, heads: int = 12, intermediate: int = 3072):
        super().__init__()
        from transformers import BertConfig
        from transformers.models.bert.modeling_bert import BertEncoder
        config = BertConfig(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                            intermediate_size=intermediate, attn_implementation="eager")
        self.encoder = BertEncoder(config)

    def forward(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.encoder(hidden_states, attention_mask=attention_mask[:, None, :, :])[0]
