"""The streaming reader and the run guards on hostile layouts: exact guarantees of the guards at every alignment
and chunking, long blank runs between events, a string far past the limit, a bomb of empty events."""

from __future__ import annotations

import json
import zlib

import pytest

from tests.helpers.hostile import intact_doc, write
from tracekit.errors import InputLimitError
from tracekit.loader.files import RunGuard
from tracekit.loader.loading import LoadOptions, load_file
from tracekit.loader.stream import EventStream

BLOCK = 4096


def _feed(kind: str, data: bytes, chunk: int) -> bool:
    guard = RunGuard(BLOCK, kind)
    return any(guard.feed(data[i : i + chunk]) for i in range(0, len(data), chunk))


@pytest.mark.parametrize("kind,run_byte,stop", [("blank", b" ", b"x"), ("quote", b"a", b'"')])
@pytest.mark.parametrize("chunk", [1000, 4096, 5000, 1 << 16])
def test_run_guard_bounds_hold_at_every_alignment(kind, run_byte, stop, chunk):
    for lead in (0, 1, 999, 4095, 4096, 6000):
        short = stop * lead + run_byte * (BLOCK - 1) + stop + run_byte * (BLOCK - 1) + stop
        assert not _feed(kind, short, chunk), (lead, "a run shorter than the block is never refused")
        long = stop * lead + run_byte * (2 * BLOCK) + stop
        assert _feed(kind, long, chunk), (lead, "a run of two blocks is always refused")


def _compact_and_padded(tmp_path, pad: str):
    doc = intact_doc()
    compact = write(tmp_path / "compact.json", doc)
    events = ("," + pad).join(json.dumps(e) for e in doc["traceEvents"])
    text = json.dumps(dict(doc, traceEvents=["@"])).replace('["@"]', f"[{events}]")
    return compact, write(tmp_path / "padded.json", text)


def test_long_blank_runs_between_events_still_stream(tmp_path):
    """100 KB of blanks between events (below the limit on blank runs): cut into pieces, the same table."""
    _, padded = _compact_and_padded(tmp_path, " " * 100_000)
    pieces = [len(p) for p in EventStream(str(padded), piece_bytes=256 * 1024)]
    assert len(pieces) > 2 and sum(pieces) == len(intact_doc()["traceEvents"])


def test_padded_trace_loads_like_the_compact_one(tmp_path):
    compact, padded = _compact_and_padded(tmp_path, "\n" * 200_000)
    a, _ = load_file(str(compact), LoadOptions(cache=False))
    b, _ = load_file(str(padded), LoadOptions(cache=False))
    for col in a.columns:
        assert (a[col] == b[col]).all(), col


def test_a_string_far_past_the_limit_is_refused_before_it_is_buffered(tmp_path):
    """A 40 MiB name in a plain .json (no gzip ratio to catch it): refused by the run-without-a-quote guard."""
    path = tmp_path / "t.json"
    with open(path, "w") as fh:
        fh.write('{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "')
        fh.write("A" * 40 * 1024**2)
        fh.write('", "ts": 1, "dur": 1}]}')
    with pytest.raises(InputLimitError, match="bytes without a '\"'.*--max-string-bytes") as err:
        load_file(str(path), LoadOptions(cache=False))
    assert "\n" not in str(err.value)


def test_a_bomb_of_repeated_tokens_is_refused_by_the_gzip_ratio(tmp_path):
    """Repeated valid tokens ('{}, ' x 64 M: 256 MiB from a 270 KB file, loaded for 31 s before) pass every run
    guard; the inflation ratio refuses them once past 16 MiB. Here 18 MiB of '0, ' in one event's args, so that
    the load with the ratio raised stays short."""
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    head = b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1, '
    data = c.compress(head + b'"args": {"Input Dims": [') + c.compress(b"0, " * (6 * 1024**2)) + c.compress(b"0]}}]}") + c.flush()
    path = tmp_path / "t.json.gz"
    path.write_bytes(data)
    with pytest.raises(InputLimitError, match="more than 200x.*TRACEKIT_MAX_GZIP_RATIO"):
        load_file(str(path), LoadOptions(cache=False))
    table, _ = load_file(str(path), LoadOptions(cache=False, max_gzip_ratio=1e9))  # the knob lets it through
    assert len(table) == 1


def _die(args):
    import os

    os._exit(9)  # what the kernel's OOM killer leaves of a worker


def test_a_loader_process_that_dies_is_a_one_line_error(tmp_path, monkeypatch):
    """A worker killed mid-load (out of memory): before, a BrokenProcessPool traceback."""
    import multiprocessing

    from tracekit.errors import TracekitError
    from tracekit.loader import executors

    if multiprocessing.get_start_method() != "fork":
        pytest.skip("the patched worker function reaches the pool's processes only when they fork")
    files = [str(write(tmp_path / f"rank{r}.json", intact_doc())) for r in range(2)]
    monkeypatch.setattr(executors, "_load_one", _die)
    with pytest.raises(TracekitError, match="a loader process died.*--executor serial") as err:
        executors.map_files(load_file, files, LoadOptions(cache=False), executor="process")
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("gz", [False, True])
def test_a_byte_order_mark_is_skipped(tmp_path, gz):
    """A UTF-8 BOM (an editor's save) made the whole trace 'not valid JSON'."""
    import gzip

    intact = write(tmp_path / "a.json", intact_doc())
    data = b"\xef\xbb\xbf" + intact.read_bytes()
    bom = tmp_path / ("b.json.gz" if gz else "b.json")
    bom.write_bytes(gzip.compress(data) if gz else data)
    a, _ = load_file(str(intact), LoadOptions(cache=False))
    b, _ = load_file(str(bom), LoadOptions(cache=False))
    for col in a.columns:
        assert (a[col] == b[col]).all(), col
