"""A trace cut inside a number: msgspec says "truncated" for ``12`` but "invalid number" for ``12.``, ``12.5e``,
``12.5e-`` and ``-`` at the end of the input. Both are a file that ends early and are salvaged as one (the events
before the cut kept, the file marked cut short), never refused as a corrupt byte with no event boundary after it
(a random cut of a gloo trace landed on ``"ts": 5808517039273.``)."""

from __future__ import annotations

import gzip
import re

import msgspec
import pytest

from tests.helpers.data import gpu_trace
from tracekit.loader.corrupt import is_truncation
from tracekit.loader.loading import LoadOptions, load


@pytest.mark.parametrize("text", [b'{"a": 12.', b'{"a": 12.5e', b'{"a": 12.5e-', b'{"a": -', b'{"a": 12', b'{"a": tr'])
def test_a_number_cut_short_is_a_truncation(text):
    with pytest.raises(msgspec.DecodeError) as exc:
        msgspec.json.decode(text)
    assert is_truncation(exc.value, text)


@pytest.mark.parametrize("text", [b'{"a": 12.x}', b'{"a": 1e+}', b'{"a": --1}'])
def test_a_bad_number_inside_the_file_is_not(text):
    with pytest.raises(msgspec.DecodeError) as exc:
        msgspec.json.decode(text)
    assert not is_truncation(exc.value, text)


def _events(path) -> list[tuple]:
    ((_, table),) = list(load([str(path)], options=LoadOptions(cache=False), executor="serial"))
    return sorted(zip(table["ts_ns"].tolist(), table["dur_ns"].tolist(), table["name_id"].tolist()))


def test_a_cut_after_the_decimal_point_loads_as_the_cut_before_it(tmp_path):
    with gzip.open(gpu_trace("rocm-mi250-minitoy.json.gz"), "rb") as f:
        raw = f.read()
    ends = [m.end() for m in re.finditer(rb'"ts": ?-?\d+\.', raw)]
    assert len(ends) > 100
    for pos in ends[len(ends) // 4 :: len(ends) // 4][:3]:
        after, before = tmp_path / "after.json", tmp_path / "before.json"
        after.write_bytes(raw[:pos])  # "ts": 4203669603187.   -> invalid number
        before.write_bytes(raw[: pos - 1])  # "ts": 4203669603187   -> truncated
        got = _events(after)
        assert got and got == _events(before)
