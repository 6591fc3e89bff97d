"""Where a warm-cache `tracekit analyze FILE --format json` spends its time: imports, the cached load, the
analyzers, the summary dict, the JSON text; and the whole command as one process. Each repeat is a fresh
process (what a user waits for); the figures are the minimum over the repeats, wall and CPU seconds (CPU time
is what the stage costs whatever else runs on the machine; wall is what a user sees on an idle one).

    python benchmarks/analyze_stages.py /tmp/tracekit-bench/trace-300mb/rank0.json
    python benchmarks/analyze_stages.py TRACE --root /tmp/base   # another checkout, same interpreter: A/B

``--bytecode``: the tracekit modules' bytecode cached (in a temporary PYTHONPYCACHEPREFIX, warmed by the first
run), as an installed package has it; without it, the environment as it is (on the project's machines
PYTHONDONTWRITEBYTECODE=1: every process compiles tracekit from source, ~0.08 s of CPU that HTA, installed with
its bytecode, never pays). With ``--root`` the two checkouts alternate run by run (the fair comparison on a
shared machine) and the two summaries are compared byte for byte.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

STAGES = r"""
import json, os, sys, time
W, C = time.perf_counter, time.process_time
out = {}
def stage(name, t, c):
    out[name] = {"wall_s": W() - t, "cpu_s": C() - c}
t, c = W(), C()
import tracekit.cli.analyze, tracekit.cli.output  # what `tracekit analyze` imports
from tracekit.analyzers import analyze
from tracekit.cli.output import text
from tracekit.loader.loading import LoadOptions, load
stage("imports", t, c)
t, c = W(), C()
ts = load([sys.argv[1]], options=LoadOptions(cache_dir=sys.argv[2]))
stage("load (warm cache)", t, c)
t, c = W(), C()
a = analyze(ts)
stage("analyzers", t, c)
t, c = W(), C()
d = a.to_dict()
stage("summary dict", t, c)
t, c = W(), C()
s = text(d, "json", indent=2)
stage("JSON text", t, c)
out["rows"] = sum(len(tb) for _, tb in ts)
out["summary_bytes"] = len(s.encode())
print(json.dumps(out))
"""


BYTECODE: dict[str, str] = {}  # set by --bytecode: PYTHONPYCACHEPREFIX, and PYTHONDONTWRITEBYTECODE removed


def _env(root: str) -> dict:
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    if BYTECODE:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env.update(BYTECODE)
    return env


def stages(root: str, trace: str, cache: str) -> dict:
    """One fresh process: per-stage wall and CPU seconds."""
    res = subprocess.run(
        [sys.executable, "-c", STAGES, trace, cache], env=_env(root), cwd=root, capture_output=True, text=True, check=True
    )
    return json.loads(res.stdout.strip().splitlines()[-1])


def whole(root: str, trace: str, cache: str, out: str) -> dict:
    """The command itself, one process: wall, and CPU (user + system) from wait4."""
    t = time.perf_counter()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tracekit",
            "analyze",
            os.path.dirname(trace) or ".",
            "--format",
            "json",
            "--cache-dir",
            cache,
            "--out",
            out,
        ],
        env=_env(root),
        cwd=root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    if status:
        raise RuntimeError(f"{root}: analyze failed: {proc.stderr.read().decode()[-500:] if proc.stderr else status}")
    return {
        "wall_s": wall,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "user_s": usage.ru_utime,
        "sys_s": usage.ru_stime,
        "peak_rss_mb": usage.ru_maxrss / 1024,
    }


def measure(root: str, trace: str, cache: str, out: str) -> dict:
    return {"stages": stages(root, trace, cache), "whole": whole(root, trace, cache, out)}


def best(runs: list[dict]) -> dict:
    """Per stage and figure, the minimum over the runs."""
    names = [k for k, v in runs[0]["stages"].items() if isinstance(v, dict)]
    out = {n: {f: min(r["stages"][n][f] for r in runs) for f in ("wall_s", "cpu_s")} for n in names}
    out["whole process"] = {f: min(r["whole"][f] for r in runs) for f in ("wall_s", "cpu_s", "user_s", "sys_s")}
    non_load = [sum(r["stages"][n]["cpu_s"] for n in names if n != "load (warm cache)") for r in runs]
    out["not the load (CPU)"] = {"cpu_s": min(non_load)}
    return out


def table(label: str, b: dict) -> str:
    rows = [f"{label}", f"{'stage':24s} {'wall s':>8s} {'CPU s':>8s}"]
    for n, v in b.items():
        rows.append(f"{n:24s} {v.get('wall_s', float('nan')):8.3f} {v['cpu_s']:8.3f}")
    return "\n".join(rows)


def main() -> None:
    p = argparse.ArgumentParser(description="stages of a warm-cache analyze, fresh processes, min of N")
    p.add_argument("trace", nargs="?", default="/tmp/tracekit-bench/trace-300mb/rank0.json")
    p.add_argument("--root", default=None, help="another checkout to measure beside this one (same interpreter)")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--bytecode", action="store_true", help="cache tracekit's bytecode, as an installed package has it")
    p.add_argument("--out", default=None, help="results JSON (default benchmarks/results-DATE-analyze-stages.json)")
    a = p.parse_args()
    roots = {"this": ROOT, **({"root": os.path.abspath(a.root)} if a.root else {})}
    doc: dict = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="minutes"),
        "trace": a.trace,
        "trace_bytes": os.path.getsize(a.trace),
        "roots": roots,
        "load_avg_at_start": os.getloadavg(),
        "bytecode_cached": a.bytecode,
        "runs": {k: [] for k in roots},
    }
    with tempfile.TemporaryDirectory(prefix="tk-stages-") as tmp:
        if a.bytecode:
            BYTECODE["PYTHONPYCACHEPREFIX"] = os.path.join(tmp, "pycache")
        caches = {k: os.path.join(tmp, f"cache-{k}") for k in roots}
        for k, r in roots.items():  # write each checkout's cache once (not measured)
            whole(r, a.trace, caches[k], os.path.join(tmp, f"{k}.json"))
        for _ in range(a.repeat):
            for k, r in roots.items():  # alternating: both see the same moments of a shared machine
                doc["runs"][k].append(measure(r, a.trace, caches[k], os.path.join(tmp, f"{k}.json")))
        if len(roots) == 2:
            with open(os.path.join(tmp, "this.json"), "rb") as f1, open(os.path.join(tmp, "root.json"), "rb") as f2:
                doc["identical_summary"] = f1.read() == f2.read()
    doc["load_avg_at_end"] = os.getloadavg()
    doc["best"] = {k: best(v) for k, v in doc["runs"].items()}
    for k in roots:
        print(table(f"{k}: {roots[k]}", doc["best"][k]))
    print(
        f"load average {doc['load_avg_at_start']} -> {doc['load_avg_at_end']}"
        + (f"; identical summaries: {doc['identical_summary']}" if "identical_summary" in doc else "")
    )
    name = f"results-{datetime.date.today().isoformat()}-analyze-stages{'-bytecode' if a.bytecode else ''}.json"
    out = a.out or os.path.join(HERE, name)
    with open(out, "w") as fh:
        json.dump(doc, fh, indent=1)
    print(f"results: {out}")


if __name__ == "__main__":
    main()
