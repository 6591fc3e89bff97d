"""The Flight Recorder reader: real gloo dumps in both forms, every field absent or of the wrong type, and pickles
that would run code (refused, and the file their payload would create never appears)."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.data import DATA
from tests.helpers.flight import dump, entry, ring, write_dumps
from tracekit.loader.flight import BadPickleError, DumpFormatError, UnsafePickleError, loads_plain, read_dump, read_flight_dir
from tracekit.loader.flight.safe_pickle import _PlainUnpickler, check_opcodes

REAL = DATA / "flight-recorder"


class _Payload:
    """Unpickling this calls os.system: the classic pickle exploit."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


class _Build:
    """BUILD calls __setstate__ of an object made from a global."""

    def __setstate__(self, state):  # pragma: no cover - never reached
        Path(state).write_text("ran")


def _evil(marker: Path, protocol: int) -> bytes:
    return pickle.dumps({"version": "2.10", "entries": [_Payload(marker)]}, protocol=protocol)


@pytest.mark.parametrize("protocol", [0, 2, 4, 5])
def test_a_pickle_with_a_global_and_reduce_is_refused_and_runs_nothing(tmp_path, protocol):
    marker = tmp_path / "pwned"
    data = _evil(marker, protocol)
    assert pickle.loads(data) == {"version": "2.10", "entries": [0]} and marker.exists()  # the payload is live...
    marker.unlink()
    with pytest.raises(UnsafePickleError, match=r"opcode (GLOBAL|STACK_GLOBAL) at byte \d+.*nothing in it ran"):
        loads_plain(data, "evil")
    assert not marker.exists()  # ...and tracekit never ran it


def test_each_wall_refuses_on_its_own(tmp_path):
    """The unpickler that resolves no global, without the opcode check; and the opcode check, before any unpickling."""
    marker = tmp_path / "pwned"
    import io

    for data in (_evil(marker, 2), _evil(marker, 4), pickle.dumps(_Build(), protocol=2)):
        with pytest.raises(pickle.UnpicklingError, match="asks for the global"):
            _PlainUnpickler(io.BytesIO(data)).load()
        with pytest.raises(UnsafePickleError, match="opcode (GLOBAL|STACK_GLOBAL)"):
            check_opcodes(data, "evil")
    assert not marker.exists()
    check_opcodes(pickle.dumps(dump(ring(3)), protocol=2), "plain")  # a dump passes


def test_reduce_without_a_global_is_refused_by_name():
    """REDUCE on a plain value (nothing callable can be on the stack): refused, naming REDUCE."""
    data = b"\x80\x02X\x04\x00\x00\x00evil)R."  # PROTO 2, 'evil', (), REDUCE, STOP
    with pytest.raises(UnsafePickleError, match="opcode REDUCE at byte 12"):
        loads_plain(data, "x")


