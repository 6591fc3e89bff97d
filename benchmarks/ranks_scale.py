"""How tracekit's commands grow with the number of ranks: 64 / 256 / 1,024 generated ranks, serial, on a local
process pool and on a Dask cluster; time and peak memory of every process involved; fitted exponents.

The runs are made by tests/helpers/multirank.py (benchmarks/gen_ranks.py is its command line) into ``--work``.

Every measurement is a fresh process (``python -m tracekit ...`` with ``--no-cache``: the whole load each time),
timed by a wrapper that samples every 20 ms the summed RSS of its process tree (``tree_gb``), of the tracekit
process alone (``parent_gb``) and, on Dask, of the cluster's processes too (``cluster_gb``: the scheduler and the
workers, which are not the command's children). Executors:

- ``serial``: ``--executor serial`` (one process);
- ``process``: the default local process pool (one worker per core);
- ``dask-local``: a ``distributed.LocalCluster`` with separate worker processes (2 x 1 thread), started by a helper
  process before the command, ``--executor dask://ADDRESS``;
- ``dask-cli``: ``dask scheduler`` and two ``dask worker`` processes started as separate commands, as a user
  would on a cluster.

A cluster is started afresh for every run (not timed). The runs of one series (the sizes of one command on one
executor) are made back to back, smallest first, and the series is repeated (``--repeat``): exponents are fitted
per series (least squares of log time against log ranks) and every figure carries the load average of its minute.

    .venv/bin/python benchmarks/ranks_scale.py --ranks 64,256,1024 --executors serial,process,dask-local,dask-cli \\
        --commands analyze,critical,report --repeat 2 --out benchmarks/results-ranks.json
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, ROOT)  # tests.helpers: the generator
from side_by_side import PYCACHE, tree_rss  # noqa: E402

from tests.helpers.multirank import generate  # noqa: E402
from tests.helpers.rank_layout import Layout  # noqa: E402

PY = sys.executable
LAYOUTS = {8: "2x2x2", 16: "2x2x4", 32: "4x2x4", 64: "8x2x4", 128: "8x2x8", 256: "8x4x8", 512: "8x4x16", 1024: "8x4x32"}
COMMANDS = {  # name -> the command's arguments after the trace directory; {out} is the run's scratch directory
    "analyze": ["analyze", "{dir}", "--format", "json", "--out", "{out}/summary.json"],
    "critical": ["analyze", "{dir}", "--critical-path", "--format", "json", "--out", "{out}/summary.json"],
    "whatif": ["whatif", "{dir}", "--set", "comm:dp=0", "--format", "json"],
    "report": ["report", "{dir}", "-o", "{out}/report.html"],
    "critical+report": ["report", "{dir}", "--critical-path", "-o", "{out}/report.html"],
    "annotate": ["annotate", "{dir}", "-o", "{out}/merged.json.gz"],
}
DASK_LOCAL = """
import sys, distributed
cluster = distributed.LocalCluster(n_workers=int(sys.argv[1]), threads_per_worker=1, processes=True,
                                   host="127.0.0.1", dashboard_address=None)
