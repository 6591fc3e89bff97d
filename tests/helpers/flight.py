"""Hand-built Flight Recorder dumps: entries spelled as torch writes them (2.10: the pickle's tuples and Nones,
the JSON form's lists and zeros), written to real files for the reader and the commands to read."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

T0 = 1_796_227_638_000_000_000  # a wall-clock time in ns, as time_created_ns holds


def entry(
    seq: int,
    op: str = "all_reduce",
    *,
    pg: tuple[str, str] = ("0", "default_pg"),
    sizes=((8,),),
    dtype: str = "Float",
    created_ns: int | None = None,
    state: str = "scheduled",
    backend: str = "gloo",
    record_id: int | None = None,
    timeout_ms: int = 2000,
    **extra,
) -> dict:
    """One entry as a 2.10 pickle dump holds it; ``extra`` adds or overrides fields (None leaves one out)."""
    e = {
        "record_id": seq - 1 if record_id is None else record_id,
        "pg_id": int(pg[0]) if pg[0].isdigit() else 0,
        "process_group": pg,
        "collective_seq_id": seq,
        "p2p_seq_id": 0,
        "op_id": seq,
        "profiling_name": f"{backend}:{op}",
        "time_created_ns": T0 + seq * 1_000_000 if created_ns is None else created_ns,
        "input_sizes": [list(s) for s in sizes],
        "input_dtypes": [dtype] * len(sizes),
        "output_sizes": [list(s) for s in sizes],
        "output_dtypes": [dtype] * len(sizes),
        "state": state,
        "time_discovered_started_ns": None,
        "time_discovered_completed_ns": None,
        "retired": True,
        "timeout_ms": timeout_ms,
        "is_p2p": False,
        "thread_id": "1",
        "thread_name": "python",
        "frames": [{"name": "step", "filename": "train.py", "line": 42}],
    }
    e.update(extra)
    return {k: v for k, v in e.items() if v is not None or k.startswith("time_discovered")}


def dump(entries: list[dict], *, version: str = "2.10", pg_config: dict | None = None, **top) -> dict:
    d = {
        "version": version,
        "pg_config": pg_config if pg_config is not None else {"": {"name": "", "desc": "", "ranks": "[]"}},
        "comm_lib_version": "",
        "pg_status": {},
        "entries": entries,
    }
    d.update(top)
    return d


def as_json(d: dict) -> dict:
    """The JSON form of a dump: tuples as lists, no frames, unrecorded times as 0."""
    out = dict(d)
    out["entries"] = [
        {
            **{k: v for k, v in e.items() if k != "frames"},
            **{k: e.get(k) or 0 for k in ("time_discovered_started_ns", "time_discovered_completed_ns")},
            "process_group": list(e["process_group"]),
        }
        for e in d["entries"]
    ]
    return out


def write_dumps(directory: Path, per_rank: dict[int, dict], *, form: str = "pickle", prefix: str = "_dump_") -> Path:
    """``{rank: dump dict}`` written as ``<prefix><rank>`` (pickle) or ``<prefix><rank>.json``."""
    directory.mkdir(parents=True, exist_ok=True)
    for rank, d in per_rank.items():
        if form == "json":
            (directory / f"{prefix}{rank}.json").write_text(json.dumps(as_json(d)))
        else:
            (directory / f"{prefix}{rank}").write_bytes(pickle.dumps(d, protocol=2))
    return directory


def ring(n: int, **kw) -> list[dict]:
    """Collectives 1..n of the default group, every rank alike."""
    return [entry(s, **kw) for s in range(1, n + 1)]


def hang_report():
    """A small real HangReport: rank 2 of 3 never reached collective 3 (read from files in a temporary folder)."""
    import tempfile

    from tracekit.analyzers.flight.hang import analyze_hang
    from tracekit.loader.flight import read_flight_dir

    with tempfile.TemporaryDirectory() as tmp:
        write_dumps(Path(tmp), {0: dump(ring(3)), 1: dump(ring(3)), 2: dump(ring(2))})
        return analyze_hang(read_flight_dir(tmp))


def flight_timing():
    """The FlightTiming of the real gloo-sleep dumps (tests/data/flight-recorder)."""
    from tests.helpers.data import DATA
    from tracekit.analyzers.flight.timing import analyze_timing
    from tracekit.loader.flight import read_flight_dir

    return analyze_timing(read_flight_dir(DATA / "flight-recorder" / "gloo-sleep"))
