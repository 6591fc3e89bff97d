"""Bad input, round 3 (issue 29): nothing that loses or distorts data passes the gate.

Each class is built from a real trace (pp-sendrecv-128rank-rank0 from HTA's test data, tests/data/kineto-gpu:
two ProfilerSteps, 1,154 kernels) with the intact trace's own figures as the reference. For each one the suite
shows: the documented exit code and no traceback; the damaged step marked (``complete: false``, with the count of
events it lost) or the input refused -- or, where nothing was lost, the intact figures exactly; that every step
still called complete has exactly the intact trace's figures; and that no budget the intact trace fails passes on
the damaged one (four budgets around the intact medians, each failed by the intact trace, one gate run each).
"""

from __future__ import annotations

import copy
import gzip
import json
import os
from pathlib import Path

import pytest

from tests.helpers.data import gpu_trace
from tests.helpers.hostile import run_inproc
from tracekit import gate
from tracekit.loader.loading import LoadOptions, load_file

SOURCE = "pp-sendrecv-128rank-rank0.json.gz"
FIGURES = ("wall_us", "compute_us", "comm_us", "hidden_comm_us", "exposed_comm_us", "idle_us", "memcpy_us", "memset_us")
NO_CACHE = LoadOptions(cache=False)


@pytest.fixture(scope="module")
def intact_doc() -> dict:
    with gzip.open(gpu_trace(SOURCE), "rt") as fh:
        return json.load(fh)


@pytest.fixture(scope="module")
def intact(intact_doc, tmp_path_factory) -> gate.RunMetrics:
    path = tmp_path_factory.mktemp("intact") / "rank0.json"
    path.write_text(json.dumps(intact_doc))
    return gate.load_summary(str(path), options=NO_CACHE, executor="serial")


def _steps(m: gate.RunMetrics) -> dict[int, dict]:
    return {
        s.step: {"complete": s.complete, "dropped": s.dropped_events, **{f: getattr(s, f) for f in FIGURES}}
        for s in m.doc.ranks[0].steps
    }


def _budgets(intact: gate.RunMetrics) -> list[str]:
    """Budgets the intact trace fails, on either side of its medians (so a figure moved either way is caught)."""
    share, ratio = intact.run_stat("exposed_comm_share").median, intact.run_stat("overlap_ratio").median
    return [
        f"exposed_comm_share<={share * 0.999:.6f}",
        f"exposed_comm_share>={share * 1.001:.6f}",
        f"overlap_ratio<={ratio * 0.999:.6f}",
        f"overlap_ratio>={ratio * 1.001:.6f}",
    ]


def _passes(m: gate.RunMetrics, budget: str) -> bool:
    return gate.run_gate(m, None, (gate.parse_budget(budget),)).passed


def _in_step(doc: dict, step: int) -> tuple[float, float]:
    (e,) = [e for e in doc["traceEvents"] if e.get("name") == f"ProfilerStep#{step}"]
    return e["ts"], e["ts"] + e["dur"]


def _compute_kernels(doc: dict, step: int = 551, every: int = 2, most: int = 40) -> list[dict]:
    """Every ``every``-th compute kernel launched in ``step`` (by its launch's time), at most ``most``."""
    lo, hi = _in_step(doc, step)
    launched = {
        e["args"]["correlation"]
        for e in doc["traceEvents"]
        if e.get("cat") == "cuda_runtime" and lo <= e["ts"] < hi and isinstance(e.get("args"), dict)
    }
    ks = [
        e
        for e in doc["traceEvents"]
        if e.get("cat") == "kernel" and "nccl" not in e["name"].lower() and e["args"].get("correlation") in launched
    ]
    return ks[::every][:most]


def _set(key, value):
    def f(doc):
        ks = _compute_kernels(doc)
        for e in ks:
            e[key] = value
        return len(ks)

    return f


def _drop(key):
    def f(doc):
        ks = _compute_kernels(doc)
        for e in ks:
            del e[key]
        return len(ks)

    return f


