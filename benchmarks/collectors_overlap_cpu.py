"""Overlap ratio of each reference workload, plain vs overlap variant, on CPU (gloo), measured by the analyzer.

    python benchmarks/collectors_overlap_cpu.py [--hidden 512] [--seq 256] tp tp-sp cp-ring ulysses dp

Prints, per workload and variant, each rank's overlap ratio over the profiled steps and the median step's
communication time. Timings on 2 shared cores are noisy: run it on an otherwise idle machine and repeat.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import tracekit
from tracekit.collectors.workloads.config import WorkloadConfig
from tracekit.collectors.workloads.runner import run_batch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workloads", nargs="+")
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--microbatches", type=int, default=4, help="pp only")
    args = ap.parse_args()
    shape = dict(
        layers=args.layers,
        seq=args.seq,
        hidden=args.hidden,
        heads=8,
        batch=args.batch,
        steps=args.steps,
        dropout=0.1,
        chunks=4,
        microbatches=args.microbatches,
    )
    with tempfile.TemporaryDirectory() as tmp:
        jobs = [
            (WorkloadConfig(workload=w, overlap=o, **shape), Path(tmp) / f"{w}-{o}")
            for w in args.workloads
            for o in (False, True)
        ]
        by_world: dict[int, list] = {}
        for job in jobs:
            by_world.setdefault(job[0].validate().world_size, []).append(job)
        for batch in by_world.values():
            run_batch(batch)
        print(f"shape: {shape}")
        for cfg, out in jobs:
            summary = tracekit.analyze(tracekit.load(str(out), executor="serial")).to_dict()
            ratios = " ".join(f"{r['totals']['overlap_ratio']:.2f}" for r in summary["ranks"])
            comm_ms = summary["ranks"][0]["totals"]["comm_us"] / 1e3 / max(len(summary["ranks"][0]["steps"]), 1)
            print(
                f"{cfg.workload:8} {'overlap' if cfg.overlap else 'plain':8} overlap ratio per rank {ratios}"
                f"   rank 0 comm {comm_ms:.1f} ms/step"
            )


if __name__ == "__main__":
    main()
