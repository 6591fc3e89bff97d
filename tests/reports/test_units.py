"""tracekit.units against strings worked out by hand."""

from __future__ import annotations

import pytest

from tracekit import units
from tracekit.gate.stats import Stat


@pytest.mark.parametrize(
    ("us", "text"),
    [
        (None, "—"),
        (float("nan"), "—"),
        (0.0, "0.0 µs"),
        (12.34, "12.3 µs"),
        (999.9, "999.9 µs"),
        (1000.0, "1.000 ms"),
        (1234.0, "1.234 ms"),
        (-1500.0, "-1.500 ms"),
        (2.5e6, "2.500 s"),
    ],
)
def test_duration_scales_to_us_ms_s(us, text):
    assert units.duration(us) == text


@pytest.mark.parametrize(
    ("nbytes", "text"),
    [
        (None, "—"),
        (0, "0 B"),
        (512, "512 B"),
        (1023, "1023 B"),
        (1024, "1.00 KiB"),
        (1536, "1.50 KiB"),
        (3 * 2**20, "3.00 MiB"),
        (2**30, "1.00 GiB"),
        (5 * 2**29, "2.50 GiB"),
    ],
)
def test_size_in_binary_units(nbytes, text):
    assert units.size(nbytes) == text


def test_percent_gbps_count():
    assert units.percent(0.125) == "12.5 %"
    assert units.percent(1.0) == "100.0 %"
    assert units.percent(None) == "—"
    assert units.gbps(12.5) == "12.50 GB/s"
    assert units.gbps(None) == "—"
    assert units.count(7.9) == "7"
    assert units.count(None) == "—"


@pytest.mark.parametrize(
    ("field", "unit"),
    [
        ("exposed_comm_us", "us"),
        ("overlap_ratio", "ratio"),
        ("exposed_comm_share", "ratio"),
        ("measured_bytes", "bytes"),
        ("bytes", "bytes"),
        ("busbw_gbps", "gbps"),
        ("count", "count"),
        ("seq", "count"),
    ],
)
def test_unit_of_a_summary_field(field, unit):
    assert units.unit_of(field) == unit


def test_display_and_metric_formatters_pick_the_unit_from_the_name():
    assert units.display("wait_us", 1500.0) == "1.500 ms"
    assert units.display("overlap_ratio", 0.25) == "25.0 %"
    assert units.for_metric("tp/all_gather:exposed_comm_us")(800.0) == "800.0 µs"
    assert units.for_metric("overlap_ratio")(0.3) == "30.0 %"
    assert units.for_metric("exposed_comm_share")(0.05) == "5.0 %"
    assert units.for_metric("tp:bytes")(2048) == "2.00 KiB"
    assert units.for_metric("busbw_gbps")(3.0) == "3.00 GB/s"
    assert units.for_metric("count")(12.0) == "12"


def test_fixed_units():
    assert units.micros(125.0) == "125.0 µs"
    assert units.micros(9420.54) == "9420.5 µs"
    assert units.mib(1.5 * 2**20) == "1.5 MiB"
    assert units.mib(2**20 / 3, 3) == "0.333 MiB"
    assert units.grouped(1234567) == "1,234,567"
    assert units.compact_percent(0.1, 0) == "10%"
    assert units.compact_percent(0.125) == "12.5%"
    assert units.signed_percent(0.125) == "+12.5%"
    assert units.signed_percent(-0.05) == "-5.0%"


def test_metric_style_of_the_gate():
    assert units.metric_value("exposed_comm_us", 800) == "800.0 µs"
    assert units.metric_value("busbw_gbps", 3.2) == "3.20 GB/s"
    assert units.metric_value("bytes", 1048576) == "1048576 B"
    assert units.metric_value("count", 3.0) == "3"
    assert units.metric_value("overlap_ratio", 0.15) == "0.150"
    assert units.metric_value("overlap_ratio", None) == "n/a"
    assert units.metric_stat("exposed_comm_us", Stat(125.0, 120.0, 130.0, 122.5, 127.5, 6)) == "125.0 µs (steps 120.0..130.0)"
    assert units.metric_stat("overlap_ratio", Stat.single(0.5)) == "0.500 (run total)"
    assert units.metric_stat("overlap_ratio", None) == "n/a"
    assert units.change(None) == "new"
    assert units.change(0.2) == "+20.0%"
    assert units.change(-0.125) == "-12.5%"


def test_tiny_shares_and_cells_never_read_zero():
    """A 22 µs collective in a 400 ms step is not "0.0 %"; a column cell that would round to 0 says "<0.01"."""
    assert units.percent(22 / 400_000) == "< 0.1 %" and units.percent(0.0) == "0.0 %" and units.percent(-1e-5) == "> -0.1 %"
    assert units.column("busbw_gbps", [0.02134, 0.00412, None]) == ("GB/s", ["0.0213", "0.0041", "—"])
    assert units.column("bytes", [10 * 2**20, 4, 0]) == ("MiB", ["10.00", "<0.01", "0.00"])
    assert units.duration_scale(999.0) == ("µs", 1.0) and units.bytes_scale(2**30) == ("GiB", 2.0**30)


def test_a_header_names_its_unit_once():
    """A field without a label of its own reads without its unit suffix: the column's scale names the unit
    ("length s", never "length us s"), in the terminal and in the HTML tables alike."""
    from tracekit.reports.critical_tables import critical_sections
    from tracekit.reports.html_tables import header
    from tracekit.reports.summary_tables import label

    steps = [{"step": 1, "length_us": 13_336_315.8, "bound": "host", "by_kind": {"host": 13_336_315.8}, "unexplained_us": 0}]
    (section,) = critical_sections({"critical_path": {"steps": steps, "verdict": "host-bound"}})
    assert section.headers[:2] == ("step", "length s") and "host s" in section.headers
    assert not any(h.endswith((" us", " bytes", " gbps")) or " us " in h for h in section.headers)
    assert label("length_us") == "length" and label("peak_bytes") == "peak" and label("algbw_gbps") == "algbw"
    assert label("wall_us") == "wall"  # LABELS first
    assert header("length_us", "ms") == "length ms"
