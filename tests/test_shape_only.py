"""Shape-only compiles: a torch model whose weights are on the meta device (too large for this machine's memory, or
never loaded) compiles to the netlist, placement and estimate the same model with its weights gives; a run, an image,
verify and training, which need the numbers, are refused naming why."""
import pytest
import torch
import transformers

import pybuda
from pybuda.errors import UserInputError
from pybuda.runtime.model import ShapeOnlyError


class ConvNet(torch.nn.Module):
    """A conv + batchnorm (folded by consteval into the conv's weights), a layernorm and a linear head."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(16)
        self.norm = torch.nn.LayerNorm(16 * 8 * 8)
        self.head = torch.nn.Linear(16 * 8 * 8, 10)

    def forward(self, x):
        y = torch.relu(self.bn(self.conv(x)))
        return self.head(self.norm(y.flatten(1)))


def _built(device: str, build=ConvNet):
    torch.manual_seed(0)
    with torch.device(device):
        return build().eval()


X = torch.randn(2, 3, 8, 8)


@pytest.fixture(scope="module")
def compiled():
    return pybuda.compile(_built("cpu"), X), pybuda.compile(_built("meta"), X)


def test_meta_weights_give_the_netlist_and_estimate_of_the_real_ones(compiled):
    real, meta = compiled
    assert meta.runtime.netlist_texts == real.runtime.netlist_texts
    assert meta.perf.samples_per_second == real.perf.samples_per_second
    assert not real.runtime.shape_only    # every weight, the conv's folded with the batchnorm's by consteval
    assert meta.runtime.shape_only == ["bn.bias.folded.const.brcst_r", "conv.weight.folded.const", "head.bias",
                                       "head.weight", "norm.bias", "norm.weight"]


def test_a_shape_only_model_refuses_a_run_and_an_image(compiled, tmp_path):
    _, meta = compiled
    with pytest.raises(ShapeOnlyError, match="compiled shape-only .* a run needs the weights' numbers"):
        meta(X)
    with pytest.raises(ShapeOnlyError, match="a TTI image needs"):
        meta.save(tmp_path / "model.tti")
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("what, kwargs", [
    ("verify", {"verify": True}),
    ("a training compile", {"loss": torch.nn.MSELoss(), "optimizer": pybuda.optimizers.SGD(learning_rate=0.1),
                            "sample_targets": torch.zeros(2, 10)}),
])
def test_what_needs_the_numbers_is_refused_before_compiling(what, kwargs):
    with pytest.raises(UserInputError, match=f"ConvNet holds weights on torch's meta device.*{what} needs"):
        pybuda.compile(_built("meta"), X, **kwargs)


def test_a_meta_causal_lm_compiles_its_decode_step():
    """Falcon's decode step (`enable_link_past_cache_ios`) from meta weights: the real one's netlists and tokens/s
    (the published Falcon-7B row is estimated so: docs/models.md); generate refuses."""
    config = transformers.FalconConfig(hidden_size=64, num_attention_heads=2, num_hidden_layers=2, vocab_size=300,
                                       multi_query=True, parallel_attn=True, new_decoder_architecture=False,
                                       alibi=False, bias=False)
    ids = torch.zeros(1, 40, dtype=torch.long)
    steps = [pybuda.compile(_built(device, lambda: transformers.FalconForCausalLM(config)), ids, device="n150",
                            config=pybuda.CompilerConfig(enable_link_past_cache_ios=True, generation_max_length=128))
             for device in ("cpu", "meta")]
    real, meta = steps
    assert meta.runtime.netlist_texts == real.runtime.netlist_texts
    assert meta.perf.generation.tokens_per_second == real.perf.generation.tokens_per_second > 0
    with pytest.raises(ShapeOnlyError, match="a run needs"):
        meta.generate(ids, max_new_tokens=2)
