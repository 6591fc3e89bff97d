"""An independent oracle for tracekit's critical path and what-if replay, written from the definition in
docs/whatif.md ("The model, step by step") and sharing no code with tracekit: it reads the raw Kineto JSON with
json/gzip (numbers as Decimal, to the ns), builds the dependency graph event by event in plain Python, and finds
each step's longest path over a networkx DiGraph (a topological order and a max-plus pass). Slow by design: a
loop per event, no numpy. tests/integration/test_critical_path_oracle.py runs it against tracekit on hand-built
traces with known answers and on the GPU traces in tests/data.

Covered: host threads cut into pieces at every op boundary (innermost op), device streams (a communication
kernel is an arrival W and a transfer T; across ranks T starts at the last peer's arrival, matched by process group
and sequence number), launch edges (natural delay: the rank's smallest positive launch latency from the call's
start), host waits for the device (sync calls, blocked launches and copies, scalar reads, allocator calls, gaps
that end when the busy device's work does; the piece after the cut waits, the pieces before it have no duration),
device and stream syncs that found the device done, stream waits, the autograd engine's hand-over. Not covered:
gloo worker threads (CPU runs).
"""

from __future__ import annotations

import bisect
import gzip
import json
import re
from dataclasses import dataclass, field
from decimal import Decimal

import networkx as nx

TOL = 20_000
BLOCKED = 50_000
BUSY = 0.9
NEG = -(2**62)
KINDS = ("compute", "comm_transfer", "comm_wait", "host", "memcpy", "idle")
SYNC_CALL = re.compile(r"^(cuda|hip)(Stream|Device|Event|Ctx)Synchroni[sz]e")
IDLE_SYNC = re.compile(r"^(cuda|hip)(Stream|Device|Ctx)Synchroni[sz]e")
BLOCKING = re.compile(r"^(cuda|hip)(LaunchKernel|LaunchKernelExC|MemcpyAsync|Memcpy|MemsetAsync)$")
ALLOC = re.compile(r"^(cuda|hip)(Free|Malloc)$")
SCALAR = ("aten::item", "aten::_local_scalar_dense")
COMM_OPS = ("c10d::", "record_param_comms", "nccl:", "gloo:")  # collective calls: not a CPU run's compute
DEVICE_CATS = {"kernel": "compute", "gpu_memcpy": "memcpy", "gpu_memset": "memcpy", "Kernel": "compute", "Memcpy": "memcpy"}
DEVICE_CATS.update(Memset="memcpy", cuda_profiler_range="compute", mtia_ccp_events="compute")
HOST_CATS = ("cpu_op", "user_annotation", "python_function", "cuda_runtime", "cuda_driver", "Runtime", "Operator", "mtia_runtime")
RUNTIME_CATS = ("cuda_runtime", "cuda_driver", "Runtime", "mtia_runtime")


def _ns(x) -> int:
    return int((Decimal(x) * 1000).to_integral_value())


@dataclass
class Ev:
    cat: str
    name: str
    ts: int
    end: int
    pid: object
    tid: object
    args: dict

    @property
    def corr(self):
        c = self.args.get("correlation", self.args.get("correlation id"))
        return int(c) if isinstance(c, (int, Decimal)) else None


@dataclass
class Node:
    rank: int
    chain: tuple
    start: int
    dur: int
    kind: str
    name: str
    step: int = -1
    ins: list = field(default_factory=list)  # (src node, anchor_end, natural, edge kind, rule)


def read(path: str) -> tuple[int, list[Ev]]:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        doc = json.load(f, parse_float=Decimal)
    rank = (doc.get("distributedInfo") or {}).get("rank", 0)
    out = []
    for e in doc["traceEvents"]:
        if e.get("ph") == "X" and "ts" in e and e.get("dur") is not None:
            ts = _ns(e["ts"])
            out.append(
                Ev(
                    e.get("cat", ""),
                    str(e.get("name", "")),
                    ts,
                    ts + _ns(e["dur"]),
                    e.get("pid"),
                    e.get("tid"),
                    e.get("args") or {},
                )
            )
    return int(rank), out


