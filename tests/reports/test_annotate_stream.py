"""`tracekit annotate` reads the trace only through the loader and writes the original bytes back: every original
event passes through unchanged, a number no float holds in an unused field survives, a truncated trace is
annotated from its salvaged prefix, and gzip is recognised by its magic bytes, not the file name."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import msgspec
import pytest
from click.testing import CliRunner

from tracekit.cli import cli
from tracekit.loader.passthrough import read_trace_bytes
from tracekit.reports.perfetto import FIRST_PID

DATA = Path(__file__).resolve().parents[1] / "data" / "kineto-gpu"
TRACKS = {"exposed comm": [[10.0, 20.0], [15.0, 30.0]], "comm dp": [[10.0, 40.0]]}
N_ADDED = 2 + 3 * 2 + 3  # process metadata, two lanes of "exposed comm" and one of "comm dp" (2 each), 3 intervals


def _json_bytes(path: Path) -> bytes:
    data = path.read_bytes()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def _annotate(tmp_path: Path, src: Path, out: str = "a.json", tracks: dict | None = TRACKS):
    args = ["annotate", str(src), "-o", str(tmp_path / out)]
    if tracks is not None:
        (tmp_path / "tracks.json").write_text(json.dumps(tracks))
        args += ["--tracks", str(tmp_path / "tracks.json")]
    return CliRunner().invoke(cli, args, catch_exceptions=False)


def _events_body(data: bytes) -> bytes:
    """The bytes of the original events, between the traceEvents array's brackets."""
    events = bytes(msgspec.json.decode(data, type=dict[str, msgspec.Raw])["traceEvents"]).strip()
    assert events[:1] == b"[" and events[-1:] == b"]"
    return events[1:-1].strip()


def _check_passthrough(original: bytes, out: bytes) -> list[dict]:
    """``out`` holds the original events byte for byte and parsed equal, then the added ones; other members equal."""
    before, after = json.loads(original), json.loads(out)
    n = len(before["traceEvents"])
    assert after["traceEvents"][:n] == before["traceEvents"]
    assert {k: v for k, v in after.items() if k != "traceEvents"} == {k: v for k, v in before.items() if k != "traceEvents"}
    assert _events_body(original) in out
    added = after["traceEvents"][n:]
    assert added and all(e.get("cat") == "tracekit" or e["ph"] == "M" for e in added)
    assert {e["pid"] for e in added}.isdisjoint({e.get("pid") for e in before["traceEvents"]})
    return added


@pytest.mark.parametrize("src", sorted(DATA.glob("*.json.gz")), ids=lambda p: p.name.split(".")[0])
def test_every_original_event_passes_through(tmp_path, src):
    res = _annotate(tmp_path, src)
    assert res.exit_code == 0, res.output
    added = _check_passthrough(_json_bytes(src), (tmp_path / "a.json").read_bytes())
    assert len(added) == N_ADDED
    assert sum(e["dur"] for e in added if e["name"] == "exposed comm") == pytest.approx(25.0)


def test_analysed_tracks_on_a_real_trace_keep_the_events(tmp_path):
    src = DATA / "rocm-mi250-minitoy.json.gz"
    res = _annotate(tmp_path, src, "a.json.gz", tracks=None)
    assert res.exit_code == 0, res.output
    _check_passthrough(_json_bytes(src), gzip.decompress((tmp_path / "a.json.gz").read_bytes()))


def _with_huge_number(src: Path) -> bytes:
    data = _json_bytes(src)
    at = data.index(b'"args"', data.index(b'"traceEvents"'))
    brace = data.index(b"{", at)
    return data[: brace + 1] + b'"unused": 1e400, ' + data[brace + 1 :]


def test_a_number_beyond_float_range_in_an_unused_field_passes_through(tmp_path):
    src = tmp_path / "huge.json"
    src.write_bytes(_with_huge_number(DATA / "rocm-mi250-minitoy.json.gz"))
    for tracks, out in ((TRACKS, "a.json"), (None, "b.json")):  # from a tracks file, and from the analysis
        res = _annotate(tmp_path, src, out, tracks)
        assert res.exit_code == 0, res.output
        data = (tmp_path / out).read_bytes()
        assert _events_body(src.read_bytes()) in data and data.count(b"1e400") == 1


def test_a_truncated_trace_is_annotated_from_its_salvaged_prefix(tmp_path):
    whole = _json_bytes(DATA / "allreduce-broadcast-2rank-rank0.json.gz")
    cut = whole[: int(len(whole) * 0.7)]
    src = tmp_path / "cut.json"
    src.write_bytes(cut)
    res = _annotate(tmp_path, src)
    assert res.exit_code == 0, res.output
    assert "truncated at byte" in res.stderr and "closed with ']}'" in res.stderr
    out = (tmp_path / "a.json").read_bytes()
    kept = json.loads(out)["traceEvents"][:-N_ADDED]
    original = json.loads(whole)["traceEvents"]
    assert 0 < len(kept) < len(original) and kept == original[: len(kept)]
    start = cut.index(b"[", cut.index(b'"traceEvents"')) + 1
    assert cut[start : cut.rindex(b"}") - 200].strip() in out  # the kept events are written as they were


@pytest.mark.parametrize("compress_input", [False, True])
def test_gzip_is_recognised_by_content_not_name(tmp_path, compress_input):
    plain = _json_bytes(DATA / "pp-sendrecv-128rank-rank0.json.gz")
    src = tmp_path / ("trace.json" if compress_input else "trace.json.gz")  # the wrong name for the content
    src.write_bytes(gzip.compress(plain) if compress_input else plain)
    res = _annotate(tmp_path, src)
    assert res.exit_code == 0, res.output
    _check_passthrough(plain, (tmp_path / "a.json").read_bytes())


