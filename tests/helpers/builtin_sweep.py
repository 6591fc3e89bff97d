"""Measure the BUILT-IN layer's per-rank saved bytes over t in {1, 2, 4}, as TP and TP + SP, for real: gloo runs
of ``tracekit run``'s workload with ``activation_memory=True`` (1, 2 and 4 processes; CPU, bf16, native dropout).

Prints the markdown table that docs/activation-memory.md carries:
    PYTHONPATH=. python tests/helpers/builtin_sweep.py [S B H A]
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from tests.helpers.sweep import split_replicated
from tracekit.analyzers.memory.activation_model import MemoryConfig, activation_model
from tracekit.collectors.workloads.config import WorkloadConfig
from tracekit.collectors.workloads.runner import run_batch


def measure(seq, batch, hidden, heads, ts=(1, 2, 4), layers=2) -> list[dict]:
    rows, base = [], Path(tempfile.mkdtemp(prefix="tracekit-sweep-"))
    for t in ts:
        modes = ("tp",) if t == 1 else ("tp", "tp-sp")
        cfgs = [
            WorkloadConfig(
                workload=m,
                tp=t,
                seq=seq,
                batch=batch,
                hidden=hidden,
                heads=heads,
                layers=layers,
                dtype="bf16",
                dropout=0.1,
                steps=1,
                wait=0,
                warmup=1,
                activation_memory=True,
            )
            for m in modes
        ]
        for cfg, res in zip(cfgs, run_batch([(c, base / f"{c.workload}-{t}") for c in cfgs])):
            per_rank = {
                json.loads(p.read_text())["rank"]: json.loads(p.read_text())["steps"][-1]["layers"] for p in res.activation_paths
            }
            values = {x["measured_bytes"] for layers_ in per_rank.values() for x in layers_}
            model = activation_model(
                MemoryConfig(seq, batch, hidden, heads, tp=t, sp=cfg.workload == "tp-sp", layernorm_stat_bytes=2)
            )
            for mode in ("tp", "tp+sp") if t == 1 else ("tp+sp" if cfg.workload == "tp-sp" else "tp",):
                rows.append(
                    {
                        "mode": mode,
                        "t": t,
                        "ranks": len(per_rank),
                        "measured_bytes": sorted(values),
                        "paper_bytes": model.paper_bytes,
                        "ln_stats_bytes": model.layernorm_stats_bytes,
                    }
                )
    return sorted(rows, key=lambda r: (r["mode"], r["t"]))


def markdown(rows, seq, batch, hidden) -> str:
    sbh = seq * batch * hidden
    out = [
        "| mode | t | processes | measured bytes (every rank, every layer) | model (paper + LN stats) | measured / sbh |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        m = r["measured_bytes"]
        shown = f"{m[0]:,}" if len(m) == 1 else " / ".join(f"{x:,}" for x in m)
        out.append(
            f"| {r['mode']} | {r['t']} | {r['ranks']} | {shown} | {r['paper_bytes']:,} + "
            f"{r['ln_stats_bytes']:,} | {m[0] / sbh:.3f} |"
        )
    return "\n".join(out)


if __name__ == "__main__":
    s, b, h, a = (int(x) for x in sys.argv[1:5]) if len(sys.argv) >= 5 else (256, 2, 256, 8)
    rows = measure(s, b, h, a)
    print(f"s={s} b={b} h={h} a={a}, sbh={s * b * h:,}, 5as/h={5 * a * s / h:g}\n")
    print(markdown(rows, s, b, h))
    for mode in ("tp", "tp+sp"):
        ms = [r["measured_bytes"][0] for r in rows if r["mode"] == mode]
        rep, shard = split_replicated(ms[0], ms[1])
        print(
            f"\n{mode}: replicated R = {rep:,} B = {rep / (s * b * h):.4f} sbh; divided by t: X = {shard:,} B;"
            f" R + X/4 = {rep + shard // 4:,} vs measured t=4 {ms[2]:,}"
        )
