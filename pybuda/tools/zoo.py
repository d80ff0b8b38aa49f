"""The model zoo of issue 5: each model in a small configuration (the fast test tier) and at full size
(`make test-zoo`), built from configs with random weights (nothing is downloaded)."""
from __future__ import annotations

import dataclasses
from typing import Callable

import torch

from ..errors import UserInputError
from . import published as pub


@dataclasses.dataclass(frozen=True)
class ZooModel:
    name: str
    builder: Callable[[], torch.nn.Module]
    inputs: Callable[[int], tuple]          # microbatch -> sample inputs
    full_size: bool

    def build(self) -> torch.nn.Module:
        """The model in eval mode, with the same random weights every time."""
        torch.manual_seed(0)
        return self.builder().eval()


def _tokens(vocab: int, seq: int) -> Callable[[int], tuple]:
    return lambda batch: (torch.randint(0, vocab, (batch, seq), generator=torch.Generator().manual_seed(0)),)


def _images(size: int, channels: int = 3) -> Callable[[int], tuple]:
    return lambda batch: (torch.randn(batch, channels, size, size, generator=torch.Generator().manual_seed(0)),)


def _bert(hidden: int, layers: int, heads: int, inter: int, vocab: int = 30522) -> Callable:
    def build():
        import transformers as T
        cfg = T.BertConfig(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                           intermediate_size=inter, vocab_size=vocab)
        return T.BertModel(cfg, add_pooling_layer=False).eval()
    return build


def _gpt2(hidden: int, layers: int, heads: int, vocab: int = 50257) -> Callable:
    def build():
        import transformers as T
        cfg = T.GPT2Config(n_embd=hidden, n_layer=layers, n_head=heads, vocab_size=vocab, use_cache=False)
        return T.GPT2Model(cfg).eval()
    return build


def _vit(hidden: int, layers: int, heads: int, inter: int, image: int, patch: int) -> Callable:
    def build():
        import transformers as T
        cfg = T.ViTConfig(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                          intermediate_size=inter, image_size=image, patch_size=patch)
        return T.ViTModel(cfg, add_pooling_layer=False).eval()
    return build


def _resnet(**config) -> Callable:
    def build():
        import transformers as T
        return T.ResNetModel(T.ResNetConfig(**config))
    return build


def _mobilenet_v2(**config) -> Callable:
    def build():
        import transformers as T
        return T.MobileNetV2Model(T.MobileNetV2Config(**config))
    return build


def _mnist() -> torch.nn.Module:
    from .models import MNISTCNN
    return MNISTCNN()


# the rest of the published benchmark table (pybuda.tools.published; timm, pytorchcv, yolov5: optional), tested by
# `make test-published`, not `make test-zoo`
_PUBLISHED_ONLY = [      # the models of the published table the zoo did not have
    ZooModel("bert_large_384_cls", pub.transformers_model(
        "BertConfig", "BertForSequenceClassification", hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
        intermediate_size=4096, attn_implementation="eager"), pub.tokens_and_mask(30522, 384, 64), True),
    ZooModel("mobilenetv1", pub.transformers_model("MobileNetV1Config", "MobileNetV1ForImageClassification"),
             _images(224), True),
    ZooModel("mobilenetv3_large", pub.timm_model("mobilenetv3_large_100"), _images(224), True),
    ZooModel("deit_b16", pub.transformers_model("DeiTConfig", "DeiTForImageClassificationWithTeacher"),
             _images(224), True),
    ZooModel("vovnet39", pub.timm_model("ese_vovnet39b"), _images(224), True),
    ZooModel("hrnet_w64", pub.timm_model("hrnet_w64"), _images(224), True),
    ZooModel("yolov5s", pub.yolov5, _images(320), True),
    ZooModel("unet", pub.BrainUNet, _images(256), True),
    ZooModel("inception_v4", pub.timm_model("inception_v4"), _images(224), True),
    ZooModel("openpose_2d", pub.pytorchcv_model("lwopenpose2d_mobilenet_cmupan_coco"), _images(224), True),
]


ZOO: dict[str, ZooModel] = {m.name: m for m in [
    # fast tier
    ZooModel("bert_tiny", _bert(128, 2, 2, 512, vocab=1000), _tokens(1000, 32), False),
    ZooModel("gpt2_tiny", _gpt2(128, 2, 2, vocab=1000), _tokens(1000, 32), False),
    ZooModel("vit_tiny", _vit(128, 2, 2, 512, image=32, patch=16), _images(32), False),
    ZooModel("resnet_tiny", _resnet(embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1],
                                     layer_type="bottleneck"), _images(16), False),
    ZooModel("mobilenetv2_tiny", _mobilenet_v2(image_size=32, depth_multiplier=0.35), _images(32), False),
    ZooModel("mnist_cnn", _mnist, _images(28, channels=1), False),
    # full size
    ZooModel("bert_base_128", _bert(768, 12, 12, 3072), _tokens(30522, 128), True),
    ZooModel("bert_base_384", _bert(768, 12, 12, 3072), _tokens(30522, 384), True),
    ZooModel("bert_large_128", _bert(1024, 24, 16, 4096), _tokens(30522, 128), True),
    ZooModel("bert_large_384", _bert(1024, 24, 16, 4096), _tokens(30522, 384), True),
    ZooModel("gpt2_small", _gpt2(768, 12, 12), _tokens(50257, 128), True),
    ZooModel("vit_b16", _vit(768, 12, 12, 3072, image=224, patch=16), _images(224), True),
    ZooModel("resnet50", _resnet(), _images(224), True),
    ZooModel("mobilenetv2", _mobilenet_v2(), _images(224), True),
    *_PUBLISHED_ONLY,
]}
PUBLISHED_ONLY = frozenset(m.name for m in _PUBLISHED_ONLY)


