"""Training (issue 14): autograd, optimizers and training netlists run in the simulator, against torch."""
from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

import pybuda
from pybuda.codegen.manifest import HostProgram
from pybuda.netlist.model import Execute
from pybuda.optimizers import SGD, Adam, AdamW
from pybuda.ops.registry import OpError
from pybuda.passes.autograd import AutogradError
from pybuda.runtime.loss import TrainingError
from pybuda.verify import pcc


def _mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64), torch.nn.GELU(),
                               torch.nn.Linear(64, 10))


def _train_both(model, inputs, targets, loss, optimizer, tmp_path, steps=5, df=None, device=None, config=None):
    """Train a compiled copy in the simulator and `model` in torch for `steps` steps; the two state dicts and
    the two loss curves."""
    ref = copy.deepcopy(model)
    config = config or pybuda.CompilerConfig()
    if df is not None:
        config.default_df_override = df
    compiled = pybuda.compile(model, *inputs, loss=loss, optimizer=optimizer, sample_targets=targets,
                              output_dir=tmp_path, config=config, device=device)
    torch_opt = optimizer.torch_optimizer(ref.parameters())
    ours, theirs = [], []
    for _ in range(steps):
        ours.append(compiled.train_step(*inputs, targets=targets))
        torch_opt.zero_grad()
        value = loss(ref(*inputs), targets)
        value.backward()
        torch_opt.step()
        theirs.append(float(value.detach()))
    return compiled, compiled.state_dict(), ref.state_dict(), ours, theirs


@pytest.mark.parametrize("optimizer", [SGD(0.1, momentum=0.9), Adam(1e-2)], ids=["sgd_momentum", "adam"])
# Float32 on n150: grayskull's dest is 16-bit, so its updates are rounded to 16 bits whatever the data format
@pytest.mark.parametrize("df, threshold, device", [(None, 0.99, "e150"), (pybuda.DataFormat.Float32, 0.999, "n150")],
                         ids=["Float16_b-e150", "Float32-n150"])
def test_mlp_parameters_match_torch_after_five_steps(tmp_path, optimizer, df, threshold, device):
    x = torch.randn(4, 32, generator=torch.Generator().manual_seed(1))
    y = torch.randint(0, 10, (4,), generator=torch.Generator().manual_seed(2))
    model = _mlp()
    initial = copy.deepcopy(model).state_dict()
    _, ours, theirs, loss_ours, loss_theirs = _train_both(model, (x,), y, torch.nn.CrossEntropyLoss(), optimizer,
                                                          tmp_path, df=df, device=device)
    assert ours.keys() == theirs.keys()
    for name in theirs:
        assert pcc(ours[name].numpy(), theirs[name].numpy()) >= threshold, name
        # the update itself, not only the (mostly unchanged) weights
        assert pcc((ours[name] - initial[name]).numpy(), (theirs[name] - initial[name]).numpy()) >= threshold, name
    assert np.allclose(loss_ours, loss_theirs, rtol=0.05, atol=0.02)


def test_mlp_learns_a_linear_map(tmp_path):
    """A synthetic task with a known answer: y = x @ W; MSE falls below 5 % of its start in 30 steps of AdamW."""
    torch.manual_seed(3)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32), torch.nn.ReLU(),
                                torch.nn.Linear(32, 8))
    x = torch.randn(8, 16)
    y = x @ torch.randn(16, 8) * 0.5
    compiled = pybuda.compile(model, x, loss=torch.nn.MSELoss(), optimizer=AdamW(1e-2, weight_decay=0.0),
                              sample_targets=y, output_dir=tmp_path)
    losses = [compiled.train_step(x, targets=y) for _ in range(30)]
    assert losses[-1] < 0.05 * losses[0], losses


