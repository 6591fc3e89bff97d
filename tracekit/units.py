"""Every unit tracekit shows, formatted in one place: durations (µs/ms/s), bytes, bandwidth, ratios as
percentages, counts, and the fixed-unit forms of the gate's one-line messages.

Two styles, each for its readers:

- *display* (terminal tables, HTML, charts): a duration scales to µs, ms or s (``duration(1234.5)`` ->
  ``"1.234 ms"``), bytes to binary units (``size(1536)`` -> ``"1.50 KiB"``), a ratio is a percentage
  (``percent(0.125)`` -> ``"12.5 %"``); a missing value is ``NA`` ("—").
- *metric* (``tracekit check`` messages, JUnit, Markdown): one fixed unit per metric so medians and limits
  compare at a glance (``metric_value("exposed_comm_us", 800)`` -> ``"800.0 µs"``); a missing value is "n/a".
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Protocol

NA = "—"
Number = float | int


def _missing(v: object) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


# -- display ------------------------------------------------------------------------------------------------
def duration(us: Number | None) -> str:
    """A duration given in µs: ``"12.5 µs"``, ``"1.234 ms"``, ``"2.000 s"``."""
    if us is None or _missing(us):
        return NA
    a = abs(us)
    if a >= 1e6:
        return f"{us / 1e6:.3f} s"
    if a >= 1e3:
        return f"{us / 1e3:.3f} ms"
    return f"{us:.1f} µs"


def percent(ratio: Number | None) -> str:
    """A ratio in 0..1 as a percentage: ``0.125`` -> ``"12.5 %"``; a share too small for one decimal but not zero
    reads ``"< 0.1 %"`` (a 22 µs collective in a 400 ms step is not "0.0 %")."""
    if ratio is None:
        return NA
    if 0 < abs(ratio) < 0.0005:
        return "< 0.1 %" if ratio > 0 else "> -0.1 %"
    return f"{100.0 * ratio:.1f} %"


def size(nbytes: Number | None) -> str:
    """Bytes in binary units: ``"512 B"``, ``"1.50 KiB"``, ``"2.00 MiB"``, ``"1.00 GiB"``."""
    if nbytes is None:
        return NA
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(nbytes) >= scale:
            return f"{nbytes / scale:.2f} {unit}"
    return f"{int(nbytes)} B"


def gbps(v: Number | None) -> str:
    """Bandwidth in GB/s (10⁹ bytes per second, as nccl-tests): ``"12.34 GB/s"``."""
    return NA if v is None else f"{v:.2f} GB/s"


def count(v: Number | None) -> str:
    return NA if v is None else f"{int(v)}"


DISPLAY: dict[str, Callable[[Number | None], str]] = {
    "us": duration,
    "ratio": percent,
    "bytes": size,
    "gbps": gbps,
    "count": count,
}


def unit_of(field: str) -> str:
    """The unit of a summary field, from its name: ``*_us``, ``*ratio``/``*share``, ``*bytes``, ``*gbps``, else a count."""
    if field.endswith("_us"):
        return "us"
    if field.endswith("ratio") or field.endswith("share"):
        return "ratio"
    if field.endswith("bytes") or field == "bytes":
        return "bytes"
    if field.endswith("gbps"):
        return "gbps"
    return "count"


def display(field: str, value: Number | None) -> str:
    """``value`` of the summary field ``field`` in its display unit."""
    return DISPLAY[unit_of(field)](value)


def for_metric(metric: str) -> Callable[[Any], str]:
    """The display formatter of a gate metric (``tp/all_gather:exposed_comm_us``, ``overlap_ratio``, ...)."""
    name = metric.rsplit(":", 1)[-1]
    if name.endswith("_us"):
        return duration
    if "ratio" in name or "share" in name:
        return percent
    if name == "bytes":
        return size
    if name.endswith("gbps"):
        return gbps
    return lambda x: f"{x:.4g}"


# -- fixed units --------------------------------------------------------------------------------------------
def micros(us: Number, digits: int = 1) -> str:
    """``"125.0 µs"``: a duration kept in µs."""
    return f"{us:.{digits}f} µs"


def mib(nbytes: Number, digits: int = 1) -> str:
    """``"1.5 MiB"``: bytes in MiB at a fixed precision (sizes of written files)."""
    return f"{nbytes / 2**20:.{digits}f} MiB"


def grouped(n: int) -> str:
    """An integer with thousands separators: ``1234567`` -> ``"1,234,567"``."""
    return f"{n:,}"


def compact_percent(fraction: float, digits: int = 1) -> str:
    """A fraction as a percentage without a space (limits, tolerances): ``0.1`` -> ``"10.0%"``."""
    return f"{fraction * 100:.{digits}f}%"


def signed_percent(fraction: float, digits: int = 1) -> str:
    """A relative change: ``0.125`` -> ``"+12.5%"``."""
    return f"{fraction * 100:+.{digits}f}%"


# -- metric style (the gate) --------------------------------------------------------------------------------
def metric_value(metric: str, value: float | None) -> str:
    """A gate metric's value in its fixed unit: ``"800.0 µs"``, ``"3.21 GB/s"``, ``"1048576 B"``, ``"0.150"``."""
    if value is None:
        return "n/a"
    if metric.endswith("_us"):
        return micros(value)
    if metric == "busbw_gbps":
        return f"{value:.2f} GB/s"
    if metric in ("bytes", "count"):
        return f"{value:.0f}" + (" B" if metric == "bytes" else "")
    return f"{value:.3f}"


