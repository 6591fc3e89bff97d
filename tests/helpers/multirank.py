"""A real-shaped multi-rank run: one Kineto trace per rank of a tp × pp × dp layout, made from one real rank.

Every rank is a copy of the first ``--steps`` ProfilerSteps of a real trace (default the A100 NCCL trace
tests/data/kineto-gpu/allreduce-broadcast-2rank-rank0.json.gz: 2 broadcasts and 5 DDP all-reduce buckets per step,
full collective args, record_param_comms, ns float timestamps), with

- process groups of the layout as Megatron-Core or torch DeviceMesh create them: every rank creates every group
  in the same order, so a group's ``pg_name`` is the same number on all its members; ``distributedInfo.pg_config``
  lists the groups the rank belongs to (``TENSOR_MODEL_PARALLEL_GROUP`` / ``mesh_tp`` ...);
- the template's collectives given roles in turn (``--roles``): a tensor-parallel collective in the rank's tp
  group, a data-parallel one in its dp group, or one of four pipeline exchanges (send/recv between adjacent
  stages, forward and backward, both parities, so every pair of stages is bounded both ways); a rank that has no
  partner in an exchange does a tp all-reduce instead, as its whole tp group does. Collectives carry ``Seq``
  numbered per group, so matching is by (group, Seq) as in recent PyTorch; send/recv carry ``Src Rank``/``Dst
  Rank`` (global ranks);
- a timing model in which groups wait for their last member: each rank's clock runs through the template with its
  own lag (compute between collectives ``--slowdown`` slower on the straggler ranks, plus exponential jitter of
  ``--jitter`` of that compute); a collective starts on each rank at its arrival and ends on all members at the
  last arrival + the template's duration, and a rank continues from that end. Host events and spans are mapped
  through the rank's (monotone) time warp, so nesting and order stay; device kernels keep their duration;
- a clock offset per host of ``--gpus-per-node`` ranks (uniform in ±``--clock-offset-us``), on every timestamp.

Deterministic: the same arguments give byte-identical files. ``generate(out, layout)`` writes ``rank00000.json``
... and ``.gen.json`` (the arguments, the stragglers, the true clock offsets, per-rank event counts: what an
analysis of the run should find); an existing directory with the same ``.gen.json`` is reused (a dot file: the
loader skips it). The command line is benchmarks/gen_ranks.py; the suite's many-rank tests use it directly.
"""

from __future__ import annotations

import gzip
import json
import os
import re
from concurrent.futures import ProcessPoolExecutor

import msgspec
import numpy as np

from tests.helpers.rank_layout import Layout

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SOURCE = os.path.join(ROOT, "tests", "data", "kineto-gpu", "allreduce-broadcast-2rank-rank0.json.gz")
ROLES = "tp,ppA,tp,ppB,ppC,ppD,dp"  # one per template collective, in turn (7 per step of the default template)
SENDRECV = "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)"
_STEP = re.compile(r"^ProfilerStep#(\d+)$")
_DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
VERSION = 1
STAMP = ".gen.json"  # hidden: a directory of traces is every *.json in it


class Template:
    """The real rank's header and events, cut to ``steps`` steps, and where its collectives are."""

    def __init__(self, path: str, steps: int) -> None:
        doc = _read(path)
        events = doc.pop("traceEvents")
        self.header = doc
        self.events = _cut(events, steps)
        ev = self.events
        self.comm = [i for i, e in enumerate(ev) if e.get("cat") == "kernel" and "Collective name" in (e.get("args") or {})]
        self.comm.sort(key=lambda i: ev[i]["ts"])
        self.start = np.array([ev[i]["ts"] for i in self.comm], np.float64)
        self.dur = np.array([ev[i]["dur"] for i in self.comm], np.float64)
        self.rpc = _host_ops_of(ev, self.comm)  # record_param_comms index -> collective number (or -1)
        timed = [e for e in ev if e.get("ph") != "M" and isinstance(e.get("ts"), (int, float))]
        self.t0 = min(e["ts"] for e in timed)
        self.t1 = max(e["ts"] + (e.get("dur") or 0) for e in timed)
        self.mode = [_mode(e) for e in ev]
        for i in self.comm:
            self.mode[i] = _COMM
        self.comm_of = {i: k for k, i in enumerate(self.comm)}
        self.ts = np.array([e["ts"] if m != _UNTIMED else 0.0 for e, m in zip(ev, self.mode)], np.float64)
        self.end = self.ts + np.array([e.get("dur", 0.0) if m == _SPAN else 0.0 for e, m in zip(ev, self.mode)])


