"""tracekit vs HTA 0.5.0, whole processes, side by side in one run; results as JSON in benchmarks/.

Every measurement is one fresh process (interpreter start and imports included: what a user waits for), run from
a wrapper that times it and samples the summed RSS of its whole process tree every 20 ms (the split loader's
workers count); ``peak_gb`` is that sum, ``peak_max_gb`` the largest single process (getrusage). What runs:

- ``tk_analyze``: ``tracekit analyze DIR --format json --no-cache`` (one file: split over every core);
  ``tk_analyze_serial``: the same with ``--executor serial`` (one process); ``tk_analyze_cached``: the Parquet
  cache warm (the traces' tables read, the analyzers run); ``tk_analyze_warm``: the analysis cache warm (the
  summary the previous run wrote, read back: docs/analyze.md).
- ``hta``: HTA 0.5.0 ``TraceAnalysis(trace_dir=DIR)`` + ``get_comm_comp_overlap(visualize=False)``.
- ``tk_import`` / ``tk_help``: ``python -c "import tracekit"`` and ``tracekit --help`` (``py_start``: bare python).
- ``split``: one load split on 2 processes, with the CPU seconds of each piece: what N cores would take.

    python benchmarks/side_by_side.py            # quick (`make bench`): a 100 MB trace, a few minutes
    python benchmarks/side_by_side.py --full     # 300 MB and 500 MB with HTA, 1.5 GB (memory), 5 M events (bounded
                                        # outputs: analyze and report), 64 ranks x 30 MB (HTA with a time limit)
    python benchmarks/side_by_side.py --memory [--base DIR]   # the memory cases only (1.5 GB analyze, 5 M events analyze
                                        # and report) and the 300 MB wall time; --base: the same commands on
                                        # another checkout (e.g. `git archive` of main), alternating, for A/B

Timings are noisy on a shared machine: the ratios of runs made side by side in one invocation are what counts.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import glob
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SOURCE = os.path.join(ROOT, "tests", "data", "kineto-gpu", "allreduce-broadcast-2rank-rank0.json.gz")
PY = sys.executable

HTA = """
import sys, time, json
t = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
a = TraceAnalysis(trace_dir=sys.argv[1])
t_load = time.perf_counter()
df = a.get_comm_comp_overlap(visualize=False)
print(json.dumps({"load_s": t_load - t, "overlap_s": time.perf_counter() - t_load,
                  "overlap_ratio": float(df.iloc[:, -1].mean())}))
"""

SPLIT = """
import sys, time, json, os
from tracekit.loader import split
from tracekit.loader.classify import RuleSet
from tracekit.loader.decode import StreamLimits
from tracekit.runtime.memory import gc_paused
from tracekit.loader.loading import _load_streaming, LoadOptions
path, workers = sys.argv[1], int(sys.argv[2])
c = time.process_time(); t = time.perf_counter()
_load_streaming(path, LoadOptions(cache=False))
serial = {"wall_s": time.perf_counter() - t, "cpu_s": time.process_time() - c}
stats = {}
t = time.perf_counter()
builder, header, warnings = split.load_split(path, StreamLimits(), RuleSet(), workers, stats)
t1, c1 = time.perf_counter(), time.process_time()
with gc_paused():
    table, info = builder.finish(header, path, warnings)
stats.update(finish_s=time.perf_counter() - t1, finish_cpu_s=time.process_time() - c1, split_wall_s=time.perf_counter() - t,
             serial=serial, rows=len(table))
