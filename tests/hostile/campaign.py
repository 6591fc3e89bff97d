"""The hostile-input campaign: every command (analyze, report, check, baseline, diff, annotate, whatif, info,
memory timeline/model, run/demo argument checks) given broken output paths, broken input paths, hostile option
values, documents of the wrong kind, mutated documents, odd trace encodings and odd directory sets.

Each case is one command line; the verdict is what a user sees: no traceback, no hang, an exit code that tells
the truth (1 only from ``check``, meaning the gate failed), and when the command fails, one line on stderr that
starts ``tracekit: error:`` (or click's own ``Error:`` usage line, exit 2). ``python -m tests.hostile.campaign``
runs the whole sweep and prints the counts (cases, commands, exit codes, defects); ``test_campaign.py`` runs it
under ``TRACEKIT_HOSTILE_SWEEP=1`` and a fast sample by default.
"""

from __future__ import annotations

import bz2
import contextlib
import copy
import gzip
import json
import lzma
import os
import signal
import sys
import traceback
import zipfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.helpers.hostile import intact_doc

TIMEOUT_S = 60
WEIRD: list = [
    None,
    True,
    False,
    -1,
    0,
    2**63,
    -(2**63),
    10**30,
    1e308,
    -0.0,
    1.5,
    "x",
    "",
    "1e3",
    [],
    [1, 2],
    {},
    {"a": {"b": [1]}},
    "A" * 100_000,
    "\ud800",
]


@dataclass
class Case:
    name: str
    cls: str
    argv: list[str]
    ok_codes: tuple[int, ...] = (0, 2, 3)  # the codes a clean answer may have; 1 only where the gate can fail
    env: dict[str, str] = field(default_factory=dict)
    stdin: bytes | None = None
    subprocess: bool = False  # closed stdout, broken pipes: only a real process shows them
    shell: str | None = None  # for subprocess cases: a shell line, ``{tk}`` the tracekit command


@dataclass
class Outcome:
    case: Case
    rc: int
    stderr: str
    stdout: str
    defect: str | None


# -- the documents every case starts from --------------------------------------------------------------------------
def _dump(path: Path, doc) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc) if not isinstance(doc, str) else doc)
    return path


def build_base(root: Path) -> dict[str, Path]:
    """An intact run and every document tracekit writes about it, each produced by tracekit itself."""
    from click.testing import CliRunner

    from tracekit.cli import cli

    root.mkdir(parents=True, exist_ok=True)
    run = root / "run"
    _dump(run / "rank0.json", intact_doc())
    two = root / "run2"
    for r in range(2):
        d = intact_doc()
        d["distributedInfo"].update(rank=r, world_size=2)
        _dump(two / f"rank{r}.json", d)
    base = {"run": run, "run2": two, "trace": run / "rank0.json"}
    runner = CliRunner()
    env = {"TRACEKIT_CACHE_DIR": str(root / "cache")}
    base["summary"] = root / "summary.json"
    base["verdict"] = root / "verdict.json"
    base["timeline"] = root / "timeline.json"
    base["html"] = root / "report.html"
    for argv in (
        ["baseline", str(run), "-o", str(base["summary"]), "--executor", "serial"],
        ["check", str(run), "--budget", "exposed_comm_share<=1", "--json", str(base["verdict"]), "--executor", "serial"],
        [
            "analyze",
            str(run),
            "--format",
            "json",
            "--out",
            str(root / "analyze.json"),
            "--timeline-out",
            str(base["timeline"]),
            "--executor",
            "serial",
            "--no-cache",
        ],
        ["report", str(run), "-o", str(base["html"]), "--executor", "serial", "--no-cache"],
        ["info", str(run), "--executor", "serial"],
    ):  # the last one writes the Parquet cache
        r = runner.invoke(cli, argv, env=env)
        assert r.exit_code == 0, (argv, r.output, r.exception)
    base["cache"] = next((root / "cache").glob("*.parquet"))
    base["tracks"] = _dump(root / "tracks.json", {"exposed": [[100.0, 200.0], [1100.0, 1300.0]]})
    base["rules"] = root / "rules.toml"
    base["rules"].write_text('[[comm]]\npattern = "^ncclDevKernel"\nlibrary = "nccl"\n')
    base["runjson"] = _dump(
        root / "runjson" / "run.json",
        {"schema": "tracekit.run/1", "world_size": 1, "layout": {"tp": 1, "dp": 1}, "workload": "x"},
    )
    _dump(root / "runjson" / "rank0.json", intact_doc())
    base["runjson_dir"] = root / "runjson"
    base["memraw"] = _dump(root / "mem.raw.json", [[0, 0, 0, 100, 0, 0], [10, 1, 0, 100, 0, 0]])
    return base


# -- case builders --------------------------------------------------------------------------------------------------
ANALYZE = ["--executor", "serial", "--no-cache"]


def _trace_commands(p: str, out: Path) -> dict[str, list[str]]:
    """Every command that takes a trace (or a run directory), with ``p`` as its input."""
    return {
        "info": ["info", p, *ANALYZE],
        "analyze": ["analyze", p, "--format", "json", *ANALYZE],
        "report": ["report", p, "-o", str(out / "r.html"), *ANALYZE],
        "baseline": ["baseline", p, "-o", str(out / "b.json"), *ANALYZE],
        "check": ["check", p, "--budget", "exposed_comm_share<=1", *ANALYZE],
        "diff": ["diff", p, p, *ANALYZE],
        "annotate": ["annotate", p, "-o", str(out / "a.json.gz"), *ANALYZE],
        "whatif": ["whatif", p, "--set", "comm:dp=0.5", *ANALYZE],
    }