_UNTIMED, _INSTANT, _DEVICE, _SPAN, _COMM = range(5)


def _mode(e: dict) -> int:
    """How an event moves with its rank's clock: not at all (metadata), its time only (instants, flows, device
    work, which keeps its duration), or both ends (host spans, annotations, collectives)."""
    if e.get("ph") == "M" or not isinstance(e.get("ts"), (int, float)):
        return _UNTIMED
    if "dur" not in e:
        return _INSTANT
    return _DEVICE if e.get("cat") in _DEVICE_CATS else _SPAN


def _read(path: str) -> dict:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as fh:
        return msgspec.json.decode(fh.read())


def _cut(events: list, steps: int) -> list:
    """The events of the first ``steps`` ProfilerSteps: host events before the next step starts, the device
    events those launched (by correlation), their flows' ends."""
    meta = [e for e in events if e.get("ph") == "M"]
    timed = [e for e in events if e.get("ph") != "M" and isinstance(e.get("ts"), (int, float))]
    have = sorted(e["ts"] for e in timed if _STEP.match(str(e.get("name", ""))) and e.get("cat") == "user_annotation")
    if not 1 <= steps <= len(have):
        raise ValueError(f"the template has {len(have)} ProfilerSteps; asked for {steps}")
    cut = have[steps] if steps < len(have) else float("inf")
    host = [e for e in timed if e.get("cat") not in _DEVICE_CATS and e.get("ph") not in ("f",) and e["ts"] < cut]
    launched = {(e.get("args") or {}).get("correlation") for e in host if e.get("cat") == "cuda_runtime"}
    device = [e for e in timed if e.get("cat") in _DEVICE_CATS and (e.get("args") or {}).get("correlation") in launched]
    flows = {(e.get("cat"), e.get("id")) for e in host if e.get("ph") == "s"}
    ends = [e for e in timed if e.get("ph") == "f" and (e.get("cat"), e.get("id")) in flows]
    kept = host + device + ends
    last = max(e["ts"] + (e.get("dur") or 0) for e in kept if e.get("cat") != "Trace")
    for i, e in enumerate(kept):  # the profiler's own span ends with what is kept
        if e.get("cat") == "Trace":
            kept[i] = dict(e, dur=round(last - e["ts"], 3))
    return meta + sorted(kept, key=lambda e: e["ts"])


def _host_ops_of(events: list, comm: list[int]) -> dict[int, int]:
    """record_param_comms -> the collective (its number in ``comm``) whose kernel a runtime call inside it
    launched; -1 for one that launched none (a wait)."""
    number = {events[i]["args"]["correlation"]: k for k, i in enumerate(comm)}
    runtimes = [e for e in events if e.get("cat") == "cuda_runtime" and (e.get("args") or {}).get("correlation") in number]
    out = {}
    for i, e in enumerate(events):
        if e.get("name") != "record_param_comms":
            continue
        lo, hi = e["ts"], e["ts"] + e.get("dur", 0)
        hit = [r for r in runtimes if r.get("tid") == e.get("tid") and lo <= r["ts"] <= hi]
        out[i] = number[hit[0]["args"]["correlation"]] if hit else -1
    return out


def timing(layout: Layout, tpl: Template, plan: dict, slow: np.ndarray, jitter: float, rng) -> tuple[np.ndarray, np.ndarray]:
    """(lag before each collective, lag after it), [collectives, ranks], in µs: a group ends together at its last
    member's arrival + the template's duration."""
    m, n = len(tpl.start), layout.world
    pre, post = np.zeros((m, n)), np.zeros((m, n))
    lag = np.zeros(n)
    prev_end = tpl.t0
    for k in range(m):
        gap = max(tpl.start[k] - prev_end, 0.0)
        lag = lag + gap * (slow - 1.0) + rng.exponential(jitter * gap + 1e-9, n)
        pre[k] = lag
        arrive = tpl.start[k] + lag
        group = plan["group"][k]
        last = np.full(int(group.max()) + 1, -np.inf)
        np.maximum.at(last, group, arrive)
        lag = last[group] - tpl.start[k]
        post[k] = lag
        prev_end = tpl.start[k] + tpl.dur[k]
    return pre, post


