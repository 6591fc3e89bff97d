"""How long the HTML report of a generated multi-rank run takes to open in headless Chromium (Debian's chromium,
driven by tests/helpers/browser.py): ``report --critical-path`` of each run in ``--work`` (made by
benchmarks/ranks_scale.py), then the page loaded offline until it says it rendered, its console errors counted.

    .venv/bin/python benchmarks/report_render.py --ranks 64,256,1024 --out benchmarks/results-report-render.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
from tests.helpers.browser import Browser  # noqa: E402


def render(run_dir: str, out: Path, timeout_s: float) -> dict:
    page_file = out / "report.html"
    t = time.perf_counter()
    res = subprocess.run(
        [sys.executable, "-m", "tracekit", "report", run_dir, "--critical-path", "-o", str(page_file), "--no-cache"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    row: dict = {"report_s": round(time.perf_counter() - t, 2), "exit": res.returncode}
    if res.returncode != 0:
        return {**row, "error": (res.stderr.strip().splitlines() or ["?"])[-1][:300]}
    row["html_mib"] = round(page_file.stat().st_size / 2**20, 2)
    browser = Browser()
    try:
        t = time.perf_counter()
        page = browser.load(page_file, timeout_s=timeout_s)
        row["load_s"] = round(time.perf_counter() - t, 2)
        row["rendered"] = page.eval("document.body.dataset.rendered") == "1"
        row["critical_rendered"] = page.eval("document.body.dataset.criticalRendered")
        row["console_errors"] = len(page.errors())
        page.close()
    finally:
        browser.close()
    return row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", default="64,256,1024")
    p.add_argument("--work", default="/tmp/tk-ranks")
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--out", default=None)
    a = p.parse_args()
    doc: dict = {"load_avg_at_start": os.getloadavg(), "runs": {}}
    for n in a.ranks.split(","):
        with tempfile.TemporaryDirectory(prefix="tk-render-") as out:
            doc["runs"][n] = render(os.path.join(a.work, n), Path(out), a.timeout)
        print(f"{n:>5} ranks: {doc['runs'][n]}", file=sys.stderr, flush=True)
    doc["load_avg_at_end"] = os.getloadavg()
    if a.out:
        Path(a.out).write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