def _input_cases(cls: str, name: str, p: Path | str, out: Path, only: tuple[str, ...] = ()) -> list[Case]:
    cmds = _trace_commands(str(p), out)
    return [
        Case(f"{name}/{c}", cls, argv, (0, 1, 2, 3) if c == "check" else (0, 2, 3))
        for c, argv in cmds.items()
        if not only or c in only
    ]


def output_cases(base: dict[str, Path], tmp: Path) -> list[Case]:
    run, summ = str(base["run"]), str(base["summary"])
    ro = tmp / "readonly.json"
    ro.write_text("{}")
    ro.chmod(0o444)
    targets = {
        "missing-dir": str(tmp / "no" / "such" / "dir" / "x.json"),
        "a-directory": str(tmp),
        "dev-full": full_device(tmp),
        "read-only": str(ro),
        "non-utf8": str(tmp).encode() + b"/\xff\xfe.json",
    }
    cases = []
    for what, target in targets.items():
        t = os.fsdecode(target) if isinstance(target, bytes) else target
        argvs = {
            "analyze--out": ["analyze", run, "--format", "json", "--out", t, *ANALYZE],
            "analyze--timeline-out": ["analyze", run, "--timeline-out", t, *ANALYZE],
            "analyze--collectives-out": ["analyze", run, "--collectives-out", t, *ANALYZE],
            "report-o": ["report", run, "-o", t if t.endswith((".json", "full")) else t, "--format", "html", *ANALYZE],
            "report--summary-o": ["report", "--summary", summ, "-o", t, "--format", "json"],
            "baseline-o": ["baseline", run, "-o", t, *ANALYZE],
            "check--json": ["check", run, "--budget", "exposed_comm_share<=1", "--json", t, *ANALYZE],
            "check--junit": ["check", run, "--budget", "exposed_comm_share<=1", "--junit", t, *ANALYZE],
            "check--markdown": ["check", run, "--budget", "exposed_comm_share<=1", "--markdown", t, *ANALYZE],
            "annotate-o": ["annotate", run, "-o", t, *ANALYZE],
        }
        for opt, argv in argvs.items():
            # a missing directory is created (as every output's parents are); root may write a read-only file
            ok = {"missing-dir": (0,), "non-utf8": (0,), "read-only": (0,) if os.geteuid() == 0 else (2,)}.get(what, (2,))
            cases.append(Case(f"out:{what}/{opt}", "output path", argv, ok))
    nul = ["analyze", run, "--out", str(tmp / "a\x00b.json"), *ANALYZE]
    cases.append(Case("out:nul-byte/analyze--out", "output path", nul, (2,)))
    cases.append(Case("out:nul-byte/baseline-o", "output path", ["baseline", run, "-o", str(tmp / "a\x00b")], (2,)))
    # stdout closed, broken pipe: real processes
    for c in ("info", "analyze", "diff", "whatif"):
        argv = {
            "info": ["info", run, *ANALYZE],
            "analyze": ["analyze", run, *ANALYZE],
            "diff": ["diff", summ, summ],
            "whatif": ["whatif", run, *ANALYZE],
        }[c]
        line = " ".join(_q(a) for a in argv)
        cases.append(
            Case(
                f"stdout:broken-pipe/{c}",
                "stdout",
                argv,
                (0, 141),
                subprocess=True,
                shell=f"{{tk}} {line} | head -c 1 >/dev/null; exit ${{PIPESTATUS[0]}}",
            )
        )
        cases.append(Case(f"stdout:closed/{c}", "stdout", argv, (0, 2, 3, 141), subprocess=True, shell=f"{{tk}} {line} >&-"))
        cases.append(
            Case(
                f"stdout:dev-full/{c}",
                "stdout",
                argv,
                (2, 3, 141),
                subprocess=True,
                shell=f"{{tk}} {line} >{_q(full_device(tmp))}",
            )
        )
    return cases


def full_device(tmp: Path) -> str:
    """A device that fails every write with ENOSPC. As root, a private copy of /dev/full (a writer that renames
    over its output would replace the real /dev/full with a regular file, as one did)."""
    if os.geteuid() == 0:
        p = tmp / "full"
        if not p.exists():
            os.mknod(p, 0o666 | __import__("stat").S_IFCHR, os.makedev(1, 7))
        return str(p)
    return "/dev/full"


def _q(a: str) -> str:
    return "'" + a.replace("'", "'\\''") + "'"


def input_path_cases(base: dict[str, Path], tmp: Path) -> list[Case]:
    out = tmp / "out"
    out.mkdir(exist_ok=True)
    cases: list[Case] = []
    denied = tmp / "denied.json"
    denied.write_text(json.dumps(intact_doc()))
    denied.chmod(0)
    if os.geteuid() == 0:  # root reads mode 000 files: a /proc entry gives EACCES instead, where one does
        denied = Path("/proc/1/mem") if not os.access("/proc/1/mem", os.R_OK) else denied
    cases += _input_cases("input path", "in:permission-denied", denied, out)
    empty_dir = tmp / "empty-dir"
    empty_dir.mkdir()
    cases += _input_cases("input path", "in:no-traces", empty_dir, out)
    many = tmp / "many-empty"
    many.mkdir()
    for i in range(2000):
        (many / f"rank{i}.json").touch()
    cases += _input_cases("input path", "in:2000-empty-files", many, out, ("info", "analyze", "check"))
    loop = tmp / "loop"
    loop.mkdir()
    os.symlink(loop / "b.json", loop / "a.json")
    os.symlink(loop / "a.json", loop / "b.json")
    cases += _input_cases("input path", "in:symlink-loop-dir", loop, out, ("info", "analyze"))
    cases += _input_cases("input path", "in:symlink-loop-file", loop / "a.json", out)
    dang = tmp / "dangling"
    dang.mkdir()
    os.symlink(tmp / "nowhere.json", dang / "rank0.json")
    cases += _input_cases("input path", "in:dangling-symlink", dang, out, ("info", "analyze", "check"))
    cases += _input_cases("input path", "in:missing", tmp / "missing.json", out)
    odd = tmp / "odd-names"
    odd.mkdir()
    for label, fname in (
        ("non-utf8", b"rank0-\xff.json"),
        ("newline", b"rank0\n.json"),
        ("escape", b"rank0\x1b[2J\x1b]0;pwned\x07.json"),
    ):
        d = odd / label
        d.mkdir()
        p = os.path.join(os.fsencode(d), fname)
        with open(p, "wb") as fh:
            fh.write(json.dumps(intact_doc()).encode())
        cases += _input_cases("input path", f"in:name-{label}-dir", d, out, ("info", "analyze", "check"))
        cases += _input_cases("input path", f"in:name-{label}-file", os.fsdecode(p), out, ("info", "annotate"))
    # an empty / garbage name for a directory of traces
    cases += _input_cases("input path", "in:empty-string", "", out, ("info", "analyze", "check", "diff"))
    return cases


