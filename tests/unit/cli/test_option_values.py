"""Every numeric option of every command refuses NaN and the infinities (issue 29, item 3).

The options are found by walking the click commands themselves (every command of the group, every subcommand),
not from a list: an option added later is walked too. Before, ``check --min-delta-ratio nan`` compared false with
every threshold and turned an 83 % overlap-ratio regression into "ok" (exit 0), and ``inf`` read as "no limit".
"""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from tracekit.cli import cli

NOT_FINITE = ("nan", "NaN", "inf", "-inf", "Infinity", "1e999", "-1e999")


def _commands():
    ctx = click.Context(cli)
    out = []

    def walk(cmd, path):
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(ctx):
                walk(cmd.get_command(ctx, name), (*path, name))
        else:
            out.append((" ".join(path), cmd))

    walk(cli, ())
    return out


def _numeric_options():
    found = []
    for path, cmd in _commands():
        for param in cmd.params:
            inner = getattr(param.type, "inner", param.type)
            if isinstance(inner, (click.types.FloatParamType, click.types.IntParamType)):
                found.append(pytest.param(path, cmd, param, id=f"{path} {param.opts[0]}"))
    return found


OPTIONS = _numeric_options()


def test_the_walk_finds_the_numeric_options_of_every_kind():
    """The walk is not empty by accident: it sees the float options of check and run and the integer ones."""
    names = {(p.values[0], p.values[2].opts[0]) for p in OPTIONS}
    assert {("check", "--min-delta-us"), ("check", "--min-delta-ratio"), ("run", "--capacity-factor")} <= names
    assert ("memory model", "--seq") in names and ("analyze", "--top") in names and len(names) > 30


@pytest.mark.parametrize("path,cmd,param", OPTIONS)
def test_every_numeric_option_refuses_nan_and_infinities(path, cmd, param):
    ctx = click.Context(cmd, info_name=path)
    for value in NOT_FINITE:
        with pytest.raises(click.BadParameter):
            param.process_value(ctx, value)
    # and a finite value in its range still passes (the refusal is about the value, not the option)
    low = getattr(getattr(param.type, "inner", param.type), "min", None)
    good = param.default if isinstance(param.default, (int, float)) and not isinstance(param.default, bool) else low or 1
    assert param.process_value(ctx, str(good)) == good


@pytest.mark.parametrize(
    "args,message",
    [
        (["check", "X", "--budget", "overlap_ratio>=0", "--min-delta-ratio", "nan"], "'nan' is not a finite number"),
        (["check", "X", "--budget", "overlap_ratio>=0", "--min-delta-us", "inf"], "'inf' is not a finite number"),
        (["check", "X", "--budget", "exposed_comm_us<=1e999"], "is not a finite number"),
        (["check", "X", "--baseline", "X", "--max-regression", "1e999%"], "not a finite non-negative number"),
        (["run", "--capacity-factor", "inf", "--out", "o"], "'inf' is not a finite number"),
    ],
)
def test_numbers_given_as_text_are_refused_too(tmp_path, args, message):
    """Options whose value is text holding a number (a budget, --max-regression) and the float options, through the
    command line: exit 2 and one line naming the value, before anything is read."""
    (tmp_path / "X").write_text("{}")
    args = [str(tmp_path / a) if a in ("X", "o") else a for a in args]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output
