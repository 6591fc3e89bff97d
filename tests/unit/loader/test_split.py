"""One trace split at event boundaries and decoded by a process pool gives exactly the serial load's table and
RankInfo (every fixture in tests/data, cut into up to 6 pieces), and keeps the hostile-input guarantees: the size
limit, the limit on blank runs, salvage of a truncated file, and a cut that lands inside an event."""

import gzip
import json
import os
import shutil

import numpy as np
import pytest

from tests.helpers.data import DATA
from tracekit.errors import InputLimitError
from tracekit.loader import split
from tracekit.loader.classify import RuleSet
from tracekit.loader.decode import StreamLimits
from tracekit.loader.loading import LoadOptions, load_file
from tracekit.loader.stream import NotStreamable
from tracekit.model.events import COLUMNS

FIXTURES = sorted(str(p.relative_to(DATA)) for p in DATA.glob("*/*.json.gz"))


@pytest.fixture
def small_pieces(monkeypatch):
    """Split files of any size into pieces of a few KB (the real floor is tens of MB)."""
    monkeypatch.setattr(split, "MIN_SPLIT_BYTES", 0)
    monkeypatch.setattr(split, "MIN_PIECE_BYTES", 2048)


def plain(src, tmp_path):
    out = tmp_path / src.name.replace(".gz", "")
    with gzip.open(src, "rb") as fin, open(out, "wb") as fout:
        shutil.copyfileobj(fin, fout)
    return str(out)


def assert_same(got, want):
    (t1, i1), (t2, i2) = got, want
    assert len(t1) == len(t2)
    assert t1.strings == t2.strings
    for key in COLUMNS:
        assert t1[key].dtype == t2[key].dtype, key
        np.testing.assert_array_equal(t1[key], t2[key], err_msg=key)
    assert i1.to_dict() == i2.to_dict()


