"""The `tracekit` command: a click group; one thin module per command, listed in COMMANDS."""

from __future__ import annotations

import errno
import importlib
import os
import sys

import click

from ..errors import TracekitError
from ..runtime import process

# (command name, "module:function") -- explicit, imported lazily so `tracekit --help` stays fast. In the order of
# the work: record, inspect, analyze, report, gate (STAGE below); a new command adds a row here and to the tables
# below (a command no STAGE names is listed last, under "other").
COMMANDS: tuple[tuple[str, str], ...] = (
    ("run", "tracekit.cli.run:run"),
    ("demo", "tracekit.cli.demo:demo"),
    ("info", "tracekit.cli.info:info"),
    ("analyze", "tracekit.cli.analyze:analyze"),
    ("whatif", "tracekit.cli.whatif:whatif"),
    ("memory", "tracekit.cli.memory:memory"),
    ("report", "tracekit.cli.report:report"),
    ("annotate", "tracekit.cli.annotate:annotate"),
    ("baseline", "tracekit.cli.baseline:baseline"),
    ("check", "tracekit.cli.check:check"),
    ("diff", "tracekit.cli.diff:diff"),
    ("hang", "tracekit.cli.hang:hang"),
)
STAGES: tuple[tuple[str, str], ...] = (
    ("record", "Record a run"),
    ("inspect", "Inspect traces"),
    ("analyze", "Analyze"),
    ("report", "Report"),
    ("gate", "Gate in CI"),
)
STAGE: dict[str, str] = {
    "run": "record",
    "demo": "record",
    "info": "inspect",
    "analyze": "analyze",
    "whatif": "analyze",
    "memory": "analyze",
    "report": "report",
    "annotate": "report",
    "baseline": "gate",
    "check": "gate",
    "diff": "gate",
    "hang": "analyze",
}

# `tracekit --help` lists these without importing the command modules (which import pandas, pyarrow, ...);
# a command missing here is imported for its help as before.
SHORT_HELP: dict[str, str] = {
    "info": "Ranks, steps, event counts, streams, process groups and communication found in PATH.",
    "report": "Write a self-contained HTML report (or JSON) of the traces.",
    "annotate": "Add exposed/hidden communication tracks to a trace, for Perfetto.",
    "memory": "Activation memory: the analytical model.",
    "analyze": "Hidden vs exposed communication per rank, step, collective, dimension.",
    "baseline": "Write the summary of a run as a baseline for `check`.",
    "check": "The CI gate: compare a run with a baseline and budgets.",
    "diff": "Compare run A (before) with run B (after).",
    "run": "Run and profile a reference workload (needs torch).",
    "demo": "Run, profile, analyse and report a real gloo workload (needs torch).",
    "whatif": "Re-time the dependency graph of every step with changed costs.",
    "hang": "Who hung, on which collective, and why, from Flight Recorder dumps.",
}

# Two or three command lines per command, shown by `tracekit --help` and at the end of `tracekit CMD --help`
# (tests/unit/cli/test_help.py checks every option they use exists).
EXAMPLES: dict[str, tuple[str, ...]] = {
    "run": (
        "tracekit run --workload tp-sp --tp 2 --steps 4 --out runs/tp",
        "tracekit run --workload pp --pp 2 --microbatches 4 --out runs/pp",
        "tracekit run --workload dp --dp 2 --profile-memory --out runs/dp",
    ),
    "demo": ("tracekit demo", "tracekit demo --out out/demo --steps 2"),
    "info": ("tracekit info runs/tp", "tracekit info rank0.trace.json.gz --format json"),
    "analyze": (
        "tracekit analyze runs/tp",
        "tracekit analyze runs/tp --format json --out summary.json",
        "tracekit analyze cut.json.gz --allow-partial",
    ),
    "whatif": ("tracekit whatif runs/tp --set comm:tp=0.5", "tracekit whatif runs/tp --set 'kernel:gemm=0.8' --format json"),
    "memory": (
        "tracekit memory model --seq 2048 --batch 1 --hidden 4096 --heads 32 --tp 8 --sp",
        "tracekit memory timeline memory.raw.json.gz",
    ),
    "report": (
        "tracekit report runs/tp -o report.html",
        "tracekit report runs/tp --critical-path -o report.html",
        "tracekit report --summary summary.json --plotly cdn -o small.html",
    ),
    "annotate": ("tracekit annotate rank0.trace.json.gz -o annotated.json.gz", "tracekit annotate runs/tp -o merged.json.gz"),
    "baseline": ("tracekit baseline runs/tp -o baseline.json",),
    "check": (
        "tracekit check runs/tp --baseline baseline.json --junit gate.xml",
        "tracekit check runs/tp --budget 'exposed_comm_share<=0.15' --markdown gate.md",
    ),
    "diff": ("tracekit diff runs/before runs/after", "tracekit diff baseline.json runs/after --format json"),
    "hang": ("tracekit hang dumps/", "tracekit hang dumps/ --format json --out hang.json"),
}


