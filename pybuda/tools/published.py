"""The models of the legacy compiler's published benchmark table (reference/silicon/README.md, tenstorrent/benchmarking
2024-09) built as a user would: from the package each comes from (`transformers`, `timm`, `pytorchcv`, the `yolov5`
package) with random weights, nothing downloaded. `timm`, `pytorchcv` and `yolov5` are an optional extra (`make
install-published`); a builder whose package is missing raises an error that says so."""
from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType
from typing import Callable

import torch
import torch.nn as nn

from ..errors import UserInputError

INSTALL_HINT = "run `make install-published` (installs timm, pytorchcv and yolov5 beside the pinned CPU torch)"


def optional_package(name: str) -> ModuleType:
    """Import an optional package of the published models."""
    try:
        return importlib.import_module(name)
    except ImportError as e:
        raise UserInputError(f"the published models need the package {name!r} ({e}); {INSTALL_HINT}") from e


def timm_model(arch: str) -> Callable[[], nn.Module]:
    """A `timm` architecture with random weights."""
    return lambda: optional_package("timm").create_model(arch, pretrained=False)


def pytorchcv_model(arch: str) -> Callable[[], nn.Module]:
    """A `pytorchcv` architecture with random weights."""
    return lambda: optional_package("pytorchcv.model_provider").get_model(arch, pretrained=False)


def yolov5(variant: str = "yolov5s") -> nn.Module:
    """A YOLOv5 model built from the `yolov5` package's yaml, convolutions and batch norms fused, its detect head on
    the export path (one tensor of boxes: centre, size, objectness, class scores per anchor and cell)."""
    package = optional_package("yolov5")
    yolo = optional_package("yolov5.models.yolo")
    with torch.no_grad():
        model = yolo.Model(str(Path(package.__file__).parent / "models" / f"{variant}.yaml")).eval().fuse()
    model.model[-1].export = True
    return model


class BrainUNet(nn.Module):
    """The brain-segmentation U-Net the benchmark ran (mateuszbuda/brain-segmentation-pytorch, a torch.hub model
    and no package): four levels of two 3x3 conv + batch norm + ReLU, 2x2 max pools down, 2x2 transposed convs up,
    skip connections concatenated along the channels, a 1x1 conv and a sigmoid."""

    def __init__(self, in_channels: int = 3, out_channels: int = 1, features: int = 32):
        super().__init__()
        widths = [features * 2 ** k for k in range(5)]
        self.encoders = nn.ModuleList(self._block(a, b) for a, b in zip([in_channels, *widths[:3]], widths[:4]))
        self.pool = nn.MaxPool2d(kernel_size=2, stride=2)
        self.bottleneck = self._block(widths[3], widths[4])
        self.upconvs = nn.ModuleList(nn.ConvTranspose2d(widths[k + 1], widths[k], 2, stride=2) for k in range(4))
        self.decoders = nn.ModuleList(self._block(widths[k] * 2, widths[k]) for k in range(4))
        self.head = nn.Conv2d(features, out_channels, kernel_size=1)

    @staticmethod
    def _block(cin: int, cout: int) -> nn.Sequential:
        return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(),
                             nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skips = []
        for encoder in self.encoders:
            x = encoder(x)
            skips.append(x)
            x = self.pool(x)
        x = self.bottleneck(x)
        for k in reversed(range(4)):
            x = self.decoders[k](torch.cat((self.upconvs[k](x), skips[k]), dim=1))
        return torch.sigmoid(self.head(x))


def tokens_and_mask(vocab: int, seq: int, padded: int) -> Callable[[int], tuple]:
    """Input ids and an attention mask whose last `padded` positions are padding, per microbatch."""
    def inputs(batch: int) -> tuple:
        ids = torch.randint(0, vocab, (batch, seq), generator=torch.Generator().manual_seed(0))
        mask = torch.ones(batch, seq, dtype=torch.long)
        mask[:, seq - padded:] = 0
        return ids, mask
    return inputs


def transformers_model(config: str, model: str, **kwargs) -> Callable[[], nn.Module]:
    """A `transformers` model class built from its config class with `kwargs`."""
    def build():
        import transformers as T
        return getattr(T, model)(getattr(T, config)(**kwargs))
    return build
