"""What the guards of issue 10 add to a compile of BERT-base (bert_base_128): the microbatch check at microbatch
1, 2 and 4 (next to one torch forward pass of the batch), and a TVM cache miss and hit (torch.export, the key,
the import or the load).

    python benchmarks/guards_cost.py
"""
from __future__ import annotations

import os
import tempfile
import time

import torch

import pybuda
from pybuda.frontend.microbatch import check_per_sample
from pybuda.frontend.torch_import import export_model, import_program
from pybuda.frontend.tvm_cache import cache_key, cached_import
from pybuda.tools.zoo import ZOO


def _seconds(run) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def main() -> None:
    entry = ZOO["bert_base_128"]
    model = entry.build()
    with torch.no_grad():
        model(*entry.inputs(1))   # warm-up
    for microbatch in (1, 2, 4):
        x = entry.inputs(microbatch)
        check = _seconds(lambda: check_per_sample(model, x))
        with torch.no_grad():
            forward = _seconds(lambda: model(*x))
        print(f"microbatch {microbatch}: check {check:.2f} s (one forward pass of the batch: {forward:.2f} s)")
    os.environ["PYBUDA_ENABLE_TVM_CACHE"] = "1"
    x = entry.inputs(1)
    with tempfile.TemporaryDirectory() as cache:
        config = pybuda.CompilerConfig(tvm_graph_store_path=cache, tvm_graph_load_path=cache)
        for what in ("miss", "hit", "hit"):
            start = time.perf_counter()
            program = export_model(model, x)
            exported = time.perf_counter()
            cache_key(program.program)
            keyed = time.perf_counter()
            cached_import(program.program, model, config, lambda: import_program(program, name="bert"))
            done = time.perf_counter()
            print(f"TVM cache {what}: export {exported - start:.2f} s, key {keyed - exported:.3f} s, "
                  f"import or load {done - keyed:.2f} s, total {done - start:.2f} s")


if __name__ == "__main__":
    main()
