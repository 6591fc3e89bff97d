"""Throwaway: overlap ratio |C ∩ K| / |C| per rank from CPU traces (gloo worker spans vs main-thread ops outside
the comm issue/wait annotations), plain vs overlap variants. Usage: python benchmarks/collectors_overlap_cpu.py tp tp-sp
Replaced by the overlap analyzer once it lands."""
import sys, glob, gzip, json
import numpy as np
from tracekit.collectors.workloads.config import WorkloadConfig
from tracekit.collectors.workloads.runner import run_batch

def union(iv):
    iv = sorted(iv); out = []
    for a, b in iv:
        if out and a <= out[-1][1]: out[-1][1] = max(out[-1][1], b)
        else: out.append([a, b])
    return out
def length(iv): return sum(b - a for a, b in iv)
def inter(x, y):
    i = j = 0; out = []
    while i < len(x) and j < len(y):
        a, b = max(x[i][0], y[j][0]), min(x[i][1], y[j][1])
        if a < b: out.append([a, b])
        if x[i][1] < y[j][1]: i += 1
        else: j += 1
    return out
def ratio(path):
    ev = [e for e in json.load(gzip.open(path))["traceEvents"] if e.get("ph") == "X"]
    main = next(e["tid"] for e in ev if e["name"].startswith("ProfilerStep#"))
    C = union([(e["ts"], e["ts"] + e["dur"]) for e in ev if e["name"].startswith("gloo:") and e["tid"] != main])
    skip = union([(e["ts"], e["ts"] + e["dur"]) for e in ev if e["name"].startswith(("tracekit:wait", "tracekit:comm"))])
    K = union([(e["ts"], e["ts"] + e["dur"]) for e in ev if e.get("cat") == "cpu_op" and e["tid"] == main])
    # compute = main-thread ops outside the issue/wait annotations
    Kc = []
    for a, b in K:
        pieces = [[a, b]]
        for s0, s1 in skip:
            if s1 <= a or s0 >= b: continue
            pieces = [p for q in pieces for p in ([[q[0], min(q[1], s0)]] if q[0] < s0 else []) + ([[max(q[0], s1), q[1]]] if s1 < q[1] else [])]
        Kc += pieces
    Kc = union(Kc)
    return length(inter(C, Kc)) / max(length(C), 1), length(C)
if __name__ == "__main__":
    shape = dict(layers=1, seq=256, hidden=256, heads=8, batch=2, steps=3, dropout=0.1, chunks=4)
    cases = sys.argv[1:]
    jobs = [(WorkloadConfig(workload=w, overlap=o, **shape), f"/tmp/ov/{w}-{o}") for w in cases for o in (False, True)]
    run_batch(jobs)
    for cfg, out in jobs:
        rs = [ratio(p) for p in sorted(glob.glob(out + "/rank*.trace.json.gz"))]
        print(f"{cfg.workload:8} overlap={cfg.overlap!s:5} ratio per rank " + " ".join(f"{r:.2f}" for r, _ in rs) + f"  comm ms {rs[0][1]/1e3:.1f}")