@dataclasses.dataclass(frozen=True)
class BenchmarkConfig:
    """A full-size zoo model at one benchmark configuration: device, microbatch, data format and fidelity, and the
    silicon samples/s of the published benchmark table (reference/silicon/README.md) where that configuration
    was measured (None: not in the table; the configuration then follows BERT-Large's)."""

    model: str
    device: str
    microbatch: int
    df: str
    fidelity: str
    silicon: float | None = None


BENCHMARKS: tuple[BenchmarkConfig, ...] = (
    BenchmarkConfig("bert_base_128", "e150", 64, "Bfp8_b", "LoFi"),
    BenchmarkConfig("bert_base_128", "n150", 64, "Bfp8_b", "LoFi"),
    BenchmarkConfig("bert_base_384", "e150", 64, "Bfp8_b", "LoFi"),
    BenchmarkConfig("bert_base_384", "n150", 64, "Bfp8_b", "LoFi"),
    BenchmarkConfig("bert_large_128", "e150", 64, "Bfp8_b", "LoFi"),
    BenchmarkConfig("bert_large_128", "n150", 64, "Bfp8_b", "LoFi"),
    BenchmarkConfig("bert_large_384", "e150", 64, "Bfp8_b", "LoFi"),
    BenchmarkConfig("bert_large_384", "n150", 64, "Bfp8_b", "LoFi"),
    BenchmarkConfig("gpt2_small", "e150", 64, "Bfp8_b", "LoFi"),
    BenchmarkConfig("gpt2_small", "n150", 64, "Bfp8_b", "LoFi"),
    BenchmarkConfig("vit_b16", "e150", 64, "Bfp8_b", "LoFi", 363.0),
    BenchmarkConfig("vit_b16", "n150", 256, "Bfp8_b", "LoFi", 540.0),
    BenchmarkConfig("resnet50", "e150", 64, "Float16_b", "HiFi3", 1410.0),
    BenchmarkConfig("resnet50", "n150", 256, "Bfp8_b", "LoFi", 2891.0),
    BenchmarkConfig("mobilenetv2", "e150", 64, "Float16_b", "HiFi3", 1491.0),
    BenchmarkConfig("mobilenetv2", "n150", 256, "Bfp8_b", "LoFi", 2721.0),
    BenchmarkConfig("bert_large_384_cls", "e150", 64, "Bfp8_b", "LoFi", 99.0),
    BenchmarkConfig("bert_large_384_cls", "n150", 64, "Bfp8_b", "LoFi", 118.0),
    BenchmarkConfig("mobilenetv1", "e150", 64, "Float16_b", "HiFi3", 2924.0),
    BenchmarkConfig("mobilenetv1", "n150", 128, "Bfp8_b", "LoFi", 3102.0),
    BenchmarkConfig("mobilenetv3_large", "e150", 64, "Float16_b", "HiFi3", 1741.0),
    BenchmarkConfig("mobilenetv3_large", "n150", 64, "Float16_b", "HiFi2", 1981.0),
    BenchmarkConfig("deit_b16", "e150", 64, "Bfp8_b", "LoFi", 363.0),
    BenchmarkConfig("deit_b16", "n150", 256, "Bfp8_b", "LoFi", 539.0),
    BenchmarkConfig("vovnet39", "e150", 64, "Float16_b", "HiFi3", 819.0),
    BenchmarkConfig("vovnet39", "n150", 128, "Bfp8_b", "LoFi", 1603.0),
    BenchmarkConfig("hrnet_w64", "e150", 64, "Bfp8_b", "LoFi", 233.0),
    BenchmarkConfig("hrnet_w64", "n150", 128, "Bfp8_b", "LoFi", 324.0),
    BenchmarkConfig("yolov5s", "e150", 64, "Float16_b", "HiFi3", 232.0),
    BenchmarkConfig("yolov5s", "n150", 128, "Float16_b", "HiFi3", 1190.0),
    BenchmarkConfig("unet", "e150", 64, "Float16_b", "HiFi3", 268.0),
    BenchmarkConfig("unet", "n150", 64, "Bfp8_b", "LoFi", 490.0),
    BenchmarkConfig("inception_v4", "e150", 64, "Float16_b", "HiFi3", 458.0),
    BenchmarkConfig("inception_v4", "n150", 128, "Bfp8_b", "LoFi", 1061.0),
    BenchmarkConfig("openpose_2d", "e150", 64, "Float16", "HiFi3", 1098.0),
    BenchmarkConfig("openpose_2d", "n150", 64, "Float16", "HiFi3", 1252.0),
)
PUBLISHED: tuple[BenchmarkConfig, ...] = tuple(b for b in BENCHMARKS if b.silicon is not None)


def compile_zoo_model(name: str, device: str, microbatch: int, df: str | None = None, fidelity: str | None = None,
                      policy: str = "default", verify: bool = False):
    """Compile zoo model `name` at one configuration (default formats where `df`/`fidelity` are None) in a
    temporary output directory; the compiled model (its netlist and estimate are kept in memory)."""
    import tempfile

    import pybuda
    if name not in ZOO:
        raise UserInputError(f"unknown zoo model {name!r}; the zoo has {', '.join(ZOO)}")
    config = pybuda.CompilerConfig(balancer_policy=policy)
    if df:
        config.default_df_override = df
    if fidelity:
        config.default_math_fidelity = fidelity
    entry = ZOO[name]
    torch.manual_seed(0)
    with torch.no_grad(), tempfile.TemporaryDirectory() as out:
        return pybuda.compile(entry.build(), *entry.inputs(microbatch), device=device, config=config,
                              output_dir=out, verify=verify)