def warp_points(tpl: Template, pre: np.ndarray, post: np.ndarray, slow: float) -> tuple[np.ndarray, np.ndarray]:
    """One rank's time warp as points (template time, lag): a ramp over the compute before each collective, flat
    while the rank waits in it, a step up to the lag of its end."""
    xs, ys = [tpl.t0], [0.0]
    prev_end, prev_lag = tpl.t0, 0.0
    for k in range(len(tpl.start)):
        a, e = tpl.start[k], tpl.start[k] + tpl.dur[k]
        xs += [max(prev_end, xs[-1]), max(a, xs[-1] + 1e-6), max(e - 1e-6, xs[-1] + 2e-6), max(e, xs[-1] + 3e-6)]
        ys += [prev_lag, pre[k], pre[k], post[k]]
        prev_end, prev_lag = e, post[k]
    tail = max(tpl.t1 + 1.0, xs[-1] + 1.0)
    xs.append(tail)
    ys.append(prev_lag + (tail - prev_end) * (slow - 1.0))
    return np.array(xs), np.maximum.accumulate(np.array(ys))


_RUN: dict = {}  # what every rank's writer shares (set before the pool forks)


def write_rank(job: tuple) -> tuple[int, int, int]:
    """Rank ``rank``'s trace file; returns (rank, events, bytes)."""
    rank, pre, post, slow, offset_us = job
    tpl, layout, plan, out, naming = (_RUN[k] for k in ("template", "layout", "plan", "out", "naming"))
    xs, ys = warp_points(tpl, pre, post, slow)
    groups = layout.groups(naming)
    enc = msgspec.json.Encoder()
    seq: dict[str, int] = {}
    args_of: dict[int, dict] = {}
    for k, i in enumerate(tpl.comm):  # the collective args this rank writes, Seq counted per group
        args_of[k] = _coll_args(tpl.events[i]["args"], layout, plan, k, rank, groups, seq)

    t = tpl.ts + np.interp(tpl.ts, xs, ys) + offset_us
    end = tpl.end + np.interp(tpl.end, xs, ys) + offset_us
    k = tpl.comm_of
    t[tpl.comm] = tpl.start + pre + offset_us  # a collective: from this rank's arrival to its group's common end
    end[tpl.comm] = tpl.start + tpl.dur + post + offset_us
    ts_list, dur_list = np.round(t, 3).tolist(), np.round(np.maximum(end - t, 0.0), 3).tolist()
    body = []
    for i, e in enumerate(tpl.events):
        mode = tpl.mode[i]
        if mode == _UNTIMED:
            body.append(e)
            continue
        e = dict(e, ts=ts_list[i])
        if mode == _SPAN:
            e["dur"] = dur_list[i]
        elif mode == _COMM:
            e["dur"] = dur_list[i]
            a = args_of[k[i]]
            e["args"] = {**e["args"], **a}
            if a["Collective name"] in ("send", "recv"):
                e["name"] = SENDRECV
        if i in tpl.rpc:
            c = tpl.rpc[i]
            e["args"] = {**e["args"], **(args_of[c] if c >= 0 else _world_args(layout, groups))}
        body.append(e)
    head = dict(tpl.header, distributedInfo=_distributed_info(tpl.header, layout, rank, groups))
    head["traceName"] = f"rank{rank:05d}.json"
    path = os.path.join(out, f"rank{rank:05d}.json")
    data = enc.encode(head)[:-1].replace(b'"rank":', b'"rank": ', 1) + b',"traceEvents":' + enc.encode(body) + b"}"
    with open(path + ".tmp", "wb") as fh:
        fh.write(data)
    os.replace(path + ".tmp", path)
    return rank, len(body), len(data)


