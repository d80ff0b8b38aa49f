"""`loopback_outputs`: a model input kept on the device as state that an output writes back after every run
(issue 36, the cache on the device): the state is pushed once, never again; calls see the state the last one
wrote; `reset_state` restarts it; a TTI image keeps it; misuse names the input, output and what is legal."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import pybuda
from pybuda.verify import pcc

op = pybuda.op
W = torch.randn(64, 64, generator=torch.Generator().manual_seed(0)) / 8


class Accumulator(pybuda.PyBudaModule):
    """state += x @ w; returns (state / 2, state)."""

    def __init__(self):
        super().__init__("acc")
        self.w = pybuda.Parameter(W, requires_grad=False)

    def forward(self, x, state):
        new = op.Add("new", state, op.Matmul("mm", x, self.w))
        return op.Multiply("half", new, 0.5), new


class TorchRunningSum(torch.nn.Module):
    """A torch model with a cache-like input and output: (relu(cache + x) summed rows, cache + x)."""

    def forward(self, x, cache):
        new = cache + x
        return torch.relu(new).sum(-1, keepdim=True), new


def _config(**loopbacks) -> pybuda.CompilerConfig:
    return pybuda.CompilerConfig(loopback_outputs=loopbacks, default_df_override="Float32")


def test_the_state_stays_on_the_device_and_each_call_sees_the_last_write(tmp_path):
    x, start = torch.randn(1, 32, 64), torch.randn(1, 32, 64)
    compiled = pybuda.compile(Accumulator(), x, start, config=_config(state=1), output_dir=tmp_path, verify=True)
    assert compiled.runtime.input_names == ["x"]
    state = start.clone()
    for _ in range(3):
        out = compiled(x)                                  # the other output alone: state is not returned
        state = state + x @ W
        assert out.shape == (1, 32, 64) and np.allclose(out.numpy(), (state / 2).numpy(), atol=2e-2, rtol=2e-2)
    (device,) = compiled.runtime.devices.values()
    pushed = [t.queue for t in device.transfers if t.kind == "push"]
    assert pushed.count("state") == 1 and pushed.count("x") == 3            # loaded once, never pushed again
    assert "state" not in {t.queue for t in device.transfers if t.kind == "pop"}
    queue = compiled.netlist.queues["state"]
    assert queue.type == "ram" and queue.input == "new"                      # the op writes it in place
    compiled.runtime.reset_state()
    assert np.allclose(compiled(x).numpy(), ((start + x @ W) / 2).numpy(), atol=2e-2, rtol=2e-2)
    loaded = pybuda.load(compiled.save(tmp_path / "acc.tti"))
    for k in range(1, 3):
        assert np.allclose(loaded(x).numpy(), ((start + k * (x @ W)) / 2).numpy(), atol=2e-2, rtol=2e-2)


def test_a_torch_model_returns_its_outputs_without_the_looped_one(tmp_path):
    x, cache = torch.randn(1, 4, 32), torch.zeros(1, 4, 32)
    compiled = pybuda.compile(TorchRunningSum(), x, cache, config=_config(cache=1), output_dir=tmp_path,
                              verify=True)
    model, expected_cache = TorchRunningSum(), cache
    for _ in range(2):
        (out,) = compiled(x)
        expected, expected_cache = model(x, expected_cache)
        assert pcc(out.numpy(), expected.numpy()) >= 0.999


@pytest.mark.parametrize("loopbacks, shape, message", [
    ({"states": 1}, (1, 32, 64), r"'states' is not an input of the model; its inputs: x, state"),
    ({"state": 2}, (1, 32, 64), r"legal: an output index 0..1"),
    ({"x": 1, "state": 1}, (1, 32, 64), r"output 1 already writes back into 'x'"),
    ({"state": 1}, (2, 32, 64), r"written back whole is one tensor, so the compile takes microbatch 1 \(a paged "
                                r"state takes any: one per sample\); the sample inputs have microbatch 2"),
])
def test_misuse_names_the_input_the_output_and_what_is_legal(tmp_path, loopbacks, shape, message):
    with pytest.raises(pybuda.UserInputError, match=message):
        pybuda.compile(Accumulator(), torch.randn(shape), torch.randn(shape), config=_config(**loopbacks),
                       output_dir=tmp_path)


def test_an_output_of_another_shape_is_refused(tmp_path):
    x = torch.randn(1, 4, 32)
    with pytest.raises(pybuda.UserInputError, match=r"output 0 has shape \(4, 1\), input 'cache' \(4, 32\)"):
        pybuda.compile(TorchRunningSum(), x, x, config=_config(cache=0), output_dir=tmp_path)


def test_a_training_compile_with_loopback_outputs_is_refused(tmp_path):
    x = torch.randn(1, 32, 64)
    with pytest.raises(pybuda.UserInputError, match="loopback_outputs in a training compile is not supported"):
        pybuda.compile(Accumulator(), x, x, config=_config(state=1), output_dir=tmp_path,
                       loss=torch.nn.MSELoss(), optimizer=pybuda.optimizers.SGD(learning_rate=0.1),
                       sample_targets=(x,))


class PagedCache(pybuda.PyBudaModule):
    """A KV-cache-like state of 4 pages of 32 rows: each run projects x to one page, attends to the cache as it
    was (scores against every cached row) and writes the page at the run's write index."""

    def __init__(self):
        super().__init__("paged")
        self.w = pybuda.Parameter(W, requires_grad=False)

    def forward(self, x, cache):
        new = op.Matmul("proj", x, self.w)
        return op.Matmul("scores", new, op.Transpose("kt", cache, -2, -1)), new