def _stage_rows(group) -> list[tuple[str, list[str]]]:
    """(section title, names) in the order of the work; commands no stage names come last."""
    names = group.list_commands(None)
    sections = [(title, [n for n in names if STAGE.get(n) == key]) for key, title in STAGES]
    sections.append(("Other", [n for n in names if STAGE.get(n) not in dict(STAGES)]))
    return [(t, ns) for t, ns in sections if ns]


class _Group(click.Group):
    def list_commands(self, ctx):
        return [name for name, _ in COMMANDS]

    def format_commands(self, ctx, formatter):
        width = max(len(n) for n in self.list_commands(ctx))
        for title, names in _stage_rows(self):
            rows = []
            for name in names:
                text = SHORT_HELP.get(name)
                if text is None:
                    cmd = self.get_command(ctx, name)
                    if cmd is None or cmd.hidden:
                        continue
                    text = cmd.get_short_help_str(limit=formatter.width - 6 - width)
                rows.append((name, text))
            if not rows:
                continue
            with formatter.section(title):
                for name, text in rows:  # each command, then its examples under it
                    formatter.write_dl([(name.ljust(width), text)])
                    for ex in EXAMPLES.get(name, ()):
                        formatter.write(f"{'':>{formatter.current_indent + 4}}$ {ex}\n")

    def get_command(self, ctx, name):
        for cmd_name, target in COMMANDS:
            if cmd_name == name:
                module, attr = target.split(":")
                from .common import finite_numbers

                return _with_examples(finite_numbers(_safe_paths(getattr(importlib.import_module(module), attr))), name)
        return None

    def invoke(self, ctx):
        try:
            from ..runtime.env import check_env

            check_env()  # a limit variable that is not a number, for every command (also those reading no trace)
            return super().invoke(ctx)
        except TracekitError as exc:
            from ..reports.safe_text import printable

            click.echo(f"tracekit: error: {_shorten(printable(exc))}", err=True)
            sys.exit(exc.exit_code)
        except KeyboardInterrupt:  # click's own handler says "Aborted!" with exit 1, which from `check` is "gate failed"
            click.echo("tracekit: interrupted", err=True)
            sys.exit(process.EXIT_INTERRUPTED)
        except OSError as exc:
            if exc.errno == errno.EPIPE:  # `tracekit analyze X | head -1`: the reader left; quietly, as a shell would
                process.stdout_to_devnull()
                sys.exit(process.EXIT_BROKEN_PIPE)
            if exc.filename is None and exc.errno in process.STREAM_ERRNOS:  # a write to stdout: /dev/full, a closed fd
                process.stdout_to_devnull()
                click.echo(f"tracekit: error: {process.stdout_error(exc)}", err=True)
                sys.exit(2)
            raise


class _SafePath(click.Path):
    """click.Path whose checks survive a name the OS refuses: ``os.stat`` raises ValueError for a NUL byte (a
    traceback from inside click's parser); here it is click's usage error naming the option, exit 2."""

    def convert(self, value, param, ctx):
        try:
            return super().convert(value, param, ctx)
        except ValueError as exc:
            self.fail(f"{os.fsdecode(value)!r} is not a usable file name ({exc})", param, ctx)


def _with_examples(cmd, name: str):
    """``cmd`` with its EXAMPLES at the end of its own --help (after any epilog it has), once."""
    examples = EXAMPLES.get(name)
    if examples and not getattr(cmd, "_tk_examples", False):
        block = "\b\nExamples:\n" + "\n".join(f"  $ {ex}" for ex in examples)
        cmd.epilog = f"{cmd.epilog}\n\n{block}" if cmd.epilog else block
        cmd._tk_examples = True
    return cmd


def _safe_paths(cmd):
    """Every click.Path parameter of ``cmd`` (and of its subcommands) checked by _SafePath: one place, so the
    option lines of the commands stay as they are."""
    for param in getattr(cmd, "params", ()):
        if type(param.type) is click.Path:
            param.type.__class__ = _SafePath
    for sub in getattr(cmd, "commands", {}).values():
        _safe_paths(sub)
    return cmd


_MAX_ERROR_CHARS = 1000


def _shorten(line: str) -> str:
    """An error line of at most about 1000 characters: a 100 kB option value or name is cut in the middle."""
    if len(line) <= _MAX_ERROR_CHARS:
        return line
    half = _MAX_ERROR_CHARS // 2
    return f"{line[:half]}...({len(line) - 2 * half} characters left out)...{line[-half:]}"


@click.group(cls=_Group)
@click.version_option(package_name="tracekit")
def cli() -> None:
    """Profile distributed transformer training and measure hidden vs exposed communication."""


def main() -> None:
    """The console script. The output still buffered in sys.stdout is flushed here, where a broken pipe or a
    full disk is one line and a truthful exit code, not an 'Exception ignored' message at interpreter exit."""
    process.reserve_standard_fds()
    try:
        cli(prog_name="tracekit")
        code: int | str | None = 0
    except SystemExit as exc:
        code = exc.code
    failed = process.flush_stdout()
    if failed is not None:
        if failed.errno == errno.EPIPE:
            code = process.EXIT_BROKEN_PIPE
        else:
            click.echo(f"tracekit: error: {process.stdout_error(failed)}", err=True)
            code = 2
    process.fast_exit(code)
