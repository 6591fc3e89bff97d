"""Hand-built ``tracekit.summary/1`` dicts and timelines with known numbers, including hostile kernel names."""

from __future__ import annotations

import random

from tests.helpers.summaries import step_row

XSS_SCRIPT = "<script>document.title='pwned';window.__tk_pwned=1</script>"
XSS_IMG = "<img src=x onerror=\"window.__tk_pwned=2;document.title='pwned'\">"
TEMPLATE_KERNEL = "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl<Foo&>(bar)::{lambda()#1}>"
BOLD_NAME = "gloo:<b>bold</b><br>&amp;"
OPS = (("tp", "all_gather"), ("tp", "reduce_scatter"), ("cp", "all_to_all"), ("dp", "all_reduce"))


def make_summary(n_ranks: int = 4, n_steps: int = 3, per_step: int = 4, seed: int = 0, hostile: bool = True) -> dict:
    rng = random.Random(seed)
    ranks, collectives = [], []
    for r in range(n_ranks):
        steps = []
        for s in range(n_steps):
            t0 = 10_000.0 * s
            comm_sum = hidden_sum = 0.0
            for k in range(per_step):
                dim, op = OPS[k % len(OPS)]
                dur = round(rng.uniform(50, 400), 3)
                hidden = round(dur * rng.uniform(0, 1), 3)
                wait = round((dur - hidden) * rng.uniform(0, 1), 3)
                name = f"gloo:{op}"
                if hostile and r == 0 and s == 0:
                    name = (XSS_SCRIPT, XSS_IMG, TEMPLATE_KERNEL, BOLD_NAME)[k % 4]
                collectives.append(
                    {
                        "rank": r,
                        "step": s,
                        "op": op,
                        "pg_name": str(k % 2),
                        "pg_desc": f"tracekit:{dim}",
                        "dimension": dim,
                        "seq": s * per_step + k,
                        "stream": 7,
                        "name": name,
                        "start_us": t0 + 2000.0 * k + 100.0,
                        "dur_us": dur,
                        "bytes": 4096 * (k + 1),
                        "hidden_us": hidden,
                        "exposed_us": round(dur - hidden, 3),
                        "wait_us": wait,
                        "transfer_us": round(dur - hidden - wait, 3),
                        "algbw_gbps": 1.5,
                        "busbw_gbps": 2.25,
                    }
                )
                comm_sum += dur
                hidden_sum += hidden
            wall, compute = 9000.0 + 100 * r + 10 * s, 6000.0 + r
            steps.append(
                step_row(
                    s,
                    wall,
                    comm_sum,
                    hidden_comm_us=hidden_sum,
                    compute_us=compute,
                    idle_us=wall - compute - (comm_sum - hidden_sum),
                )
            )
        totals = {k: sum(st[k] for st in steps) for k in steps[0] if k != "step"}
        totals["overlap_ratio"] = totals["hidden_comm_us"] / totals["comm_us"]
        ranks.append({"rank": r, "steps": steps, "totals": totals})
    by_dim = {}
    for c in collectives:
        row = by_dim.setdefault(
            (c["dimension"], c["op"]),
            {
                "dimension": c["dimension"],
                "op": c["op"],
                "count": 0,
                "bytes": 0,
                "comm_us": 0.0,
                "hidden_comm_us": 0.0,
                "exposed_comm_us": 0.0,
                "wait_us": 0.0,
                "transfer_us": 0.0,
                "busbw_gbps": 2.25,
            },
        )
        row["count"] += 1
        row["bytes"] += c["bytes"]
        for a, b in (
            ("comm_us", "dur_us"),
            ("hidden_comm_us", "hidden_us"),
            ("exposed_comm_us", "exposed_us"),
            ("wait_us", "wait_us"),
            ("transfer_us", "transfer_us"),
        ):
            row[a] += c[b]
    return {
        "schema": "tracekit.summary/1",
        "tracekit_version": "0.1.0",
        "run": {
            "world_size": n_ranks,
            "backend": "gloo",
            "device_type": "cpu",
            "layout": {"tp": 2, "cp": n_ranks // 2},
            "workload": "tp-sp <b>bold</b>",
            "ranks": list(range(n_ranks)),
            "sources": [f"rank{r}.trace.json.gz" for r in range(n_ranks)],
            "manifest": {"torch": "2.13.0"},
        },
        "ranks": ranks,
        "by_dimension": list(by_dim.values()),
        "by_process_group": [],
        "collectives": collectives,
        "clock_offsets": [
            {"rank": r, "offset_us": 3.5 * r, "spread_us": 1.25, "matched": per_step * n_steps} for r in range(1, n_ranks)
        ],
        "stragglers": [
            {
                "rank": r,
                "last_arrivals": r + 1,
                "instances": per_step * n_steps,
                "mean_lateness_us": 10.0 * r,
                "total_caused_wait_us": 100.0 * r,
            }
            for r in range(n_ranks)
        ],
        "unrecognised_kernels": [
            {"name": TEMPLATE_KERNEL, "count": 3, "total_us": 12.5, "streams": [7]},
            {"name": XSS_IMG, "count": 1, "total_us": 1.0, "streams": [7]},
        ]
        if hostile
        else [],
        "activation_memory": {
            "layers": [
                {"rank": 0, "layer": i, "measured_bytes": 1_000_000 + i, "model_bytes": 1_000_000, "model": "tp+sp"}
                for i in range(2)
            ]
        },
        "warnings": [f"rank 1: {XSS_SCRIPT} in a warning"] if hostile else [],
    }


def make_timeline(n_ranks: int = 4, pieces: int = 10, step: int = 1) -> dict:
    """Per rank: ``pieces`` compute intervals of 300 µs every 500 µs; comm 250 µs from 200 µs after each
    compute start, so 100 µs hidden under it and 150 µs exposed."""
    ranks = []
    for r in range(n_ranks):
        t0 = 1e6 * r + 10_000.0 * step
        ivs = []
        for i in range(pieces):
            s = t0 + 500.0 * i
            ivs += [[s, s + 300.0, "compute"], [s + 200.0, s + 300.0, "hidden"], [s + 300.0, s + 450.0, "exposed"]]
        ranks.append({"rank": r, "step": step, "window_us": [t0, t0 + 500.0 * pieces], "intervals": ivs})
    return {"schema": "tracekit.timeline/1", "ranks": ranks}