print(cluster.scheduler_address, flush=True)
sys.stdin.read()
cluster.close()
"""


def machine() -> dict:
    from importlib.metadata import version

    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="minutes"),
        "cpus": os.cpu_count(),
        "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "load_avg_at_start": os.getloadavg(),
        "python": platform.python_version(),
        "commit": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip(),
        **{p: version(p) for p in ("msgspec", "numpy", "pandas", "pyarrow", "distributed")},
    }


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _env() -> dict:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), PYTHONPYCACHEPREFIX=PYCACHE)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """A Dask cluster for one run: its address and the pids whose trees are its memory."""

    def __init__(self, kind: str, workers: int) -> None:
        self.procs: list[subprocess.Popen] = []
        env = _env()
        if kind == "dask-local":
            p = subprocess.Popen(
                [PY, "-c", DASK_LOCAL, str(workers)], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
            )
            self.procs.append(p)
            self.address = p.stdout.readline().strip().split("://")[-1]
        else:
            port = _free_port()
            dask = os.path.join(os.path.dirname(PY), "dask")
            quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "env": env}
            self.procs.append(
                subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"], **quiet)
            )
            self.address = f"127.0.0.1:{port}"
            for _ in range(workers):
                self.procs.append(
                    subprocess.Popen(
                        [dask, "worker", f"tcp://{self.address}", "--nthreads", "1", "--nworkers", "1", "--no-dashboard"], **quiet
                    )
                )
        self._wait_ready(workers)

    def _wait_ready(self, workers: int) -> None:
        code = (
            f"import distributed; c = distributed.Client('{self.address}', timeout='60s'); "
            f"c.wait_for_workers({workers}, timeout=120); c.close()"
        )
        subprocess.run([PY, "-c", code], env=_env(), check=True, capture_output=True, timeout=180)

    def rss(self) -> int:
        return sum(tree_rss(p.pid) for p in self.procs)

    def close(self) -> None:
        for p in self.procs:
            with contextlib.suppress(OSError, ValueError):
                if p.stdin:
                    p.stdin.close()
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(30)
            if p.poll() is None:
                p.kill()


def measure(cmd: list[str], timeout: float, cluster: Cluster | None = None) -> dict:
    """Run ``cmd``; wall time, peaks of its tree, of the process itself and of the cluster's processes."""
    load_before = os.getloadavg()[0]
    t = time.perf_counter()
    proc = subprocess.Popen(
        cmd, env=_env(), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    peak = {"tree": 0, "parent": 0, "cluster": 0, "all": 0}
    base = cluster.rss() if cluster else 0
    stop = [""]

    def sample():
        while proc.poll() is None:
            tr, pa = tree_rss(proc.pid), _rss(proc.pid)
            cl = cluster.rss() if cluster else 0
            for k, v in (("tree", tr), ("parent", pa), ("cluster", cl), ("all", tr + cl)):
                peak[k] = max(peak[k], v)
            if time.perf_counter() - t > timeout:
                stop[0] = f"stopped after {timeout:.0f} s"
                os.killpg(proc.pid, 9)
                return
            time.sleep(0.02)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    out, err = proc.communicate()
    wall = time.perf_counter() - t
    th.join()
    res = {
        "wall_s": round(wall, 3),
        "tree_gb": round(peak["tree"] / 2**30, 4),
        "parent_gb": round(peak["parent"] / 2**30, 4),
        "load_avg": [round(load_before, 2), round(os.getloadavg()[0], 2)],
    }
    if cluster:
        res.update(
            cluster_gb=round(peak["cluster"] / 2**30, 4),
            cluster_idle_gb=round(base / 2**30, 4),
            all_gb=round(peak["all"] / 2**30, 4),
        )
    if stop[0] or proc.returncode not in (0, 1):
        res["error"] = stop[0] or (err.strip().splitlines() or [f"exit {proc.returncode}"])[-1][:300]
    return res


def run_one(command: str, trace_dir: str, executor: str, timeout: float, workers: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="tk-ranks-run-") as out:
        args = [a.format(dir=trace_dir, out=out) for a in COMMANDS[command]]
        cmd = [PY, "-m", "tracekit", *args, "--no-cache"]
        cluster = None
        try:
            if executor.startswith("dask"):
                cluster = Cluster(executor, workers)
                cmd += ["--executor", f"dask://{cluster.address}"]
            elif executor != "process":
                cmd += ["--executor", executor]
            res = measure(cmd, timeout, cluster)
        finally:
            if cluster:
                cluster.close()
        for name in ("summary.json", "report.html", "merged.json.gz"):
            path = os.path.join(out, name)
            if os.path.isfile(path):
                res[name.replace(".", "_") + "_bytes"] = os.path.getsize(path)
    return res


def fit(ranks: list[int], values: list[float]) -> float | None:
    """The exponent b of value = a * ranks^b, least squares in log-log."""
    pts = [(r, v) for r, v in zip(ranks, values) if v and v > 0]
    if len(pts) < 2:
        return None
    x, y = np.log([p[0] for p in pts]), np.log([p[1] for p in pts])
    return round(float(np.polyfit(x, y, 1)[0]), 3)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", default="64,256,1024")
    p.add_argument("--executors", default="serial,process,dask-local,dask-cli")
    p.add_argument("--commands", default="analyze,critical,report")
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--work", default="/tmp/tk-ranks", help="generated runs (reused; never the repository)")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 2, help="Dask worker processes")
    p.add_argument("--timeout", type=float, default=1800)
    p.add_argument("--out", default=None)
    a = p.parse_args()
    sizes = [int(x) for x in a.ranks.split(",")]
    dirs = {}
    for n in sizes:
        dirs[n] = os.path.join(a.work, str(n))
        rec = generate(dirs[n], Layout.parse(LAYOUTS[n]), workers=os.cpu_count() or 1)
        print(
            f"{n} ranks: {rec['events_per_rank']} events and {rec['collectives_per_rank']} collectives per rank, "
            f"{rec['bytes'] / 1e9:.2f} GB",
            file=sys.stderr,
            flush=True,
        )
    doc = {"machine": machine(), "ranks": sizes, "layouts": {n: LAYOUTS[n] for n in sizes}, "series": []}
    for rep in range(a.repeat):
        for command in a.commands.split(","):
            for executor in a.executors.split(","):
                series = {"command": command, "executor": executor, "repeat": rep, "runs": {}}
                for n in sizes:
                    res = run_one(command, dirs[n], executor, a.timeout, a.workers)
                    series["runs"][str(n)] = res
                    print(f"  {command:>16} {executor:>10} {n:>5} ranks: {res}", file=sys.stderr, flush=True)
                ok = [n for n in sizes if "error" not in series["runs"][str(n)]]
                for key in ("wall_s", "tree_gb", "parent_gb", "all_gb"):
                    vals = [series["runs"][str(n)].get(key) for n in ok]
                    if all(v is not None for v in vals):
                        series[f"exponent_{key}"] = fit(ok, vals)
                doc["series"].append(series)
                if a.out:
                    doc["machine"]["load_avg_at_end"] = os.getloadavg()
                    with open(a.out, "w") as fh:
                        json.dump(doc, fh, indent=1)
    print(json.dumps([{k: v for k, v in s.items() if k != "runs"} for s in doc["series"]]))


if __name__ == "__main__":
    main()
