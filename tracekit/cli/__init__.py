"""The `tracekit` command: a click group; one thin module per command, listed in COMMANDS."""

from __future__ import annotations

import importlib
import sys

import click

from ..errors import TracekitError

# (command name, "module:function") -- explicit, imported lazily so `tracekit --help` stays fast.
COMMANDS: tuple[tuple[str, str], ...] = (
    ("info", "tracekit.cli.info:info"),
    ("report", "tracekit.cli.report:report"),
    ("annotate", "tracekit.cli.annotate:annotate"),
    ("memory", "tracekit.cli.memory:memory"),
    ("analyze", "tracekit.cli.analyze:analyze"),
    ("baseline", "tracekit.cli.baseline:baseline"),
    ("check", "tracekit.cli.check:check"),
    ("diff", "tracekit.cli.diff:diff"),
    ("run", "tracekit.cli.run:run"),
    ("demo", "tracekit.cli.demo:demo"),
    ("whatif", "tracekit.cli.whatif:whatif"),
)


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
}


class _Group(click.Group):
    def list_commands(self, ctx):
        return [name for name, _ in COMMANDS]

    def format_commands(self, ctx, formatter):
        rows = []
        for name in self.list_commands(ctx):
            text = SHORT_HELP.get(name)
            if text is None:
                cmd = self.get_command(ctx, name)
                if cmd is None or cmd.hidden:
                    continue
                text = cmd.get_short_help_str(limit=formatter.width - 6 - max(len(n) for n in self.list_commands(ctx)))
            rows.append((name, text))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def get_command(self, ctx, name):
        for cmd_name, target in COMMANDS:
            if cmd_name == name:
                module, attr = target.split(":")
                return getattr(importlib.import_module(module), attr)
        return None

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except TracekitError as exc:
            from ..reports.safe_text import printable

            click.echo(f"tracekit: error: {printable(exc)}", err=True)
            sys.exit(exc.exit_code)


@click.group(cls=_Group)
@click.version_option(package_name="tracekit")
def cli() -> None:
    """Profile distributed transformer training and measure hidden vs exposed communication."""


def main() -> None:
    cli(prog_name="tracekit")