def option_cases(base: dict[str, Path], tmp: Path) -> list[Case]:
    run, summ = str(base["run"]), str(base["summary"])
    bad_nums = ["-1", "0", "1e309", "nan", "inf", "-inf", "", "abc", "99999999999999999999999"]
    cases: list[Case] = []
    for v in bad_nums:
        for opt, cmd in (
            ("--top", ["analyze", run, *ANALYZE]),
            ("--width", ["analyze", run, *ANALYZE]),
            ("--memory-points", ["analyze", run, *ANALYZE]),
            ("--max-timeline-events", ["report", run, "-o", str(tmp / "r.html"), *ANALYZE]),
            ("--max-trace-bytes", ["info", run, *ANALYZE]),
            ("--max-string-bytes", ["info", run, *ANALYZE]),
            ("--top", ["diff", summ, summ]),
            ("--points", ["memory", "timeline", str(base["memraw"])]),
            ("--min-delta-us", ["check", run, "--budget", "exposed_comm_share<=1", *ANALYZE]),
            ("--min-delta-ratio", ["check", run, "--budget", "exposed_comm_share<=1", *ANALYZE]),
            ("--max-regression", ["check", run, "--baseline", summ, *ANALYZE]),
            ("--rank", ["annotate", run, "-o", str(tmp / "a.json"), *ANALYZE]),
        ):
            cases.append(
                Case(f"opt:{cmd[0]}{opt}={v}", "option value", [*cmd, opt, v], (0, 1, 2) if cmd[0] == "check" else (0, 2))
            )
        for opt in ("--seq", "--batch", "--hidden", "--heads", "--tp", "--cp", "--layers", "--vocab", "--ln-stats-bytes"):
            argv = ["memory", "model", "--seq", "64", "--batch", "2", "--hidden", "64", "--heads", "8"]
            if opt in argv:
                argv[argv.index(opt) + 1] = v
            else:
                argv += [opt, v]
            cases.append(Case(f"opt:memory-model{opt}={v}", "option value", argv, (0, 2)))
    specs = [
        "comm:dp=nan",
        "comm:dp=-1",
        "comm:dp=inf",
        "comm:dp=1e309",
        "comm:dp=",
        "comm:=1",
        "comm:dp",
        "kernel:(=2",
        "kernel:=2",
        "kernel:.*=1e309",
        "rank:999:host=0",
        "rank:-1:host=0",
        "rank:x:host=1",
        "rank:0:host=nan",
        "annotation:=1",
        "annotation:aten::mm=-0.0",
        "bogus:x=1",
        "",
        "comm:dp=1=2",
        "kernel:" + "a" * 70000 + "=1",
        "comm:dp=99999999999999999999999",
        "kernel:(.*a){20}$=2",
    ]
    for s in specs:
        cases.append(Case(f"opt:whatif--set={s[:40]}", "option value", ["whatif", run, "--set", s, *ANALYZE], (0, 2)))
    for w in ["", "*", "[", "nosuch", "\x1b[2J", "a" * 100000, "ProfilerStep#*", "**/[!]"]:
        for c in ("analyze", "check", "whatif", "info"):
            cmd = _trace_commands(run, tmp)[c]
            cases.append(
                Case(
                    f"opt:{c}--window={w[:20]!r}",
                    "option value",
                    [*cmd, "--window", w],
                    (0, 1, 2, 3) if c == "check" else (0, 2, 3),
                )
            )
    for ex in [
        "",
        "thread",
        "dask://",
        "dask://nohost:0",
        "dask://[::1",
        "process:x",
        "serial ",
        "dask://h:99999",
        "dask://127.0.0.1:9",
    ]:
        cases.append(Case(f"opt:--executor={ex!r}", "option value", ["info", run, "--no-cache", "--executor", ex], (0, 2)))
    for fmt in ["", "xml", "JSON", "html"]:
        cases.append(Case(f"opt:analyze--format={fmt!r}", "option value", ["analyze", run, "--format", fmt], (2,)))
        cases.append(
            Case(
                f"opt:report--format={fmt!r}",
                "option value",
                ["report", run, "--format", fmt, "-o", str(tmp / "r.html"), *ANALYZE],
                (0, 2),
            )
        )
    for suffix in ("r.txt", "r", "r.HTML", "r.json.gz", "r.parquet"):
        cases.append(
            Case(f"opt:report-o-suffix={suffix}", "option value", ["report", run, "-o", str(tmp / suffix), *ANALYZE], (0, 2))
        )
    for b in [
        "",
        "exposed_comm_share",
        "exposed_comm_share<=nan",
        "exposed_comm_share<=inf",
        "exposed_comm_share<=-1",
        "nosuch<=1",
        "exposed_comm_share<=1e309",
        "tp/all_gather:exposed_comm_us<=800",
        "*/*:x<=1",
        "<=1",
        "exposed_comm_share<=1<=2",
        "exposed_comm_share>=0",
        "exposed_comm_share==0.5",
        "a" * 10000 + "<=1",
    ]:
        cases.append(Case(f"opt:check--budget={b[:30]!r}", "option value", ["check", run, "--budget", b, *ANALYZE], (0, 1, 2)))
    for m in ["", "nosuch", "*/*:nosuch", "tp/all_gather:", ":x", "*/*:exposed_comm_us:x", "exposed_comm_us"]:
        cases.append(
            Case(
                f"opt:check--metric={m!r}", "option value", ["check", run, "--baseline", summ, "--metric", m, *ANALYZE], (0, 1, 2)
            )
        )
    for r in ["-1%", "nan", "inf", "1e309%", "%", "abc", "0", "1000%", ""]:
        cases.append(
            Case(
                f"opt:check--max-regression={r!r}",
                "option value",
                ["check", run, "--baseline", summ, "--max-regression", r, *ANALYZE],
                (0, 1, 2),
            )
        )
    for dm in ["", "=", "x=", "=tp", "*=nosuch", "[=tp", "default_pg=tp=dp", "default_pg=" + "x" * 1000]:
        cases.append(
            Case(
                f"opt:analyze--dim-map={dm[:20]!r}",
                "option value",
                ["analyze", run, "--format", "json", "--dim-map", dm, *ANALYZE],
                (0, 2),
            )
        )
    for d in ["", "0", "0:", ":5", "0:-5", "0:nan", "0:inf", "x:5", "99:5", "-1:5", "0:1e309", "0:5:6", "0:99999999999"]:
        cases.append(Case(f"opt:run--delay={d!r}", "option value", ["run", "--delay", d, "--out", str(tmp / "rr")], (2,)))
    for o, v in (
        ("--tp", "0"),
        ("--tp", "-2"),
        ("--steps", "0"),
        ("--steps", "-1"),
        ("--layers", "0"),
        ("--hidden", "0"),
        ("--heads", "0"),
        ("--seq", "0"),
        ("--batch", "0"),
        ("--capacity-factor", "nan"),
        ("--capacity-factor", "-1"),
        ("--experts", "0"),
        ("--top-k", "0"),
        ("--workload", ""),
        ("--workload", "nosuch"),
        ("--workload", "tp+tp"),
        ("--dp", "0"),
        ("--cp", "-1"),
        ("--pp", "0"),
        ("--ep", "0"),
        ("--hidden", "7"),
        ("--heads", "3"),
        ("--tp", "100000"),
    ):
        cases.append(
            Case(
                f"opt:run{o}={v}",
                "option value",
                ["run", o, v, "--out", str(tmp / "rr"), "--steps", "1"]
                if o != "--steps"
                else ["run", o, v, "--out", str(tmp / "rr")],
                (2,),
            )
        )
    for o, v in (("--tp", "0"), ("--cp", "-1"), ("--steps", "0"), ("--workload", "nosuch")):
        cases.append(Case(f"opt:demo{o}={v}", "option value", ["demo", o, v, "--out", str(tmp / "dd")], (2,)))
    # the environment
    for var in (
        "TRACEKIT_MAX_TRACE_BYTES",
        "TRACEKIT_MAX_STRING_BYTES",
        "TRACEKIT_MAX_GZIP_RATIO",
        "TRACEKIT_MAX_DOCUMENT_BYTES",
        "TRACEKIT_MAX_COLLECTIVE_ROWS",
        "TRACEKIT_CACHE_DIR",
        "TRACEKIT_COLLECTIVE_TIMEOUT_S",
        "TRACEKIT_FUZZ_EXAMPLES",
        "COLUMNS",
    ):
        for v in ("abc", "-1", "nan", "9" * 400):
            for cmd in (["info", run, "--executor", "serial"], ["diff", summ, summ]):
                cases.append(Case(f"env:{var}={v[:10]!r}/{cmd[0]}", "environment", cmd, (0, 2), env={var: v}, subprocess=True))
    cases.append(
        Case("env:TRACEKIT_CACHE_DIR=/dev/full", "environment", ["info", run], (0,), env={"TRACEKIT_CACHE_DIR": "/dev/full/x"})
    )
    cases.append(
        Case("env:TRACEKIT_CACHE_DIR=file", "environment", ["info", run], (0,), env={"TRACEKIT_CACHE_DIR": str(base["summary"])})
    )
    cases.append(Case("opt:--cache-dir=file", "option value", ["info", run, "--cache-dir", str(base["summary"])], (0,)))
    cases.append(Case("opt:--cache-dir=/proc", "option value", ["info", run, "--cache-dir", "/proc/x"], (0,)))
    return cases