def _coll_args(args: dict, layout: Layout, plan: dict, k: int, rank: int, groups, seq: dict) -> dict:
    role, peer = plan["role"][k][rank], int(plan["peer"][k][rank])
    pg = groups.of(rank, "pp" if role in ("send", "recv") else role)
    out = {
        "Process Group Name": pg.name,
        "Process Group Description": pg.desc,
        "Process Group Ranks": pg.ranks_text,
        "Group size": len(pg.ranks),
        "Global rank start": pg.ranks[0],
        "Global rank stride": pg.stride,
    }
    if role in ("send", "recv"):
        out["Collective name"] = role
        out["Src Rank"], out["Dst Rank"] = (rank, peer) if role == "send" else (peer, rank)
    else:
        out["Collective name"] = args["Collective name"]
        seq[pg.name] = seq.get(pg.name, -1) + 1
        out["Seq"] = seq[pg.name]
    return out


def _world_args(layout: Layout, groups) -> dict:
    w = groups.world
    return {
        "Process Group Name": w.name,
        "Process Group Description": w.desc,
        "Process Group Ranks": w.ranks_text,
        "Group size": layout.world,
    }


def _distributed_info(header: dict, layout: Layout, rank: int, groups) -> dict:
    di = dict(header.get("distributedInfo") or {})
    mine = groups.member_of(rank)
    di.update(
        backend="nccl",
        rank=rank,
        world_size=layout.world,
        pg_count=len(groups.all),
        pg_config=[
            {"pg_name": g.name, "pg_desc": g.desc, "backend_config": "cuda:nccl", "pg_size": len(g.ranks), "ranks": list(g.ranks)}
            for g in mine
        ],
    )
    return di


def generate(
    out: str,
    layout: Layout,
    *,
    source: str = SOURCE,
    steps: int = 1,
    roles: str = ROLES,
    stragglers: int = 1,
    slowdown: float = 0.2,
    jitter: float = 0.01,
    clock_offset_us: float = 20_000.0,
    gpus_per_node: int = 8,
    naming: str = "megatron",
    seed: int = 0,
    workers: int = 0,
) -> dict:
    """Write the run into ``out``; returns .gen.json's record (reused when ``out`` has the same one)."""
    params = {
        "version": VERSION,
        "source": os.path.basename(source),
        "layout": layout.text,
        "steps": steps,
        "roles": roles,
        "stragglers": stragglers,
        "slowdown": slowdown,
        "jitter": jitter,
        "clock_offset_us": clock_offset_us,
        "gpus_per_node": gpus_per_node,
        "naming": naming,
        "seed": seed,
    }
    stamp = os.path.join(out, STAMP)
    if os.path.isfile(stamp):
        with open(stamp) as fh:
            old = json.load(fh)
        if old.get("params") == params and all(
            os.path.isfile(os.path.join(out, f"rank{r:05d}.json")) for r in range(layout.world)
        ):
            return old
    tpl = Template(source, steps)
    rng = np.random.default_rng(seed)
    strag = sorted(int(r) for r in rng.choice(layout.world, size=min(stragglers, layout.world), replace=False))
    slow = np.ones(layout.world)
    slow[strag] += slowdown
    plan = layout.plan(roles.split(","), len(tpl.comm))
    pre, post = timing(layout, tpl, plan, slow, jitter, rng)
    nodes = -(-layout.world // gpus_per_node)
    offsets = rng.uniform(-clock_offset_us, clock_offset_us, nodes)
    offsets[0] = 0.0
    os.makedirs(out, exist_ok=True)
    _RUN.update(template=tpl, layout=layout, plan=plan, out=out, naming=naming)
    jobs = [(r, pre[:, r], post[:, r], float(slow[r]), float(offsets[r // gpus_per_node])) for r in range(layout.world)]
    if workers > 1:
        with ProcessPoolExecutor(workers) as pool:
            written = list(pool.map(write_rank, jobs, chunksize=8))
    else:
        written = [write_rank(j) for j in jobs]
    record = {
        "params": params,
        "world": layout.world,
        "stragglers": strag,
        "clock_offsets_us": {str(r): float(offsets[r // gpus_per_node]) for r in range(0, layout.world, gpus_per_node)},
        "collectives_per_rank": len(tpl.comm),
        "events_per_rank": written[0][1],
        "bytes": sum(w[2] for w in written),
    }
    with open(stamp, "w") as fh:
        json.dump(record, fh, indent=1)
    return record