def _absurd_duration(doc):
    """The issue's case: one kernel of 10**12 µs (11.6 days) in a step of 0.6 s."""
    _compute_kernels(doc)[0]["dur"] = 1e12
    return 1


def _begin_end(doc):
    lo, _ = _in_step(doc, 551)
    doc["traceEvents"] += [
        {"ph": "B", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 1, "ts": lo + 100},
        {"ph": "E", "pid": 1, "tid": 1, "ts": lo + 200},
    ]
    return 2


# class -> (mutation returning how many events it damaged, the reason the steps give, whether the place is known)
LOSSY = {
    "absurd-duration": (_absurd_duration, "implausible", True),
    "no-ph": (_drop("ph"), "malformed", True),
    "unknown-ph": (_set("ph", "Q"), "malformed", True),
    "ph-not-a-string": (_set("ph", 5), "malformed", True),
    "args-not-an-object": (_set("args", 5), "malformed", True),
    "negative-duration": (_set("dur", -3.0), "times", True),
    "x-without-dur": (_drop("dur"), "times", True),
    "ts-beyond-the-ns-range": (_set("ts", 1e18), "times", True),  # placed by its correlation id
    "boolean-ts": (_set("ts", True), "malformed", True),  # the lenient decode reads the correlation id
    "string-ts": (_set("ts", "soon"), "malformed", True),
    "begin-end": (_begin_end, "begin/end", True),
}


@pytest.mark.parametrize("name", sorted(LOSSY))
def test_an_event_lost_marks_its_step_and_passes_no_gate_the_intact_trace_fails(name, intact_doc, intact, tmp_path):
    mutate, reason, placed = LOSSY[name]
    doc = copy.deepcopy(intact_doc)
    damaged = mutate(doc)
    path = tmp_path / "rank0.json"
    path.write_text(json.dumps(doc))
    _, info = load_file(str(path), NO_CACHE)
    assert info.dropped.total == damaged  # each damaged event counted, once
    m = gate.load_summary(str(path), options=NO_CACHE, executor="serial")
    got, want = _steps(m), _steps(intact)
    assert got[551]["complete"] is False and got[551]["dropped"] == damaged
    assert reason in next(s.partial_reason for s in m.doc.ranks[0].steps if s.step == 551)
    assert got[552] == want[552]  # the step that lost nothing: the intact figures exactly
    for budget in _budgets(intact):
        assert not _passes(intact, budget), budget
        assert not _passes(m, budget), budget
    # and through the command line: a run that lost events fails the gate (exit 1), in one verdict, no traceback
    (tmp_path / "c").mkdir()
    res = run_inproc({"check": ["check", str(path), "--budget", "exposed_comm_share<=1.0"]}, tmp_path / "c")["check"]
    assert res.rc == 1 and "Traceback" not in res.stderr + res.stdout
    assert "events were dropped from 1 step as unreadable or implausible" in res.stdout and "--allow-partial" in res.stdout


def test_allow_partial_gates_the_whole_steps_alone(intact_doc, intact, tmp_path):
    """--allow-partial: the step that lost events is left out, the other one gated with the intact figures."""
    doc = copy.deepcopy(intact_doc)
    _absurd_duration(doc)
    path = tmp_path / "rank0.json"
    path.write_text(json.dumps(doc))
    m = gate.load_summary(str(path), options=NO_CACHE, executor="serial")
    report = gate.run_gate(m, None, (gate.parse_budget("exposed_comm_share<=1.0"),), allow_partial=True)
    assert report.passed and m.steps_left_out == 1
    share = next(s for s in intact.doc.ranks[0].steps if s.step == 552)
    assert m.run_stat("exposed_comm_share").median == pytest.approx(share.exposed_comm_us / share.wall_us)


def _unreadable_everywhere(doc):
    """Events whose time cannot be read and whose correlation names no launch: any step may have lost them."""
    ks = _compute_kernels(doc)
    for e in ks:
        e["ts"] = "soon"
        e["args"]["correlation"] = 10**15
    return len(ks)