def document_cases(base: dict[str, Path], tmp: Path) -> list[Case]:
    """Each document where another is expected, and each mutated field by field with the WEIRD values."""
    run, out = str(base["run"]), tmp / "out"
    out.mkdir(exist_ok=True)
    docs = {k: base[k] for k in ("summary", "verdict", "timeline", "tracks", "rules", "memraw", "html", "cache", "trace")}
    docs["runjson"] = base["runjson"]
    from tests.helpers.hostile import whitespace_bomb

    docs["gzip-bomb"] = whitespace_bomb(tmp / "bomb.json.gz", 256)  # 256 MiB of blanks in a 270 kB file
    cases: list[Case] = []
    for kind, p in docs.items():
        s = str(p)
        where = {
            "as-trace/info": ["info", s, *ANALYZE],
            "as-trace/analyze": ["analyze", s, "--format", "json", *ANALYZE],
            "as-trace/annotate": ["annotate", s, "-o", str(out / "a.json"), *ANALYZE],
            "as-trace/whatif": ["whatif", s, *ANALYZE],
            "as-summary/report": ["report", "--summary", s, "-o", str(out / "r.html")],
            "as-baseline/check": ["check", run, "--baseline", s, *ANALYZE],
            "as-run/check": ["check", s, "--budget", "exposed_comm_share<=1", *ANALYZE],
            "as-run/baseline": ["baseline", s, "-o", str(out / "b.json"), *ANALYZE],
            "as-A/diff": ["diff", s, str(base["summary"])],
            "as-timeline/report": ["report", run, "--timeline", s, "-o", str(out / "r.html"), *ANALYZE],
            "as-verdict/report": ["report", run, "--verdict", s, "-o", str(out / "r.html"), *ANALYZE],
            "as-tracks/annotate": ["annotate", run + "/rank0.json", "--tracks", s, "-o", str(out / "a.json"), *ANALYZE],
            "as-rules/info": ["info", run, "--comm-rules", s, *ANALYZE],
            "as-memraw/memory": ["memory", "timeline", s],
        }
        for w, argv in where.items():
            cases.append(Case(f"doc:{kind}/{w}", "document kind", argv, (0, 1, 2, 3) if argv[0] == "check" else (0, 2, 3)))
    # field-by-field mutations of the JSON documents
    readers = {
        "summary": lambda s: [
            ["report", "--summary", s, "-o", str(out / "r.html")],
            ["check", run, "--baseline", s, *ANALYZE],
            ["diff", s, str(base["summary"])],
            ["check", s, "--budget", "exposed_comm_share<=1"],
        ],
        "verdict": lambda s: [["report", run, "--verdict", s, "-o", str(out / "r.html"), *ANALYZE]],
        "timeline": lambda s: [["report", run, "--timeline", s, "-o", str(out / "r.html"), *ANALYZE]],
        "tracks": lambda s: [["annotate", run + "/rank0.json", "--tracks", s, "-o", str(out / "a.json"), *ANALYZE]],
        "memraw": lambda s: [["memory", "timeline", s]],
    }
    mdir = tmp / "mutants"
    mdir.mkdir(exist_ok=True)
    n = 0
    for kind, make in readers.items():
        doc = json.loads(base[kind].read_text())
        for path, _ in _leaves(doc, max_depth=3):
            for w in _weird_sample(path):
                mutant = copy.deepcopy(doc)
                _set(mutant, path, w)
                n += 1
                f = mdir / f"{kind}-{n}.json"
                f.write_text(json.dumps(mutant))
                for argv in make(str(f)):
                    cases.append(
                        Case(
                            f"mut:{kind}{_fmt(path)}={_short(w)}/{argv[0]}",
                            f"mutated {kind}",
                            argv,
                            (0, 1, 2, 3) if argv[0] == "check" else (0, 2, 3),
                        )
                    )
    # rule TOML mutations
    for i, text in enumerate(
        [
            '[[comm]]\npattern = "x"\nlibrary = ["a"]\n',
            '[[comm]]\npattern = ""\n',
            "[[comm]]\npattern = 1e309\n",
            '[[comm]]\npattern = "\\u0000"\n',
            '[[comm]]\npattern = "x"\nkind = "nosuch"\n',
            "comm = []\n",
            '[comm]\npattern = "x"\n',
            '[[comm]]\npattern = "x"\n[[comm]]\npattern = "("\n',
            "\ufeff[[comm]]\npattern = 'x'\n",
            '[[comm]]\npattern = "x"\ndim = 5\n',
            "x = 1\n",
            "[[other]]\na = 1\n",
            '[[comm]]\npattern = "(?P<a>x)(?P<a>y)"\n',
            '[[comm]]\npattern = "\\\\"\n',
        ]
    ):
        f = tmp / f"rules-{i}.toml"
        f.write_text(text, encoding="utf-8")
        cases.append(
            Case(
                f"mut:rules-{i}/analyze",
                "mutated rules",
                ["analyze", run, "--comm-rules", str(f), "--format", "json", *ANALYZE],
                (0, 2),
            )
        )
    # run.json field by field (in the run directory)
    rj = json.loads(base["runjson"].read_text())
    for key in list(rj) + ["process_groups", "schedule", "ranks"]:
        for w in WEIRD[::2]:
            d = tmp / "runjsons" / f"{key}-{_short(w)}"
            d.mkdir(parents=True, exist_ok=True)
            m = dict(rj)
            m[key] = w
            (d / "run.json").write_text(json.dumps(m))
            (d / "rank0.json").write_text(json.dumps(intact_doc()))
            for c in ("analyze", "baseline"):
                cases.append(
                    Case(f"mut:run.json.{key}={_short(w)}/{c}", "mutated run.json", _trace_commands(str(d), out)[c], (0, 3))
                )
    # activation files
    act = {"schema": "tracekit.activation/1", "rank": 0, "steps": [{"step": 1, "saved_bytes": 1024}]}
    for key in ("schema", "rank", "steps"):
        for w in WEIRD[::3]:
            d = tmp / "acts" / f"{key}-{_short(w)}"
            d.mkdir(parents=True, exist_ok=True)
            m = dict(act)
            m[key] = w
            (d / "activation_r0.json").write_text(json.dumps(m))
            (d / "rank0.json").write_text(json.dumps(intact_doc()))
            cases.append(
                Case(
                    f"mut:activation.{key}={_short(w)}/analyze",
                    "mutated activation",
                    _trace_commands(str(d), out)["analyze"],
                    (0, 3),
                )
            )
    return cases


