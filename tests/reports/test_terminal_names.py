"""At any width, two different kernels never print as one name: the terminal's cut names keep them apart with a
``#k`` suffix where cutting would make them read the same (issue 27 item 6)."""

import pytest
from rich.cells import cell_len

from tests.unit.analyzers.test_names import _fp8, trace_kernel_names
from tracekit.analyzers.names import distinct_short_names
from tracekit.reports.terminal import distinct_cuts


@pytest.fixture(scope="module")
def labels():
    names = [_fp8(3), _fp8(4), _fp8(5), *sorted(trace_kernel_names())]
    return distinct_short_names(names)


@pytest.mark.parametrize("width", [8, 12, 20, 31, 40, 60, 100, 140])
def test_distinct_at_every_width(labels, width):
    cut = distinct_cuts(labels, width)
    assert len(set(cut)) == len(set(labels))
    assert all(cell_len(c) <= width for c in cut)
    short = [lab for lab in labels if cell_len(lab) <= width]
    assert all(c == lab for c, lab in zip(cut, labels) if lab in short and labels.count(lab) == 1 and cut.count(c) == 1)