def test_new_process_takes_a_free_pid_and_falls_back_when_pids_are_unreadable(tmp_path):
    src = tmp_path / "t.json"
    src.write_text(json.dumps({"traceEvents": [{"ph": "X", "name": "k", "pid": FIRST_PID, "tid": 1, "ts": 1, "dur": 2}]}))
    assert _annotate(tmp_path, src).exit_code == 0
    assert {e["pid"] for e in json.loads((tmp_path / "a.json").read_bytes())["traceEvents"][1:]} == {FIRST_PID + 1}
    src.write_text('{"traceEvents": [7, {"ph": "X", "name": "k", "pid": 3, "tid": 1, "ts": 1, "dur": 2}]}')
    assert read_trace_bytes(str(src)).pids is None  # an event that is not an object: the pids are not read
    assert _annotate(tmp_path, src).exit_code == 0
    events = json.loads((tmp_path / "a.json").read_bytes())["traceEvents"]
    assert events[:2] == [7, {"ph": "X", "name": "k", "pid": 3, "tid": 1, "ts": 1, "dur": 2}]


def test_empty_events_array_and_non_traces_are_handled(tmp_path):
    src = tmp_path / "t.json"
    src.write_text('{"traceEvents": [ ], "x": 1}')
    assert _annotate(tmp_path, src).exit_code == 0
    out = json.loads((tmp_path / "a.json").read_bytes())
    assert out["x"] == 1 and len(out["traceEvents"]) == N_ADDED
    for text in ("[1, 2]", '{"foo": 1}', '{"traceEvents": 3}'):
        src.write_text(text)
        res = _annotate(tmp_path, src)
        assert res.exit_code == 3 and len(res.stderr.strip().splitlines()) == 1, res.output


@pytest.mark.parametrize(
    "text", ['{"t": [[1, NaN]]}', '{"t": [[5, 1]]}', '{"t": [[1, 1e400]]}', '{"t": [[1]]}', '{"t": [["a", 2]]}', "[1, 2]"]
)
def test_bad_tracks_file_is_one_line(tmp_path, text):
    (tmp_path / "bad.json").write_text(text)
    res = CliRunner().invoke(
        cli,
        [
            "annotate",
            str(DATA / "rocm-mi250-minitoy.json.gz"),
            "--tracks",
            str(tmp_path / "bad.json"),
            "-o",
            str(tmp_path / "a.json"),
        ],
    )
    assert res.exit_code == 2, res.output
    assert len(res.stderr.strip().splitlines()) == 1 and "bad.json" in res.stderr
    assert not (tmp_path / "a.json").exists()


@pytest.fixture(scope="module")
def gloo_trace(tmp_path_factory) -> Path:
    import torch.multiprocessing as mp

    from tests.helpers.net import free_port
    from tests.integration.test_cross_rank_gloo import _worker

    out = tmp_path_factory.mktemp("gloo-annotate")
    mp.start_processes(_worker, args=(free_port(), str(out)), nprocs=2, start_method="spawn")
    return sorted(p for p in out.iterdir() if ".json" in p.name and p.name != "run.json")[0]


@pytest.mark.slow
def test_gloo_trace_passes_through(tmp_path, gloo_trace):
    res = _annotate(tmp_path, gloo_trace, "a.json", tracks=None)
    assert res.exit_code == 0, res.output
    added = _check_passthrough(_json_bytes(gloo_trace), (tmp_path / "a.json").read_bytes())
    assert any(e["name"].startswith("comm ") for e in added if e["ph"] == "X")


def test_lone_surrogate_escape_is_read_as_the_loader_reads_it(tmp_path):
    src = tmp_path / "s.json"
    src.write_bytes(b'{"traceEvents": [{"ph": "X", "name": "cut \\ud800 name", "pid": 1, "tid": 1, "ts": 1, "dur": 2}]}')
    res = _annotate(tmp_path, src)
    assert res.exit_code == 0, res.output
    assert "lone UTF-16 surrogate" in res.stderr and "closed with" not in res.stderr
    assert json.loads((tmp_path / "a.json").read_bytes())["traceEvents"][0]["name"] == "cut \ufffd name"


def test_two_event_arrays_are_refused_as_the_loader_refuses_them(tmp_path):
    src = tmp_path / "d.json"
    src.write_text('{"traceEvents": [{"pid": 1}], "traceEvents": [{"pid": 2}]}')
    res = _annotate(tmp_path, src)
    assert res.exit_code == 3 and "two 'traceEvents' arrays" in res.stderr


def test_the_loader_limits_apply_as_set_on_the_command_line(tmp_path):
    src = DATA / "pp-sendrecv-128rank-rank0.json.gz"
    (tmp_path / "tracks.json").write_text(json.dumps(TRACKS))
    base = ["annotate", str(src), "--tracks", str(tmp_path / "tracks.json"), "-o", str(tmp_path / "a.json")]
    res = CliRunner().invoke(cli, [*base, "--max-trace-bytes", "1000"])
    assert res.exit_code == 3 and "--max-trace-bytes" in res.stderr, res.output
    assert CliRunner().invoke(cli, [*base, "--max-trace-bytes", str(10**9)]).exit_code == 0


def test_an_empty_file_is_one_line(tmp_path):
    src = tmp_path / "e.json"
    src.write_text("  \n")
    res = _annotate(tmp_path, src)
    assert res.exit_code == 3 and "empty file" in res.stderr
