"""The ``tracekit.summary/1`` contract in one place (docs/summary-schema.md): the schema names of every document
tracekit writes, the per-step fields, and the metrics that readers derive from them the same way.

No heavy imports: the analyzers that write the summary, the gate that reads it and the reports that show it
all import these names from here.
"""

from __future__ import annotations

SUMMARY_SCHEMA = "tracekit.summary/1"
TIMELINE_SCHEMA = "tracekit.timeline/1"
GATE_SCHEMA = "tracekit.gate/1"
DIFF_SCHEMA = "tracekit.diff/1"
# What each interval of a timeline rank is (tracekit.timeline/1 ``intervals``: [start_us, end_us, category]).
TIMELINE_CATEGORIES: tuple[str, ...] = ("compute", "hidden", "exposed")

# The figures of one (rank, step) row and of a rank's ``totals``, in the order the summary writes them.
STEP_KEYS: tuple[str, ...] = (
    "wall_us",
    "compute_us",
    "comm_us",
    "hidden_comm_us",
    "exposed_comm_us",
    "overlap_ratio",
    "idle_us",
    "memcpy_us",
    "memset_us",
    "multi_stream_comm_us",
)
# The step's time split (wall, compute, comm, hidden, exposed, overlap, idle): what the headline pools and the
# HTML report's rank table shows.
CORE_STEP_KEYS: tuple[str, ...] = STEP_KEYS[:7]


def exposed_comm_share(exposed_comm_us: float | None, wall_us: float | None) -> float | None:
    """Exposed communication as a share of the step: exposed / wall; None without a value or a positive wall."""
    if exposed_comm_us is None or wall_us is None or not float(wall_us) > 0:
        return None
    return float(exposed_comm_us) / float(wall_us)