def test_events_that_could_be_anywhere_mark_every_step(intact_doc, intact, tmp_path):
    doc = copy.deepcopy(intact_doc)
    damaged = _unreadable_everywhere(doc)
    path = tmp_path / "rank0.json"
    path.write_text(json.dumps(doc))
    m = gate.load_summary(str(path), options=NO_CACHE, executor="serial")
    assert all(not s.complete and s.dropped_events == damaged for s in m.doc.ranks[0].steps)
    assert not m.has_data
    for budget in _budgets(intact):
        assert not _passes(m, budget)
    (tmp_path / "c").mkdir()
    res = run_inproc({"analyze": ["analyze", str(path), "--no-cache"]}, tmp_path / "c")["analyze"]
    assert res.rc == 3 and f"are incomplete (lost {damaged} events" in res.stderr and "Traceback" not in res.stderr


# -- one bad byte, told apart from a truncation ---------------------------------------------------------------------
def _bad_byte(text: bytes, what: bytes, offset: int, value: int) -> bytes:
    at = text.find(what, len(text) // 3)
    b = bytearray(text)
    b[at + offset] = value
    return bytes(b)


@pytest.mark.parametrize(
    "name,damage",
    [
        ("invalid-utf8-in-a-name", lambda t: _bad_byte(t, b'"name": "void fbgemm', 12, 0xFF)),
        ("a-digit-turned-letter", lambda t: _bad_byte(t, b'"dur": 1', 7, ord("x"))),
    ],
)
@pytest.mark.parametrize("suffix", [".json", ".json.gz"])
def test_one_bad_byte_loses_its_event_only(name, damage, suffix, intact_doc, intact, tmp_path):
    """Before: 'truncated at byte N ... the process was probably killed' and every event after the byte lost."""
    text = damage(json.dumps(intact_doc).encode())
    path = tmp_path / f"rank0{suffix}"
    path.write_bytes(gzip.compress(text) if suffix.endswith(".gz") else text)
    table, info = load_file(str(path), NO_CACHE)
    (w,) = [w for w in info.warnings if "corrupt bytes" in w]
    assert (
        "not a truncation" in w
        and "dropped the 1 events" in w
        and "truncated" not in " ".join(info.warnings).replace("not a truncation", "")
    )
    assert not info.truncated and info.dropped.total == 1
    m = gate.load_summary(str(path), options=NO_CACHE, executor="serial")
    got, want = _steps(m), _steps(intact)
    lost = [s for s, f in got.items() if not f["complete"]]
    assert len(lost) == 1 and all(got[s] == want[s] for s in got if s not in lost)
    for budget in _budgets(intact):
        assert not _passes(m, budget)


# -- nothing lost: the intact figures, and a word -------------------------------------------------------------------
def _member(data: bytes) -> bytes:
    return gzip.compress(data)


SAME = {
    "step-name-with-a-zero-width-space": (
        lambda t: t.replace(b'"ProfilerStep#551"', b'"ProfilerStep#\\u200b551"'),
        "read as the ProfilerStep#N they spell",
    ),
    "step-name-with-a-no-break-space": (
        lambda t: t.replace(b'"ProfilerStep#552"', b'"ProfilerStep#\\u00a0552"'),
        "read as the ProfilerStep#N they spell",
    ),
    "gzip-trailing-garbage": (lambda t: _member(t) + b"garbage after the member", "trailing bytes that are not gzip data"),
    "gzip-trailing-zeros": (lambda t: _member(t) + bytes(512), "512 trailing zero bytes"),
    "gzip-member-without-trailer": (lambda t: _member(t)[:-8], "ends before the trailer of member 1"),
    "gzip-second-member-cut-after-its-header": (lambda t: _member(t) + _member(b" ")[:10], "trailer of member 2"),
}


@pytest.mark.parametrize("name", sorted(SAME))
def test_damage_that_loses_nothing_keeps_the_figures_and_says_so(name, intact_doc, intact, tmp_path):
    damage, said = SAME[name]
    data = damage(json.dumps(intact_doc).encode())
    path = tmp_path / ("rank0.json.gz" if name.startswith("gzip") else "rank0.json")
    path.write_bytes(data)
    m = gate.load_summary(str(path), options=NO_CACHE, executor="serial")
    assert _steps(m) == _steps(intact)
    assert any(said in w for w in m.warnings), m.warnings


def test_a_failed_crc_is_refused_even_after_every_byte_inflated(intact_doc, tmp_path):
    data = bytearray(gzip.compress(json.dumps(intact_doc).encode()))
    data[-6] ^= 0xFF  # in the CRC-32 of the trailer: every byte inflated, the check fails
    run = tmp_path / "run"
    run.mkdir()
    (run / "rank0.json.gz").write_bytes(bytes(data))
    (tmp_path / "c").mkdir()
    for cmd in (["info", str(run)], ["check", str(run), "--budget", "exposed_comm_share<=1.0"]):
        res = run_inproc({"x": [*cmd, "--no-cache"]}, tmp_path / "c")["x"]
        assert res.rc == 3 and "fails its CRC check" in res.stderr and "Traceback" not in res.stderr


def test_correlation_ids_that_name_the_next_launch_are_unusable(intact_doc, intact, tmp_path):
    """Each kernel points at the launch after its own (the issue's 'shifted by one'): most then start before the
    launch they name, the rank's ids are declared unusable, every link broken and the kernels placed by time."""
    doc = copy.deepcopy(intact_doc)
    launches = sorted(
        (e["ts"], e["args"]["correlation"])
        for e in doc["traceEvents"]
        if e.get("cat") == "cuda_runtime" and "Launch" in e["name"] and isinstance(e.get("args"), dict)
    )
    after = {c: launches[i + 1][1] for i, (_, c) in enumerate(launches[:-1])}
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel" and e["args"].get("correlation") in after:
            e["args"]["correlation"] = after[e["args"]["correlation"]]
    path = tmp_path / "rank0.json"
    path.write_text(json.dumps(doc))
    m = gate.load_summary(str(path), options=NO_CACHE, executor="serial")
    (w,) = [w for w in m.warnings if "before the launch their correlation id names" in w]
    assert "correlation ids are unusable" in w
    got = _steps(m)
    assert got == _steps(intact)  # placed by time, the figures are the intact ones


def test_format_characters_in_names_reach_no_terminal_raw(intact_doc, intact, tmp_path):
    """U+200F and U+061C (right-to-left and Arabic letter marks) reached the terminal raw; U+202E did not."""
    doc = copy.deepcopy(intact_doc)
    marks = ["\u200f", "\u061c", "\u202e", "\u200b"]
    names = sorted({e["name"] for e in _compute_kernels(doc, every=1, most=10**6)})
    for e in doc["traceEvents"]:
        if e.get("name") in names[:4]:
            e["name"] = e["name"][:5] + marks[names.index(e["name"])] + e["name"][5:]
    run = tmp_path / "run"
    run.mkdir()
    (run / "rank0.json").write_text(json.dumps(doc))
    (tmp_path / "c").mkdir()
    res = run_inproc({"analyze": ["analyze", str(run), "--no-cache", "--full-names", "--wide"]}, tmp_path / "c")["analyze"]
    assert res.rc == 0
    assert not any(mark in res.stdout + res.stderr for mark in marks)
    m = gate.load_summary(str(run), options=NO_CACHE, executor="serial")
    assert _steps(m) == _steps(intact)


# -- options, the cache, read errors ----------------------------------------------------------------------------------
def test_nan_thresholds_cannot_turn_a_regression_into_ok(intact_doc, tmp_path):
    """The issue's case: --min-delta-ratio nan / --min-delta-us nan made a real regression 'ok' (exit 0)."""
    base, cur = tmp_path / "base", tmp_path / "cur"
    base.mkdir()
    cur.mkdir()
    (base / "rank0.json").write_text(json.dumps(intact_doc))
    doc = copy.deepcopy(intact_doc)
    for e in doc["traceEvents"]:  # the communication runs 3x as long: less of it hidden, more exposed
        if e.get("cat") == "kernel" and "nccl" in e["name"].lower():
            e["dur"] *= 3
    (cur / "rank0.json").write_text(json.dumps(doc))
    (tmp_path / "c").mkdir()
    args = ["check", str(cur), "--baseline", str(base), "--no-cache"]
    results = run_inproc(
        {
            "finite": args,
            "ratio-nan": [*args, "--min-delta-ratio", "nan"],
            "us-nan": [*args, "--min-delta-us", "nan"],
            "ratio-inf": [*args, "--min-delta-ratio", "inf"],
        },
        tmp_path / "c",
    )
    assert results["finite"].rc == 1  # the control: the regression is caught
    for name in ("ratio-nan", "us-nan", "ratio-inf"):
        assert results[name].rc == 2 and "is not a finite number" in results[name].stderr


def test_a_real_trace_rewritten_with_its_mtime_put_back_is_read_afresh(intact_doc, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    src = run / "rank0.json"
    text = json.dumps(intact_doc)
    src.write_text(text)
    cache = tmp_path / "c"
    opts = LoadOptions(cache=True, cache_dir=str(cache))
    before = gate.load_summary(str(src), options=opts, executor="serial")
    st = os.stat(src)
    # the same bytes but one kernel 10x as long (the same length of text: '"dur": 10.0' -> '"dur": 99.0')
    k = _compute_kernels(intact_doc)[0]
    old = json.dumps(k)
    assert k["dur"] == 10.0 and text.count(old) == 1
    new = old.replace('"dur": 10.0', '"dur": 99.0')
    src.write_text(text.replace(old, new))
    os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (os.stat(src).st_size, os.stat(src).st_mtime_ns) == (st.st_size, st.st_mtime_ns)
    after = gate.load_summary(str(src), options=opts, executor="serial")
    fresh = gate.load_summary(str(src), options=NO_CACHE, executor="serial")
    assert _steps(after) == _steps(fresh) != _steps(before)


def test_a_read_error_is_exit_3_through_every_loader_path(tmp_path):
    """EIO on the first read (/proc/self/mem at offset 0): the default executor plans a split of one plain trace and
    read it unguarded, so the OSError was taken for a failure to write the standard output (exit 2)."""
    try:
        with open("/proc/self/mem", "rb") as fh:
            fh.read(1)
        pytest.skip("/proc/self/mem is readable here: no file to give an I/O error")
    except OSError as exc:
        if exc.errno != 5:
            pytest.skip(f"/proc/self/mem gives {exc} here, not EIO")
    run = tmp_path / "run"
    run.mkdir()
    os.symlink("/proc/self/mem", run / "rank1.json")
    (tmp_path / "c").mkdir()
    cmds = {
        "file": ["info", str(run / "rank1.json"), "--no-cache"],
        "dir": ["analyze", str(run), "--no-cache"],
        "annotate": ["annotate", str(run / "rank1.json"), "-o", str(tmp_path / "a.json"), "--no-cache"],
        "check": ["check", str(run), "--budget", "overlap_ratio>=0"],
    }
    for name, res in run_inproc(cmds, tmp_path / "c").items():
        assert res.rc == 3, (name, res.stderr)
        assert "read error after 0 bytes (Input/output error)" in res.stderr and "standard output" not in res.stderr


def test_the_corpus_names_every_class_in_docs_robustness():
    """docs/robustness.md lists each class with its test: the names below must appear there."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "robustness.md").read_text()
    for test in (
        "test_an_event_lost_marks_its_step_and_passes_no_gate_the_intact_trace_fails",
        "test_events_that_could_be_anywhere_mark_every_step",
        "test_one_bad_byte_loses_its_event_only",
        "test_damage_that_loses_nothing_keeps_the_figures_and_says_so",
        "test_a_failed_crc_is_refused_even_after_every_byte_inflated",
        "test_correlation_ids_that_name_the_next_launch_are_unusable",
        "test_format_characters_in_names_reach_no_terminal_raw",
        "test_nan_thresholds_cannot_turn_a_regression_into_ok",
        "test_a_real_trace_rewritten_with_its_mtime_put_back_is_read_afresh",
        "test_a_read_error_is_exit_3_through_every_loader_path",
    ):
        assert test in text, test
