"""Cost of `tracekit annotate DIR -o merged.json.gz` (tracekit/reports/perfetto_merge.py): the writer alone and the
whole command, on N copies of a real trace as N ranks (each its own rank in distributedInfo, its clock shifted).

    .venv/bin/python benchmarks/merge_trace.py --ranks 4

Prints one JSON line per stage: seconds, events per second, the writer's peak traced memory (tracemalloc) and the
merged file's size.
"""

from __future__ import annotations

import argparse
import gzip
import json
import tempfile
import time
import tracemalloc
from functools import partial
from pathlib import Path

from click.testing import CliRunner

from tracekit.cli import cli
from tracekit.loader.passthrough import read_trace_bytes
from tracekit.reports.perfetto_merge import MergedPerfettoReporter, MergedTrace, MergeRank

SOURCE = "tests/data/kineto-gpu/ddp-allreduce-2rank-rank1-oldformat.json.gz"


def copies(n: int, out: Path) -> int:
    doc = json.loads(gzip.decompress(Path(SOURCE).read_bytes()))
    for r in range(n):
        d = dict(doc, distributedInfo={**doc.get("distributedInfo", {}), "rank": r, "world_size": n})
        d["traceEvents"] = [
            dict(e, ts=e["ts"] + 37.0 * r) if isinstance(e.get("ts"), (int, float)) and e.get("ph") != "M" else e
            for e in doc["traceEvents"]
        ]
        (out / f"rank{r}.json.gz").write_bytes(gzip.compress(json.dumps(d).encode(), 1))
    return n * len(doc["traceEvents"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=4)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "run", Path(tmp) / "merged.json.gz"
        src.mkdir()
        n_events = copies(args.ranks, src)
        ranks = [MergeRank(r, partial(read_trace_bytes, str(src / f"rank{r}.json.gz")), -37_000 * r) for r in range(args.ranks)]
        t0, c0 = time.perf_counter(), time.process_time()
        MergedPerfettoReporter().render(MergedTrace(ranks, 0), dst)
        dt, cpu = time.perf_counter() - t0, time.process_time() - c0
        print(
            json.dumps(
                {
                    "stage": "writer",
                    "ranks": args.ranks,
                    "events": n_events,
                    "s": round(dt, 3),
                    "cpu_s": round(cpu, 3),
                    "events_per_cpu_s": round(n_events / cpu),
                    "out_mib": round(dst.stat().st_size / 2**20, 2),
                }
            )
        )
        tracemalloc.start()  # slows every allocation: the peak only
        MergedPerfettoReporter().render(MergedTrace(ranks, 0), dst)
        print(
            json.dumps(
                {"stage": "writer under tracemalloc", "peak_traced_mib": round(tracemalloc.get_traced_memory()[1] / 2**20, 1)}
            )
        )
        tracemalloc.stop()
        t0, c0 = time.perf_counter(), time.process_time()
        res = CliRunner().invoke(cli, ["annotate", str(src), "--no-cache", "--executor", "serial", "-o", str(dst)])
        assert res.exit_code == 0, res.output
        print(
            json.dumps(
                {
                    "stage": "annotate DIR (load, analysis, critical path, writer)",
                    "s": round(time.perf_counter() - t0, 3),
                    "cpu_s": round(time.process_time() - c0, 3),
                }
            )
        )


if __name__ == "__main__":
    main()
