"""Bounded-time fuzzing of the loader (and the analyzer behind it) on mutated real traces.

Mutations: truncation, byte flips, gzip damage, and JSON-level edits (a field's value swapped for a value of
another type, a huge or negative number, a control-character string; fields deleted; events duplicated). The
only acceptable outcomes are a TracekitError (one line) or a table whose numbers are sane. Each crash found
here became a named regression test in test_robustness.py. TRACEKIT_FUZZ_EXAMPLES raises the example count.
"""

from __future__ import annotations

import gzip
import json
import os
from functools import cache

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers.data import gpu_trace
from tracekit.analyzers import analyze
from tracekit.errors import TracekitError
from tracekit.loader.loading import LoadOptions, load
from tracekit.model.events import COLUMNS, EventKind

EXAMPLES = int(os.environ.get("TRACEKIT_FUZZ_EXAMPLES", 60))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))


@cache
def seeds() -> tuple[dict, ...]:
    """Two small real traces: the ROCm toy, and 400 events of an NCCL all-reduce trace with its header."""
    toy = json.loads(gzip.open(gpu_trace("rocm-mi250-minitoy.json.gz")).read())
    nccl = json.loads(gzip.open(gpu_trace("allreduce-broadcast-2rank-rank0.json.gz")).read())
    ev = nccl["traceEvents"]
    comm = [e for e in ev if "Collective name" in (e.get("args") or {})][:20]
    nccl["traceEvents"] = [e for e in ev if e.get("ph") == "M"] + ev[5000:5400] + comm
    return toy, nccl


def _seed_bytes(i: int) -> bytes:
    return json.dumps(seeds()[i]).encode()


def check(path: str, run_analyzer: bool = True) -> None:
    """Load (and analyse); only TracekitError may escape, and a loaded table must be sane."""
    try:
        ts = load(path, options=LoadOptions(cache=False, max_bytes=50_000_000), executor="serial")
    except TracekitError as exc:
        assert "\n" not in str(exc)
        return
    for _, t in ts:
        assert set(t.columns) == set(COLUMNS)
        assert (t["dur_ns"] >= 0).all()
        assert (np.abs(t["ts_ns"]) < 2**62).all() and (np.abs(t.end_ns) < 2**62).all()
        assert np.isin(t["kind"], [int(k) for k in EventKind]).all()
        for col in ("in_bytes", "out_bytes", "in_nelems", "out_nelems"):
            assert (t[col] >= -1).all()
        for n, b in (("in_nelems", "in_bytes"), ("out_nelems", "out_bytes")):  # bytes = n x size: no wrap-around
            both = (t[n] >= 0) & (t[b] >= 0)
            assert (t[b][both] >= t[n][both]).all()
    if run_analyzer:
        try:
            summary = analyze(ts).to_dict()
        except TracekitError:
            return
        json.dumps(summary, allow_nan=True)  # serialisable


# -- byte level -----------------------------------------------------------------------------------------------
@FUZZ
@given(seed=st.integers(0, 1), cut=st.floats(0.0, 1.0), gz=st.booleans())
def test_truncated(tmp_path_factory, seed, cut, gz):
    data = _seed_bytes(seed)
    data = data[: int(len(data) * cut)]
    path = tmp_path_factory.mktemp("f") / ("t.json.gz" if gz else "t.json")
    path.write_bytes(gzip.compress(data) if gz else data)
    check(str(path), run_analyzer=False)


@FUZZ
@given(
    seed=st.integers(0, 1),
    flips=st.lists(st.tuples(st.floats(0.0, 1.0, exclude_max=True), st.integers(0, 255)), min_size=1, max_size=8),
    gz=st.booleans(),
)
def test_byte_flips(tmp_path_factory, seed, flips, gz):
    data = bytearray(_seed_bytes(seed))
    if gz:
        data = bytearray(gzip.compress(bytes(data)))
    for where, value in flips:
        data[int(where * len(data))] = value
    path = tmp_path_factory.mktemp("f") / ("t.json.gz" if gz else "t.json")
    path.write_bytes(bytes(data))
    check(str(path), run_analyzer=False)