class Rank:
    """One rank's nodes and edges, built from its events by the model's rules."""

    def __init__(self, rank: int, events: list[Ev]):
        self.rank = rank
        mtia_sync = re.compile(r"^event_(record|wait)")
        for e in events:  # MTIA: copies and event records among its device events
            if e.cat == "mtia_ccp_events" and mtia_sync.match(e.name):
                e.cat = "cuda_sync"
            elif e.cat == "mtia_ccp_events" and e.name.startswith("dma"):
                e.cat = "gpu_memcpy"
        self.dev = [e for e in events if e.cat in DEVICE_CATS]
        self.dsync = [e for e in events if e.cat == "cuda_sync" and isinstance(e.pid, int)]
        device_pids = {e.pid for e in self.dev}  # events on a device's process are the device's, whatever their cat
        self.host = [e for e in events if e.cat in HOST_CATS and e.end > e.ts and e.pid not in device_pids]
        self.events = events
        self.nodes: list[Node] = []
        self._device_nodes()
        self.cuts: dict = {}  # thread -> {cut time}
        self.waiting_calls: dict = {}  # id(call event) -> cut
        self.stretches: dict = {}  # thread -> [(from, to)]
        self.waits: list = []  # (device end node, thread, cut, rule)
        self._host_waits()
        self._autograd()
        self._pieces()
        self._edges()

    # --- device ---------------------------------------------------------------------------------------
    def _device_nodes(self):
        self.end_node = {}  # id(event) -> the node whose end is the activity's end
        self.first_node = {}
        by_lane: dict = {}
        for e in self.dev:
            by_lane.setdefault((e.pid, e.tid), []).append(e)
        for lane, evs in sorted(by_lane.items(), key=lambda kv: str(kv[0])):
            for e in sorted(evs, key=lambda e: e.ts):
                kind = DEVICE_CATS[e.cat]
                if kind == "compute" and e.name.lower().startswith(("nccl", "rccl")):
                    w = Node(self.rank, ("dev", lane), e.ts, 0, "comm_wait", e.name + " (arrival)")
                    t = Node(self.rank, ("dev", lane), e.ts, e.end - e.ts, "comm_transfer", e.name)
                    t.coll = (e.args.get("Process Group Name"), e.args.get("Seq"))  # type: ignore[attr-defined]
                    self.nodes += [w, t]
                    self.first_node[id(e)], self.end_node[id(e)] = w, t
                else:
                    n = Node(self.rank, ("dev", lane), e.ts, e.end - e.ts, kind, e.name)
                    self.nodes.append(n)
                    self.first_node[id(e)] = self.end_node[id(e)] = n
        self.dev_by_end = sorted(self.dev, key=lambda e: e.end)
        self.dev_ends = [e.end for e in self.dev_by_end]
        self.busy = _union([(e.ts, e.end) for e in self.dev])

    def _latest_end(self, limit: int, stream=None):
        i = bisect.bisect_right(self.dev_ends, limit) - 1
        while i >= 0:
            e = self.dev_by_end[i]
            if stream is None or e.tid == stream:
                return e
            i -= 1
        return None

    # --- host waits -----------------------------------------------------------------------------------
    def _cut(self, thread, cut, call, dep, rule):
        if cut in self.cuts.setdefault(thread, set()):
            return
        self.cuts[thread].add(cut)
        if call is not None:
            self.waiting_calls.setdefault(id(call), cut)
        self.waits.append((dep, thread, cut, rule))

    def _host_waits(self):
        launch_ts = {e.corr: e.ts for e in self.host if e.cat in RUNTIME_CATS and e.corr is not None}
        sync_stream = {e.corr: e.tid for e in self.dsync if e.corr is not None}
        self.idle_syncs = []
        for e in sorted(self.host, key=lambda e: e.ts):
            if e.cat not in RUNTIME_CATS:
                continue
            is_sync = bool(SYNC_CALL.match(e.name))
            is_long = not is_sync and bool(BLOCKING.match(e.name)) and e.end - e.ts >= BLOCKED
            if not (is_sync or is_long):
                continue
            stream = sync_stream.get(e.corr)
            stream = stream if isinstance(stream, int) and stream >= 0 else None
            dep = self._latest_end(e.end, stream)
            if dep is None:
                continue
            waited = dep.end > e.ts
            if is_long:
                own = dep.corr == e.corr and DEVICE_CATS[dep.cat] == "memcpy"
                waited &= (launch_ts.get(dep.corr, 2**62) < e.ts or own) and e.end - dep.end <= BLOCKED
            if waited:
                self._cut(e.tid, dep.end, e, dep, "sync_call" if is_sync else "blocking_call")
            if not is_long and IDLE_SYNC.match(e.name):
                if not waited:  # it found the device done: a slower device would have made it wait
                    self.idle_syncs.append(("idle", e, dep, waited))
                if stream is None:  # a device sync waits for every stream
                    self.idle_syncs.append(("wide", e, dep, waited))
        for names, rule in ((SCALAR, "scalar_read"), (ALLOC, "allocator")):
            for e in sorted(self.host, key=lambda e: -e.ts):  # the innermost call waits, not its callers
                hit = e.name in names if isinstance(names, tuple) else bool(names.match(e.name))
                if not hit:
                    continue
                dep = self._latest_end(e.end)
                if dep is not None and dep.end > e.ts and e.end - dep.end <= BLOCKED:
                    self._cut(e.tid, dep.end, e, dep, rule)

    def _gaps(self, skip):
        """Gaps no op but annotations covers (the step window and record_function ranges do no work)."""
        for thread, evs in self._threads().items():
            cov = _union([(e.ts, e.end) for e in evs if e.cat != "user_annotation" and not e.name.startswith("ProfilerStep#")])
            for (_, a), (b, _) in zip(cov, cov[1:]):
                if b - a < BLOCKED or any(lo < b and hi > a for lo, hi in skip.get(thread, [])):
                    continue
                if _overlap(self.busy, a, b) < BUSY * (b - a):
                    continue
                dep = self._latest_end(b)
                if dep is None or b - dep.end > TOL:
                    i = bisect.bisect_right(self.dev_ends, b)
                    dep = self.dev_by_end[i] if i < len(self.dev_ends) and self.dev_ends[i] - b <= TOL else None
                if dep is not None and dep.end > a:
                    cut = min(dep.end, b)
                    if cut not in self.cuts.setdefault(thread, set()):
                        self.stretches.setdefault(thread, []).append((a, cut))
                    self._cut(thread, cut, None, dep, "host_gap")

    def _threads(self):
        out: dict = {}
        for e in self.host:
            out.setdefault(e.tid, []).append(e)
        return out

    def _autograd(self):
        threads = self._threads()
        step_lanes = {e.tid for e in self.host if e.name.startswith("ProfilerStep#")}
        engine = {t for t, evs in threads.items() if any(e.name.startswith("autograd::engine::evaluate_function") for e in evs)}
        engine -= step_lanes
        self.handovers = []
        for a in sorted(step_lanes, key=str):
            bounds = sorted({x for e in threads[a] for x in (e.ts, e.end)})
            for b in sorted(engine, key=str):
                groups: dict = {}
                for e in threads[b]:
                    i = bisect.bisect_right(bounds, e.ts) - 1
                    if 0 <= i < len(bounds) - 1 and e.end <= bounds[i + 1]:
                        groups.setdefault(i, []).append(e)
                for i, evs in sorted(groups.items()):
                    if any(e.name.startswith("autograd::engine::evaluate_function") for e in evs):
                        first, last = min(e.ts for e in evs), max(e.end for e in evs)
                        self.stretches.setdefault(a, []).append((bounds[i], last))
                        self.cuts.setdefault(a, set()).add(last)
                        self.handovers.append((a, bounds[i], last, b, first))
        self._gaps(dict(self.stretches))

    # --- host pieces ----------------------------------------------------------------------------------
    def _pieces(self):
        self.pieces: dict = {}  # thread -> sorted list of (start, node)
        for thread, evs in sorted(self._threads().items(), key=lambda kv: str(kv[0])):
            bounds = sorted({x for e in evs for x in (e.ts, e.end)} | self.cuts.get(thread, set()))
            ops = sorted(evs, key=lambda e: (e.ts, -e.end))
            stack: list[Ev] = []
            k = 0
            out = []
            stretches = sorted(self.stretches.get(thread, []))
            for p, q in zip(bounds, bounds[1:]):
                while k < len(ops) and ops[k].ts <= p:
                    stack.append(ops[k])
                    k += 1
                inner = max((e for e in stack if e.end > p), key=lambda e: (e.ts, -e.end), default=None)
                stack = [e for e in stack if e.end > p]
                dur = q - p
                if inner is not None and id(inner) in self.waiting_calls and p < self.waiting_calls[id(inner)]:
                    dur = 0
                i = bisect.bisect_right(stretches, (p, 2**62)) - 1
                if i >= 0 and p < stretches[i][1]:
                    dur = 0
                name = inner.name if inner is not None else "(host gap)"
                cpu_work = not self.dev and inner is not None and inner.cat == "cpu_op" and not inner.name.startswith(COMM_OPS)
                n = Node(self.rank, ("host", thread), p, dur, "compute" if cpu_work else "host", name)
                n.op = inner  # type: ignore[attr-defined]
                out.append((p, n))
                self.nodes.append(n)
            self.pieces[thread] = out

    def piece_at(self, thread, t, exact=False):
        """The last piece of ``thread`` that starts at or before ``t`` (with ``exact``: the one starting at ``t``)."""
        ps = self.pieces.get(thread, [])
        i = bisect.bisect_right(ps, (t, 2**62), key=lambda x: (x[0], 0)) - 1 if ps else -1
        if i < 0 or (exact and ps[i][0] != t):
            return None
        return ps[i][1]

    # --- edges ----------------------------------------------------------------------------------------
    def _edges(self):
        for a, frm, cut, b, first in self.handovers:
            caller, op = self.piece_at(a, frm), self.piece_at(b, first)
            if caller is not None and op is not None:
                op.ins.append((caller, False, 0, "host", -1))
            last, resume = self.piece_at(b, cut - 1), self.piece_at(a, cut, exact=True)
            if last is not None and resume is not None:
                resume.ins.append((last, True, 0, "host", -1))
        calls = {e.corr: e for e in self.host if e.cat in RUNTIME_CATS and e.corr is not None}
        lats = [d.ts - calls[d.corr].ts for d in self.dev if d.corr in calls]
        natural = min([x for x in lats if x > 0], default=0)
        for d in self.dev:
            c = calls.get(d.corr)
            src = self.piece_at(c.tid, c.ts) if c is not None else None
            if src is not None:
                self.first_node[id(d)].ins.append((src, False, natural, "host", -1))
        for dep, thread, cut, rule in self.waits:
            dst = self.piece_at(thread, cut, exact=True)
            if dst is not None:
                dst.ins.append((self.end_node[id(dep)], True, 0, "host", rule))
        for what, call, dep, waited in self.idle_syncs:
            nat = 0 if waited else call.end - call.ts
            if what == "idle":
                dst = self.piece_at(call.tid, call.end, exact=True)
                if dst is not None:
                    dst.ins.append((self.end_node[id(dep)], True, nat, "host", -1))
                continue
            dst = self.piece_at(call.tid, dep.end if waited else call.end, exact=True)
            for stream in sorted({e.tid for e in self.dev}, key=str):
                other = self._latest_end(call.end, stream)
                if dst is not None and other is not None and other is not dep:
                    dst.ins.append((self.end_node[id(other)], True, nat, "host", -1))
        self._stream_waits()

    def _stream_waits(self):
        by_lane: dict = {}
        for d in self.dev:
            by_lane.setdefault((d.pid, d.tid), []).append(d)
        for lane in by_lane:
            by_lane[lane].sort(key=lambda d: d.ts)
        for s in self.dsync:
            if not isinstance(s.tid, int) or s.tid < 0 or "wait" not in s.name.lower():
                continue
            evs = by_lane.get((s.pid, s.tid), [])
            i = bisect.bisect_left([d.ts for d in evs], s.ts)
            if i >= len(evs):
                continue
            nxt = evs[i]
            cands = [d for d in self.dev if d.pid == s.pid and d.tid != s.tid and d.end <= nxt.ts]
            src = max(cands, key=lambda d: d.end, default=None)
            if src is not None:
                self.first_node[id(nxt)].ins.append((self.end_node[id(src)], True, 0, "idle", -1))


