"""`make demo`: compile the MNIST CNN (batch 64) for e150, simulate the netlist, print match and estimate."""
from __future__ import annotations

import time

import torch

import pybuda
from pybuda.device import get_device
from pybuda.tools.models import MNISTCNN
from pybuda.verify import pcc


def main() -> None:
    torch.manual_seed(0)
    model = MNISTCNN().eval()
    x = torch.randn(64, 1, 28, 28)
    start = time.perf_counter()
    compiled = pybuda.compile(model, x, device="e150", output_dir="pybuda_out")
    compile_s = time.perf_counter() - start
    with torch.no_grad():
        expected = model(x)
    start = time.perf_counter()
    got = compiled(x)
    sim_s = time.perf_counter() - start
    perf = compiled.perf
    print("model:            MNIST CNN, microbatch 64, device e150 (grayskull, 10x12 cores)")
    print(f"compile:          {compile_s:.2f} s  ({', '.join(f'{k} {v:.2f}s' for k, v in compiled.stage_times.items())})")
    print(f"netlist:          {compiled.netlist_path}")
    print(f"epochs:           {len(perf.epochs)}")
    print(f"cores per epoch:  {[e.cores for e in perf.epochs]}")
    print(f"simulated in:     {sim_s:.2f} s")
    print(f"output match:     PCC {pcc(got.numpy(), expected.numpy()):.5f} vs PyTorch (Float16_b, HiFi3), "
          f"max abs error {float((got - expected).abs().max()):.4f}")
    print(f"estimate:         {perf.samples_per_second:,.0f} samples/s at {get_device(compiled.device).clock_hz / 1e9:.1f} GHz")
    placement = compiled.placement
    print(f"balancer:         {placement.policy} plan {placement.estimated_cycles:,} cycles, lower bound "
          f"{placement.lower_bound_cycles:,} (plan/bound {placement.bound_ratio:.2f}x)")


if __name__ == "__main__":
    main()
