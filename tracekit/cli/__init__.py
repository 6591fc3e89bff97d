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


class _Group(click.Group):
    def list_commands(self, ctx):
        return [name for name, _ in COMMANDS]

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
