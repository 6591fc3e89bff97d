"""Run inside HTA's own environment (pandas < 3, HolisticTraceAnalysis 0.5.0; tests/helpers/hta_env.py makes it):
HTA's critical path of one annotation instance of a single-rank trace, printed as JSON. No tracekit import.

    python hta_critical_path.py TRACE ANNOTATION INSTANCE [INSTANCE ...]
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import warnings


def main(trace: str, annotation: str, instances: list[int]) -> None:
    warnings.simplefilter("ignore")
    import logging

    logging.disable(logging.CRITICAL)
    from hta.trace_analysis import TraceAnalysis

    with tempfile.TemporaryDirectory() as d:
        shutil.copy(trace, os.path.join(d, os.path.basename(trace)))
        t = TraceAnalysis(trace_dir=d)
        rank = next(iter(t.t.traces))
        out = []
        for i in instances:
            try:
                cp, ok = t.critical_path_analysis(rank=rank, annotation=annotation, instance_id=i)
                bd = cp.get_critical_path_breakdown() if ok else None
            except Exception as exc:  # HTA fails on some traces: say so, the caller reports it
                out.append({"instance": i, "error": f"{type(exc).__name__}: {exc}"[:300]})
                continue
            if bd is None or not len(bd):
                out.append({"instance": i, "error": "no critical path"})
                continue
            by = {str(k): float(v) for k, v in bd.groupby("bound_by")["duration"].sum().items()}
            cpu = bd[bd["bound_by"] == "cpu_bound"]
            tids = {str(k): float(v) for k, v in cpu.groupby("tid")["duration"].sum().items()} if "tid" in bd else {}
            out.append(
                {"instance": i, "length_us": float(bd["duration"].sum()), "by": by, "edges": int(len(bd)), "cpu_by_tid": tids}
            )
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], [int(x) for x in sys.argv[3:]])