def _leaves(doc, prefix=(), max_depth=3):
    """(path, value) of every field down to ``max_depth`` (lists: their first element only)."""
    if len(prefix) >= max_depth:
        return
    items = doc.items() if isinstance(doc, dict) else enumerate(doc[:1]) if isinstance(doc, list) else ()
    for k, v in items:
        yield (*prefix, k), v
        yield from _leaves(v, (*prefix, k), max_depth)


def _weird_sample(path) -> list:
    i = sum(len(str(p)) for p in path)
    return [WEIRD[(i + j * 7) % len(WEIRD)] for j in range(3)]


def _set(doc, path, value):
    for k in path[:-1]:
        doc = doc[k]
    doc[path[-1]] = value


def _fmt(path) -> str:
    return "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in path)


def _short(w) -> str:
    s = repr(w)
    return s if len(s) <= 12 else s[:9] + "..."


def encoding_cases(base: dict[str, Path], tmp: Path) -> list[Case]:
    out = tmp / "out"
    out.mkdir(exist_ok=True)
    raw = json.dumps(intact_doc())
    enc = tmp / "enc"
    enc.mkdir()
    files: dict[str, tuple[str, bytes]] = {
        "utf16-bom": ("rank0.json", raw.encode("utf-16")),
        "utf16le": ("rank0.json", raw.encode("utf-16-le")),
        "utf32-bom": ("rank0.json", raw.encode("utf-32")),
        "utf32be": ("rank0.json", raw.encode("utf-32-be")),
        "gzip-of-gzip": ("rank0.json.gz", gzip.compress(gzip.compress(raw.encode()))),
        "multi-member-gzip": ("rank0.json.gz", gzip.compress(raw[:500].encode()) + gzip.compress(raw[500:].encode())),
        "gzip-trailing-garbage": ("rank0.json.gz", gzip.compress(raw.encode()) + b"GARBAGE\x00\x01"),
        "bz2-as-gz": ("rank0.json.gz", bz2.compress(raw.encode())),
        "xz-as-gz": ("rank0.json.gz", lzma.compress(raw.encode())),
        "zstd-magic-as-gz": ("rank0.json.gz", b"\x28\xb5\x2f\xfd" + os.urandom(64)),
        "empty-gz": ("rank0.json.gz", b""),
        "gzip-of-nothing": ("rank0.json.gz", gzip.compress(b"")),
        "concatenated": ("rank0.json", (raw + raw).encode()),
        "concatenated-newline": ("rank0.json", (raw + "\n" + raw).encode()),
        "trailing-garbage": ("rank0.json", (raw + " xyz").encode()),
        "events-object": ("rank0.json", json.dumps({"traceEvents": {"a": 1}}).encode()),
        "events-string": ("rank0.json", json.dumps({"traceEvents": "x"}).encode()),
        "events-number": ("rank0.json", json.dumps({"traceEvents": 5}).encode()),
        "events-null": ("rank0.json", json.dumps({"traceEvents": None}).encode()),
        "events-not-objects": ("rank0.json", json.dumps({"traceEvents": [1, "x", None, [], True]}).encode()),
        "top-level-list": ("rank0.json", json.dumps(intact_doc()["traceEvents"]).encode()),
        "nul-bytes": ("rank0.json", raw.encode().replace(b'"ph"', b'"p\x00h"')),
        "latin1-name": ("rank0.json", raw.replace("aten::mm", "aten::mm\u00e9").encode("latin-1")),
    }
    zpath = enc / "zip"
    zpath.mkdir()
    with zipfile.ZipFile(zpath / "rank0.json.gz", "w") as z:
        z.writestr("rank0.json", raw)
    cases = _input_cases("trace encoding", "enc:zip-as-gz", zpath, out, ("info", "analyze", "check", "annotate"))
    for label, (name, data) in files.items():
        d = enc / label
        d.mkdir()
        (d / name).write_bytes(data)
        cases += _input_cases("trace encoding", f"enc:{label}", d, out, ("info", "analyze", "check", "annotate"))

    # event-level oddities
    def doc_with(events_fn: Callable[[list], list], header=None) -> dict:
        d = intact_doc()
        d["traceEvents"] = events_fn(d["traceEvents"])
        d.update(header or {})
        return d

    step = lambda n, ts, dur=1000: {
        "ph": "X",
        "cat": "user_annotation",
        "name": f"ProfilerStep#{n}",
        "pid": 1,
        "tid": 1,
        "ts": ts,
        "dur": dur,
    }
    events = {
        "100k-pids": lambda ev: (
            ev + [{"ph": "X", "cat": "cpu_op", "name": "x", "pid": i, "tid": i, "ts": 5, "dur": 1} for i in range(100_000)]
        ),
        "1e6-names": lambda ev: (
            ev + [{"ph": "i", "cat": "cpu_op", "name": f"n{i}", "pid": 1, "tid": 1, "ts": 5} for i in range(300_000)]
        ),
        "step-negative": lambda ev: [dict(e, name="ProfilerStep#-5") if e.get("name") == "ProfilerStep#1" else e for e in ev],
        "step-huge": lambda ev: [
            dict(e, name="ProfilerStep#9223372036854775807") if e.get("name") == "ProfilerStep#1" else e for e in ev
        ],
        "step-duplicated": lambda ev: [dict(e, name="ProfilerStep#1") if e.get("name") == "ProfilerStep#2" else e for e in ev],
        "step-non-monotonic": lambda ev: [
            dict(
                e, name={"ProfilerStep#1": "ProfilerStep#9", "ProfilerStep#2": "ProfilerStep#3"}.get(e.get("name"), e.get("name"))
            )
            for e in ev
        ],
        "steps-overlapping": lambda ev: ev + [step(3, 500, 1000)],
        "steps-nested": lambda ev: ev + [step(3, 100, 100)],
        "step-empty-number": lambda ev: ev + [dict(step(3, 2000), name="ProfilerStep#")],
        "begin-end-unbalanced": lambda ev: (
            ev
            + [
                {"ph": "B", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 1, "ts": 10},
                {"ph": "E", "pid": 1, "tid": 1, "ts": 5},
                {"ph": "E", "pid": 1, "tid": 2, "ts": 50},
            ]
        ),
        "begin-end-step": lambda ev: (
            [e for e in ev if not str(e.get("name", "")).startswith("ProfilerStep")]
            + [
                {"ph": "B", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0},
                {"ph": "E", "pid": 1, "tid": 1, "ts": 1000},
                {"ph": "B", "cat": "user_annotation", "name": "ProfilerStep#2", "pid": 1, "tid": 1, "ts": 1000},
            ]
        ),
        "ts-all-equal": lambda ev: [dict(e, ts=5) if "ts" in e else e for e in ev],
        "dur-all-zero": lambda ev: [dict(e, dur=0) if "dur" in e else e for e in ev],
        "ts-strings": lambda ev: [dict(e, ts=str(e["ts"])) if "ts" in e else e for e in ev],
        "no-steps": lambda ev: [e for e in ev if not str(e.get("name", "")).startswith("ProfilerStep")],
        "only-steps": lambda ev: [e for e in ev if str(e.get("name", "")).startswith("ProfilerStep")],
        "flow-events": lambda ev: (
            ev
            + [
                {"ph": "s", "id": 1, "pid": 1, "tid": 1, "ts": 20, "cat": "ac2g", "name": "x"},
                {"ph": "f", "id": 1, "pid": 0, "tid": 7, "ts": 1e300, "cat": "ac2g", "name": "x", "bp": "e"},
            ]
        ),
        "correlation-everywhere": lambda ev: [dict(e, args=dict(e.get("args") or {}, correlation=1)) for e in ev],
        "kernel-no-stream": lambda ev: [dict(e, args={}) if e.get("cat") == "kernel" else e for e in ev],
        "collective-huge-group": lambda ev: [
            dict(e, args=dict(e["args"], **{"Group size": 10**9, "Seq": -5})) if "nccl" in e.get("name", "") else e for e in ev
        ],
        "collective-pg-odd": lambda ev: [
            dict(e, args=dict(e["args"], **{"Process Group Name": "", "Process Group Description": "\x1b[2J"}))
            if "nccl" in e.get("name", "")
            else e
            for e in ev
        ],
        "memory-events": lambda ev: (
            ev
            + [
                {
                    "ph": "i",
                    "cat": "cpu_instant_event",
                    "name": "[memory]",
                    "pid": 1,
                    "tid": 1,
                    "ts": 50 + i,
                    "args": {"Device Id": 0, "Device Type": 1, "Addr": i, "Bytes": b, "Total Allocated": t, "Total Reserved": 0},
                }
                for i, (b, t) in enumerate([(10**30, -1), (-5, 1e308), (1, "x")])
            ]
        ),
    }
    for label, fn in events.items():
        d = enc / f"ev-{label}"
        d.mkdir()
        (d / "rank0.json").write_text(json.dumps(doc_with(fn)))
        cases += _input_cases(
            "trace events", f"ev:{label}", d, out, ("info", "analyze", "check", "annotate", "whatif", "report", "baseline")
        )
    return cases


