"""`tracekit annotate DIR -o merged.json.gz`: one trace holding every rank on the corrected common clock.

Read back two ways, by tracekit's loader and by a plain gzip + json reader, the merged trace must hold every event
of every rank with its times moved by exactly that rank's shift (its base time minus its clock offset, the offset
taken from `tracekit analyze --format json`, another command), pids distinct per rank and labelled "rank N", flow
and correlation ids unique per rank with every flow still paired, every event with ph/ts/pid/tid, and the
critical path as a track whose segments line up with the events they name. A planted clock shift of one rank's
trace must leave the merged trace's times unchanged (the estimate moves with the shift). The writer streams: no
json.load, each event decoded on its own."""

from __future__ import annotations

import collections
import gzip
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from tests.helpers.data import real_trace
from tracekit.cli import cli
from tracekit.loader.loading import LoadOptions, load
from tracekit.reports import perfetto_merge
from tracekit.reports.perfetto_merge import MERGED_MEMBER

OPTS = ["--no-cache", "--executor", "serial"]
PLANTED_US = 5000.0


@pytest.fixture(scope="module")
def gloo_run(tmp_path_factory) -> Path:
    """tracekit's tp-sp workload on 2 gloo processes (1 layer, 2 steps): CPU traces with fwdbwd flows."""
    from tracekit.collectors.workloads.config import WorkloadConfig
    from tracekit.collectors.workloads.runner import run_batch

    out = tmp_path_factory.mktemp("merge") / "tp-sp"
    cfg = WorkloadConfig(workload="tp-sp", layers=1, seq=16, batch=1, hidden=32, heads=2, steps=2, wait=1, warmup=1)
    run_batch([(cfg, out)])
    return out


@pytest.fixture(scope="module")
def shifted_run(gloo_run, tmp_path_factory) -> Path:
    """The same run with rank 1's clock PLANTED_US ahead: an offset larger than its bound, so one is applied
    (unshifted, the two ranks share one host's clock and the offset stays 0: issue 27 item 9)."""
    return _shift(gloo_run, tmp_path_factory.mktemp("merge") / "shifted", PLANTED_US)


def _shift(run: Path, dest: Path, us: float) -> Path:
    shutil.copytree(run, dest, ignore=shutil.ignore_patterns(".tracekit_cache"))
    (p1,) = [p for p in dest.glob("*.json.gz") if _doc(p)["distributedInfo"]["rank"] == 1]
    doc = _doc(p1)
    for e in doc["traceEvents"]:
        if e.get("ph") != "M" and isinstance(e.get("ts"), (int, float)):
            e["ts"] += us
    with gzip.open(p1, "wt") as f:
        json.dump(doc, f)
    return dest


def _doc(path: Path):
    with gzip.open(path, "rb") as f:
        return json.loads(f.read())


def _inputs(run: Path) -> dict[int, dict]:
    """rank -> its trace as written by the profiler (plain reader)."""
    docs = [_doc(p) for p in sorted(run.glob("*.json.gz"))]
    return {d["distributedInfo"]["rank"]: d for d in docs}


def _merge(tmp_path: Path, src, name="merged.json.gz") -> Path:
    out = tmp_path / name
    res = CliRunner().invoke(cli, ["annotate", *map(str, src), *OPTS, "-o", str(out)])
    assert res.exit_code == 0, res.output
    return out


def _offsets(src) -> dict[int, int]:
    res = CliRunner().invoke(cli, ["analyze", *map(str, src), *OPTS, "--format", "json"])
    assert res.exit_code == 0, res.output
    return {o["rank"]: round(o["offset_us"] * 1e3) for o in json.loads(res.output)["clock_offsets"]}


LINKS = ("correlation", "External id")


def _unlink(v, r, stride):
    if isinstance(v, int) and not isinstance(v, bool):
        assert (v - r) % stride == 0
        return (v - r) // stride
    return v[len(f"r{r}:") :] if isinstance(v, str) else v