# -- JSON level -------------------------------------------------------------------------------------------------
NASTY_STR = st.sampled_from(
    [
        "",
        "\x1b]0;pwned\x07",
        "ProfilerStep#99999999999999999999",
        "ProfilerStep#-1",
        "nan",
        "1e309",
        "-1",
        "0x10",
        "allreduce",
        "ncclDevKernel_x",
        "gloo:all_reduce",
        "tracekit:comm|op=all_reduce|pg=0",
        "[0, 1, 2]",
        "kernel",
        "cpu_op",
    ]
)
NASTY = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.sampled_from([2**62, 2**63, -(2**63), 0]),
    st.floats(allow_nan=False, allow_infinity=False),
    NASTY_STR,
    st.text(max_size=8),
    st.lists(st.integers(-3, 3), max_size=3),
    st.fixed_dictionaries({"x": st.integers()}),
)
NUMS = st.one_of(
    st.integers(-(2**70), 2**70),
    st.sampled_from([2**31, 2**53, 2**62, 2**63, -(2**63), 10**30, str(10**30), 1e300, -1, 0, "12", "-3"]),
)
NUM_ARGS = [
    "In msg nelems",
    "Out msg nelems",
    "In msg size",
    "Group size",
    "Seq",
    "Src Rank",
    "Dst Rank",
    "device",
    "correlation",
    "External id",
    "Bytes",
    "Total Allocated",
    "bytes",
]
FIELDS = ["ph", "cat", "name", "pid", "tid", "ts", "dur", "args"]
ARGS = [
    "External id",
    "correlation",
    "stream",
    "device",
    "Collective name",
    "In msg nelems",
    "Out msg nelems",
    "Group size",
    "dtype",
    "Process Group Name",
    "Process Group Ranks",
    "Seq",
    "Bytes",
    "Total Allocated",
    "name",
]
HEADER = ["distributedInfo", "baseTimeNanoseconds", "traceEvents", "deviceProperties", "trace_id"]

EDIT = st.one_of(
    st.tuples(st.just("field"), st.floats(0, 1, exclude_max=True), st.sampled_from(FIELDS), NASTY),
    st.tuples(st.just("arg"), st.floats(0, 1, exclude_max=True), st.sampled_from(ARGS), NASTY),
    st.tuples(st.just("arg"), st.floats(0, 0.5, exclude_max=True), st.sampled_from(NUM_ARGS), NUMS),  # collectives
    st.tuples(st.just("field"), st.floats(0, 1, exclude_max=True), st.sampled_from(["ts", "dur", "pid", "tid"]), NUMS),
    st.tuples(st.just("delete"), st.floats(0, 1, exclude_max=True), st.sampled_from(FIELDS), st.none()),
    st.tuples(st.just("dup"), st.floats(0, 1, exclude_max=True), st.none(), st.none()),
    st.tuples(st.just("header"), st.just(0.0), st.sampled_from(HEADER), NASTY),
    st.tuples(st.just("dist"), st.just(0.0), st.sampled_from(["rank", "world_size", "pg_config", "backend"]), NASTY),
)


def apply(doc: dict, edit) -> None:
    what, where, key, value = edit
    events = doc.get("traceEvents")
    if what == "header":
        doc[key] = value
        return
    if what == "dist":
        if isinstance(doc.get("distributedInfo"), dict):
            doc["distributedInfo"][key] = value
        return
    if not isinstance(events, list) or not events:
        return
    pool = range(len(events))
    if what in ("arg", "field") and where < 0.5:  # half the edits hit a collective (the args tracekit reads)
        pool = [
            j
            for j, e in enumerate(events)
            if isinstance(e, dict)
            and (
                isinstance(e.get("args"), dict)
                and "Collective name" in e["args"]
                or str(e.get("name", "")).startswith("ProfilerStep#")
            )
        ] or pool
        where *= 2
    i = pool[min(int(where * len(pool)), len(pool) - 1)]
    e = events[i]
    if not isinstance(e, dict):
        return
    if what == "field":
        e[key] = value
    elif what == "arg":
        if isinstance(e.get("args"), dict):
            e["args"][key] = value
    elif what == "delete":
        e.pop(key, None)
    elif what == "dup":
        events.insert(i, json.loads(json.dumps(e)))


@FUZZ
@given(seed=st.integers(0, 1), edits=st.lists(EDIT, min_size=1, max_size=6))
@pytest.mark.slow
def test_json_mutations(tmp_path_factory, seed, edits):
    doc = json.loads(json.dumps(seeds()[seed]))
    for edit in edits:
        apply(doc, edit)
    path = tmp_path_factory.mktemp("f") / "t.json"
    path.write_text(json.dumps(doc))
    check(str(path))


# -- the header, field by field ----------------------------------------------------------------------------------------
PG_FIELDS = ["pg_name", "pg_desc", "uid", "backend_config", "pg_size", "ranks"]
HEADER_EDIT = st.one_of(
    st.tuples(st.just("header"), st.sampled_from([h for h in HEADER if h != "traceEvents"] + ["schemaVersion"]), NASTY),
    st.tuples(
        st.just("dist"), st.sampled_from(["rank", "world_size", "pg_count", "pg_config", "backend", "nccl_version"]), NASTY
    ),
    st.tuples(st.just("pg"), st.sampled_from(PG_FIELDS), NASTY),
)