def directory_cases(base: dict[str, Path], tmp: Path) -> list[Case]:
    out = tmp / "out"
    out.mkdir(exist_ok=True)
    raw = lambda r, w=2: json.dumps(
        dict(intact_doc(), distributedInfo=dict(intact_doc()["distributedInfo"], rank=r, world_size=w))
    )
    sets: dict[str, dict[str, bytes]] = {
        "same-rank-two-suffixes": {
            "rank0.json": raw(0).encode(),
            "rank0.json.gz": gzip.compress(raw(0).encode()),
            "rank1.json": raw(1).encode(),
        },
        "same-rank-two-names": {"a.json": raw(0).encode(), "b.pt.trace.json": raw(0).encode()},
        "ranks-0-and-1e6": {"rank0.json": raw(0, 10**6 + 1).encode(), "rank1000000.json": raw(10**6, 10**6 + 1).encode()},
        "world-size-1e9": {"rank0.json": raw(0, 10**9).encode()},
        "world-size-2**63": {"rank0.json": raw(0, 2**63).encode()},
        "one-rank-zero-bytes": {"rank0.json": raw(0).encode(), "rank1.json": b""},
        "one-rank-truncated": {"rank0.json": raw(0).encode(), "rank1.json": raw(1).encode()[:300]},
        "mixed-gzip-plain": {"rank0.json.gz": gzip.compress(raw(0).encode()), "rank1.json": raw(1).encode()},
        "gzip-named-json": {"rank0.json": gzip.compress(raw(0).encode()), "rank1.json": raw(1).encode()},
        "plain-named-gz": {"rank0.json.gz": raw(0).encode(), "rank1.json": raw(1).encode()},
        "rank-negative": {"rank0.json": raw(-1).encode()},
        "no-distributed-info-two": {
            "a.json": json.dumps({**intact_doc(), "distributedInfo": None}).encode(),
            "b.json": json.dumps({**intact_doc(), "distributedInfo": None}).encode(),
        },
        "with-subdirs": {"rank0.json": raw(0).encode(), "sub/rank1.json": raw(1).encode()},
        "with-other-files": {
            "rank0.json": raw(0, 1).encode(),
            "notes.txt": b"hello",
            "report.html": b"<html>",
            "summary.json": base["summary"].read_bytes(),
        },
        "run-json-dir": {"rank0.json": raw(0, 1).encode(), "run.json/x": b"{}"},
        "activation-dir": {"rank0.json": raw(0, 1).encode(), "activation_r0.json/x": b"{}"},
        "cache-dir-file": {"rank0.json": raw(0, 1).encode(), ".tracekit_cache": b"not a directory"},
    }
    cases: list[Case] = []
    for label, files in sets.items():
        d = tmp / "sets" / label
        for name, data in files.items():
            (d / name).parent.mkdir(parents=True, exist_ok=True)
            (d / name).write_bytes(data)
        for c, argv in _trace_commands(str(d), out).items():
            if label == "cache-dir-file":
                argv = [a for a in argv if a != "--no-cache"]
            cases.append(Case(f"dir:{label}/{c}", "directory set", argv, (0, 1, 2, 3) if c == "check" else (0, 2, 3)))
    return cases