def _canonical(e: dict, shift_us: float = 0.0) -> str:
    e = json.loads(json.dumps(e))
    if e.get("ph") != "M" and isinstance(e.get("ts"), (int, float)):
        e["ts"] = round(e["ts"] + shift_us, 3)
    if e.get("ph") == "M" and e.get("name") in ("process_name", "process_sort_index"):
        e.pop("args", None)
    e.pop("pid", None)
    return json.dumps(e, sort_keys=True)


def _by_rank(merged: dict) -> tuple[dict[int, list], dict[int, dict]]:
    """The merged events of each rank, pids and ids mapped back; and each rank's pid map."""
    info = {x["rank"]: x for x in merged[MERGED_MEMBER]["ranks"]}
    owner = {pid: r for r, x in info.items() for pid in x["pids"].values()}
    out: dict[int, list] = collections.defaultdict(list)
    for e in merged["traceEvents"]:
        r = owner.get(e["pid"])
        if r is None:
            continue
        e = dict(e)
        stride = info[r]["id_stride"]
        for k in ("id", "bind_id"):
            if k in e:
                e[k] = _unlink(e[k], r, stride)
        if isinstance(e.get("args"), dict):
            e["args"] = {k: _unlink(v, r, stride) if k in LINKS else v for k, v in e["args"].items()}
        out[r].append(e)
    return out, info


