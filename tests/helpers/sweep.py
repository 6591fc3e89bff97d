"""Measure the reference layer's per-rank saved bytes over t, as TP and TP + SP (CPU, bf16, native dropout).

Run as a script to print the markdown table that docs/activation-memory.md carries:
    PYTHONPATH=. python tests/helpers/sweep.py
"""

from __future__ import annotations

import torch

from tests.helpers.ref_layer import RefLayer, layer_input
from tracekit.analyzers.memory.activation_model import MemoryConfig, activation_model
from tracekit.collectors.activation import activation_memory


def measure_layer(seq, batch, hidden, heads, tp=1, sp=False, seed=0) -> int:
    """Saved bytes of one reference layer on one rank (forward and backward run, like a training step)."""
    torch.manual_seed(seed)
    layer = RefLayer(hidden, heads, tp=tp, sp=sp)
    x = layer_input(seq, batch, hidden, tp, sp, seed=seed)
    with activation_memory(layer, layers=[layer], peak="none") as rec:
        layer(x).float().sum().backward()
    return rec.result().layers[0].measured_bytes


def sweep(seq, batch, hidden, heads, ts=(1, 2, 4)) -> list[dict]:
    rows = []
    for sp in (False, True):
        for t in ts:
            cfg = MemoryConfig(seq, batch, hidden, heads, tp=t, sp=sp and t > 1, layernorm_stat_bytes=2)
            model = activation_model(cfg)
            rows.append(
                {
                    "t": t,
                    "mode": "tp+sp" if sp else "tp",
                    "measured_bytes": measure_layer(seq, batch, hidden, heads, t, sp and t > 1),
                    "model_bytes": model.total_bytes,
                    "paper_bytes": model.paper_bytes,
                    "ln_stats_bytes": model.layernorm_stats_bytes,
                }
            )
    return rows


def split_replicated(m1: int, m2: int) -> tuple[int, int]:
    """Solve measured(t) = R + X/t from t = 1 and t = 2: (R, X)."""
    x = 2 * (m1 - m2)
    return m1 - x, x


def markdown(rows, seq, batch, hidden) -> str:
    sbh = seq * batch * hidden
    out = ["| mode | t | measured bytes | model (paper + LN stats) | measured / sbh |", "|---|---|---|---|---|"]
    for r in rows:
        out.append(
            f"| {r['mode']} | {r['t']} | {r['measured_bytes']:,} | {r['paper_bytes']:,} + "
            f"{r['ln_stats_bytes']:,} | {r['measured_bytes'] / sbh:.3f} |"
        )
    return "\n".join(out)


if __name__ == "__main__":
    s, b, h, a = 256, 2, 256, 8
    rows = sweep(s, b, h, a)
    print(f"s={s} b={b} h={h} a={a}, sbh={s * b * h:,}, 5as/h={5 * a * s / h:g}\n")
    print(markdown(rows, s, b, h))
    for mode in ("tp", "tp+sp"):
        ms = [r["measured_bytes"] for r in rows if r["mode"] == mode]
        rep, shard = split_replicated(ms[0], ms[1])
        print(
            f"\n{mode}: replicated R = {rep:,} B = {rep / (s * b * h):.4f} sbh; divided by t: X = {shard:,} B;"
            f" R + X/4 = {rep + shard // 4:,} vs measured t=4 {ms[2]:,}"
        )