CLASSES = (output_cases, input_path_cases, option_cases, document_cases, encoding_cases, directory_cases)


def build_cases(tmp: Path) -> list[Case]:
    base = build_base(tmp / "base")
    cases = []
    for make in CLASSES:
        sub = tmp / make.__name__
        sub.mkdir()
        cases += make(base, sub)
    return cases


# -- running and judging ------------------------------------------------------------------------------------------------
def judge(case: Case, rc: int, stdout: str, stderr: str, exc: BaseException | None) -> str | None:
    if rc == 124:
        return "hang"
    if "Traceback (most recent call last)" in stderr + stdout or (exc is not None and not isinstance(exc, SystemExit)):
        return "traceback"
    if rc == 1 and case.argv[0] != "check":
        return "exit 1 (gate failed) from a command without a gate"
    if rc not in case.ok_codes:
        return f"exit {rc}, expected one of {case.ok_codes}"
    if rc == 1:  # check's gate failed: the verdict is on stdout, the reasons in notes and warnings
        return None
    if rc not in (0, 141):
        lines = [x for x in stderr.splitlines() if x.strip() and not x.startswith(("warning:", "note:", "tracekit: note:"))]
        errors = [x for x in lines if x.startswith(("tracekit: error:", "Error:"))]
        if not errors:
            return "no one-line error on stderr"
        if len(errors[0]) > 2000:
            return "error line over 2000 characters"
        if rc != 2 and errors[0].startswith("Error:"):  # click's usage line only with 2
            return "usage error with exit != 2"
        if any(ord(ch) < 32 and ch not in "\t" for ch in errors[0]):
            return "raw control character in the error line"
    return None


