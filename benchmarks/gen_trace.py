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


def dp_rank_header(doc: dict, rank: int, world: int, group: int) -> dict:
    """``doc``'s header as rank ``rank`` of ``world``, in data-parallel groups of ``group`` ranks (rank r is in the
    group of ranks r % (world / group) + k * world / group): distributedInfo and its pg_config rewritten."""
    stride = world // group
    members = [rank % stride + k * stride for k in range(group)]
    di = dict(doc.get("distributedInfo") or {})
    di.update(
        rank=rank,
        world_size=world,
        pg_count=1,
        pg_config=[
            {"pg_name": "0", "pg_desc": "DATA_PARALLEL_GROUP", "backend_config": "cuda:nccl", "pg_size": group, "ranks": members}
        ],
    )
    return dict(doc, distributedInfo=di)


def _regroup(events: list, ranks_text: str, size: int) -> list:
    """Collective args naming the rank's own group (its ranks text and size)."""
    out = []
    for e in events:
        a = e.get("args")
        if isinstance(a, dict) and "Process Group Ranks" in a:
            e = dict(
                e,
                args=dict(
                    a,
                    **{"Process Group Ranks": ranks_text, "Group size": size, "Process Group Description": "DATA_PARALLEL_GROUP"},
                ),
            )
        out.append(e)
    return out


def generate(src: str, out: str, target_mb: float, rank: int | None = None, world: int = 64, group: int = 8) -> dict:
    """Write ``out`` (plain JSON) of about ``target_mb`` MB; return what was written. ``rank``: write it as that
    rank of a ``world``-rank data-parallel run (``dp_rank_header``)."""
    doc = _read(src)
    events = doc.pop("traceEvents")
    if rank is not None:
        doc = dp_rank_header(doc, rank, world, group)
        pg = doc["distributedInfo"]["pg_config"][0]
        events = _regroup(events, "[" + ", ".join(map(str, pg["ranks"])) + "]", group)
    meta = [e for e in events if e.get("ph") == "M"]
    timed, lo, hi = _spans(events)
    span = hi - lo
    shift = int(span * 1.01) + 1000 if all(type(e["ts"]) is int for e in timed) else round(span * 1.01 + 1000, 3)
    off = _offsets(timed)
    enc = msgspec.json.Encoder()
    per_copy = len(enc.encode(timed))
    copies = max(1, round(target_mb * 1e6 / per_copy))
    # the header object without its closing brace; `"rank": N` with the space torch writes: HTA finds a file's
    # rank with the regex '"rank":\s+(\d+)' and takes every file without that match for rank 0
    head = enc.encode(doc)[:-1].replace(b'"rank":', b'"rank": ')
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
    return {"path": out, "source": os.path.basename(src), "copies": copies, "events": n, "bytes": os.path.getsize(out)}


def synthetic_collectives(out: str, events: int) -> dict:
    """A trace made for the bounded-output check: ``events`` events of which a quarter are NCCL all-reduce kernels
    (each with its launch and a compute kernel with its own launch beside it), 100 collectives per ProfilerStep:
    ~events / 4 collective instances. Deterministic; integer µs timestamps."""
    enc = msgspec.json.Encoder()
    per_step = 100
    steps = max(1, events // (4 * per_step + 1))
    head = {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": "synthetic"}],
        "distributedInfo": {
            "backend": "nccl",
            "rank": 0,
            "world_size": 1,
            "pg_count": 1,
            "pg_config": [{"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl", "pg_size": 1, "ranks": [0]}],
        },
    }
    n, corr, t = 0, 1, 0
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out + ".tmp", "wb") as fh:
        fh.write(enc.encode(head)[:-1] + b',"traceEvents":[')
        for s in range(steps):
            batch = [
                {
                    "ph": "X",
                    "cat": "user_annotation",
                    "name": f"ProfilerStep#{s}",
                    "pid": 1,
                    "tid": 1,
                    "ts": t,
                    "dur": per_step * 100,
                    "args": {"External id": corr},
                }
            ]
            for k in range(per_step):
                t0 = t + 100 * k
                batch += [
                    {
                        "ph": "X",
                        "cat": "cuda_runtime",
                        "name": "cudaLaunchKernel",
                        "pid": 1,
                        "tid": 1,
                        "ts": t0 + 1,
                        "dur": 2,
                        "args": {"correlation": corr, "External id": corr},
                    },
                    {
                        "ph": "X",
                        "cat": "cuda_runtime",
                        "name": "cudaLaunchKernel",
                        "pid": 1,
                        "tid": 1,
                        "ts": t0 + 3,
                        "dur": 1,
                        "args": {"correlation": corr + 1, "External id": corr + 1},
                    },
                    {
                        "ph": "X",
                        "cat": "kernel",
                        "name": f"gemm_{k % 7}",
                        "pid": 0,
                        "tid": 7,
                        "ts": t0 + 5,
                        "dur": 40 + k % 30,
                        "args": {"device": 0, "stream": 7, "correlation": corr + 1},
                    },
                    {
                        "ph": "X",
                        "cat": "kernel",
                        "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgs)",
                        "pid": 0,
                        "tid": 20,
                        "ts": t0 + 20 + k % 10,
                        "dur": 30 + (k * 7) % 50,
                        "args": {
                            "device": 0,
                            "stream": 20,
                            "correlation": corr,
                            "Collective name": "allreduce",
                            "In msg nelems": 1 << (10 + k % 10),
                            "Out msg nelems": 1 << (10 + k % 10),
                            "Group size": 1,
                            "dtype": "Float",
                            "Process Group Name": "0",
                            "Process Group Description": "default_pg",
                            "Process Group Ranks": "[0]",
                            "Seq": s * per_step + k,
                        },
                    },
                ]
                corr += 2
            chunk = enc.encode(batch)[1:-1]
            fh.write((b"," if s else b"") + chunk)
            n += len(batch)
            t += per_step * 100 + 50
        fh.write(b"]}")
    os.replace(out + ".tmp", out)
    return {"path": out, "events": n, "collectives": steps * per_step, "bytes": os.path.getsize(out)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("source")
    p.add_argument("out")
    p.add_argument("--mb", type=float, default=100.0, help="target size in MB of JSON")
    a = p.parse_args()
    print(generate(a.source, a.out, a.mb))


if __name__ == "__main__":
    main()