@FUZZ
@given(edits=st.lists(HEADER_EDIT, min_size=1, max_size=6))
def test_header_mutations_keep_every_event(tmp_path_factory, edits):
    """A mistyped header field costs that field only: every event is still there, or the error is one of the
    documented header errors (an impossible rank, a baseTimeNanoseconds out of range)."""
    doc = json.loads(json.dumps(seeds()[1]))
    doc["distributedInfo"].setdefault("pg_config", [{"pg_name": "0", "pg_desc": "default_pg", "ranks": [0, 1]}])
    for what, key, value in edits:
        if what == "header":
            doc[key] = value
        elif what == "dist" and isinstance(doc.get("distributedInfo"), dict):
            doc["distributedInfo"][key] = value
        elif what == "pg" and isinstance(doc.get("distributedInfo"), dict):
            pgs = doc["distributedInfo"].get("pg_config")
            if isinstance(pgs, list) and pgs and isinstance(pgs[0], dict):
                pgs[0][key] = value
    path = tmp_path_factory.mktemp("f") / "t.json"
    path.write_text(json.dumps(doc))
    try:
        ts = load(str(path), options=LoadOptions(cache=False), executor="serial")
    except TracekitError as exc:
        assert "\n" not in str(exc)
        assert "world size" in str(exc) or "baseTimeNanoseconds" in str(exc), str(exc)
        return
    (table,) = [t for _, t in ts]
    assert len(table) == _intact_rows()
    assert all("\n" not in w for w in ts.metadata.warnings)
    touched = {key for what, key, _ in edits if what in ("header", "dist")}
    if not touched & {"distributedInfo", "rank"}:  # the fields nobody edited are all still there
        (info,) = [ts.info(r) for r in ts.ranks]
        assert info.rank == 0 and ts.ranks == [0]
        if "backend" not in touched:
            assert info.backend == "nccl"
        if "world_size" not in touched:
            assert info.world_size == 2


@cache
def _intact_rows() -> int:
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        fh.write(json.dumps(seeds()[1]))
    try:
        return len(next(iter(load(fh.name, options=LoadOptions(cache=False), executor="serial")))[1])
    finally:
        os.unlink(fh.name)


# -- text level: numbers beyond float range, nesting, a second traceEvents key, blank runs --------------------------
TEXT_EDIT = st.one_of(
    st.tuples(
        st.just("number"),
        st.floats(0, 1, exclude_max=True),
        st.sampled_from(["1e400", "-1e400", "1e18", "123456789012345678901234"]),
    ),
    st.tuples(st.just("nest"), st.floats(0, 1, exclude_max=True), st.integers(1, 1500)),
    st.tuples(st.just("dupkey"), st.just(0.0), st.none()),
    st.tuples(st.just("blank"), st.floats(0, 1, exclude_max=True), st.integers(1, 3_000_000)),
)


def apply_text(text: str, edit) -> str:
    import re

    what, where, arg = edit
    if what == "number":
        spots = [m.start() for m in re.finditer(r"(?<=: )-?\d+(\.\d+)?(?=[,}])", text)]
        if spots:
            at = spots[int(where * len(spots))]
            end = re.match(r"-?\d+(\.\d+)?", text[at:]).end()
            return text[:at] + arg + text[at + end :]
        return text
    if what == "nest":
        at = text.find('"args": {', int(where * len(text)))
        return text if at < 0 else text[:at] + f'"args": {{"x": {"[" * arg + "]" * arg}, ' + text[at + 9 :]
    if what == "dupkey":
        return text[:-1] + ', "traceEvents": []}'
    at = text.find(", ", int(where * len(text)))
    return text if at < 0 else text[: at + 1] + " " * arg + text[at + 1 :]


@FUZZ
@given(seed=st.integers(0, 1), edits=st.lists(TEXT_EDIT, min_size=1, max_size=3), gz=st.booleans())
def test_text_mutations(tmp_path_factory, seed, edits, gz):
    text = _seed_bytes(seed).decode()
    for edit in edits:
        text = apply_text(text, edit)
    path = tmp_path_factory.mktemp("f") / ("t.json.gz" if gz else "t.json")
    path.write_bytes(gzip.compress(text.encode(), 1) if gz else text.encode())
    check(str(path), run_analyzer=False)
