"""Stand-ins for the operators torchvision declares at import when its compiled library cannot load.

The torchvision wheels on the package index are built against CUDA torch: beside the pinned CPU torch their `_C`
library fails to load, and `import torchvision` then stops at registering fake kernels for `torchvision::nms` and
`qnms`. transformers imports torchvision whenever it is installed, so one failing import breaks every model class
(BERT included). Declaring the two schemas (no kernel: calling either op still fails) lets torchvision's model
definitions, and everything that imports it, load; nothing is declared where the library loads."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import torch

_FRAGMENTS: list[torch.library.Library] = []     # a registration lives as long as its library object


def _compiled_library_loads() -> bool:
    """Whether torchvision's own compiled ops load (trying it the way torchvision does)."""
    spec = importlib.util.find_spec("torchvision")
    for lib in Path(next(iter(spec.submodule_search_locations))).glob("_C*.so"):
        try:
            torch.ops.load_library(str(lib))
            return True
        except (OSError, RuntimeError):
            return False
    return False


def declare_torchvision_ops() -> None:
    """Declare `torchvision::nms` and `qnms` if torchvision is installed and its compiled ops cannot load."""
    if _FRAGMENTS or importlib.util.find_spec("torchvision") is None or _compiled_library_loads():
        return
    fragment = torch.library.Library("torchvision", "FRAGMENT")
    for op in ("nms", "qnms"):
        fragment.define(f"{op}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    _FRAGMENTS.append(fragment)