def test_training_netlist_has_the_legacy_structure(tmp_path):
    x, y = torch.randn(2, 32), torch.randint(0, 10, (2,))
    compiled = pybuda.compile(_mlp(), x, loss=torch.nn.CrossEntropyLoss(), optimizer=SGD(0.1, momentum=0.9),
                              sample_targets=y, output_dir=tmp_path)
    nl = compiled.netlist
    assert [p.name for p in nl.programs] == ["run_fwd", "run_bwd", "run_opt"]
    kinds = {g.split("_")[0] for g in nl.graphs}
    assert kinds == {"fwd", "bwd", "opt"}
    grad_ops = [op for op in nl.ops.values() if op.gradient_op]
    assert grad_ops and all(op.graph.startswith("bwd") for op in grad_ops)
    assert all(nl.queues[f"grad_acc_{p}"].input in {op.name for op in grad_ops} for p in ("0.weight", "4.bias"))
    # the optimizer writes the parameters back (loopback) and runs once per step
    assert nl.queues["0.weight"].type == "ram" and nl.ops[nl.queues["0.weight"].input].graph.startswith("opt")
    assert all(g.input_count == 1 for name, g in nl.graphs.items() if name.startswith("opt"))
    bwd = next(p for p in nl.programs if p.name == "run_bwd")
    zeroed = {q for ins in bwd.instructions if isinstance(ins, Execute) for q, s in ins.queue_settings.items()
              if s.zero == "$v_zero_grad"}
    assert zeroed == {f"grad_acc_{p}" for p in _mlp().state_dict()}
    assert compiled.perf.samples_per_second > 0
    # the balancer optimises what the simulator reports (rounded up once per program)
    assert abs(compiled.placement.estimated_cycles - compiled.perf.total_cycles) <= 3
    assert compiled.placement.lower_bound_cycles <= compiled.placement.estimated_cycles
    assert "training epochs: forward" in compiled.summary()


def test_mixed_precision_rules_select_by_epoch_type_and_gradient_op(tmp_path):
    """configure_mixed_precision's epoch_type ("fwd", "bwd", "opt") and is_gradient_op select training ops; a
    Float32 accumulation keeps a gradient matmul's accumulator in Float32 (its intermediate format must equal
    its output's)."""
    x, y = torch.randn(2, 32), torch.randint(0, 10, (2,))
    config = pybuda.CompilerConfig(default_accumulate_df=pybuda.DataFormat.Float32)
    config.amp_properties.append(pybuda.config.AMPNodeProperties(epoch_type="bwd", output_df=pybuda.DataFormat.Float32))
    config.amp_properties.append(pybuda.config.AMPNodeProperties(is_gradient_op=True, math_fidelity=pybuda.MathFidelity.HiFi4))
    compiled = pybuda.compile(_mlp(), x, loss=torch.nn.CrossEntropyLoss(), optimizer=SGD(0.1), sample_targets=y,
                              output_dir=tmp_path, config=config, device="n150")
    ops = compiled.netlist.ops.values()
    fwd = [op for op in ops if op.graph.startswith("fwd")]
    bwd = [op for op in ops if op.graph.startswith("bwd")]
    assert fwd and all(op.out_df == pybuda.DataFormat.Float16_b for op in fwd)
    assert bwd and all(op.out_df == pybuda.DataFormat.Float32 for op in bwd)
    assert {op.math_fidelity for op in ops if op.gradient_op} == {pybuda.MathFidelity.HiFi4}
    assert {op.math_fidelity for op in ops if not op.gradient_op} == {pybuda.MathFidelity.HiFi3}
    assert all(op.intermed_df == op.out_df for op in ops if op.gradient_op)


def test_dropout_in_training_mode_warns(tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(32, 16), torch.nn.Dropout(0.1), torch.nn.Linear(16, 4))
    with pytest.warns(UserWarning, match="dropout is not applied in training yet.*1"):
        pybuda.compile(model, torch.randn(2, 32), loss=torch.nn.MSELoss(), optimizer=SGD(0.1),
                       sample_targets=torch.randn(2, 4), output_dir=tmp_path)


def test_accumulation_sums_microbatch_gradients(tmp_path):
    """Two microbatches accumulated: the gradient is the sum of each microbatch's, as loss.backward() twice."""
    model = _mlp()
    ref = copy.deepcopy(model)
    x, y = torch.randn(4, 32), torch.randint(0, 10, (4,))
    compiled = pybuda.compile(model, x[:2], loss=torch.nn.CrossEntropyLoss(), optimizer=SGD(0.1),
                              sample_targets=y[:2], output_dir=tmp_path)
    compiled.train_step(x, targets=y, accumulation_steps=2)
    for part in (slice(0, 2), slice(2, 4)):
        torch.nn.CrossEntropyLoss()(ref(x[part]), y[part]).backward()
    grads = compiled.get_parameter_gradients()
    for name, p in ref.named_parameters():
        assert pcc(grads[name].numpy(), p.grad.numpy()) >= 0.99, name


