"""CPU seconds of one split piece (``split.decode_piece``: stream, decode, columns) by the size of the stream's
pieces (``stream.PIECE_BYTES``), the sizes interleaved run by run so that drift on a shared machine hits them all.

    python benchmarks/piece_size.py /tmp/tracekit-bench/trace-300mb/rank0.json [--repeat 4] [--out FILE.json]

The decoded structs of a piece are walked a dozen times while their columns are built; when they fit in the
core's cache (a few thousand events) those walks cost much less than when they do not (~20 k events at 4 MiB).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tracekit.loader import split, stream
from tracekit.loader.decode import StreamLimits

SIZES_KIB = (4096, 1024, 768, 512, 384, 256)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace", help="a big plain-JSON trace (benchmarks/side_by_side.py makes them under /tmp/tracekit-bench)")
    ap.add_argument("--repeat", type=int, default=4)
    ap.add_argument("--out", help="also write the results here as JSON")
    args = ap.parse_args()
    head_stream = stream.EventStream(args.trace, StreamLimits())
    _, body = head_stream.head()
    span = split.plan(args.trace, body, os.path.getsize(args.trace), 4)[1]  # a middle piece of four
    runs: dict[int, list[float]] = {k: [] for k in SIZES_KIB}
    default = stream.PIECE_BYTES
    try:
        for _ in range(args.repeat):
            for kib in SIZES_KIB:
                stream.PIECE_BYTES = kib * 1024
                c = time.process_time()
                split.decode_piece((args.trace, span, StreamLimits(), None))
                runs[kib].append(time.process_time() - c)
    finally:
        stream.PIECE_BYTES = default
    doc = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="minutes"),
        "trace": args.trace,
        "piece_bytes": span[1] - span[0],
        "default_kib": default // 1024,
        "load_avg": os.getloadavg(),
        "cpu_s": {str(k): {"min": min(v), "median": sorted(v)[len(v) // 2], "runs": v} for k, v in runs.items()},
    }
    for kib, v in runs.items():
        print(
            f"{kib:5d} KiB pieces: {min(v):.3f} s CPU (median {sorted(v)[len(v) // 2]:.3f})"
            f"{'  <- default' if kib * 1024 == default else ''}"
        )
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(doc, fh, indent=1)


if __name__ == "__main__":
    main()