print(json.dumps(stats))
"""


def tree_rss(pid: int) -> int:
    """Summed RSS (bytes) of ``pid`` and its descendants, from /proc, plus the split pieces' columns on their way
    back to the parent (files in /dev/shm, memory that no process's RSS counts until the parent maps them)."""
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as fh:
                    ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
                kids.setdefault(ppid, []).append(int(d))
            except (OSError, ValueError, IndexError):
                pass
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        todo += kids.get(p, [])
        for f in glob.glob(f"/dev/shm/tracekit-piece-{p}-*"):
            with contextlib.suppress(OSError):
                total += os.stat(f).st_blocks * 512
        try:
            with open(f"/proc/{p}/statm") as fh:
                total += int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            pass
    return total


# The measured processes keep compiled bytecode here (set on this machine class, PYTHONDONTWRITEBYTECODE=1 made
# every process recompile the checkout's tracekit, ~0.08 s of CPU that a pip-installed tracekit never spends).
PYCACHE = os.path.join(tempfile.gettempdir(), "tracekit-bench-pycache")


def measure(cmd: list[str], timeout: float, max_tree_gb: float | None = None, root: str = ROOT) -> dict:
    """Run ``cmd`` (a whole process) with ``root``'s tracekit, timing it and sampling its tree's RSS; stop it past
    ``timeout`` seconds or ``max_tree_gb`` (so a run that would exhaust the shared machine is reported, not
    survived)."""
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""), PYTHONPYCACHEPREFIX=PYCACHE)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed tracekit has its bytecode, as HTA's install has
    t = time.perf_counter()
    proc = subprocess.Popen(
        cmd, env=env, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    peak, stop = [0], [""]

    def sample():
        while proc.poll() is None:
            peak[0] = max(peak[0], tree_rss(proc.pid))
            if time.perf_counter() - t > timeout:
                stop[0] = f"stopped after {timeout:.0f} s"
            elif max_tree_gb and peak[0] > max_tree_gb * 1024**3:
                stop[0] = f"stopped at {max_tree_gb} GB of memory after {time.perf_counter() - t:.0f} s"
            if stop[0]:
                os.killpg(proc.pid, 9)
                return
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = proc.communicate()
    wall = time.perf_counter() - t
    sampler.join()
    res: dict = {"wall_s": wall, "peak_gb": peak[0] / 1024**3}
    if stop[0] or proc.returncode:
        res["error"] = stop[0] or (err.strip().splitlines() or [f"exit {proc.returncode}"])[-1][:300]
        res["stderr_tail"] = err.strip().splitlines()[-3:]
    lines = out.strip().splitlines()
    if lines and lines[-1].startswith("{"):
        with contextlib.suppress(ValueError):
            res.update(json.loads(lines[-1]))
    return res


def repeated(cmd: list[str], timeout: float, times: int = 3, before: dict | None = None) -> dict:
    """The run of median wall time of ``times`` (one run of a few seconds moves by +-20 % on a shared 2-core
    machine; HTA's minute-long run averages that out by itself), with every run's wall time and peak; ``before``:
    a result of this function whose runs count too (runs before and after HTA's bracket it in time)."""
    runs = [dict(r) for r in (before or {}).get("runs", [])] + [measure(cmd, timeout) for _ in range(times)]
    ok = sorted((r for r in runs if "error" not in r), key=lambda r: r["wall_s"])
    if not ok:
        return runs[0]
    return dict(
        ok[len(ok) // 2],
        runs=[{"wall_s": r["wall_s"], "peak_gb": r["peak_gb"]} for r in runs],
        peak_gb=max(r["peak_gb"] for r in runs),
    )


def tracekit_cmd(*args: str) -> list[str]:
    return [PY, "-m", "tracekit", *args]


def trace_dir(work: str, name: str, make) -> tuple[str, dict]:
    d = os.path.join(work, name)
    marker = os.path.join(d, ".done.json")
    if os.path.exists(marker):
        with open(marker) as fh:
            return d, dict(json.load(fh), reused=True)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    info = make(d)
    with open(marker, "w") as fh:
        json.dump(info, fh)
    return d, info


def gen():
    sys.path.insert(0, HERE)
    import gen_trace

    return gen_trace


def sized(mb: int):
    return lambda d: gen().generate(SOURCE, os.path.join(d, "rank0.json"), mb)


def one_file(d: str) -> str:
    return next(os.path.join(d, f) for f in sorted(os.listdir(d)) if f.endswith(".json") and not f.startswith("."))


def bench_trace(d: str, work: str, hta: bool, timeout: float, split: bool = True) -> dict:
    out = os.path.join(work, "out")
    os.makedirs(out, exist_ok=True)
    summary = os.path.join(out, "summary.json")
    runs: dict[str, dict] = {}
    runs["tk_analyze"] = repeated(tracekit_cmd("analyze", d, "--format", "json", "--no-cache", "--out", summary), timeout)
    runs["tk_analyze"]["summary_bytes"] = os.path.getsize(summary) if os.path.exists(summary) else None
    runs["tk_analyze_serial"] = measure(
        tracekit_cmd("analyze", d, "--format", "json", "--no-cache", "--executor", "serial", "--out", summary), timeout
    )
    cache = os.path.join(work, "cache")
    shutil.rmtree(cache, ignore_errors=True)
    measure(tracekit_cmd("analyze", d, "--format", "json", "--cache-dir", cache, "--out", summary), timeout)
    runs["tk_analyze_warm"] = measure(
        tracekit_cmd("analyze", d, "--format", "json", "--cache-dir", cache, "--out", summary), timeout
    )
    for entry in glob.glob(os.path.join(cache, "analysis.*.json")):  # leave the Parquet tables only
        os.unlink(entry)
    runs["tk_analyze_cached"] = measure(
        tracekit_cmd("analyze", d, "--format", "json", "--cache-dir", cache, "--out", summary), timeout
    )
    shutil.rmtree(cache, ignore_errors=True)
    if split:
        runs["split"] = measure([PY, "-c", SPLIT, one_file(d), "2"], timeout)
    if hta:
        runs["hta"] = measure([PY, "-c", HTA, d], timeout, max_tree_gb=10)
        # two more tracekit runs after HTA's: the median of five then brackets HTA's minute in time
        runs["tk_analyze"] = repeated(
            tracekit_cmd("analyze", d, "--format", "json", "--no-cache", "--out", summary), timeout, 2, before=runs["tk_analyze"]
        ) | {"summary_bytes": runs["tk_analyze"].get("summary_bytes")}
    for name, r in runs.items():
        print(f"  {os.path.basename(d)} {name}: {_short(r)}", file=sys.stderr, flush=True)
    return runs


def _short(r: dict) -> str:
    return json.dumps({k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items() if not isinstance(v, (list, dict))})


def bench_bounded(work: str, events: int, timeout: float) -> dict:
    d, info = trace_dir(
        work, f"synthetic-{events // 1_000_000}m", lambda d: gen().synthetic_collectives(os.path.join(d, "rank0.json"), events)
    )
    out = os.path.join(work, "out")
    os.makedirs(out, exist_ok=True)
    summary, html, table = (os.path.join(out, n) for n in ("bounded.json", "bounded.html", "bounded.parquet"))
    runs = {
        "tk_analyze": measure(
            tracekit_cmd("analyze", d, "--format", "json", "--no-cache", "--out", summary, "--collectives-out", table), timeout
        ),
        "tk_report": measure(tracekit_cmd("report", d, "--no-cache", "-o", html), timeout),
    }
    runs["tk_analyze"].update(summary_bytes=_size(summary), parquet_bytes=_size(table))
    runs["tk_report"]["html_bytes"] = _size(html)
    for name, r in runs.items():
        print(f"  bounded {name}: {_short(r)}", file=sys.stderr, flush=True)
    return {"trace": info, "runs": runs}


def _size(path: str) -> int | None:
    return os.path.getsize(path) if os.path.exists(path) else None


def bench_ranks(work: str, ranks: int, mb: int, hta: bool, timeout: float) -> dict:
    def make(d):
        g = gen()
        infos = [g.generate(SOURCE, os.path.join(d, f"rank{r}.json"), mb, rank=r, world=ranks, group=8) for r in range(ranks)]
        return {"ranks": ranks, "bytes": sum(i["bytes"] for i in infos), "events": sum(i["events"] for i in infos)}

    d, info = trace_dir(work, f"dp-{ranks}x{mb}mb", make)
    out = os.path.join(work, "out", "ranks.json")
    runs = {"tk_analyze": measure(tracekit_cmd("analyze", d, "--format", "json", "--no-cache", "--out", out), timeout)}
    if hta:
        runs["hta"] = measure([PY, "-c", HTA, d], timeout, max_tree_gb=10)
    for name, r in runs.items():
        print(f"  {ranks} ranks {name}: {_short(r)}", file=sys.stderr, flush=True)
    return {"trace": info, "runs": runs}


def memory_cases(work: str, timeout: float, base: str | None, repeat: int, base_all: bool = False) -> dict:
    """Peak memory of the whole command (process tree) on the issue's three memory cases, and the wall time of
    the 300 MB analyze (split loader) for regressions; with ``base``, the 300 MB command (every command with
    ``base_all``) also runs on that checkout, alternating with this one (same moment, same load). Memory does not
    depend on the machine's load; the wall time does, hence the alternation."""
    big, _ = trace_dir(work, "trace-1500mb", sized(1500))
    mid, _ = trace_dir(work, "trace-300mb", sized(300))
    synth, info = trace_dir(work, "synthetic-5m", lambda d: gen().synthetic_collectives(os.path.join(d, "rank0.json"), 5_000_000))
    out = os.path.join(work, "out")
    os.makedirs(out, exist_ok=True)
    cases = {
        "analyze_300mb": (["analyze", mid, "--format", "json", "--no-cache", "--out", os.path.join(out, "m300.json")], repeat),
        "analyze_1500mb": (["analyze", big, "--format", "json", "--no-cache", "--out", os.path.join(out, "m1500.json")], 1),
        "analyze_5m": (
            [
                "analyze",
                synth,
                "--format",
                "json",
                "--no-cache",
                "--out",
                os.path.join(out, "m5m.json"),
                "--collectives-out",
                os.path.join(out, "m5m.parquet"),
            ],
            1,
        ),
        "report_5m": (["report", synth, "--no-cache", "-o", os.path.join(out, "m5m.html")], 1),
    }
    trees = {"this": ROOT, **({"base": os.path.abspath(base)} if base else {})}
    res: dict = {"synthetic": info, "trees": trees, "cases": {}}
    for name, (args, n) in cases.items():
        runs: dict[str, list] = {t: [] for t in trees}
        for _ in range(n):
            for tree, root in trees.items():
                if tree == "base" and not (base_all or name == "analyze_300mb"):
                    continue
                r = measure(tracekit_cmd(*args), timeout, root=root)
                r["load_avg"] = os.getloadavg()
                runs[tree].append(r)
                print(f"  {name} [{tree}]: {_short(r)}", file=sys.stderr, flush=True)
        res["cases"][name] = runs
    return res


def machine() -> dict:
    from importlib.metadata import version

    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1024**3
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="minutes"),
        "cpus": os.cpu_count(),
        "memory_gb": round(mem, 1),
        "load_avg_at_start": os.getloadavg(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        **{p: version(p) for p in ("HolisticTraceAnalysis", "msgspec", "numpy", "pandas", "pyarrow")},
    }


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            return next((ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")), "")
    except OSError:
        return ""


def startup(timeout: float) -> dict:
    runs = {
        "py_start": [measure([PY, "-c", "pass"], timeout) for _ in range(3)],
        "tk_import": [measure([PY, "-c", "import tracekit"], timeout) for _ in range(3)],
        "tk_help": [measure(tracekit_cmd("--help"), timeout) for _ in range(3)],
    }
    out = {k: {"min_wall_s": min(r["wall_s"] for r in v), "runs": v} for k, v in runs.items()}
    print(f"  startup: { {k: round(v['min_wall_s'], 3) for k, v in out.items()} }", file=sys.stderr, flush=True)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description="tracekit vs HTA: whole-process time and peak memory, side by side")
    p.add_argument("--full", action="store_true", help="the full sizes (tens of minutes; run once)")
    p.add_argument("--sizes", default=None, help="comma-separated trace sizes in MB (default 100; --full 300,500)")
    p.add_argument("--work", default="/tmp/tracekit-bench", help="generated traces (reused; never the repository)")
    p.add_argument("--out", default=None, help="results JSON (default benchmarks/results-DATE[-full].json)")
    p.add_argument("--timeout", type=float, default=900)
    p.add_argument("--skip-hta", action="store_true")
    p.add_argument("--memory", action="store_true", help="the memory cases only (see memory_cases)")
    p.add_argument("--base", default=None, help="with --memory: also run each command on this checkout (A/B)")
    p.add_argument("--base-all", action="store_true", help="with --base: every memory case on both checkouts")
    p.add_argument("--repeat", type=int, default=3, help="with --memory: runs of the 300 MB wall-time case")
    a = p.parse_args()
    os.makedirs(a.work, exist_ok=True)
    if a.memory:
        out = a.out or os.path.join(HERE, f"results-{datetime.date.today().isoformat()}-mem.json")
        doc = {"machine": machine(), "memory": memory_cases(a.work, a.timeout, a.base, a.repeat, a.base_all)}
        save(doc, out)
        print(f"results: {out}")
        return
    sizes = [int(s) for s in (a.sizes or ("300,500" if a.full else "100")).split(",")]
    out = a.out or os.path.join(HERE, f"results-{datetime.date.today().isoformat()}{'-full' if a.full else ''}.json")
    measure([PY, "-m", "compileall", "-q", os.path.join(ROOT, "tracekit")], a.timeout)  # bytecode, as installed
    doc: dict = {"machine": machine(), "startup": startup(a.timeout), "traces": []}
    for mb in sizes:
        d, info = trace_dir(a.work, f"trace-{mb}mb", sized(mb))
        doc["traces"].append({"size_mb": mb, "trace": info, "runs": bench_trace(d, a.work, not a.skip_hta, a.timeout)})
        save(doc, out)
    if a.full:
        d, info = trace_dir(a.work, "trace-1500mb", sized(1500))
        doc["streaming_1500mb"] = {"trace": info, "runs": bench_trace(d, a.work, False, a.timeout, split=False)}
        save(doc, out)
        doc["bounded_5m"] = bench_bounded(a.work, 5_000_000, a.timeout)
        save(doc, out)
        doc["ranks_64"] = bench_ranks(a.work, 64, 30, not a.skip_hta, a.timeout)
    save(doc, out)
    print(f"results: {out}")


def save(doc: dict, out: str) -> None:
    """After each part, so that a run stopped half-way keeps what it measured."""
    doc["machine"]["load_avg_at_end"] = os.getloadavg()
    with open(out, "w") as fh:
        json.dump(doc, fh, indent=1)


if __name__ == "__main__":
    main()
