"""tracekit's critical path against HTA 0.5.0's critical_path_analysis, run in HTA's own environment (pandas < 3;
tests/helpers/hta_env.py makes it once and reuses it), on the single-rank GPU traces in tests/data with a window
HTA can take (each ProfilerStep; AlexNet's measured forward annotation). Where the two model the same thing — the
GPU-bound steps, AlexNet's forward — the lengths agree within 5 %. Every larger difference is one of the causes
docs/whatif.md ("Against HTA") shows from the raw events, and the test checks that cause on HTA's own output: its
path never leaves one host thread (so the autograd engine's thread and the device work a step waits for at its end
are no part of it), or it errors."""

from __future__ import annotations

import os
import warnings

import pytest

from tests.helpers import hta_env
from tracekit.analyzers.comm.communication import CommAnalyzer, CommOptions
from tracekit.analyzers.graph.build import build_graph
from tracekit.analyzers.graph.critical_path import critical_paths
from tracekit.loader.loading import LoadOptions, load

DATA = os.path.join(os.path.dirname(__file__), "..", "data")
ALEXNET = "[param|pytorch.model.alex_net|0|0|0|measure|forward]"
CASES = [
    ("kineto-gpu/single-rank-nocomm-nsresolution.json.gz", None),
    ("kineto-gpu-more/critical-path-alexnet.json.gz", ALEXNET),
    ("kineto-gpu-more/critical-path-alexnet.json.gz", (ALEXNET, 1)),  # the instance nested in the first: --instance 1
    ("kineto-gpu/allreduce-broadcast-2rank-rank0.json.gz", None),
    ("kineto-gpu/ddp-allreduce-2rank-rank1-oldformat.json.gz", None),
    ("kineto-gpu/pp-sendrecv-128rank-rank0.json.gz", None),
    ("kineto-gpu/rocm-mi250-minitoy.json.gz", None),
    ("kineto-gpu-more/cuda-event-sync.json.gz", None),
]
# where tracekit's path runs through more than HTA's: HTA's path stays on one host thread (docs/whatif.md)
ONE_THREAD = {"allreduce-broadcast-2rank-rank0.json.gz", "ddp-allreduce-2rank-rank1-oldformat.json.gz"}
ONE_THREAD |= {"pp-sendrecv-128rank-rank0.json.gz", "rocm-mi250-minitoy.json.gz", "cuda-event-sync.json.gz"}


@pytest.fixture(scope="module")
def hta_ready():
    py, why = hta_env.hta_python()
    if py is None:
        pytest.skip(why)
    return py


@pytest.mark.slow
@pytest.mark.parametrize(
    ("rel", "window"),
    CASES,
    ids=lambda c: os.path.basename(c) if isinstance(c, str) else str(c[1]) if isinstance(c, tuple) else "",
)
def test_length_within_5_percent_or_an_explained_difference(hta_ready, rel, window):
    path = os.path.join(DATA, rel)
    instance = None
    if isinstance(window, tuple):
        window, instance = window
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ts = load([path], options=LoadOptions(cache=False), executor="serial")
        comm = CommAnalyzer().run(ts, CommOptions(window=window, instance=instance))
        ours = critical_paths(ts, graph=build_graph(ts, window, comm)).steps
    instances = [instance] if instance is not None else list(range(len(ours)))
    hta = hta_env.run_hta(path, window or "ProfilerStep", instances)
    compared = 0
    for p, h in zip(ours, hta):
        if "error" in h:  # HTA 0.5.0 fails on the last step of most traces (a NaN in its query): nothing to hold
            continue
        compared += 1
        ratio = p.length_ns / 1e3 / h["length_us"]
        if abs(ratio - 1) <= 0.05:
            continue
        assert os.path.basename(rel) in ONE_THREAD, (p.step, ratio, h)
        assert len(h["cpu_by_tid"]) <= 1, h["cpu_by_tid"]  # the cause: HTA's path never leaves one thread
    assert compared
