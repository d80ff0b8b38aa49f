"""The one error hierarchy: every error class pybuda defines is a PyBudaError, on the user-input or the internal
branch; an internal error says it is a bug and what to report; a compiled netlist that breaks a rule is internal."""
from __future__ import annotations

import importlib
import inspect
import pickle
import pkgutil

import pytest
import torch

import pybuda
from pybuda.errors import InternalError, PyBudaError, UsageError, UserInputError, UserTypeError


def _error_classes() -> dict:
    found = {}
    for info in pkgutil.walk_packages(pybuda.__path__, "pybuda."):
        if info.name.startswith("pybuda.tools.cli_") or info.name in ("pybuda.__main__", "pybuda.errors"):
            continue
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if inspect.isclass(obj) and issubclass(obj, Exception) and not issubclass(obj, Warning) \
                    and obj.__module__ == info.name:
                found[f"{info.name}.{name}"] = obj
    return found


def test_every_error_class_is_on_one_branch():
    classes = _error_classes()
    assert len(classes) >= 20
    for name, cls in classes.items():
        assert issubclass(cls, PyBudaError), f"{name} is not a pybuda.PyBudaError"
        assert issubclass(cls, UserInputError) != issubclass(cls, InternalError), name


def test_branches_keep_the_python_conventions():
    assert issubclass(UserInputError, ValueError) and issubclass(UserTypeError, TypeError)
    assert issubclass(UsageError, RuntimeError) and issubclass(InternalError, RuntimeError)
    assert issubclass(pybuda.VerificationError, AssertionError) and issubclass(pybuda.VerificationError, InternalError)


def test_an_internal_error_asks_for_a_report_and_pickles():
    err = InternalError("the placer put two ops on one core")
    assert str(err).startswith("the placer put two ops on one core\n(this is a pybuda bug: please report it")
    assert str(pickle.loads(pickle.dumps(err))) == str(err)


def test_a_compiled_netlist_that_breaks_a_rule_is_a_compiler_bug(tmp_path, monkeypatch):
    import pybuda.stages
    from pybuda.netlist import CompiledNetlistError, NetlistError

    def broken_build(*args, **kwargs):
        netlist = build(*args, **kwargs)
        next(iter(netlist.ops.values())).ublock = (4, 4)      # 16 tiles: more than the dest register holds
        return netlist

    build = pybuda.stages.build_netlist
    monkeypatch.setattr(pybuda.stages, "build_netlist", broken_build)
    with pytest.raises(CompiledNetlistError) as err:
        pybuda.compile(torch.nn.Linear(64, 64), torch.randn(2, 64), output_dir=tmp_path)
    assert isinstance(err.value, InternalError) and not isinstance(err.value, NetlistError)
    assert "dest.ublock_limit" in err.value.rules and "this is a pybuda bug" in str(err.value)
    assert not list(tmp_path.glob("*.yaml"))          # nothing half-written


def test_an_unexpected_exception_in_a_stage_asks_for_a_report(tmp_path):
    import dataclasses

    from pybuda.stages import STAGES

    def broken(state):
        raise KeyError("lost op")

    stages = [dataclasses.replace(s, run=broken) if s.name == "lower" else s for s in STAGES]
    with pytest.raises(KeyError) as err:
        pybuda.compile(torch.nn.Linear(32, 32), torch.randn(2, 32), stages=stages, output_dir=tmp_path)
    note = err.value.__notes__[-1]
    assert "compile stage 'lower'" in note and "pybuda bug" in note


def test_a_model_torch_export_cannot_capture_is_a_user_input_error(tmp_path):
    class Branchy(torch.nn.Module):
        def forward(self, x):
            return x * 2 if x.sum().item() > 0 else x

    with pytest.raises(UserInputError, match="torch.export cannot capture Branchy"):
        pybuda.compile(Branchy(), torch.randn(1, 32), output_dir=tmp_path)