def _union(spans):
    out: list[list[int]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [tuple(x) for x in out]


def _overlap(union, a, b) -> int:
    return sum(max(0, min(hi, b) - max(lo, a)) for lo, hi in union if lo < b and hi > a)


# --- all ranks: the barrier, the binding inputs, the steps -----------------------------------------------------


@dataclass
class StepResult:
    step: int
    length_ns: int
    by_kind_ns: dict
    unexplained_ns: int
    host_waits: dict
    segments: list  # (rank, name, start, dur, kind, unexplained), latest last


class Model:
    """The graph of one or more rank traces (files), with each node's binding input and each step's window."""

    def __init__(self, paths: list[str]):
        self.ranks = [Rank(*read(p)) for p in paths]
        self.nodes = [n for r in self.ranks for n in r.nodes]
        self._barriers()
        self._chains()
        self._bind()
        self.windows = {}
        for r in self.ranks:
            for step, lo, hi, host_end in _windows(r):
                self.windows.setdefault(step, []).append((r, lo, hi, host_end))

    def _barriers(self):
        groups: dict = {}
        for r in self.ranks:
            for n in r.nodes:
                if n.kind == "comm_transfer" and getattr(n, "coll", (None, None))[1] is not None:
                    groups.setdefault(n.coll, []).append(n)
        for key, ts in groups.items():
            if len(ts) < 2:
                continue
            ws = [self._prev_in_chain(t) for t in ts]
            arrive = max(w.start for w in ws)
            bar = Node(-1, ("bar", str(key)), arrive, 0, "comm_wait", "(last arrival)")
            bar.ins = [(w, False, 0, "comm_wait", -1) for w in ws]
            for t in ts:
                end = t.start + t.dur
                t.start = min(max(t.start, arrive), end)
                t.dur = end - t.start
                t.ins.append((bar, False, 0, "comm_wait", -1))
            self.nodes.append(bar)

    def _prev_in_chain(self, t):
        r = next(r for r in self.ranks if r.rank == t.rank)
        return next(a for a, b in zip(r.nodes, r.nodes[1:]) if b is t)

    def _chains(self):
        by_chain: dict = {}
        for n in self.nodes:
            by_chain.setdefault((n.rank, n.chain), []).append(n)
        for chain in by_chain.values():  # already in time order (device W before T; pieces by start)
            for a, b in zip(chain, chain[1:]):
                b.prev = a  # type: ignore[attr-defined]
        for n in self.nodes:
            if not hasattr(n, "prev"):
                n.prev = None  # type: ignore[attr-defined]

    def _bind(self):
        """Evidence: the input that finished latest, no later than TOL after the node's start; the chain on ties."""
        for n in self.nodes:
            chain_fin = min(n.prev.start + n.prev.dur, n.start) if n.prev is not None else NEG
            best, pick = NEG, None
            for i, (src, anchor_end, natural, _, _) in enumerate(n.ins):
                fin = src.start + (src.dur if anchor_end else 0) + natural
                if fin <= n.start + TOL and fin > best:
                    best, pick = fin, i
            n.delays = [nat for (_, _, nat, _, _) in n.ins]
            if pick is not None and best > chain_fin:
                n.bind, n.resid = pick, n.start - best
                n.delays[pick] += n.resid
                n.gap = min(0, n.start - (n.prev.start + n.prev.dur)) if n.prev is not None else 0
            else:
                n.bind = -1 if n.prev is not None else -2
                n.resid = n.start - (n.prev.start + n.prev.dur) if n.prev is not None else 0
                n.gap = n.resid if n.prev is not None else 0
            n.fixed = n.prev is None and not n.ins

    # --- replay and path -----------------------------------------------------------------------------------
    def replay(self, lo: int, hi: int, factor=lambda n: 1.0):
        """{node: (start, dur)} of the nodes that start in [lo, hi] with durations scaled by ``factor`` (the rest
        as measured), computed in a topological order of a networkx DiGraph: start = max over inputs."""
        inside = [n for n in self.nodes if lo <= n.start <= hi]
        g = nx.DiGraph()
        ids = {id(n): n for n in inside}
        g.add_nodes_from(ids)
        for n in inside:
            if n.prev is not None and id(n.prev) in ids:
                g.add_edge(id(n.prev), id(n))
            for src, *_ in n.ins:
                if id(src) in ids:
                    g.add_edge(id(src), id(n))
        t, d = {}, {}
        for key in nx.topological_sort(g):
            n = ids[key]
            d[key] = int(round(n.dur * factor(n)))
            cands = [n.start] if n.fixed else []
            if n.prev is not None:
                ps, pd = t.get(id(n.prev), n.prev.start), d.get(id(n.prev), n.prev.dur)
                cands.append(ps + pd + n.gap)
            for (src, anchor_end, _, _, _), delay in zip(n.ins, n.delays):
                ss, sd = t.get(id(src), src.start), d.get(id(src), src.dur)
                cands.append(ss + (sd if anchor_end else 0) + delay)
            t[key] = max(cands) if cands else n.start
        return t, d

    def step_time(self, step: int, factor=lambda n: 1.0) -> int:
        wins = self.windows[step]
        lo, hi = min(w[1] for w in wins), max(w[2] for w in wins)
        t, d = self.replay(lo, hi, factor)
        return max(self._end(w, t, d)[0] for w in wins) - lo

    def _end(self, w, t, d):
        """(the window's replayed end, its end node, the node's replayed end, the tail)."""
        r, lo, hi, host_end = w
        nodes = self._end_nodes(r, w)
        if not nodes:
            return lo, None, lo, 0
        ends = [(t.get(id(n), n.start) + d.get(id(n), n.dur), n.chain[0] == "dev", n) for n in nodes]
        measured = max(n.start + n.dur for n in nodes)
        tail = max(hi - measured, 0)
        e, _, n = max(ends, key=lambda x: (x[0], x[1]))
        return e + tail, n, e, tail

    def _end_nodes(self, r, w):
        _, lo, hi, host_end = w
        step = next(s for s, ws in self.windows.items() if w in ws)
        host = [(n.start + n.dur, i, n) for i, n in enumerate(r.nodes) if n.chain[0] == "host" and n.start + n.dur <= host_end]
        out = [max(host, key=lambda x: (x[0], x[1]))[2]] if host else []
        last: dict = {}
        for n in r.nodes:
            if n.chain[0] == "dev" and getattr(n, "step", None) == step:
                last[n.chain] = n
        return out + list(last.values())

    def path(self, step: int) -> StepResult:
        """The measured step's critical path: back from the latest end node along each node's binding input."""
        wins = self.windows[step]
        lo = min(w[1] for w in wins)
        t = {id(n): n.start for n in self.nodes}
        d = {id(n): n.dur for n in self.nodes}
        best = max((self._end(w, t, d) + (w,) for w in wins), key=lambda x: x[0])
        end, j, cur, tail = best[:4]
        segs = []
        if tail:
            segs.append((best[4][0].rank, "(after the last activity)", cur, tail, "idle", True))
        at_end = True
        while cur > lo and j is not None:
            if at_end:
                if j.dur:
                    s = max(j.start, lo)
                    segs.append((j.rank, j.name, s, cur - s, j.kind, False))
                cur = j.start
                at_end = False
                continue
            if j.bind == -1:
                if j.gap:
                    s = max(cur - j.gap, lo) if j.gap > 0 else cur - j.gap
                    kind = {"host": "host", "dev": "idle", "bar": "comm_wait"}[j.chain[0]]
                    segs.append((j.rank, "(gap)", s, cur - s, kind, j.gap > TOL))
                cur, j, at_end = j.prev.start + j.prev.dur, j.prev, True
            elif j.bind >= 0:
                src, anchor_end, natural, kind, _ = j.ins[j.bind]
                anchor = src.start + (src.dur if anchor_end else 0)
                cut = cur - j.resid if j.resid > TOL and anchor < cur - j.resid < cur else cur
                if cut < cur:
                    segs.append((j.rank, "(edge)", max(cut, lo), cur - max(cut, lo), kind, True))
                if cut != anchor:
                    s = max(anchor, lo) if cut > anchor else anchor
                    segs.append((j.rank, "(edge)", s, cut - s, kind, False))
                cur, j, at_end = anchor, src, anchor_end
            else:
                segs.append((j.rank, "(no recorded input)", lo, cur - lo, "idle", True))
                cur = lo
        by_kind = dict.fromkeys(KINDS, 0)
        for _, _, _, dur, kind, _ in segs:
            by_kind[kind] += dur
        unexplained = sum(s[3] for s in segs if s[5])
        hi = max(w[2] for w in wins)
        waits: dict = {}
        for r in self.ranks:
            for _dep, thread, cut, rule in r.waits:
                p = r.piece_at(thread, cut, exact=True)
                if p is not None and lo <= cut <= hi:
                    waits[rule] = waits.get(rule, 0) + 1
        return StepResult(step, end - lo, by_kind, unexplained, waits, segs[::-1])


def _windows(r: Rank):
    """(step, span start, span end, host end) of a rank: ProfilerStep#N windows (host events by the window they start
    in, device events by their launch's), or one window (-1) over the whole trace."""
    steps = sorted((e.ts, e.end, int(e.name.split("#", 1)[1])) for e in r.host if e.name.startswith("ProfilerStep#"))
    calls = {e.corr: e for e in r.host if e.cat in RUNTIME_CATS and e.corr is not None}
    device = r.dev + r.dsync
    if not steps:
        known = [e for e in r.events if e.cat in HOST_CATS or e.cat in DEVICE_CATS or e.cat == "cuda_sync"]
        lo = min(e.ts for e in known)  # the profiler's own span (cat "Trace") is no event of the run
        hi = max(e.end for e in known)
        for n in r.nodes:
            n.step = -1
        return [(-1, lo, hi, hi)]
    starts = [s[0] for s in steps]

    def window_of(ts):
        i = bisect.bisect_right(starts, ts) - 1
        return steps[i][2] if i >= 0 and ts < steps[i][1] else None

    of: dict = {}
    for e in device:
        c = calls.get(e.corr)
        of[id(e)] = window_of(c.ts if c is not None else e.ts)
    for e in r.dev:
        r.first_node[id(e)].step = r.end_node[id(e)].step = of[id(e)]
    out, prev_end = [], None
    for ws, we, n in steps:
        mine = [e for e in device if of[id(e)] == n]
        end = max([we] + [e.end for e in mine])
        first = min((e.ts for e in mine), default=None)
        start = ws
        if prev_end is not None and first is not None and first >= prev_end:
            start = min(max(ws, prev_end), end)
        prev_end = end if prev_end is None else max(prev_end, end)
        out.append((n, start, end, we))
    return out


def predicted(paths: list[str], step: int, kernel: str | None = None, factor: float = 1.0) -> int:
    """The what-if: the step's replayed time with the device compute kernels whose name matches ``kernel`` scaled."""
    m = Model(paths)
    pat = re.compile(kernel) if kernel else None
    return m.step_time(
        step, lambda n: factor if pat is not None and n.kind == "compute" and n.chain[0] == "dev" and pat.search(n.name) else 1.0
    )