class _Spread(Protocol):
    @property
    def median(self) -> float: ...

    def spread_text(self, fmt: Callable[[float], str]) -> str: ...


def metric_stat(metric: str, stat: _Spread | None) -> str:
    """``"125.0 µs (steps 120.0..130.0)"``: the median and the spread of the per-step values."""
    if stat is None:
        return "n/a"
    spread = stat.spread_text(lambda v: metric_value(metric, v).split(" ")[0])
    return f"{metric_value(metric, stat.median)} ({spread})"


def change(fraction: float | None) -> str:
    """A change against the baseline: ``"+12.5%"``, or ``"new"`` when the baseline had nothing."""
    return "new" if fraction is None else signed_percent(fraction)


# -- one unit per table column (terminal and Markdown tables) -------------------------------------------------
_COLUMN_BYTES = (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))


def duration_scale(top_us: float) -> tuple[str, float]:
    """The unit a duration column or chart axis whose largest value is ``top_us`` reads in, and µs per unit."""
    return ("s", 1e6) if top_us >= 1e6 else ("ms", 1e3) if top_us >= 1e3 else ("µs", 1.0)


def bytes_scale(top: float) -> tuple[str, float]:
    """The binary unit of a bytes column or axis whose largest value is ``top``, and bytes per unit."""
    return next(((u, float(s)) for u, s in _COLUMN_BYTES if top >= s), ("B", 1.0))


def column(field: str, values: list[Number | None]) -> tuple[str, list[str]]:
    """A whole table column of the summary field ``field`` in one unit, chosen by its largest value, for the
    header (``("ms", ["682.6", "1.3", "—"])``): the cells hold bare numbers, so a column stays narrow and never
    mixes ms with s. Durations keep four significant digits of the largest value; counts stay integers."""
    kind = unit_of(field)
    nums = [None if v is None or _missing(v) else float(v) for v in values]
    top = max((abs(v) for v in nums if v is not None), default=0.0)
    if kind == "us":
        unit, scale = duration_scale(top)
        digits = 1 if unit == "µs" or top / scale >= 100 else 2 if top / scale >= 10 else 3
    elif kind == "bytes":
        unit, scale = bytes_scale(top)
        digits = 0 if unit == "B" else 2
    elif kind == "ratio":
        unit, scale, digits = "%", 0.01, 1
    elif kind == "gbps":  # gloo on CPU moves MB/s: four decimals there rather than a column of 0.00
        unit, scale, digits = "GB/s", 1.0, 2 if top >= 1 else 3 if top >= 0.1 else 4
    else:
        return "", [NA if v is None else f"{int(v)}" for v in nums]
    return unit, [NA if v is None else _cell(v / scale, digits) for v in nums]


def _cell(v: float, digits: int) -> str:
    """``v`` at ``digits`` decimals; a value that is not 0 but would read 0 there says so (``<0.01``)."""
    text = f"{v:.{digits}f}"
    if v != 0 and float(text) == 0:
        return f"<{10**-digits:.{digits}f}" if v > 0 else f">-{10**-digits:.{digits}f}"
    return text