@pytest.mark.slow
def test_every_rank_in_one_trace_on_the_corrected_clock(tmp_path, shifted_run, monkeypatch):
    gloo_run = shifted_run
    decoded = []
    real = perfetto_merge._EVENTS_CHUNK

    class Recording:
        def decode(self, data):
            chunk = real.decode(data)
            decoded.append(len(chunk))
            return chunk

    real_loads = json.loads

    def refuse(s, *a, **k):  # small documents (run.json) may be read so; a trace may not
        if hasattr(s, "read") or len(s) > 64 * 1024:
            raise AssertionError("the merged trace is written without a whole-file json load")
        return real_loads(s, *a, **k)

    with monkeypatch.context() as m:
        m.setattr(perfetto_merge, "_EVENTS_CHUNK", Recording())
        m.setattr(perfetto_merge, "CHUNK_EVENTS", 100)
        m.setattr(json, "load", refuse)
        m.setattr(json, "loads", refuse)
        out = _merge(tmp_path, [gloo_run])
    inputs = _inputs(gloo_run)
    total = sum(len(d["traceEvents"]) for d in inputs.values())
    assert sum(decoded) == total and max(decoded) == 100  # the events a chunk at a time, never the whole array

    merged = _doc(out)  # the plain reader
    offsets = _offsets([gloo_run])
    assert set(offsets) == set(inputs) == {0, 1} and offsets[1] != 0
    events, info = _check_events(merged, inputs, offsets)
    # pids: distinct per rank, each labelled with process_name "rank N"
    pid_sets = {r: set(x["pids"].values()) for r, x in info.items()}
    assert not pid_sets[0] & pid_sets[1]
    names = {e["pid"]: e["args"]["name"] for e in merged["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name"}
    for r, pids in pid_sets.items():
        assert all(names[p] == f"rank {r}" or names[p].startswith(f"rank {r} · ") for p in pids)
    # Perfetto-style validity: ph/ts/pid/tid on every event, flows paired, ids unique per rank
    assert all(all(k in e for k in ("ph", "ts", "pid", "tid")) for e in merged["traceEvents"])
    flows = collections.Counter((e["cat"], e["id"], e["ph"]) for e in merged["traceEvents"] if e["ph"] in "sf")
    ids = {(c, i) for c, i, _ in flows}
    assert ids and all(flows[(c, i, "s")] == 1 and flows[(c, i, "f")] == 1 for c, i in ids)
    per_rank = [{e["id"] for e in events[r] if e["ph"] in "sf"} for r in (0, 1)]
    assert (
        len(ids)
        == sum(len(s) for s in per_rank)
        == sum(len({e["id"] for e in d["traceEvents"] if e.get("ph") in ("s", "f")}) for d in inputs.values())
    )
    corr = [
        {
            (e["pid"], e["args"]["External id"])
            for e in merged["traceEvents"]
            if e["pid"] in pid_sets[r] and "External id" in e.get("args", {})
        }
        for r in (0, 1)
    ]
    assert corr[0] and corr[1] and not {x for _, x in corr[0]} & {x for _, x in corr[1]}
    _check_loader(out, gloo_run, offsets, pid_sets)
    _check_critical_track(merged, gloo_run, pid_sets)


def _check_events(merged: dict, inputs: dict[int, dict], offsets: dict[int, int]):
    """Every original event of every rank in ``merged``, its times moved by exactly the rank's shift; nothing else
    of the rank's but the labels of pids its trace left unnamed."""
    base = inputs[min(inputs)].get("baseTimeNanoseconds", 0)
    assert merged["baseTimeNanoseconds"] == base
    events, info = _by_rank(merged)
    for r, doc in inputs.items():
        shift_ns = doc.get("baseTimeNanoseconds", 0) - offsets[r] - base
        assert info[r]["shift_us"] == shift_ns / 1e3
        want = collections.Counter(_canonical(e, shift_ns / 1e3) for e in doc["traceEvents"])
        got = collections.Counter(_canonical(e) for e in events[r])
        assert want - got == collections.Counter()
        extra = [json.loads(k) for k in (got - want).elements()]
        assert all(e["ph"] == "M" and e["name"] in ("process_name", "process_sort_index") for e in extra)
    return events, info


def _rows(table, ts_shift=0, pids=None):
    m = np.ones(len(table), bool) if pids is None else np.isin(table["pid"], list(pids))
    names = [table.string(int(i)) for i in table["name_id"][m]]
    return sorted(zip(table["kind"][m].tolist(), names, (table["ts_ns"][m] + ts_shift).tolist(), table["dur_ns"][m].tolist()))


def _check_loader(out: Path, run: Path, offsets: dict[int, int], pid_sets: dict[int, set]) -> None:
    """tracekit's loader on the merged file: each rank's events at its own loaded times minus its offset."""
    opts = LoadOptions(cache=False)
    merged = load([str(out)], options=opts, executor="serial")
    (table,) = [t for _, t in merged]
    for p in sorted(run.glob("*.json.gz")):
        ((r, orig),) = list(load([str(p)], options=opts, executor="serial"))
        got, want = _rows(table, pids=pid_sets[r]), _rows(orig, -offsets[r])
        assert len(got) == len(want) > 100
        assert [g[:2] for g in got] == [w[:2] for w in want]
        assert max(abs(g[2] - w[2]) for g, w in zip(got, want)) <= 1  # ns: the float µs of the JSON
        assert [g[3] for g in got] == [w[3] for w in want]


def _check_critical_track(merged: dict, run: Path, pid_sets: dict[int, set]) -> None:
    """The path track: its events add up to the summary's positive segments, and a segment named after an op of
    rank r lies inside an event of that name of rank r on the merged clock."""
    res = CliRunner().invoke(cli, ["analyze", str(run), *OPTS, "--critical-path", "--format", "json"])
    steps = json.loads(res.output)["critical_path"]["steps"]
    track = [e for e in merged["traceEvents"] if e.get("cat") == "tracekit" and e["ph"] == "X"]
    segs = [s for st in steps for s in st["segments"] if s["dur_us"] > 0]
    assert len(track) == len(segs) > 10
    for kind in {s["kind"] for s in segs}:
        assert sum(e["dur"] for e in track if e["name"] == kind) == pytest.approx(
            sum(s["dur_us"] for s in segs if s["kind"] == kind), abs=1e-3 * len(segs)
        )
    spans = collections.defaultdict(list)
    for e in merged["traceEvents"]:
        if e["ph"] == "X" and e.get("cat") != "tracekit":
            r = next((r for r, p in pid_sets.items() if e["pid"] in p), None)
            spans[(r, e["name"])].append((e["ts"], e["ts"] + e["dur"]))
    checked = 0
    for e in track:
        a = e["args"]
        cands = spans.get((a["rank"], a["op"]))
        if not cands or a["op"].startswith("("):
            continue
        checked += 1
        assert any(s - 1e-3 <= e["ts"] and e["ts"] + e["dur"] <= t + 1e-3 for s, t in cands), e
    assert checked > len(track) // 3


@pytest.mark.slow
def test_a_planted_clock_shift_leaves_the_merged_times_unchanged(tmp_path, gloo_run, shifted_run):
    twice = _shift(gloo_run, tmp_path / "twice", 2 * PLANTED_US)
    a, b, c = (_doc(_merge(tmp_path, [r], f"{k}.json.gz")) for k, r in enumerate((gloo_run, shifted_run, twice)))
    oa, ob, oc = ({x["rank"]: x["offset_us"] for x in d[MERGED_MEMBER]["ranks"]} for d in (a, b, c))
    assert oa[1] == 0.0  # one host's clock: no offset applied
    assert oc[1] - ob[1] == pytest.approx(PLANTED_US, abs=1e-3)
    moved = abs(ob[1] - PLANTED_US)  # how far the applied correction lies from the planted shift: its error
    ts = [[round(e["ts"], 3) for e in d["traceEvents"] if e["ph"] != "M"] for d in (a, b, c)]
    assert len(ts[1]) == len(ts[2])
    assert np.allclose(ts[1], ts[2], rtol=0, atol=2e-3)  # two applied corrections: the same merged times
    # none against one: the traces' own events (tracekit's tracks are the analysis', which the offset's error may
    # change, a critical-path segment more or less) are rank 1's moved by the error at most, which may reorder them
    # among rank 0's;
    ts = [[round(e["ts"], 3) for e in d["traceEvents"] if e["ph"] != "M" and e.get("cat") != "tracekit"] for d in (a, b)]
    assert len(ts[0]) == len(ts[1])
    # sorted, the two lists still differ by no more than the largest move (to the ms-scale µs floats' 1 ns ulp)
    assert np.allclose(np.sort(ts[0]), np.sort(ts[1]), rtol=0, atol=moved + 1e-2)


def test_gpu_ranks_merge_with_pids_per_rank(tmp_path):
    """Two ranks of a real 128-rank GPU run (pp send/recv): device and host pids of both ranks stay apart."""
    src = [real_trace(f"pp-sendrecv-128rank-rank{r}") for r in (0, 1)]
    merged = _doc(_merge(tmp_path, src))
    inputs = {r: _doc(p) for r, p in enumerate(src)}
    assert [d["distributedInfo"]["rank"] for d in inputs.values()] == [0, 1]
    events, info = _check_events(merged, inputs, _offsets(src))
    assert not set(info[0]["pids"].values()) & set(info[1]["pids"].values())
    kernels = [{e["args"]["correlation"] for e in events[r] if "correlation" in e.get("args", {})} for r in (0, 1)]
    assert kernels[0] and kernels[1]


@pytest.mark.slow
def test_trace_processor_opens_the_merged_trace(tmp_path, gloo_run):
    """Perfetto's own trace processor, where its binary is at hand (the perfetto package downloads it on first use,
    which this offline machine cannot): every event becomes a slice or a flow."""
    tp_bin = shutil.which("trace_processor_shell") or shutil.which("trace_processor")
    pytest.importorskip("perfetto.trace_processor")
    if tp_bin is None:
        pytest.skip("no trace_processor_shell binary on PATH")
    from perfetto.trace_processor import TraceProcessor, TraceProcessorConfig

    out = _merge(tmp_path, [gloo_run], "tp.json.gz")
    tp = TraceProcessor(trace=str(out), config=TraceProcessorConfig(bin_path=tp_bin))
    n = tp.query("select count(*) as n from slice").as_pandas_dataframe()["n"][0]
    merged = _doc(out)
    assert n == sum(1 for e in merged["traceEvents"] if e["ph"] == "X")
    tp.close()


@pytest.mark.slow
def test_tracks_file_and_a_merged_trace_do_not_mix(tmp_path, gloo_run):
    (tmp_path / "t.json").write_text('{"x": [[1, 2]]}')
    res = CliRunner().invoke(
        cli, ["annotate", str(gloo_run), "--tracks", str(tmp_path / "t.json"), "-o", str(tmp_path / "m.json")]
    )
    assert res.exit_code == 2 and "--tracks is for one trace" in res.output
