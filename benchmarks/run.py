"""tracekit vs HTA 0.5.0 on the same generated traces, side by side in one run.

Each measurement runs in its own subprocess (peak RSS from getrusage of that child alone): HTA
``TraceAnalysis`` load and its comm/comp overlap; tracekit load (no cache), cached reload (Parquet) and
``tracekit.analyze``. Times exclude interpreter start and imports on both sides. Prints a table with ratios and
writes JSON. Timings live here, never in tests.

    python benchmarks/run.py                 # quick: a ~100 MB trace (a few minutes)
    python benchmarks/run.py --sizes 100,500,1500 --repeat 2
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SOURCE = os.path.join(ROOT, "tests", "data", "kineto-gpu", "allreduce-broadcast-2rank-rank0.json.gz")

# each snippet prints one JSON line {"seconds": ..., ...}; the trace directory is argv[1]
SNIPPETS = {
    "hta_load": """
import sys, time, json
from hta.trace_analysis import TraceAnalysis
t = time.perf_counter()
a = TraceAnalysis(trace_dir=sys.argv[1])
print(json.dumps({"seconds": time.perf_counter() - t}))
""",
    "hta_overlap": """
import sys, time, json
from hta.trace_analysis import TraceAnalysis
a = TraceAnalysis(trace_dir=sys.argv[1])
t = time.perf_counter()
df = a.get_comm_comp_overlap(visualize=False)
print(json.dumps({"seconds": time.perf_counter() - t, "ratio": float(df.iloc[:, -1].mean())}))
""",
    "tracekit_load": """
import sys, time, json
from tracekit.loader.io import LoadOptions, load
import pyarrow.parquet, pandas  # imports are not load time (on either side)
t = time.perf_counter()
ts = load(sys.argv[1], options=LoadOptions(cache=False), executor="serial", progress=False)
print(json.dumps({"seconds": time.perf_counter() - t, "events": sum(len(t) for _, t in ts)}))
""",
    "tracekit_cache_write": """
import sys, time, json
from tracekit.loader.io import LoadOptions, load
ts = load(sys.argv[1], options=LoadOptions(cache=True, cache_dir=sys.argv[2]), executor="serial", progress=False)
print(json.dumps({"seconds": 0.0}))
""",
    "tracekit_cached": """
import sys, time, json
from tracekit.loader.io import LoadOptions, load
import pyarrow.parquet, pandas  # imports are not load time (on either side)
t = time.perf_counter()
ts = load(sys.argv[1], options=LoadOptions(cache=True, cache_dir=sys.argv[2]), executor="serial", progress=False)
print(json.dumps({"seconds": time.perf_counter() - t, "events": sum(len(t) for _, t in ts)}))
""",
    "tracekit_analyze": """
