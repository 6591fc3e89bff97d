"""The optimised (streaming, piecewise) loader yields exactly the EventTable and RankInfo of the
straightforward reference loader (tests/helpers/reference_loader.py) on every fixture, for any piece size, gzip or not."""

import gzip
import shutil

import numpy as np
import pytest

from tests.helpers.data import DATA, GPU
from tests.helpers.reference_loader import reference_load
from tracekit.loader import stream as decode
from tracekit.loader.loading import LoadOptions, _load_streaming, load_file
from tracekit.model.events import COLUMNS

# every trace in tests/data (kineto-gpu and kineto-gpu-more: CUDA, ROCm, MTIA, CPU-only, old formats, no rank)
FIXTURES = sorted(str(p.relative_to(DATA)) for p in DATA.glob("*/*.json.gz"))


def assert_same(got, want):
    (t1, i1), (t2, i2) = got, want
    assert t1.strings == t2.strings
    for key in COLUMNS:
        assert t1[key].dtype == t2[key].dtype, key
        np.testing.assert_array_equal(t1[key], t2[key], err_msg=key)
    assert i1.to_dict() == i2.to_dict()


@pytest.mark.parametrize("name", FIXTURES)
def test_same_table_as_the_reference(name):
    path = str(DATA / name)
    assert_same(load_file(path, LoadOptions(cache=False)), reference_load(path))


@pytest.mark.parametrize("piece", [1 << 16, 1 << 20])
@pytest.mark.parametrize(
    "name",
    [
        "allreduce-broadcast-2rank-rank0.json.gz",
        "ddp-allreduce-2rank-rank1-oldformat.json.gz",
        "pp-sendrecv-128rank-rank0.json.gz",
        "rocm-mi250-minitoy.json.gz",
    ],
)
def test_many_small_pieces_plain_json(name, piece, tmp_path, monkeypatch):
    """Cut into many pieces (the streaming path really streams: more than one piece), plain JSON."""
    plain = tmp_path / name.replace(".gz", "")
    with gzip.open(GPU / name, "rb") as src, open(plain, "wb") as dst:
        shutil.copyfileobj(src, dst)
    monkeypatch.setattr(decode, "PIECE_BYTES", piece)
    pieces = list(decode.EventStream(str(plain)))
    assert len(pieces) >= min(3, plain.stat().st_size // piece)
    got = _load_streaming(str(plain), LoadOptions(cache=False))  # no fallback to the whole-file path
    want = reference_load(str(plain))
    assert_same(got, want)


def test_ns_resolution_trace_takes_the_exact_path(monkeypatch):
    path = str(GPU / "single-rank-nocomm-nsresolution.json.gz")
    with pytest.raises(decode.NotStreamable):
        _load_streaming(path, LoadOptions(cache=False))
