"""Models users bring (issue 10): architectures the zoo does not cover, each built from a small `transformers`
config with random weights (nothing is downloaded), for `benchmarks/models_table.py` and `tests/test_zoo_models.py`."""
from __future__ import annotations

from typing import Callable

import torch

from .zoo import ZooModel


def _tokens(vocab: int = 1000, seq: int = 32) -> Callable[[int], tuple]:
    return lambda batch: (torch.randint(0, vocab, (batch, seq), generator=torch.Generator().manual_seed(0)),)


def _images(size: int, channels: int = 3) -> Callable[[int], tuple]:
    return lambda batch: (torch.randn(batch, channels, size, size, generator=torch.Generator().manual_seed(0)),)


def _audio(samples: int) -> Callable[[int], tuple]:
    return lambda batch: (torch.randn(batch, samples, generator=torch.Generator().manual_seed(0)),)


def _hf(config_cls: str, model_cls: str, **config) -> Callable[[], torch.nn.Module]:
    """A builder of `transformers.<model_cls>(<config_cls>(**config))`, eval mode, no KV cache."""
    def build() -> torch.nn.Module:
        import transformers as T
        cfg = getattr(T, config_cls)(**config)
        if hasattr(cfg, "use_cache"):
            cfg.use_cache = False
        return getattr(T, model_cls)(cfg).eval()
    return build


_TEXT = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128, vocab_size=1000)
_DECODER = dict(_TEXT, num_key_value_heads=2, max_position_embeddings=64)

FAMILIES: dict[str, ZooModel] = {m.name: m for m in [
    # encoders, learned / absolute positions
    ZooModel("distilbert", _hf("DistilBertConfig", "DistilBertModel", dim=64, n_layers=2, n_heads=2, hidden_dim=128,
                               vocab_size=1000), _tokens(), False),
    ZooModel("roberta", _hf("RobertaConfig", "RobertaModel", **_TEXT), _tokens(), False),
    ZooModel("albert", _hf("AlbertConfig", "AlbertModel", embedding_size=32, **_TEXT), _tokens(), False),
    ZooModel("electra", _hf("ElectraConfig", "ElectraModel", embedding_size=32, **_TEXT), _tokens(), False),
    # encoders, relative positions
    ZooModel("deberta", _hf("DebertaConfig", "DebertaModel", **_TEXT), _tokens(), False),
    ZooModel("deberta_v2", _hf("DebertaV2Config", "DebertaV2Model", **_TEXT), _tokens(), False),
    ZooModel("t5_encoder", _hf("T5Config", "T5EncoderModel", d_model=64, d_kv=32, d_ff=128, num_layers=2,
                               num_heads=2, vocab_size=1000), _tokens(), False),
    # decoders: learned positions, alibi, rotary
    ZooModel("opt", _hf("OPTConfig", "OPTModel", hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                        ffn_dim=128, vocab_size=1000, word_embed_proj_dim=64), _tokens(), False),
    ZooModel("gpt_neo", _hf("GPTNeoConfig", "GPTNeoModel", hidden_size=64, num_layers=2, num_heads=2,
                            attention_types=[[["global", "local"], 1]], window_size=16, vocab_size=1000,
                            bos_token_id=0, eos_token_id=0),
             _tokens(), False),
    ZooModel("bloom", _hf("BloomConfig", "BloomModel", hidden_size=64, n_layer=2, n_head=2, vocab_size=1000),
             _tokens(), False),
    ZooModel("llama", _hf("LlamaConfig", "LlamaModel", **_DECODER), _tokens(), False),
    ZooModel("qwen2", _hf("Qwen2Config", "Qwen2Model", **_DECODER), _tokens(), False),
    ZooModel("mistral", _hf("MistralConfig", "MistralModel", **_DECODER), _tokens(), False),
    # vision transformers: class tokens, windows
    ZooModel("deit", _hf("DeiTConfig", "DeiTModel", hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=128, image_size=32, patch_size=8), _images(32), False),
    ZooModel("beit", _hf("BeitConfig", "BeitModel", hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=128, image_size=32, patch_size=8,
                         use_relative_position_bias=True), _images(32), False),
    ZooModel("swin", _hf("SwinConfig", "SwinModel", image_size=32, patch_size=2, embed_dim=32, depths=[2, 2],
                         num_heads=[2, 4], window_size=4), _images(32), False),
    # CNNs: squeeze-and-excitation, depthwise-separable, inverted bottlenecks
    ZooModel("convnext", _hf("ConvNextConfig", "ConvNextModel", hidden_sizes=[32, 64], depths=[1, 1],
                             num_stages=2), _images(32), False),
    ZooModel("regnet", _hf("RegNetConfig", "RegNetModel", embedding_size=16, hidden_sizes=[32, 64], depths=[1, 1],
                           groups_width=8), _images(32), False),
    ZooModel("efficientnet", _hf("EfficientNetConfig", "EfficientNetModel", image_size=32, width_coefficient=0.25,
                                 depth_coefficient=0.25, hidden_dim=320), _images(32), False),
    ZooModel("mobilenet_v1", _hf("MobileNetV1Config", "MobileNetV1Model", image_size=32, depth_multiplier=0.25),
             _images(32), False),
    # hybrid conv / attention
    ZooModel("mobilevit", _hf("MobileViTConfig", "MobileViTModel", image_size=32, hidden_sizes=[32, 48, 64],
                              neck_hidden_sizes=[8, 16, 24, 32, 48, 64, 96]), _images(32), False),
    ZooModel("levit", _hf("LevitConfig", "LevitModel", image_size=64, hidden_sizes=[32, 64, 96],
                          num_attention_heads=[1, 2, 3], depths=[1, 1, 1], key_dim=[8, 8, 8]), _images(64), False),
    # (CvT's builder indexes the drop-path rates of a stage by the stage: stage k needs depth > k)
    ZooModel("cvt", _hf("CvtConfig", "CvtModel", embed_dim=[16, 32, 48], num_heads=[1, 2, 3], depth=[1, 2, 3],
                        mlp_ratio=[2.0, 2.0, 2.0], drop_path_rate=[0.0, 0.0, 0.0]), _images(32), False),
    # segmentation encoder
    ZooModel("segformer", _hf("SegformerConfig", "SegformerModel", num_encoder_blocks=2, depths=[1, 1],
                              sr_ratios=[2, 1], hidden_sizes=[16, 32], num_attention_heads=[1, 2],
                              patch_sizes=[7, 3], strides=[4, 2], mlp_ratios=[2, 2]), _images(32), False),
    # 1-D convolutional audio encoders, with their CTC head (one output: the bare encoders return two)
    ZooModel("wav2vec2", _hf("Wav2Vec2Config", "Wav2Vec2ForCTC", vocab_size=32, hidden_size=64, num_hidden_layers=2,
                             num_attention_heads=2, intermediate_size=128, conv_dim=(32, 32, 32),
                             conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3), num_conv_pos_embeddings=16,
                             num_conv_pos_embedding_groups=4), _audio(1600), False),
    ZooModel("hubert", _hf("HubertConfig", "HubertForCTC", vocab_size=32, hidden_size=64, num_hidden_layers=2,
                           num_attention_heads=2, intermediate_size=128, conv_dim=(32, 32, 32),
                           conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3), num_conv_pos_embeddings=16,
                           num_conv_pos_embedding_groups=4), _audio(1600), False),
]}
