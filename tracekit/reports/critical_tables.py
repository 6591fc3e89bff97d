"""The critical-path tables of `tracekit analyze --critical-path` (terminal and ``--format markdown``), from the
summary's ``critical_path`` section: per step its length, what bounds it, the length by kind, how much of it the
graph explains and the host waits it inferred; then the longest segments of each step; the verdicts are the
notes. Nothing here measures: every figure is the summary's (docs/whatif.md)."""

from __future__ import annotations

from collections.abc import Mapping

from . import summary_tables as st

STEP_COLS = (
    st.Col("step"),
    st.Col("length_us"),
    st.Col("bound"),
    st.Col("compute_us"),
    st.Col("comm_us"),
    st.Col("host_us"),
    st.Col("idle_us", st.DROPPABLE),
    st.Col("memcpy_us", st.WIDE_ONLY),
    st.Col("unexplained_share"),
    st.Col("host_waits", st.DROPPABLE),
)
SEGMENT_COLS = (
    st.Col("step"),
    st.Col("rank"),
    st.Col("lane", st.DROPPABLE),
    st.Col("name", name=True),
    st.Col("dur_us"),
    st.Col("kind"),
)


def critical_sections(summary: Mapping, *, top: int = 10, segments: int = 3, wide: bool = False, full_names: bool = False):
    """The critical path per step (the first ``top`` steps) and each step's ``segments`` longest segments; [] without
    a critical_path section."""
    section = summary.get("critical_path") or {}
    steps = list(section.get("steps") or [])[:top]
    if not steps:
        return []
    rows = [_step_row(s) for s in steps]
    notes = [f"{s.get('verdict', '')}" for s in steps] + [f"run: {section.get('verdict', '')}"]
    notes.append(
        "unexplained: gaps on the path that no recorded dependency accounts for (over 20 µs after the input that bound them)"
    )
    out = [st._section("critical path per step (to the step's device end)", rows, STEP_COLS, wide, full_names, notes)]
    longest = [
        {"step": s["step"], **seg}
        for s in steps
        for seg in sorted(s.get("segments") or [], key=lambda x: -float(x.get("dur_us") or 0))[:segments]
    ]
    if longest:
        out.append(
            st._section(f"critical path: the {segments} longest segments of each step", longest, SEGMENT_COLS, wide, full_names)
        )
    return out


def _step_row(s: Mapping) -> dict:
    kinds = s.get("by_kind") or {}
    length = float(s.get("length_us") or 0)
    unexplained = s.get("unexplained_us")
    waits = s.get("host_waits") or {}
    return {
        "step": s.get("step"),
        "length_us": length,
        "bound": s.get("bound") or "",
        "compute_us": kinds.get("compute"),
        "comm_us": (kinds.get("comm_transfer") or 0) + (kinds.get("comm_wait") or 0),
        "host_us": kinds.get("host"),
        "idle_us": kinds.get("idle"),
        "memcpy_us": kinds.get("memcpy"),
        "unexplained_share": (float(unexplained) / length) if unexplained is not None and length else None,
        "host_waits": ", ".join(f"{k} {v}" for k, v in waits.items()) or "—",
    }