def test_an_unsafe_dump_is_one_error_line_with_exit_3_and_no_file_appears(tmp_path):
    marker = tmp_path / "pwned"
    (tmp_path / "dumps").mkdir()
    (tmp_path / "dumps" / "_dump_0").write_bytes(_evil(marker, 2))
    out = subprocess.run(
        [sys.executable, "-m", "tracekit", "hang", str(tmp_path / "dumps")], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 3 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and "refused" in out.stderr and "GLOBAL" in out.stderr
    assert not marker.exists()


def test_an_unsafe_dump_beside_good_ones_is_left_out_named_and_its_rank_absent(tmp_path):
    marker = tmp_path / "pwned"
    d = write_dumps(tmp_path / "dumps", {0: dump(ring(3)), 2: dump(ring(3))})
    (d / "_dump_1").write_bytes(_evil(marker, 4))
    run = read_flight_dir(d)
    assert run.ranks == (0, 2) and run.absent_ranks == (1,) and run.left_out_ranks == (1,)
    assert any("_dump_1" in w and "STACK_GLOBAL" in w for w in run.warnings)
    assert not marker.exists()


def test_a_memo_bomb_and_deep_nesting_are_refused_quickly():
    shared: list = ["x"]
    for _ in range(28):  # 2**28 leaves as a tree, a few hundred bytes as a pickle
        shared = [shared, shared]
    data = pickle.dumps({"entries": [], "pg_config": shared}, protocol=2)
    assert len(data) < 2000
    with pytest.raises(BadPickleError, match="pickle bomb"):
        loads_plain(data, "bomb")
    deep: list = []
    for _ in range(200):
        deep = [deep]
    with pytest.raises(BadPickleError, match="nested more than 32 levels"):
        loads_plain(pickle.dumps({"pg_status": deep}, protocol=2), "deep")


def test_a_bomb_inside_the_entries_is_never_walked(tmp_path):
    """Entries are read by a typed conversion of fixed depth: a shared or deep structure in a field it does not
    read is never visited, and one where a field should be is that field of the wrong type."""
    shared: list = ["x"]
    for _ in range(40):  # 2**40 leaves as a tree
        shared = [shared, shared]
    deep: list = []
    for _ in range(200):  # deeper than any dump (pickle itself recurses to write it)
        deep = [deep]
    entries = [entry(1, extra_field=shared), entry(2, frames=shared), entry(3, input_sizes=deep)]
    d = write_dumps(tmp_path / "d", {0: dump(entries)})
    dump0, table = read_dump(str(d / "_dump_0"), 0)
    assert table["seq"].tolist() == [1, 2, 3] and table["frame"].tolist() == ["train.py:42 in step", "", "train.py:42 in step"]
    assert table["input_sizes"].tolist() == ["[[8]]", "[[8]]", ""]
    (note,) = dump0.notes
    assert "frames ×1" in note and "input_sizes ×1" in note


@pytest.mark.parametrize(
    "data, what",
    [
        (pickle.dumps(dump(ring(2)), protocol=2)[:-40], "truncated"),
        (b"\x80\x02\xff\xff", "unknown opcode"),
        (b"\x80", "only a PROTO byte"),
    ],
)
def test_a_broken_pickle_is_one_line(data, what):
    with pytest.raises(BadPickleError, match="not a readable pickle") as err:
        loads_plain(data, "x")
    assert "\n" not in str(err.value), what


def test_real_gloo_dumps_read_alike_in_both_forms():
    for case in ("gloo-ok", "gloo-skip", "gloo-sleep", "gloo-size"):
        pk, js = read_flight_dir(REAL / case), read_flight_dir(REAL / case / "json")
        assert {d.form for d in pk.dumps} == {"pickle"} and {d.form for d in js.dumps} == {"json"}
        assert pk.ranks == js.ranks == (0, 1, 2) and all(d.version == "2.10" for d in pk.dumps + js.dumps)
        for col in pk.entries.columns:
            # the JSON form has no frames, and it was dumped a moment later: a failed entry may have retired since
            if col not in ("frame", "retired"):
                assert pk.entries[col].tolist() == js.entries[col].tolist(), (case, col)
        e = pk.entries
        assert set(e["pg_desc"]) == {"mesh_dp"} and set(e["op"]) == {"all_reduce"}
        assert (e["started_ns"] == -1).all() and (e["completed_ns"] == -1).all() and (e["duration_ns"] == -1).all()
        assert (e["created_ns"] > 1.7e18).all() and set(e["state"]) == {"scheduled"}
        assert all(d.process_groups == () for d in pk.dumps)  # gloo's pg_config names no group


def test_real_stack_frames_point_at_the_users_call():
    e = read_flight_dir(REAL / "gloo-size" / "stacks").entries
    mesh = e.select(e["pg_desc"] == "mesh_dp")
    assert all(f.startswith(str(Path("tests/helpers/flight_cases.py"))) or "flight_cases.py:" in f for f in mesh["frame"])
    assert all(" in hang_case" in f for f in mesh["frame"])


def test_every_field_absent_is_absent_never_a_crash(tmp_path):
    bare = {"entries": [{}, {"collective_seq_id": 3}, {"process_group": ("5", "mesh_tp")}, "not a dict", 7]}
    d = tmp_path / "d"
    d.mkdir()
    (d / "_dump_0").write_bytes(pickle.dumps(bare, protocol=2))
    dump0, table = read_dump(str(d / "_dump_0"), 0)
    assert len(table) == 3 and dump0.version == "" and dump0.process_groups == () and dump0.status == ()
    assert table["seq"].tolist() == [-1, 3, -1] and table["pg_name"].tolist() == ["", "", "5"]
    assert table["op"].tolist() == ["", "", ""] and table["created_ns"].tolist() == [-1, -1, -1]
    assert any("entries[] ×2" in n for n in dump0.notes)


def test_fields_of_the_wrong_type_are_left_out_and_counted(tmp_path):
    bad = entry(
        1,
        collective_seq_id="1",
        time_created_ns=True,
        input_sizes=[[8, "x"]],
        input_dtypes="Float",
        duration_ms=float("nan"),
        is_p2p=0,
        process_group=("0", "default_pg", "extra"),
        state=3,
    )
    d = write_dumps(tmp_path / "d", {0: dump([bad, entry(2, duration_ms=1.5, time_discovered_started_ns=5)])})
    dump0, table = read_dump(str(d / "_dump_0"), 0)
    assert table["seq"].tolist() == [-1, 2] and table["created_ns"][0] == -1 and table["input_sizes"][0] == ""
    assert table["duration_ns"].tolist() == [-1, 1_500_000] and table["started_ns"].tolist() == [-1, 5]
    assert table["is_p2p"][0] == -1 and table["pg_name"][0] == "" and table["state"][0] == ""
    (note,) = dump0.notes
    for key in ("collective_seq_id", "time_created_ns", "input_sizes", "input_dtypes", "duration_ms", "is_p2p", "state"):
        assert key in note


def test_older_spellings_and_a_filled_pg_config(tmp_path):
    old = {k: v for k, v in entry(4).items() if k != "collective_seq_id"} | {"seq_id": 4}
    d = dump(
        [old],
        version="2.1",
        nccl_version="2.17.1",
        pg_config={"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1, 2, 3]"}, "7": ("mesh_tp", [0, 1])},
        pg_status={"0": {"last_enqueued_collective": "4", "last_started_collective": 4, "last_completed_collective": -1}},
    )
    del d["comm_lib_version"]
    write_dumps(tmp_path / "d", {0: d})
    dump0, table = read_dump(str(tmp_path / "d" / "_dump_0"), 0)
    assert table["seq"].tolist() == [4] and dump0.comm_lib_version == "2.17.1" and dump0.version == "2.1"
    assert [(g.name, g.desc, g.ranks) for g in dump0.process_groups] == [
        ("0", "default_pg", (0, 1, 2, 3)),
        ("7", "mesh_tp", (0, 1)),
    ]
    assert (dump0.status[0].last_enqueued, dump0.status[0].last_started, dump0.status[0].last_completed) == (4, 4, -1)
    assert read_flight_dir(tmp_path / "d").expected_ranks == (0, 1, 2, 3)  # the default group's ranks


