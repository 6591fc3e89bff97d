"""Where the peak memory of `analyze` / `report` is: the whole command's stages, each with its peak RSS.

One process runs what the CLI runs, stage by stage (imports, load -- split pieces in worker processes or the
serial stream --, the analyzers, the summary dict, the JSON or HTML text), while a thread samples the summed RSS
of this process and its children every 5 ms and keeps the peak of each stage. Stages are cumulative: each
stage's peak includes what earlier stages left alive.

    python benchmarks/mem_stages.py /tmp/tracekit-bench/trace-1500mb/rank0.json [--serial] [--report]

Prints one JSON line (stage -> peak GiB, and the RSS of this process when the stage ended).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from side_by_side import tree_rss


class Sampler:
    def __init__(self) -> None:
        self.stage, self.peaks, self.ends, self.times = "start", {}, {}, {}
        self._t = time.perf_counter()
        self._stop = False
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        pid = os.getpid()
        while not self._stop:
            rss = tree_rss(pid)
            self.peaks[self.stage] = max(self.peaks.get(self.stage, 0), rss)
            time.sleep(0.005)

    def enter(self, stage: str) -> None:
        rss = tree_rss(os.getpid())
        self.peaks[self.stage] = max(self.peaks.get(self.stage, 0), rss)
        self.ends[self.stage] = rss
        now = time.perf_counter()
        self.times[self.stage] = now - self._t
        self._t = now
        self.stage = stage
        self.peaks[stage] = rss

    def result(self) -> dict:
        self.enter("end")
        self._stop = True
        gib = 1024**3
        return {
            s: {
                "peak_gib": round(self.peaks[s] / gib, 3),
                "end_gib": round(self.ends[s] / gib, 3),
                "wall_s": round(self.times[s], 2),
            }
            for s in self.times
        }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("trace")
    p.add_argument("--serial", action="store_true", help="the serial stream (default: split over every core)")
    p.add_argument("--report", action="store_true", help="the HTML report instead of the JSON summary")
    a = p.parse_args()
    s = Sampler()
    s.enter("imports")
    from tracekit.analyzers import analyze
    from tracekit.loader.loading import LoadOptions, load

    try:  # what the CLI does before loading (absent in checkouts before it)
        from tracekit.cli._analysis import compact_arrow_pool

        compact_arrow_pool()
    except ImportError:
        pass
    s.enter("load")
    ts = load([a.trace], options=LoadOptions(cache=False), executor="serial" if a.serial else None)
    s.enter("analyze")
    result = analyze(ts)
    s.enter("to_dict")
    summary = result.to_dict()
    if a.report:  # what `tracekit report` does after the analysis
        from tracekit.reports import get_reporter

        s.enter("timeline")
        timeline = result.timeline()
        s.enter("html")
        get_reporter("html", "/tmp/tracekit-bench/perfmem-out/stages.html").render(
            summary,
            "/tmp/tracekit-bench/perfmem-out/stages.html",
            timeline=timeline,
            verdict=None,
            sort_keys=True,
            allow_nan=False,
        )
    else:  # what `tracekit analyze --format json --out FILE` does
        from tracekit.cli.output import text

        s.enter("json_text")
        out = text(summary, "json", indent=2)
        s.enter("write")
        with open(os.devnull, "w") as fh:
            fh.write(out)
    res = s.result()
    res["rows"] = sum(len(t) for _, t in ts)
    print(json.dumps(res))


if __name__ == "__main__":
    main()