def write_trace(path, events, tail=b"", **header):
    doc = {"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1}, **header}
    head = json.dumps(doc)[:-1].encode() + b', "traceEvents": ['
    path.write_bytes(head + b",\n".join(json.dumps(e).encode() for e in events) + b"]" + tail + b"}")
    return str(path)


def kernels(n, **args):
    return [
        {
            "ph": "X",
            "cat": "kernel",
            "name": f"k{i % 7}",
            "pid": 0,
            "tid": 7,
            "ts": 10 * i,
            "dur": 5,
            "args": {"device": 0, "stream": 7, "correlation": i, **args},
        }
        for i in range(n)
    ]


@pytest.mark.parametrize("name", FIXTURES)
def test_split_load_equals_the_serial_load(name, tmp_path, small_pieces):
    path = plain(DATA / name, tmp_path)
    assert_same(load_file(path, LoadOptions(cache=False, split=3)), load_file(path, LoadOptions(cache=False)))


def test_a_real_trace_is_really_split_and_joined_in_order(tmp_path, small_pieces):
    path = plain(DATA / "kineto-gpu" / "allreduce-broadcast-2rank-rank0.json.gz", tmp_path)
    stats: dict = {}
    builder, header, _ = split.load_split(path, StreamLimits(), RuleSet(), 3, stats)
    assert len(stats["piece_bytes"]) == 6 and min(stats["piece_bytes"]) > 0
    assert header.baseTimeNanoseconds is not None  # the header after the events came from the last piece
    serial, _ = load_file(path, LoadOptions(cache=False))
    assert builder.rows == len(serial)  # every kept event once (this real trace has no duplicates to drop)


def test_gzip_is_not_split(tmp_path, small_pieces):
    with pytest.raises(NotStreamable):
        split.load_split(str(DATA / "kineto-gpu" / "rocm-mi250-minitoy.json.gz"), StreamLimits(), RuleSet(), 2)


def test_nested_objects_at_the_cut_fall_back_to_the_serial_load(tmp_path, small_pieces):
    """Lists of objects inside args look like event boundaries to the scan: a piece cut there does not decode,
    and the load is the serial one, not a wrong table."""
    path = write_trace(tmp_path / "t.json", kernels(300, **{"Input Dims": [{"a": 1}, {"b": 2}] * 20}))
    with pytest.raises(NotStreamable):
        split.load_split(path, StreamLimits(), RuleSet(), 3)
    assert_same(load_file(path, LoadOptions(cache=False, split=3)), load_file(path, LoadOptions(cache=False)))


def test_size_limit_is_kept(tmp_path, small_pieces):
    path = write_trace(tmp_path / "t.json", kernels(400))
    with pytest.raises(InputLimitError, match="max-trace-bytes"):
        load_file(path, LoadOptions(cache=False, split=2, max_bytes=10_000))


def test_a_blank_run_inside_a_piece_is_refused_by_its_worker(tmp_path, small_pieces):
    """A 2.5 MiB run of blanks after the first event, cuts far past it: the first piece's worker refuses it (the
    limit on blank runs holds in every piece), and the whole load fails the same way."""
    compact = open(write_trace(tmp_path / "u.json", kernels(80_000)), "rb").read()
    path = tmp_path / "t.json"
    path.write_bytes(compact.replace(b",\n", b"," + b" " * (5 << 19), 1))
    assert path.stat().st_size > 4 * (3 << 20)  # the first cut (a quarter in) lies past the blank run
    with pytest.raises(InputLimitError, match="whitespace"):
        split.load_split(str(path), StreamLimits(), RuleSet(), 2)
    with pytest.raises(InputLimitError, match="whitespace"):
        load_file(str(path), LoadOptions(cache=False, split=2))


def test_a_truncated_trace_is_salvaged_as_serially(tmp_path, small_pieces):
    full = open(write_trace(tmp_path / "full.json", kernels(500)), "rb").read()
    path = tmp_path / "cut.json"
    path.write_bytes(full[: len(full) * 2 // 3])
    got = load_file(str(path), LoadOptions(cache=False, split=3))
    assert got[1].truncated and 0 < len(got[0]) < 500
    assert_same(got, load_file(str(path), LoadOptions(cache=False)))


# -- the columns' way back from the workers (loader/handoff.py) ---------------------------------------------------
def _leftovers():
    from tracekit.loader import handoff

    return sorted(p.name for p in __import__("pathlib").Path(handoff._SHM).glob(f"tracekit-piece-{os.getpid()}-*"))


@pytest.mark.skipif(not split.handoff.available(), reason="no writable /dev/shm on this machine")
def test_pieces_come_back_through_shared_memory_and_equal_the_pipe_way(tmp_path, small_pieces, monkeypatch):
    """Every piece's columns travel through a /dev/shm file (none is left), and the table equals the one whose
    pieces came back pickled through the pipe (no /dev/shm) and the serial load's."""
    path = plain(DATA / "kineto-gpu" / "allreduce-broadcast-2rank-rank0.json.gz", tmp_path)
    stats: dict = {}
    builder, header, warnings = split.load_split(path, StreamLimits(), RuleSet(), 3, stats)
    assert stats["pieces_shared"] == len(stats["piece_bytes"]) == 6
    shared = builder.finish(header, path, warnings)
    assert not _leftovers()
    monkeypatch.setattr(split.handoff, "_SHM", str(tmp_path / "no-such-dir"))
    stats = {}
    builder, header, warnings = split.load_split(path, StreamLimits(), RuleSet(), 3, stats)
    assert stats["pieces_shared"] == 0
    assert_same(shared, builder.finish(header, path, warnings))
    assert_same(shared, load_file(path, LoadOptions(cache=False)))


def test_a_handoff_file_that_cannot_be_written_is_none_and_leaves_nothing(tmp_path):
    """A full tmpfs (here: a file-size limit, EFBIG) sends the arrays back through the pipe instead."""
    import subprocess
    import sys

    code = (
        "import os, resource, signal, sys, numpy as np\n"
        "from tracekit.loader import handoff\n"
        "handoff._SHM = sys.argv[1]\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))\n"
        "small = handoff.put({'a': np.arange(10)}, 'p-')\n"
        "assert small is not None and (handoff.take(small)['a'] == np.arange(10)).all()\n"
        "assert handoff.put({'a': np.arange(1 << 18), 'b': np.arange(1 << 18)}, 'p-') is None\n"
        "assert os.listdir(sys.argv[1]) == [], os.listdir(sys.argv[1])\n"
    )
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], check=True)


@pytest.mark.skipif(not split.handoff.available(), reason="no writable /dev/shm on this machine")
def test_a_failed_split_load_leaves_no_handoff_files(tmp_path, small_pieces, monkeypatch):
    """The first piece fails (a blank run) while the next ones decode and are handed off, never to be taken: the
    load removes their files."""
    compact = open(write_trace(tmp_path / "u.json", kernels(80_000)), "rb").read()
    path = tmp_path / "t.json"
    path.write_bytes(compact.replace(b",\n", b"," + b" " * (5 << 19), 1))
    real_sweep, swept = split.handoff.sweep, []

    def sweep(prefix):
        swept.extend(_leftovers())
        real_sweep(prefix)

    monkeypatch.setattr(split.handoff, "sweep", sweep)
    with pytest.raises(InputLimitError, match="whitespace"):
        split.load_split(str(path), StreamLimits(), RuleSet(), 2)
    assert swept  # there was something to remove: the test saw the case it is about
    assert not _leftovers()


def test_handoff_keeps_shapes_and_dtypes(tmp_path, monkeypatch):
    """Two-dimensional arrays (the collective records' codes) and empty ones come back as they went."""
    from tracekit.loader import handoff

    monkeypatch.setattr(handoff, "_SHM", str(tmp_path))
    sent = {"m": np.arange(14, dtype=np.int32).reshape(2, 7), "e": np.empty((0, 6), np.int64), "v": np.array([3, -1], np.int64)}
    got = handoff.take(handoff.put(sent, "p-"))
    for k, v in sent.items():
        assert got[k].dtype == v.dtype and got[k].shape == v.shape and (got[k] == v).all()
    assert not list(tmp_path.iterdir())


@pytest.mark.skipif(not split.handoff.available(), reason="no writable /dev/shm on this machine")
def test_a_handoff_file_gone_before_it_is_read_falls_back_to_the_serial_load(tmp_path, small_pieces, monkeypatch):
    """A piece's file removed under the load (a /dev/shm cleaner): the serial load's table, nothing left behind."""
    path = plain(DATA / "kineto-gpu" / "allreduce-broadcast-2rank-rank0.json.gz", tmp_path)
    real_take = split.handoff.take

    def vanished(sent):
        os.unlink(sent.path)
        return real_take(sent)

    monkeypatch.setattr(split.handoff, "take", vanished)
    with pytest.raises(NotStreamable, match="could not be read back"):
        split.load_split(path, StreamLimits(), RuleSet(), 3)
    assert not _leftovers()
    assert_same(load_file(path, LoadOptions(cache=False, split=3)), load_file(path, LoadOptions(cache=False)))


def test_drops_in_every_piece_are_counted_once_as_serially(tmp_path, small_pieces):
    """Events without a ph and with a negative duration spread over every piece (issue 29): the split load counts and
    places each once, as the serial load does (the pieces' records joined in file order)."""
    events = kernels(3000)
    for i, e in enumerate(events):
        if i % 97 == 0:
            del e["ph"]
        elif i % 89 == 0:
            e["dur"] = -1
    path = write_trace(tmp_path / "t.json", events)
    got, want = load_file(path, LoadOptions(cache=False, split=3)), load_file(path, LoadOptions(cache=False))
    assert_same(got, want)
    counts = dict(got[1].dropped.counts)
    assert counts == {"malformed": len(range(0, 3000, 97)), "times": sum(1 for i in range(3000) if i % 89 == 0 and i % 97)}
    assert sorted(got[1].dropped.correlation) == sorted(i for i in range(3000) if i % 97 == 0 or i % 89 == 0)
