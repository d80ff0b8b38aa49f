"""Per-op kernel cycles: our model (pybuda.arch.cycles.kernel_cycles) against the cycles measured on silicon.

For every sweep CSV under the silicon reference (one folder per arch) prints a Markdown table: rows, mean and max
|estimate - measured| / measured, the overall mean over all rows, and the error of the backend's own sparse matmul
V2 formula on the same rows. `--worst N` lists the N worst rows.

    PYTHONPATH=. python benchmarks/silicon_ops.py [--root DIR] [--worst N]
"""
from __future__ import annotations

import argparse
from pathlib import Path

from pybuda.arch.cycles import backend_sparse_matmul_v2
from pybuda.arch.sweeps import SweepRow, estimate, file_errors
from pybuda.tools.shared import OP_SWEEPS

DEFAULT_ROOT = OP_SWEEPS


def _describe(row: SweepRow) -> str:
    o = row.op
    extra = f" m_k={o.m_k} u_kt={o.u_kt}" if o.type in ("matmul", "depthwise") else ""
    nz = f" nz={row.nz.tiles}/{row.nz.ublocks}/{row.nz.strips}" if row.nz else ""
    return (f"{o.type} {row.out_df} {row.math_fidelity} t={o.t} mb={list(o.mblock)} ub={list(o.ublock)}"
            f"{extra}{nz}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=DEFAULT_ROOT, help="folder of <arch>/*.csv sweeps")
    ap.add_argument("--worst", type=int, default=0, metavar="N", help="also list the N worst rows")
    args = ap.parse_args(argv)
    errors = file_errors(args.root)
    print("| file | rows | mean abs err % | max % |\n|---|---:|---:|---:|")
    for name, rows in errors.items():
        errs = [e for e, _ in rows]
        print(f"| {name} | {len(errs)} | {100 * sum(errs) / len(errs):.1f} | {100 * max(errs):.1f} |")
    every = [e for rows in errors.values() for e, _ in rows]
    print(f"\nOverall: {len(every)} rows, mean abs error {100 * sum(every) / len(every):.1f} %")
    backend = [abs(b - r.measured) / r.measured for rows in errors.values() for _, r in rows if r.nz
               and (b := backend_sparse_matmul_v2(r.arch, r.op, r.out_df, r.math_fidelity, r.nz)) is not None]
    if backend:
        print(f"Sparse matmul with the backend's V2 tables instead: {len(backend)} rows, "
              f"mean abs error {100 * sum(backend) / len(backend):.1f} %")
    if args.worst:
        print("\n| worst rows | estimate | measured | err % |\n|---|---:|---:|---:|")
        ranked = sorted(((e, name, r) for name, rows in errors.items() for e, r in rows), key=lambda x: -x[0])
        for e, name, r in ranked[:args.worst]:
            print(f"| {name}: {_describe(r)} | {estimate(r)} | {r.measured:.0f} | {100 * e:.1f} |")


if __name__ == "__main__":
    main()
