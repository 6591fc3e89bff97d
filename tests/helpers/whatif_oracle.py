"""An independent replay for tracekit.analyzers.graph.whatif (issue 28 item 4): given the dependency graph as plain
arrays (node chains, measured starts, durations, gaps, fixed starts; edges with their anchors and delays) and the
step windows as plain tuples, each step is replayed by the definition in docs/whatif.md — every node that starts in
the step's window at the latest of its inputs, everything before the window as measured (start, duration) — in a topological order
of a networkx DiGraph, one node at a time. No numpy scan, no blocks, no index, no tracekit import: it checks the
indexed, blocked max-plus replay (tests/integration/test_critical_path_fast.py). Slow by design."""

from __future__ import annotations

import networkx as nx


def graph_arrays(g) -> dict:
    """The plain data of a tracekit Graph (lists of ints and bools), and its windows as tuples."""
    keys = ("chain", "start", "dur", "gap", "fixed", "src", "dst", "anchor_end", "delay")
    out = {k: getattr(g, k).tolist() for k in keys}
    out["windows"] = [(w.step, w.start_ns, w.end_ns, w.tail_ns, tuple(w.end_nodes)) for w in g.windows]
    return out


def predicted_step_times(data: dict, dur: list[int]) -> dict[int, int]:
    """Per step: the latest replayed end of its windows' end nodes (plus their tails) minus its earliest start."""
    steps: dict[int, list] = {}
    for w in data["windows"]:
        steps.setdefault(w[0], []).append(w)
    into: dict[int, list[int]] = {}
    for e, d in enumerate(data["dst"]):
        into.setdefault(d, []).append(e)
    out = {}
    for step, wins in sorted(steps.items()):
        lo, hi = min(w[1] for w in wins), max(w[2] for w in wins)
        t = _replay(data, dur, into, lo, hi)
        end = max(max(t[n] + dur[n] if n in t else data["start"][n] + data["dur"][n] for n in w[4]) + w[3] for w in wins)
        out[step] = end - lo
    return out


def _replay(data: dict, dur: list[int], into: dict, lo: int, hi: int) -> dict[int, int]:
    chain, start, measured, gap, fixed = data["chain"], data["start"], data["dur"], data["gap"], data["fixed"]
    src, anchor_end, delay = data["src"], data["anchor_end"], data["delay"]
    inside = [i for i, s in enumerate(start) if lo <= s <= hi]
    member = set(inside)
    g = nx.DiGraph()
    g.add_nodes_from(inside)
    for i in inside:
        if i > 0 and chain[i - 1] == chain[i] and i - 1 in member:
            g.add_edge(i - 1, i)
        for e in into.get(i, []):
            if src[e] in member:
                g.add_edge(src[e], i)
    t: dict[int, int] = {}

    def end(n: int) -> int:  # a node before the window as measured (its start and its duration), else as replayed
        return t[n] + dur[n] if n in t else start[n] + measured[n]

    for i in nx.topological_sort(g):
        cands = [fixed[i]]
        if i > 0 and chain[i - 1] == chain[i]:
            p = i - 1
            cands.append(end(p) + gap[i])
        for e in into.get(i, []):
            s = src[e]
            cands.append((end(s) if anchor_end[e] else t.get(s, start[s])) + delay[e])
        t[i] = max(cands)
    return t
