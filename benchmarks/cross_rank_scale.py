"""What the parent does after the per-rank work, stage by stage, at many ranks and many collectives per rank.

The per-rank results are built directly (no traces): every rank of a tp × pp × dp layout (tests/helpers/rank_layout.py)
runs ``--steps`` steps of the generator's seven collectives (tp all-reduces and broadcast, four pipeline exchanges,
a dp all-reduce), timed by the generator's model (tests/helpers/multirank.py: a slowed straggler, jitter, groups
ending together at their last arrival), with a clock offset per host. Then, timed one by one in this process: the
cross-rank analysis (``combine``: dimensions, matching, clock offsets, wait/transfer, stragglers, bandwidth), the
summary dict, its JSON text, the terminal tables and the HTML report. Each stage's exponent is fitted over the
rank counts (time ~ ranks^b at a fixed number of collectives per rank: b = 1 is linear in the instances).

    .venv/bin/python benchmarks/cross_rank_scale.py --ranks 64,256,1024 --steps 10 --out results.json
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import time
import tracemalloc

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tests.helpers.multirank import ROLES
from tests.helpers.rank_layout import Layout
from tracekit.analyzers.comm.communication import CommOptions, combine
from tracekit.analyzers.comm.instances import Instances
from tracekit.analyzers.comm.overlap import RankOverlap, StepOverlap
from tracekit.analyzers.summary_schema import build_summary
from tracekit.model.traceset import RankInfo, RunMetadata, TraceSet

LAYOUTS = {16: "2x2x4", 64: "8x2x4", 128: "8x2x8", 256: "8x4x8", 512: "8x4x16", 1024: "8x4x32", 2048: "8x4x64"}
TEMPLATE_US = [(6598, 31), (9151, 8), (107928, 3307), (117724, 2424), (123911, 2369), (149647, 2161), (190088, 1690)]
STEP_US = 222_442.0
NAMES = {"tp": "ncclKernel_AllReduce_RING_LL_Sum_float", "dp": "ncclKernel_AllReduce_RING_LL_Sum_float"}


def model(layout: Layout, steps: int, seed: int = 0):
    """Per collective k (steps x 7) and rank: start and end (ns, own clock), role, peer; and the plan."""
    rng = np.random.default_rng(seed)
    n = layout.world
    plan = layout.plan(ROLES.split(","), 7 * steps)
    start = np.array([s * STEP_US + a for s in range(steps) for a, _ in TEMPLATE_US])
    dur = np.array([d for _ in range(steps) for _, d in TEMPLATE_US], np.float64)
    slow = np.ones(n)
    slow[rng.integers(n)] += 0.08
    lag, prev_end = np.zeros(n), 0.0
    t0, t1 = np.zeros((len(start), n)), np.zeros((len(start), n))
    for k in range(len(start)):
        gap = max(start[k] - prev_end, 0.0)
        lag = lag + gap * (slow - 1) + rng.exponential(0.02 * gap + 1e-9, n)
        arrive = start[k] + lag
        g = plan["group"][k]
        last = np.full(int(g.max()) + 1, -np.inf)
        np.maximum.at(last, g, arrive)
        t0[k], t1[k] = arrive, last[g] + dur[k]
        lag = last[g] - start[k]
        prev_end = start[k] + dur[k]
    host = rng.uniform(-20_000, 20_000, -(-n // 8))
    host[0] = 0.0
    offset = host[np.arange(n) // 8]
    base = 1_716_423_322_000_000_000
    return base + np.rint((t0 + offset) * 1e3).astype(np.int64), base + np.rint((t1 + offset) * 1e3).astype(np.int64), plan


def parts(layout: Layout, steps: int) -> tuple[TraceSet, tuple[RankOverlap, ...]]:
    """A TraceSet of RankInfos only and each rank's RankOverlap with its collective instances."""
    start, end, plan = model(layout, steps)
    groups = layout.groups()
    m, n = start.shape
    step_of = np.repeat(np.arange(steps), 7)
    ranks, infos = [], {}
    for r in range(n):
        role = [plan["role"][k][r] for k in range(m)]
        pgs = [groups.of(r, "pp" if x in ("send", "recv") else x) for x in role]
        seq: dict[str, int] = {}
        seqs = []
        for x, g in zip(role, pgs):
            if x in ("send", "recv"):
                seqs.append(-1)
            else:
                seq[g.name] = seq.get(g.name, -1) + 1
                seqs.append(seq[g.name])
        peer = np.array([plan["peer"][k][r] for k in range(m)])
        is_send, is_recv = np.array([x == "send" for x in role]), np.array([x == "recv" for x in role])
        op = np.array(["send" if x == "send" else "recv" if x == "recv" else "all_reduce" for x in role], object)
        cols = {
            "op": op,
            "pg_name": np.array([g.name for g in pgs], object),
            "pg_desc": np.array([g.desc for g in pgs], object),
            "pg_ranks": np.array([g.ranks_text for g in pgs], object),
            "pg_members": np.array([g.ranks for g in pgs] + [()], object)[:-1],
            "name": np.array([NAMES.get(x, "ncclKernel_SendRecv") for x in role], object),
            "dimension": np.full(m, "", object),
            "rank": np.full(m, r, np.int64),
            "step": step_of.astype(np.int64),
            "group_size": np.array([len(g.ranks) for g in pgs], np.int64),
            "seq": np.array(seqs, np.int64),
            "stream": np.full(m, 40, np.int64),
            "start_ns": start[:, r],
            "end_ns": end[:, r],
            "bytes": np.full(m, 1 << 22, np.int64),
            "hidden_ns": np.zeros(m, np.int64),
            "src_rank": np.where(is_send, r, np.where(is_recv, peer, -1)).astype(np.int64),
            "dst_rank": np.where(is_send, peer, np.where(is_recv, r, -1)).astype(np.int64),
            "wait_ns": np.full(m, np.nan),
            "transfer_ns": np.full(m, np.nan),
        }
        comm = int((end[:, r] - start[:, r]).sum())
        steps_t = tuple(
            StepOverlap(s, int(STEP_US * 1e3), int(STEP_US * 170), comm // steps, 0, comm // steps, 0, 0, 0, 0)
            for s in range(steps)
        )
        ranks.append(RankOverlap(r, "cuda", steps_t, StepOverlap.total(steps_t), (), Instances(cols)))
        infos[r] = RankInfo(r, n, "nccl", source=f"rank{r:05d}.json", device_type="cuda", base_time_ns=1)
    traces = TraceSet({r: None for r in range(n)}, infos, RunMetadata(world_size=n, backend="nccl"))  # type: ignore[misc]
    return traces, tuple(ranks)


def stages(traces: TraceSet, ranks: tuple[RankOverlap, ...]) -> dict:
    from tracekit.cli.output import text
    from tracekit.reports.html import HtmlReporter
    from tracekit.reports.terminal import render_text

    out: dict = {}

    def timed(name, fn):
        t = time.perf_counter()
        value = fn()
        out[name] = round(time.perf_counter() - t, 4)
        return value

    comm = timed("cross_rank", lambda: combine(traces, ranks, [[] for _ in ranks], {r: 1 for r in traces.ranks}, CommOptions()))
    summary = timed("summary", lambda: build_summary(traces, comm))
    doc = timed("json", lambda: text(summary, "json", indent=None))
    out["summary_bytes"] = len(doc)
    table = timed("terminal", lambda: render_text(summary, width=160))
    out["terminal_lines"] = table.count("\n")
    buf = io.StringIO()
    timed("html", lambda: HtmlReporter().write(summary, buf))
    out["html_bytes"] = len(buf.getvalue())
    out["instances"] = len(comm.instances)
    out["matched"] = comm.cross.matched
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", default="64,256,1024")
    p.add_argument("--steps", type=int, default=10, help="steps of 7 collectives per rank")
    p.add_argument("--memory", action="store_true", help="also each stage's peak of Python allocations (tracemalloc)")
    p.add_argument("--out")
    a = p.parse_args()
    rows = []
    for n in (int(x) for x in a.ranks.split(",")):
        traces, ranks = parts(Layout.parse(LAYOUTS[n]), a.steps)
        row = {"ranks": n, "load_avg": os.getloadavg()[0], **stages(traces, ranks)}
        if a.memory:
            tracemalloc.start()
            stages(traces, ranks)
            row["peak_mb"] = round(tracemalloc.get_traced_memory()[1] / 2**20, 1)
            tracemalloc.stop()
        rows.append(row)
        print(json.dumps(row), flush=True)
    xs = np.log([r["ranks"] for r in rows])
    fits = {}
    for key in ("cross_rank", "summary", "json", "terminal", "html", "summary_bytes", "html_bytes", "terminal_lines"):
        ys = [max(r[key], 1e-4) for r in rows]
        fits[key] = round(float(np.polyfit(xs, np.log(ys), 1)[0]), 3) if len(rows) > 1 else None
    print(json.dumps({"exponents": fits}))
    if a.out:
        with open(a.out, "w") as fh:
            json.dump({"steps": a.steps, "rows": rows, "exponents": fits}, fh, indent=1)


if __name__ == "__main__":
    main()