import sys, time, json
import tracekit
from tracekit.loader.io import LoadOptions, load
ts = load(sys.argv[1], options=LoadOptions(cache=True, cache_dir=sys.argv[2]), executor="serial", progress=False)
t = time.perf_counter()
s = tracekit.analyze(ts)
r = s.comm.ranks[0].totals
print(json.dumps({"seconds": time.perf_counter() - t, "ratio": r.overlap_ratio, "events": len(ts.table(ts.ranks[0]))}))
""",
}


def measure(name: str, trace_dir: str, cache_dir: str, timeout: int) -> dict:
    """Run one snippet in a fresh interpreter; its peak RSS is that child's alone (wait4 rusage)."""
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-c", SNIPPETS[name], trace_dir, cache_dir], env=env, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return {"error": f"timeout after {timeout} s"}
    if proc.returncode != 0:
        return {"error": err.strip().splitlines()[-1] if err.strip() else f"exit {proc.returncode}"}
    result = json.loads(out.strip().splitlines()[-1])
    # ru_maxrss of RUSAGE_CHILDREN is the largest peak of the waited-for children: this wrapper has one
    result["peak_rss_gb"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024**2
    return result


def run_isolated(name: str, trace_dir: str, cache_dir: str, timeout: int) -> dict:
    """Measure in a wrapper child, so RUSAGE_CHILDREN there holds exactly this one snippet's peak."""
    cmd = [sys.executable, os.path.abspath(__file__), "--_one", name, trace_dir, cache_dir, str(timeout)]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    try:
        return json.loads(out.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"error": (out.stderr.strip().splitlines() or ["no output"])[-1]}


def generate(size_mb: int, work: str) -> tuple[str, dict]:
    sys.path.insert(0, HERE)
    from gen_trace import generate as gen

    d = os.path.join(work, f"trace-{size_mb}mb")
    out = os.path.join(d, "rank0.json")
    if os.path.exists(out):
        return d, {"path": out, "bytes": os.path.getsize(out), "reused": True}
    return d, gen(SOURCE, out, size_mb)


def machine() -> dict:
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1024**3
    from importlib.metadata import version

    import hta  # noqa: F401

    return {"date": datetime.date.today().isoformat(), "cpus": os.cpu_count(), "memory_gb": round(mem, 1),
            "python": platform.python_version(), "platform": platform.platform(),
            "hta": version("HolisticTraceAnalysis"), "msgspec": version("msgspec"), "numpy": version("numpy")}


def bench_size(size_mb: int, work: str, repeat: int, timeout: int, skip_hta: bool, hta_once_mb: int) -> dict:
    trace_dir, info = generate(size_mb, work)
    cache_dir = tempfile.mkdtemp(prefix="tk-cache-", dir=work)
    names = ["tracekit_load", "tracekit_cache_write", "tracekit_cached", "tracekit_analyze"]
    if not skip_hta:
        names += ["hta_load"] if size_mb > hta_once_mb else ["hta_load", "hta_overlap"]
    runs: dict[str, list[dict]] = {n: [] for n in names}
    for _ in range(repeat):
        for n in names:
            if runs[n] and (n == "tracekit_cache_write" or (n.startswith("hta") and size_mb > hta_once_mb)):
                continue
            runs[n].append(run_isolated(n, trace_dir, cache_dir, timeout))
            print(f"  {size_mb} MB {n}: {runs[n][-1]}", file=sys.stderr, flush=True)
    shutil.rmtree(cache_dir, ignore_errors=True)
    return {"size_mb": size_mb, "trace": info, "runs": runs}


def _best(rows: list[dict], key: str):
    vals = [r[key] for r in rows if key in r]
    return (min(vals), max(vals)) if vals else (None, None)


def table(results: list[dict]) -> str:
    lines = [f"{'trace':>8} {'what':<16} {'time s (min..max)':>20} {'peak GB':>8} {'vs HTA load':>12}"]
    for res in results:
        hta_t, _ = _best(res["runs"].get("hta_load", []), "seconds")
        hta_m, _ = _best(res["runs"].get("hta_load", []), "peak_rss_gb")
        for n in ("hta_load", "hta_overlap", "tracekit_load", "tracekit_cached", "tracekit_analyze"):
            rows = res["runs"].get(n, [])
            lo, hi = _best(rows, "seconds")
            if lo is None:
                if rows:
                    lines.append(f"{res['size_mb']:>6}MB {n:<16} {rows[-1].get('error', '?')}")
                continue
            mem, _ = _best(rows, "peak_rss_gb")
            ratio = f"{hta_t / lo:6.1f}x" if hta_t and n in ("tracekit_load", "tracekit_cached") else ""
            if hta_m and n == "tracekit_load":
                ratio += f" mem {mem / hta_m:.2f}"
            lines.append(f"{res['size_mb']:>6}MB {n:<16} {lo:9.2f}..{hi:<9.2f} {mem:8.2f} {ratio:>12}")
    return "\n".join(lines)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--_one":
        name, trace_dir, cache_dir, timeout = sys.argv[2:6]
        print(json.dumps(measure(name, trace_dir, cache_dir, int(timeout))))
        return
    p = argparse.ArgumentParser(description="tracekit vs HTA: load time, peak memory, overlap analysis")
    p.add_argument("--sizes", default="100", help="comma-separated trace sizes in MB of JSON (e.g. 100,500,1500)")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "tracekit-bench"),
                   help="where generated traces are kept (reused between runs; never inside the repository)")
    p.add_argument("--out", default=os.path.join(ROOT, "out", "bench.json"))
    p.add_argument("--timeout", type=int, default=1800)
    p.add_argument("--skip-hta", action="store_true")
    p.add_argument("--hta-once-mb", type=int, default=600,
                   help="above this size HTA's load runs once and its overlap call is skipped (minutes each)")
    a = p.parse_args()
    os.makedirs(a.work, exist_ok=True)
    results = [bench_size(int(s), a.work, a.repeat, a.timeout, a.skip_hta, a.hta_once_mb) for s in a.sizes.split(",")]
    doc = {"machine": machine(), "results": results}
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as fh:
        json.dump(doc, fh, indent=1)
    print(table(results))
    print(f"results: {a.out}")


if __name__ == "__main__":
    main()
