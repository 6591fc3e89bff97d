"""The TracekitError family. Only the CLI maps these to exit codes (0 ok, 1 gate failed, 2 usage, 3 bad input)."""

from __future__ import annotations


class TracekitError(Exception):
    """Base class: a one-line message that says what, where, and how to fix it."""

    exit_code = 3


class TraceFormatError(TracekitError):
    """A trace file that cannot be read as a Kineto/Chrome trace."""


class MissingRankError(TracekitError):
    """Ranks expected by the run are absent, or a rank appears twice."""


class EmptyWindowError(TracekitError):
    """Nothing to analyse: no steps, no events in the window."""


class ConfigError(TracekitError):
    """A bad option, rule file or budget expression."""

    exit_code = 2


class InputLimitError(TraceFormatError):
    """Input exceeds a safety limit (decompressed size, string length); a flag raises the limit."""


class SummaryFormatError(TracekitError):
    """A file given as a `tracekit.summary/1` JSON summary (a baseline, say) that is not one."""


class IncomparableRunsError(TracekitError):
    """Two runs that differ in layout, world size, workload or device type: the gate refuses to compare them."""


class MissingDependencyError(TracekitError):
    """A command needs an optional package that is not installed (torch for the collectors)."""

    exit_code = 4