def test_a_paged_state_is_written_one_page_at_the_run_s_write_index(tmp_path):
    x, start = torch.randn(1, 32, 64), torch.randn(1, 128, 64)
    compiled = pybuda.compile(PagedCache(), x, start, config=_config(cache=1), output_dir=tmp_path, verify=True)
    assert compiled.runtime.pages == 4
    cache = start.clone()
    for page in (1, 3, 0):
        scores = compiled(x, cache_write_index=page)
        expected = (x @ W) @ cache.transpose(-2, -1)                     # the cache as the run found it
        assert pcc(scores.numpy(), expected.numpy()) >= 0.999
        cache[:, 32 * page:32 * (page + 1)] = x @ W
    (device,) = compiled.runtime.devices.values()
    assert [t.queue for t in device.transfers if t.kind == "push"].count("cache") == 1
    assert np.allclose(device.peek("cache", 0).reshape(128, 64), cache[0].numpy(), atol=2e-2, rtol=2e-2)
    nl = compiled.netlist
    reader, (writer,) = nl.queues["cache"], [q for q in nl.queues.values() if q.alias == "cache"]
    assert (reader.entries, reader.t, writer.entries, writer.t, writer.input) == (1, 4, 4, 1, "proj")
    assert reader.dram == writer.dram                                    # two views of one buffer
    (program,) = nl.programs
    execute = next(i for i in program.instructions if hasattr(i, "queue_settings"))
    assert execute.queue_settings[writer.name].wr_ptr_global == "$v_cache_write_index"
    assert execute.queue_settings["cache"].read_only is True and execute.queue_settings["cache"].prologue is False
    with pytest.raises(pybuda.InputError, match=r"legal: the page, 0\.\.3"):
        compiled(x)
    with pytest.raises(pybuda.InputError, match=r"cache_write_index=4"):
        compiled(x, cache_write_index=4)


def test_a_paged_state_is_per_sample_at_a_larger_microbatch(tmp_path):
    """Microbatch 3: each sample has its own cache (the readers' entry b, pages at stride 4 in the writer's view),
    every sample's page written at the one write index."""
    x, start = torch.randn(3, 32, 64), torch.randn(3, 128, 64)
    compiled = pybuda.compile(PagedCache(), x, start, config=_config(cache=1), output_dir=tmp_path, verify=True)
    assert compiled.runtime.pages == 4
    cache = start.clone()
    for page in (2, 0):
        x = torch.randn(3, 32, 64)
        scores = compiled(x, cache_write_index=page)
        expected = (x @ W) @ cache.transpose(-2, -1)                     # each sample against its own cache
        assert pcc(scores.numpy(), expected.numpy()) >= 0.999
        cache[:, 32 * page:32 * (page + 1)] = x @ W
    (device,) = compiled.runtime.devices.values()
    for b in range(3):
        assert np.allclose(device.peek("cache", b).reshape(128, 64), cache[b].numpy(), atol=2e-2, rtol=2e-2)
    nl = compiled.netlist
    reader, (writer,) = nl.queues["cache"], [q for q in nl.queues.values() if q.alias == "cache"]
    assert (reader.entries, reader.t, writer.entries, writer.t) == (3, 4, 12, 1)
    (program,) = nl.programs
    execute = next(i for i in program.instructions if hasattr(i, "queue_settings"))
    assert execute.queue_settings["cache"].global_rdptr_autoinc == 1
    assert execute.queue_settings[writer.name].global_wrptr_autoinc == 4


def test_a_page_must_be_whole_tiles_dividing_the_state(tmp_path):
    x = torch.randn(1, 32, 64)
    with pytest.raises(pybuda.UserInputError, match=r"a multiple of 32 rows dividing them"):
        pybuda.compile(PagedCache(), x, torch.randn(1, 80, 64), config=_config(cache=1), output_dir=tmp_path)
    with pytest.raises(pybuda.InputError, match="the model has no paged state"):
        pybuda.compile(Accumulator(), torch.randn(1, 32, 64), torch.randn(1, 32, 64), config=_config(state=1),
                       output_dir=tmp_path / "whole")(torch.randn(1, 32, 64), cache_write_index=0)