def test_files_prefixes_and_what_is_not_a_dump(tmp_path):
    d = write_dumps(tmp_path / "a", {0: dump(ring(1)), 1: dump(ring(1))}, prefix="nccl_trace_rank_")
    (d / "run.json").write_text("{}")
    (d / "rank0.trace.json.gz").write_bytes(b"")
    (d / "activation_r0.json").write_text("{}")
    assert read_flight_dir(d).ranks == (0, 1)
    write_dumps(d, {3: dump(ring(1))}, prefix="other_")
    with pytest.raises(DumpFormatError, match="several prefixes.*--prefix"):
        read_flight_dir(d)
    assert read_flight_dir(d, _opts(prefix="other_")).expected_ranks == (0, 1, 2, 3)
    assert read_flight_dir(d, _opts(prefix="nccl_trace_rank_", world_size=4)).absent_ranks == (2, 3)
    e = tmp_path / "e"
    e.mkdir()
    (e / "_dump_0").write_bytes(b"hello")
    with pytest.raises(DumpFormatError, match="neither a pickle nor a JSON dump"):
        read_flight_dir(e)
    with pytest.raises(DumpFormatError, match="no Flight Recorder dumps"):
        read_flight_dir(tmp_path / "a" / "..")
    os.mkfifo(e / "_dump_1")
    (e / "_dump_0").write_bytes(pickle.dumps(dump(ring(1)), protocol=2))
    run = read_flight_dir(e)  # the FIFO is refused from its stat, never opened for reading
    assert run.ranks == (0,) and any("FIFO" in w for w in run.warnings)


def test_size_limit_and_gzip(tmp_path):
    import gzip

    d = write_dumps(tmp_path / "d", {0: dump(ring(50))})
    raw = (d / "_dump_0").read_bytes()
    (d / "_dump_0").write_bytes(gzip.compress(raw))
    assert len(read_flight_dir(d).entries) == 50
    with pytest.raises(DumpFormatError, match="more than 100 bytes.*--max-dump-bytes"):
        read_flight_dir(d, _opts(max_bytes=100))
    (d / "_dump_0").write_bytes(gzip.compress(raw)[:-20])
    with pytest.raises(DumpFormatError, match="ends early|corrupt"):
        read_flight_dir(d)


def test_json_that_is_not_a_dump(tmp_path):
    for text, what in (('{"traceEvents": []}', "without entries"), ("[1, 2]", "neither"), ('{"entries": [', "not valid JSON")):
        d = tmp_path / what.replace(" ", "_")
        d.mkdir()
        (d / "_dump_0.json").write_text(text)
        with pytest.raises(DumpFormatError, match=what):
            read_flight_dir(d)
    deep = tmp_path / "deep"
    deep.mkdir()
    (deep / "_dump_0.json").write_text('{"entries": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(DumpFormatError, match="nested"):
        read_flight_dir(deep)


def _opts(**kw):
    from tracekit.loader.flight import FlightReadOptions

    return FlightReadOptions(**kw)