class _CumsumHead(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(32, 4)

    def forward(self, x):
        return torch.cumsum(self.linear(x), dim=-1)


def test_op_without_backward_rule_fails_early_naming_it(tmp_path):
    with pytest.raises(AutogradError, match=r"no backward rule for op type\(s\) cumsum \(ops cumsum_"):
        pybuda.compile(_CumsumHead(), torch.randn(2, 8, 32), loss=torch.nn.MSELoss(), optimizer=SGD(0.1),
                       sample_targets=torch.randn(2, 8, 4), output_dir=tmp_path)


def test_loss_shape_mismatch_names_both_shapes(tmp_path):
    with pytest.raises(TrainingError, match=r"output 0 of shape \(2, 10\) and target of shape \(2, 5\)"):
        pybuda.compile(_mlp(), torch.randn(2, 32), loss=torch.nn.MSELoss(), optimizer=SGD(0.1),
                       sample_targets=torch.randn(2, 5), output_dir=tmp_path)


def test_training_needs_loss_optimizer_and_targets(tmp_path):
    with pytest.raises(TrainingError, match="missing: loss, sample_targets"):
        pybuda.compile(_mlp(), torch.randn(2, 32), optimizer=SGD(0.1), output_dir=tmp_path)
    with pytest.raises(RuntimeError, match="compiled for inference"):
        pybuda.compile(_mlp(), torch.randn(2, 32), output_dir=tmp_path).train_step(torch.randn(2, 32),
                                                                                    targets=torch.zeros(2))


def _small_cnn() -> torch.nn.Module:
    torch.manual_seed(4)
    return torch.nn.Sequential(torch.nn.Conv2d(1, 8, 3), torch.nn.ReLU(), torch.nn.MaxPool2d(2), torch.nn.Conv2d(8, 16, 3),
                               torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(16 * 3 * 3, 10))


@pytest.mark.parametrize("optimizer", [SGD(0.05, momentum=0.9), Adam(1e-3)], ids=["sgd_momentum", "adam"])
@pytest.mark.parametrize("df, threshold", [(None, 0.99), (pybuda.DataFormat.Float32, 0.999)],
                         ids=["Float16_b", "Float32"])
def test_small_cnn_parameters_match_torch(tmp_path, optimizer, df, threshold):
    """Conv weights are trained as the padded matrix their matmul reads; state_dict gives them back as torch's
    4-D weights. On n150: the optimizer's 32-bit dest keeps Adam's small steps (grayskull's 16-bit dest rounds
    each update to the parameter's Float16_b step)."""
    x = torch.randn(2, 1, 12, 12, generator=torch.Generator().manual_seed(5))
    y = torch.tensor([3, 7])
    model = _small_cnn()
    initial = copy.deepcopy(model).state_dict()
    _, ours, theirs, _, _ = _train_both(model, (x,), y, torch.nn.CrossEntropyLoss(), optimizer, tmp_path,
                                        device="n150", df=df)
    for name in theirs:
        assert ours[name].shape == theirs[name].shape
        assert pcc(ours[name].numpy(), theirs[name].numpy()) >= threshold, name
        assert pcc((ours[name] - initial[name]).numpy(), (theirs[name] - initial[name]).numpy()) >= 0.9, name


def _train_small_bert(tmp_path, optimizer, device, config=None):
    """A 2-layer BERT encoder trained 5 steps in the simulator and in torch: (initial, ours, torch's) state dicts."""
    from pybuda.tools.models import BertEncoderStack
    torch.manual_seed(0)
    model = BertEncoderStack(layers=2, hidden=64, heads=2, intermediate=128).eval()
    initial = copy.deepcopy(model).state_dict()
    x = (torch.randn(2, 32, 64, generator=torch.Generator().manual_seed(6)), torch.zeros(2, 1, 32))
    y = torch.randn(2, 32, 64, generator=torch.Generator().manual_seed(7))
    _, ours, theirs, _, _ = _train_both(model, x, y, torch.nn.MSELoss(), optimizer, tmp_path, device=device,
                                        config=config)
    # the attention key biases are left out: their gradient is 0 in exact arithmetic (softmax shift invariance)
    return ({k: v for k, v in d.items() if "attention.self.key.bias" not in k} for d in (initial, ours, theirs))


@pytest.mark.parametrize("device", ["n150", "e150"])
def test_small_bert_parameters_and_updates_match_torch_with_sgd(tmp_path, device):
    """Compensated updates (a residual per parameter) keep every small step: on n150 the device reads a Float32
    parameter through 19-bit source registers (a layernorm weight near 1.0 would lose any step below 2^-10), on
    e150 the 16-bit dest rounds the new value to Float16_b (steps of 2^-7); the updates themselves match torch's."""
    initial, ours, theirs = _train_small_bert(tmp_path, SGD(0.05, momentum=0.9), device)
    for name, value in theirs.items():
        assert pcc(ours[name].numpy(), value.numpy()) >= 0.99, name
        assert pcc((ours[name] - initial[name]).numpy(), (value - initial[name]).numpy()) >= 0.99, name


def test_small_bert_parameters_match_torch_with_adam(tmp_path):
    """Every parameter but the layernorm weights and biases reaches PCC 0.99 after 5 Adam steps; those reach
    0.97-0.99 (docs/training.md, "Not done yet"). Adam moves every element whose gradient keeps its sign by about
    lr per step: the output layernorm weight's update is -5.0e-3 for every element, give or take 0.24 %, so its PCC
    measures differences of 1e-5 (ours are within 0.34 % rms of torch's update); and an element whose gradient is
    near 0 can take the opposite full step when the Float16_b backward flips its sign."""
    initial, ours, theirs = _train_small_bert(tmp_path, Adam(1e-3), "n150")
    for name, value in theirs.items():
        assert pcc(ours[name].numpy(), value.numpy()) >= (0.97 if "LayerNorm" in name else 0.99), name


@pytest.mark.parametrize("df, threshold", [("Float32", 0.999), ("Float16_b", 0.99)])
def test_small_bert_with_adam_on_the_host_matches_torch(tmp_path, df, threshold):
    """optimizer_on_host: the device computes and accumulates the gradients (run_fwd, run_bwd; no run_opt), the
    host updates float32 master parameters with Adam and writes them back, and gradients and the PCIe transfers
    are the only differences from torch. Every parameter, the layernorm weights whose near-uniform Adam steps the
    device's 10-bit multiply operands cannot resolve included, reaches PCC 0.999 at Float32; at Float16_b (the
    backward epochs in Float32: a 16-bit backward flips the sign of near-zero gradients, which Adam turns into
    full steps) 0.99."""
    config = pybuda.CompilerConfig(optimizer_on_host=True, default_df_override=df)
    if df == "Float16_b":
        f32 = pybuda.DataFormat.Float32
        config.amp_properties.append(pybuda.config.AMPNodeProperties(epoch_type="bwd", output_df=f32,
                                                                     accumulate_df=f32))
    initial, ours, theirs = _train_small_bert(tmp_path, Adam(1e-3), "n150", config)
    for name, value in theirs.items():
        assert pcc(ours[name].numpy(), value.numpy()) >= threshold, name
        assert pcc((ours[name] - initial[name]).numpy(), (value - initial[name]).numpy()) >= threshold, name


def test_optimizer_on_host_netlist_has_no_optimizer_and_its_estimate_counts_the_transfers(tmp_path):
    x, y = torch.randn(2, 32), torch.randint(0, 10, (2,))
    args = dict(loss=torch.nn.CrossEntropyLoss(), optimizer=Adam(1e-2), sample_targets=y, device="n150")
    host = pybuda.compile(_mlp(), x, output_dir=tmp_path / "host",
                          config=pybuda.CompilerConfig(optimizer_on_host=True), **args)
    device = pybuda.compile(_mlp(), x, output_dir=tmp_path / "device", **args)
    assert [p.name for p in host.netlist.programs] == ["run_fwd", "run_bwd"]
    assert not any(g.startswith("opt") for g in host.netlist.graphs)
    assert host.netlist.queues["0.weight"].df == pybuda.DataFormat.Float16_b   # the float32 master is on the host
    assert host.perf.transfer_cycles > 0 and "host optimizer transfers" in host.summary()
    assert device.perf.transfer_cycles == 0 and [p.program for p in device.perf.parts][-1] == "run_opt"
    host.train_step(x, targets=y)
    master = host.state_dict()["0.weight"]
    assert not torch.equal(master, master.to(torch.bfloat16).float())   # the float32 master, not the device's copy
    with pytest.warns(UserWarning, match="optimizer_on_host has no effect on an inference compile"):
        pybuda.compile(_mlp(), x, output_dir=tmp_path / "inf", config=pybuda.CompilerConfig(optimizer_on_host=True))


def test_verify_checks_gradients_at_every_stage_and_the_step(tmp_path):
    x, y = torch.randn(4, 32), torch.randint(0, 10, (4,))
    compiled = pybuda.compile(_mlp(), x, loss=torch.nn.CrossEntropyLoss(), optimizer=Adam(1e-2), sample_targets=y,
                              output_dir=tmp_path, verify=True)
    checked = [c.stage for c in compiled.checks if "gradients" in c.stage or c.stage == "netlist step"]
    assert checked == ["autograd gradients", "cpu_fallback gradients", "host_io gradients", "lower gradients",
                       "data_formats gradients", "fuse gradients", "save_intermediates gradients",
                       "insert_nops gradients", "t_stream gradients",
                       "netlist gradients", "netlist step"]
    assert all(c.pcc >= c.threshold for c in compiled.checks)


def test_verify_catches_a_wrong_gradient(tmp_path):
    """A stage that doubles one parameter's gradient is named by verify."""
    import dataclasses
    from pybuda.compile import VerificationError
    from pybuda.ops.registry import add_op
    from pybuda.stages import STAGES

    autograd = next(s for s in STAGES if s.name == "autograd")

    def doubled(state):
        state = autograd.run(state)
        graph = state.graph
        out = "grad_acc_2.weight.write"
        src = graph.output_source(out)
        two = graph.add_constant("two", np.array([2.0], dtype=np.float32))
        graph.set_operand(out, 0, add_op(graph, "doubled", "multiply", [src, two]))
        return state

    stages = [dataclasses.replace(s, run=doubled) if s.name == "autograd" else s for s in STAGES]
    with pytest.raises(VerificationError, match="stage 'autograd gradients'.*parameter '2.weight'.*norm 2.0000x"):
        pybuda.compile(_mlp(), torch.randn(4, 32), loss=torch.nn.CrossEntropyLoss(), optimizer=SGD(0.1),
                       sample_targets=torch.randint(0, 10, (4,)), output_dir=tmp_path, verify=True, stages=stages)


def test_training_netlist_programs_match_the_legacy_training_netlists(tmp_path):
    """Program names, accumulator zeroing through $v_zero_grad and parameters written back by optimizer ops, as in
    the legacy compiler's training netlist of a feedforward block."""
    from pybuda.netlist import load
    from corpus import REAL_DIR
    legacy = load(str(REAL_DIR / ("graph_tests__netlists__pybuda_pregenerated__feedforward_train__grayskull__"
                                  "feedforward_training_netlist.yaml")))
    ours = pybuda.compile(_mlp(), torch.randn(2, 32), loss=torch.nn.CrossEntropyLoss(), optimizer=SGD(0.1),
                          sample_targets=torch.randint(0, 10, (2,)), output_dir=tmp_path).netlist
    assert [p.name for p in ours.programs] == [p.name for p in legacy.programs]
    for nl in (legacy, ours):
        params = [q for q in nl.queues.values() if q.type == "ram" and q.input in nl.ops
                  and nl.ops[q.input].graph.startswith("opt")]
        assert params, "parameters written back by the optimizer"
        zeroed = {q for p in nl.programs if p.name == "run_bwd" for ins in p.instructions
                  if isinstance(ins, Execute) for q, s in ins.queue_settings.items() if s.zero == "$v_zero_grad"}
        assert zeroed and all(q.startswith("grad_acc_") for q in zeroed)


def test_legacy_loss_names_train_like_torch_losses(tmp_path):
    from pybuda.op.loss import L1Loss
    x, y = torch.randn(4, 32), torch.randn(4, 10)
    compiled = pybuda.compile(_mlp(), x, loss=L1Loss(), optimizer=SGD(0.05), sample_targets=y, output_dir=tmp_path)
    losses = [compiled.train_step(x, targets=y) for _ in range(5)]
    assert losses[-1] < losses[0]
    with torch.no_grad():
        assert abs(losses[0] - float(torch.nn.L1Loss()(_mlp()(x), y))) < 0.02


def test_recompute_keeps_no_forward_activation_and_the_same_numbers(tmp_path):
    x, y = torch.randn(4, 32), torch.randint(0, 10, (4,))
    plain = pybuda.compile(_mlp(), x, loss=torch.nn.CrossEntropyLoss(), optimizer=SGD(0.1), sample_targets=y,
                           output_dir=tmp_path / "plain")
    config = pybuda.CompilerConfig(enable_recompute=True)
    again = pybuda.compile(_mlp(), x, loss=torch.nn.CrossEntropyLoss(), optimizer=SGD(0.1), sample_targets=y,
                           output_dir=tmp_path / "recompute", config=config, verify=True)
    nl = again.netlist
    recomputed = [op for op in nl.ops.values() if "_recompute" in op.name]
    assert recomputed and all(op.graph.startswith("bwd") for op in recomputed)
    # no queue carries a forward op's output to the backward epochs
    fwd_ops = {n for n, op in nl.ops.items() if op.graph.startswith("fwd")}
    assert not [q for q in nl.queues.values() if q.input in fwd_ops and q.name.startswith("e2e_")
                and any(q.name in op.inputs for op in nl.ops.values() if op.graph.startswith("bwd"))]
    assert any(q.name.startswith("e2e_") for q in plain.netlist.queues.values())
    for _ in range(2):
        plain.train_step(x, targets=y)
        again.train_step(x, targets=y)
    for name, value in plain.state_dict().items():
        assert pcc(again.state_dict()[name].numpy(), value.numpy()) >= 0.9999, name


def test_enable_training_without_loss_is_refused_and_training_options_in_inference_warn(tmp_path):
    with pytest.raises(TrainingError, match="enable_training is set"):
        pybuda.compile(_mlp(), torch.randn(2, 32), output_dir=tmp_path, config=pybuda.CompilerConfig(enable_training=True))
    with pytest.warns(UserWarning, match="enable_recompute has no effect on an inference compile"):
        pybuda.compile(_mlp(), torch.randn(2, 32), output_dir=tmp_path, config=pybuda.CompilerConfig(enable_recompute=True))
    with pytest.warns(UserWarning, match="compensated_parameter_updates=False has no effect on an inference compile"):
        pybuda.compile(_mlp(), torch.randn(2, 32), output_dir=tmp_path,
                       config=pybuda.CompilerConfig(compensated_parameter_updates=False))


def test_verify_accepts_updates_lost_to_the_parameter_format(tmp_path):
    """Without compensated updates, on e150 a layernorm weight near 1.0 in Float16_b cannot take a 5e-4 step (its
    rounding step is 2^-7): verify accepts the updated value as torch's up to that rounding, and still checks the
    other parameters' PCC."""
    from pybuda.tools.models import BertEncoderStack
    torch.manual_seed(0)
    model = BertEncoderStack(layers=1, hidden=64, heads=2, intermediate=128).eval()
    x = (torch.randn(2, 32, 64), torch.zeros(2, 1, 32))
    config = pybuda.CompilerConfig(compensated_parameter_updates=False)
    compiled = pybuda.compile(model, *x, loss=torch.nn.MSELoss(), optimizer=SGD(0.05, momentum=0.9),
                              sample_targets=torch.randn(2, 32, 64), output_dir=tmp_path, verify=True, config=config)
    assert not any(q.endswith(".residual") for q in compiled.netlist.queues)
    step = next(c for c in compiled.checks if c.stage == "netlist step")
    assert step.pcc >= step.threshold


class _EmbeddingRegressor(torch.nn.Module):
    """Token and position embeddings (CPU fallback ops: their tables train on the host) before two linear layers."""

    def __init__(self):
        super().__init__()
        self.tokens = torch.nn.Embedding(50, 32)
        self.positions = torch.nn.Embedding(16, 32)
        self.register_buffer("position_ids", torch.arange(16)[None])
        self.fc1 = torch.nn.Linear(32, 64)
        self.fc2 = torch.nn.Linear(64, 32)

    def forward(self, ids):
        x = self.tokens(ids) + self.positions(self.position_ids)
        return self.fc2(torch.nn.functional.gelu(self.fc1(x)))


@pytest.mark.parametrize("optimizer", [SGD(0.1, momentum=0.9), Adam(1e-2)], ids=["sgd_momentum", "adam"])
def test_embedding_tables_train_on_the_host_like_torch(tmp_path, optimizer):
    torch.manual_seed(0)
    model = _EmbeddingRegressor()
    initial = copy.deepcopy(model).state_dict()
    ids = torch.randint(0, 50, (2, 16), generator=torch.Generator().manual_seed(1))
    y = torch.randn(2, 16, 32, generator=torch.Generator().manual_seed(2))
    compiled, ours, theirs, _, _ = _train_both(model, (ids,), y, torch.nn.MSELoss(), optimizer, tmp_path)
    manifest = compiled.runtime.manifest
    hosts = [p for p in manifest.parts if isinstance(p, HostProgram)]
    assert [h.epoch_type for h in hosts] == ["forward", "backward", "optimizer"]
    assert [op.op_type for op in hosts[1].ops] == ["embedding_backward"] * 2
    # the gradient of the embeddings' output leaves the device in run_bwd, written by a backward epoch
    (gradient,) = [q for q, f in manifest.device_parts[0].queues.items() if f.kind == "gradient"]
    nl = compiled.netlist
    assert nl.ops[nl.queues[gradient].input].graph.startswith("bwd")
    assert "host backward (2 ops) -> host optimizer" in compiled.summary()
    for name, _ in model.named_parameters():
        assert pcc(ours[name].numpy(), theirs[name].numpy()) >= 0.99, name
        assert pcc((ours[name] - initial[name]).numpy(), (theirs[name] - initial[name]).numpy()) >= 0.99, name
    # an image of the training model runs its forward (the host's forward program and run_fwd)
    loaded = pybuda.load(compiled.save(tmp_path / "model.tti"))
    assert torch.equal(loaded(ids), compiled.runtime(ids))


def test_optimizer_on_host_updates_host_trained_tables_too(tmp_path):
    """With optimizer_on_host the embedding tables (trained on the host) and the device's parameters are all
    updated by the host optimizer: no optimizer program on either side."""
    torch.manual_seed(0)
    model = _EmbeddingRegressor()
    initial = copy.deepcopy(model).state_dict()
    ids = torch.randint(0, 50, (2, 16), generator=torch.Generator().manual_seed(1))
    y = torch.randn(2, 16, 32, generator=torch.Generator().manual_seed(2))
    compiled, ours, theirs, _, _ = _train_both(model, (ids,), y, torch.nn.MSELoss(), Adam(1e-2), tmp_path,
                                               steps=3, config=pybuda.CompilerConfig(optimizer_on_host=True))
    hosts = [p for p in compiled.runtime.manifest.parts if isinstance(p, HostProgram)]
    assert [h.epoch_type for h in hosts] == ["forward", "backward"]
    for name, _ in model.named_parameters():
        assert pcc((ours[name] - initial[name]).numpy(), (theirs[name] - initial[name]).numpy()) >= 0.99, name


def test_bert_with_its_embeddings_trains_like_torch(tmp_path):
    """A 2-layer Hugging Face BertModel, embeddings included (word, position and token type tables trained on the
    host), 5 steps of SGD with momentum at Float16_b on e150."""
    transformers = pytest.importorskip("transformers")
    config = transformers.BertConfig(vocab_size=100, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=128, max_position_embeddings=64)
    torch.manual_seed(0)
    model = transformers.BertModel(config, add_pooling_layer=False).eval()
    initial = copy.deepcopy(model).state_dict()
    ids = torch.randint(0, 100, (2, 32), generator=torch.Generator().manual_seed(1))
    y = torch.randn(2, 32, 64, generator=torch.Generator().manual_seed(2))
    compiled, ours, theirs, _, _ = _train_both(_LastHiddenState(model), (ids,), y, torch.nn.MSELoss(),
                                               SGD(0.05, momentum=0.9), tmp_path)
    assert {"bert.embeddings.word_embeddings.weight", "bert.embeddings.token_type_embeddings.weight"} <= set(ours)
    for name, value in theirs.items():
        if name in ours and "attention.self.key.bias" not in name:   # (its gradient is 0 in exact arithmetic)
            assert pcc(ours[name].numpy(), value.numpy()) >= 0.99, name
            update = (value - initial[name.removeprefix("bert.")]).numpy()
            assert pcc((ours[name] - initial[name.removeprefix("bert.")]).numpy(), update) >= 0.99, name


class _LastHiddenState(torch.nn.Module):
    def __init__(self, bert):
        super().__init__()
        self.bert = bert

    def forward(self, ids):
        return self.bert(ids).last_hidden_state


class _TiedHead(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = torch.nn.Embedding(50, 32)
        self.head = torch.nn.Linear(32, 50, bias=False)
        self.head.weight = self.embedding.weight

    def forward(self, ids):
        return self.head(self.embedding(ids))


class _HostInTheMiddle(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(32, 32), torch.nn.Linear(32, 4)

    def forward(self, x):
        return self.b(torch.exp(self.a(x)))


def test_parameters_and_fallback_ops_training_cannot_split_are_named(tmp_path):
    with pytest.raises(OpError, match=r"trained parameter 'head.weight' is read on the host by embedding_\d+ and on "
                                      r"the device by .*freeze it"):
        pybuda.compile(_TiedHead(), torch.randint(0, 50, (2, 8)), loss=torch.nn.MSELoss(), optimizer=SGD(0.1),
                       sample_targets=torch.randn(2, 8, 50), output_dir=tmp_path)
    config = pybuda.CompilerConfig()
    config.cpu_fallback_ops = {"embedding", "exp"}
    with pytest.raises(OpError, match=r"host ops sit between device ops \(exp_\d+\); CPU fallback in the middle of "
                                      "a model is for inference only"):
        pybuda.compile(_HostInTheMiddle(), torch.randn(2, 8, 32), loss=torch.nn.MSELoss(), optimizer=SGD(0.1),
                       sample_targets=torch.randn(2, 8, 4), output_dir=tmp_path, config=config)


def test_verify_checks_host_trained_gradients_and_step(tmp_path):
    torch.manual_seed(0)
    ids = torch.randint(0, 50, (2, 16), generator=torch.Generator().manual_seed(1))
    y = torch.randn(2, 16, 32)
    compiled = pybuda.compile(_EmbeddingRegressor(), ids, loss=torch.nn.MSELoss(), optimizer=Adam(1e-2),
                              sample_targets=y, output_dir=tmp_path, verify=True)
    assert all(c.pcc >= c.threshold for c in compiled.checks)
    stages = [c.stage for c in compiled.checks]
    assert "lower gradients" in stages and "netlist step" in stages
    compiled.train_step(ids, targets=y)
    grads = compiled.get_parameter_gradients()
    assert grads["tokens.weight"].shape == (50, 32)
    assert set(np.flatnonzero(grads["tokens.weight"].abs().sum(1).numpy())) == set(ids.flatten().tolist())


def test_verify_catches_a_wrong_host_gradient(tmp_path, monkeypatch):
    """An embedding backward that doubles the table's gradient is named by verify (the host's gradients are
    compared with torch's like the device's)."""
    import dataclasses
    from pybuda.compile import VerificationError
    from pybuda.ops import registry
    scatter = registry.get("embedding_backward")
    monkeypatch.setitem(registry._REGISTRY, "embedding_backward",
                        dataclasses.replace(scatter, eval=lambda v, a: 2 * scatter.eval(v, a)))
    ids = torch.randint(0, 50, (2, 16), generator=torch.Generator().manual_seed(1))
    with pytest.raises(VerificationError, match=r"stage 'autograd gradients'.*parameter '(tokens|positions)\.weight'"
                                                r".*norm 2\.0000x"):
        pybuda.compile(_EmbeddingRegressor(), ids, loss=torch.nn.MSELoss(), optimizer=SGD(0.1),
                       sample_targets=torch.randn(2, 16, 32), output_dir=tmp_path, verify=True)


class _FirstOutput(torch.nn.Module):
    """A zoo model's first output tensor (the loss reads one tensor)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, *inputs):
        return [o for o in torch.utils._pytree.tree_leaves(self.model(*inputs)) if isinstance(o, torch.Tensor)][0]


@pytest.mark.parametrize("name", ["gpt2_tiny", "resnet_tiny"])
def test_zoo_models_train_like_torch(tmp_path, name):
    """GPT-2 (its causal mask is -inf in Float16_b: the max-reduction's backward multiplies it) and ResNet (its
    batchnorms stay apart from trained convolutions; their bias gradients accumulate through a NOP, as a gradient op
    with an input transpose must be a matmul or datacopy), 3 steps of SGD with momentum on n150."""
    from pybuda.tools.zoo import ZOO
    zoo = ZOO[name]
    model = _FirstOutput(zoo.build())
    inputs = zoo.inputs(2)
    with torch.no_grad():
        y = torch.randn(model(*inputs).shape, generator=torch.Generator().manual_seed(3))
    initial = copy.deepcopy(model).state_dict()
    _, ours, theirs, _, _ = _train_both(model, inputs, y, torch.nn.MSELoss(), SGD(0.05, momentum=0.9), tmp_path,
                                        steps=3, device="n150")
    assert set(ours) == {n for n, _ in model.named_parameters()}
    for name_, value in theirs.items():
        if name_ in ours and "key.bias" not in name_:
            assert pcc(ours[name_].numpy(), value.numpy()) >= 0.99, name_
            assert pcc((ours[name_] - initial[name_]).numpy(), (value - initial[name_]).numpy()) >= 0.99, name_


def test_trained_depthwise_convolution_weights_are_refused_naming_them(tmp_path):
    from pybuda.tools.zoo import ZOO
    zoo = ZOO["mobilenetv2_tiny"]
    model = _FirstOutput(zoo.build())
    inputs = zoo.inputs(2)
    with pytest.raises(OpError, match=r"conv2d 'conv2d_\d+': its weight 'model\..*convolution.weight' is trained, "
                                      r"but a grouped convolution \(groups \d+\).*freeze them"):
        pybuda.compile(model, *inputs, loss=torch.nn.MSELoss(), optimizer=SGD(0.1),
                       sample_targets=torch.randn(2, 1280, 1, 1), output_dir=tmp_path)