def run_inproc(case: Case, cache: Path) -> Outcome:
    from click.testing import CliRunner

    from tracekit.cli import cli

    def alarm(signum, frame):
        raise TimeoutError(f"still running after {TIMEOUT_S} s")

    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(TIMEOUT_S)
    try:
        env = {"TRACEKIT_CACHE_DIR": str(cache), "COLUMNS": "160", **case.env}
        r = CliRunner(env=env).invoke(cli, case.argv, input=case.stdin)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    err, exc = r.stderr, r.exception
    if exc is not None and not isinstance(exc, SystemExit):
        err += "".join(traceback.format_exception(exc))
        rc = 124 if isinstance(exc, TimeoutError) else 1
    else:
        rc = r.exit_code
    return Outcome(case, rc, err, r.stdout, judge(case, rc, r.stdout, err, exc))


def run_process(case: Case, cache: Path) -> Outcome:
    import subprocess

    env = {**os.environ, "TRACEKIT_CACHE_DIR": str(cache), "COLUMNS": "160", **case.env}
    tk = f"{_q(sys.executable)} -m tracekit"
    if case.shell:
        cmd: list[str] | str = ["bash", "-c", case.shell.replace("{tk}", tk)]
    else:
        cmd = [sys.executable, "-m", "tracekit", *case.argv]
    try:
        # cwd: a relative TRACEKIT_CACHE_DIR ('abc') makes its directory there, not in the checkout
        p = subprocess.run(cmd, capture_output=True, timeout=TIMEOUT_S, env=env, stdin=subprocess.DEVNULL, cwd=cache.parent)
        rc, out, err = p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")
    except subprocess.TimeoutExpired as e:
        rc, out, err = 124, (e.stdout or b"").decode(errors="replace"), (e.stderr or b"").decode(errors="replace")
    return Outcome(case, rc, err, out, judge(case, rc, out, err, None))


def run_case(case: Case, cache: Path) -> Outcome:
    return run_process(case, cache) if case.subprocess else run_inproc(case, cache)


def counts(outcomes: list[Outcome]) -> dict:
    return {
        "cases": len(outcomes),
        "commands": dict(Counter(o.case.argv[0] if o.case.argv[0] != "memory" else " ".join(o.case.argv[:2]) for o in outcomes)),
        "classes": dict(Counter(o.case.cls for o in outcomes)),
        "exit_codes": dict(sorted(Counter(o.rc for o in outcomes).items())),
        "defects": dict(Counter(o.defect.split(",")[0] for o in outcomes if o.defect)),
    }


def main(argv: list[str]) -> int:
    import tempfile
    import time

    pattern = argv[1] if len(argv) > 1 else ""
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        cases = [c for c in build_cases(tmp) if pattern in c.name]
        (tmp / "cache").mkdir()
        t0 = time.monotonic()
        outcomes = []
        for c in cases:
            o = run_case(c, tmp / "cache")
            outcomes.append(o)
            if o.defect:
                last = (o.stderr.strip().splitlines() or [""])[-1]
                print(f"DEFECT {o.defect} | {c.name} | rc {o.rc} | {last[:300]!r}", flush=True)
        for path in tmp.rglob("*"):  # chmod 000 leftovers would stop the cleanup
            if not path.is_symlink():
                with contextlib.suppress(OSError):
                    path.chmod(0o700)
        print(json.dumps(counts(outcomes), indent=1))
        print(f"{len(outcomes)} cases in {time.monotonic() - t0:.0f} s")
        return 1 if any(o.defect for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
