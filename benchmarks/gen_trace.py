"""Deterministically grow a real Kineto trace to a target size by replicating its ProfilerStep iterations.

Copy k of the trace's timed events is shifted by k x (the trace's span + a gap), ProfilerStep#N becomes
ProfilerStep#(N + k x steps), and correlation ids, External ids, flow ids and collective sequence numbers get
fresh values (offset by k x (max + 1)), so every copy is a distinct, consistent set of iterations. Metadata
events (process/thread names) are written once. Same input and size -> byte-identical output.
"""

from __future__ import annotations

import argparse
import gzip
import os
import re

import msgspec

_STEP = re.compile(r"^ProfilerStep#(\d+)$")
_ARG_IDS = ("correlation", "External id", "Seq")


def _read(path: str) -> dict:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as fh:
        return msgspec.json.decode(fh.read())


def _max_int(events, get) -> int:
    vals = [v for v in map(get, events) if type(v) is int]
    return max(vals) + 1 if vals else 0


def _spans(events):
    timed = [e for e in events if e.get("ph") != "M" and isinstance(e.get("ts"), (int, float))]
    lo = min(e["ts"] for e in timed)
    hi = max(e["ts"] + (e.get("dur") or 0) for e in timed)
    return timed, lo, hi


def _offsets(timed) -> dict:
    steps = sorted({int(m.group(1)) for e in timed if (m := _STEP.match(str(e.get("name", ""))))})
    off = {"step": (max(steps) - min(steps) + 1) if steps else 0, "id": _max_int(timed, lambda e: e.get("id"))}
    for key in _ARG_IDS:
        off[key] = _max_int(timed, lambda e, k=key: (e.get("args") or {}).get(k))
    return off


def _shifted(e: dict, k: int, shift, off: dict) -> dict:
    e = dict(e)
    ts = e["ts"] + k * shift
    e["ts"] = ts if type(e["ts"]) is int else round(ts, 3)
    if type(e.get("id")) is int:
        e["id"] += k * off["id"]
    m = _STEP.match(str(e.get("name", "")))
    if m:
        e["name"] = f"ProfilerStep#{int(m.group(1)) + k * off['step']}"
    a = e.get("args")
    if isinstance(a, dict):
        a = dict(a)
        for key in _ARG_IDS:
            if type(a.get(key)) is int and a[key] >= 0:
                a[key] += k * off[key]
        e["args"] = a
    return e


def generate(src: str, out: str, target_mb: float) -> dict:
    """Write ``out`` (plain JSON) of about ``target_mb`` MB; return what was written."""
    doc = _read(src)
    events = doc.pop("traceEvents")
    meta = [e for e in events if e.get("ph") == "M"]
    timed, lo, hi = _spans(events)
    span = hi - lo
    shift = int(span * 1.01) + 1000 if all(type(e["ts"]) is int for e in timed) else round(span * 1.01 + 1000, 3)
    off = _offsets(timed)
    enc = msgspec.json.Encoder()
    per_copy = len(enc.encode(timed))
    copies = max(1, round(target_mb * 1e6 / per_copy))
    head = enc.encode(doc)[:-1]  # the header object without its closing brace
    n = len(meta)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out + ".tmp", "wb") as fh:
        fh.write(head + (b"," if len(doc) else b"") + b'"traceEvents":[')
        fh.write(enc.encode(meta)[1:-1])
        for k in range(copies):
            chunk = enc.encode([_shifted(e, k, shift, off) for e in timed])
            fh.write(b"," + chunk[1:-1] if (n or k) else chunk[1:-1])
            n += len(timed)
        fh.write(b"]}")
    os.replace(out + ".tmp", out)
    return {"path": out, "source": os.path.basename(src), "copies": copies, "events": n,
            "bytes": os.path.getsize(out)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("source")
    p.add_argument("out")
    p.add_argument("--mb", type=float, default=100.0, help="target size in MB of JSON")
    a = p.parse_args()
    print(generate(a.source, a.out, a.mb))


if __name__ == "__main__":
    main()
