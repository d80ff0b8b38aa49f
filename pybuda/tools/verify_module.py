"""The legacy test harness `pybuda.verify.verify_module(module, input_shapes, verify_cfg, ...)`: random inputs (and
random values for parameters made from a shape), a compile with `verify=True` (every stage, the netlist run in the
backend simulator included, checked against the framework), then the compiled model's outputs compared with the
framework's as legacy compared them: `torch.allclose` with atol = `relative_atol` x the largest golden value, or a
PCC of at least `pcc`."""
from __future__ import annotations

import dataclasses
import enum
from typing import Any, Sequence

import numpy as np
import torch

from ..compile import compile as compile_model, framework_outputs
from ..errors import UserInputError
from ..module import PyBudaModule
from ..verify import VerificationError, pcc as pearson

DEFAULT_PCC = 0.99
DEVICE_OF_ARCH = {"grayskull": "e150", "wormhole": "n150", "wormhole_b0": "n150"}


class TestKind(enum.Enum):
    """What a legacy verify run checks; only inference is verified by `verify_module` here."""

    __test__ = False    # not a pytest test class

    INFERENCE = "inference"
    TRAINING = "training"
    TRAINING_RECOMPUTE = "training_recompute"


@dataclasses.dataclass
class VerifyConfig:
    """The legacy `VerifyConfig` fields `verify_module` reads (legacy defaults). `arch` picks the device
    ("grayskull": e150, "wormhole_b0": n150; None: the config's device); `devtype` is accepted for legacy scripts
    (the backend simulator is the only backend here)."""

    graph_name: str = "graph"
    enabled: bool = True
    pcc: float | None = None
    relative_atol: float = 0.1
    rtol: float = 0.0
    test_kind: TestKind = TestKind.INFERENCE
    arch: Any = None
    devtype: Any = None

    @classmethod
    def disabled(cls) -> "VerifyConfig":
        """A config that checks nothing (the model is still compiled and run)."""
        return cls(enabled=False)


def verify_module(module, input_shapes: Sequence[tuple], verify_cfg: VerifyConfig | None = None,
                  input_params: Sequence[dict] = (), device_type: str = "TTDevice",
                  params_centered_on_zero: bool = False, scale_params: float = 1.0, inputs=None,
                  loss_module=None, uniform_inputs: bool = False, inputs_centered_on_zero: bool = False
                  ) -> list[torch.Tensor]:
    """Compile `module` for random inputs of `input_shapes` (or `inputs`), run it and check it against the
    framework (module docstring); returns the compiled model's outputs. VerificationError names the output that
    diverges."""
    cfg = verify_cfg or VerifyConfig()
    _check_supported(cfg, device_type, loss_module)
    if inputs is None:
        inputs = [_random_input(shape, params, uniform_inputs, inputs_centered_on_zero)
                  for shape, params in zip(input_shapes, [*input_params, *[{}] * len(input_shapes)])]
    if isinstance(module, PyBudaModule):
        _draw_parameters(module, params_centered_on_zero, scale_params)
    compiled = compile_model(module, *inputs, device=_device(cfg.arch), verify=cfg.enabled)
    outputs = compiled(*inputs)
    outputs = list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]
    if cfg.enabled:
        for k, (got, want) in enumerate(zip(outputs, framework_outputs(module, inputs))):
            _compare(f"{cfg.graph_name} output {k}", got.detach().numpy(), want, cfg)
    return outputs


def _check_supported(cfg: VerifyConfig, device_type: str, loss_module) -> None:
    if device_type != "TTDevice":
        raise UserInputError(f"verify_module: device_type {device_type!r}: only 'TTDevice' (the compiled model, run "
                             "in the backend simulator) is verified here")
    if cfg.test_kind is not TestKind.INFERENCE or loss_module is not None:
        raise UserInputError(f"verify_module: test_kind {cfg.test_kind.name}: only INFERENCE is verified by "
                             "verify_module here; compile a training step with pybuda.compile(model, ..., loss=, "
                             "optimizer=), which checks gradients with verify=True (docs/training.md)")


def _device(arch: Any) -> str | None:
    """The device of a legacy `arch` (a BackendDevice-like enum or its name)."""
    if arch is None:
        return None
    name = str(getattr(arch, "name", arch)).lower()
    if name not in DEVICE_OF_ARCH:
        raise UserInputError(f"verify_module: arch {arch!r}; legal: {sorted(DEVICE_OF_ARCH)}")
    return DEVICE_OF_ARCH[name]


def _random_input(shape: tuple, params: dict, uniform: bool, centered: bool) -> torch.Tensor:
    """A random input: normal, or (`uniform`) uniform in [0, 1) ([-1, 1) when `centered`), in the legacy
    `input_params` "data_format" (a torch dtype)."""
    x = torch.rand(shape) if uniform or centered else torch.randn(shape)
    if centered:
        x = x * 2 - 1
    return x.to(params.get("data_format", torch.float32))


def _draw_parameters(module: PyBudaModule, centered: bool, scale: float) -> None:
    """Legacy's parameters without a value (here: made from a shape) drawn uniform in [0, 1) (centered: [-0.5,
    0.5)) times `scale`; parameters given a tensor keep it."""
    for param in module.get_parameters().values():
        if param.from_shape:
            value = torch.rand(param.shape) - (0.5 if centered else 0.0)
            param.set_value(value * scale)


def _compare(what: str, got: np.ndarray, want: np.ndarray, cfg: VerifyConfig) -> None:
    """Legacy `compare_tensor_to_golden`: equal shapes, then allclose (atol relative to the golden's largest
    value) or a PCC of at least cfg.pcc."""
    if got.shape != want.shape:
        raise VerificationError(f"{what}: shape {got.shape}, the framework's {want.shape}")
    atol = cfg.relative_atol * float(np.abs(want).max(initial=0.0))
    threshold = DEFAULT_PCC if cfg.pcc is None else cfg.pcc
    value = pearson(got, want)
    if not (np.allclose(got, want, rtol=cfg.rtol, atol=atol) or value >= threshold):
        raise VerificationError(f"{what}: PCC {value:.4f} < {threshold} and max abs error "
                                f"{float(np.abs(got - want).max()):.4g} > atol {atol:.4g}")
