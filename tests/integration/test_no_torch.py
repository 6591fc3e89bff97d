"""`pip install tracekit` reads, analyses, reports and gates saved traces without torch.

The package is built into a wheel from this checkout and installed into a fresh virtual environment that has no
torch. Its dependencies are this environment's own installed packages, seen through a directory of links that
leaves torch (and the packages that come with it) out, so the test runs offline in seconds; the wheel's
metadata, read independently, shows that nothing `pip install tracekit` resolves requires torch. Then `import
torch` fails there, and `info`, `analyze`, `report`, `baseline` and `check` work on a real GPU trace, while the
collectors refuse in one line with exit code 4.
"""

from __future__ import annotations

import email.parser
import importlib.metadata as md
import os
import re
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

from tests.helpers.data import real_trace

ROOT = Path(__file__).resolve().parents[2]
TORCH_FAMILY = re.compile(r"^(torch|functorch|torchgen|triton|nvidia|tracekit|__editable__|_tracekit)", re.I)


def _run(args, cwd, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=300, **kw)


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> dict:
    d = tmp_path_factory.mktemp("no-torch")
    r = _run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(d / "wheel"), str(ROOT)], d
    )
    assert r.returncode == 0, r.stderr[-2000:]
    (wheel,) = (d / "wheel").glob("tracekit-*.whl")
    venv.EnvBuilder(with_pip=False).create(d / "venv")
    py = d / "venv" / "bin" / "python"
    r = _run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps", "--no-index", str(wheel)], d)
    assert r.returncode == 0, r.stderr[-2000:]
    deps = d / "deps"  # this environment's packages, without torch and its family
    deps.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not TORCH_FAMILY.match(entry.name) and not entry.name.endswith(".pth"):
            (deps / entry.name).symlink_to(entry)
    site = _run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], d).stdout.strip()
    Path(site, "deps.pth").write_text(f"{deps}\n")
    return {"dir": d, "py": py, "tracekit": d / "venv" / "bin" / "tracekit", "wheel": wheel}


def test_the_wheel_requires_no_torch_unless_collecting(env):
    meta = email.parser.Parser().parsestr(
        zipfile.ZipFile(env["wheel"])
        .read(next(n for n in zipfile.ZipFile(env["wheel"]).namelist() if n.endswith("METADATA")))
        .decode()
    )
    reqs = meta.get_all("Requires-Dist")
    torch = [r for r in reqs if re.match(r"torch\b", r)]
    assert torch and all('extra == "collect"' in r for r in torch), torch
    assert meta["License-Expression"] == "MIT"
    base = [re.split(r"[\s<>=!~;\[(]", r, maxsplit=1)[0] for r in reqs if "extra ==" not in r]
    seen, todo = set(), list(base)  # everything pip would resolve for `pip install tracekit`, from its metadata
    while todo:
        name = todo.pop()
        if name.lower() in seen:
            continue
        seen.add(name.lower())
        try:
            dep_reqs = md.requires(name) or []
        except md.PackageNotFoundError:  # a marker-excluded dependency (tomli on 3.11+)
            continue
        todo += [re.split(r"[\s<>=!~;\[(]", r, maxsplit=1)[0] for r in dep_reqs if "extra ==" not in r]
    assert "torch" not in seen and "pandas" in seen and "pyarrow" in seen


def test_the_wheel_carries_the_plotly_bundle_and_its_license(env):
    names = zipfile.ZipFile(env["wheel"]).namelist()
    assert {"tracekit/reports/assets/plotly-cartesian.min.js", "tracekit/reports/assets/plotly-LICENSE.txt"} <= set(names)
    meta = zipfile.ZipFile(env["wheel"]).read(next(n for n in names if n.endswith("METADATA"))).decode()
    assert not re.search(r"^Requires-Dist: plotly\b", meta, re.M)  # the bundle is vendored: no plotly package


def test_torch_is_absent_and_tracekit_imports_without_it(env):
    r = _run([str(env["py"]), "-c", "import torch"], env["dir"])
    assert r.returncode != 0 and "No module named 'torch'" in r.stderr
    code = (
        "import sys, tracekit; assert tracekit.__file__.startswith(sys.prefix), tracekit.__file__; "
        "heavy = {'torch', 'pandas', 'pyarrow', 'numpy', 'rich', 'jinja2', 'plotly'} & set(sys.modules); "
        "assert not heavy, heavy; tracekit.load; print('ok')"
    )
    r = _run([str(env["py"]), "-c", code], env["dir"])
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]


def test_analysis_commands_work_without_torch(env):
    trace, d, tk = str(real_trace("pp-sendrecv-128rank-rank0")), env["dir"], str(env["tracekit"])
    common = ["--no-cache", "--executor", "serial"]
    r = _run([tk, "info", *common, trace], d)
    assert r.returncode == 0 and "tracekit info: 1 rank(s)" in r.stdout, r.stderr[-2000:]
    r = _run([tk, "analyze", *common, trace], d, env={**os.environ, "COLUMNS": "100"})
    assert r.returncode == 0 and "per rank (totals over complete steps)" in r.stdout, r.stderr[-2000:]
    assert max(map(len, r.stdout.splitlines())) <= 100
    r = _run([tk, "report", *common, trace, "-o", str(d / "r.html")], d)
    assert r.returncode == 0 and "tracekit.summary/1" in (d / "r.html").read_text(), r.stderr[-2000:]
    r = _run([tk, "baseline", *common, trace, "-o", str(d / "base.json")], d)
    assert r.returncode == 0, r.stderr[-2000:]
    r = _run([tk, "check", *common, trace, "--baseline", str(d / "base.json"), "--budget", "overlap_ratio>=0"], d)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    r = _run([tk, "check", *common, trace, "--budget", "overlap_ratio>=1"], d)
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]  # the gate still fails when it should


@pytest.mark.parametrize("args", [["run", "--out", "x"], ["demo", "--out", "x"]])
def test_collectors_say_in_one_line_that_torch_is_missing(env, args):
    r = _run([str(env["tracekit"]), *args], env["dir"])
    assert r.returncode == 4, r.stdout + r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith("tracekit: error:") and "pip install 'tracekit[collect]'" in line
    assert not (env["dir"] / "x").exists()


def test_profile_says_that_torch_is_missing(env):
    code = (
        "import tracekit\ntry:\n    tracekit.profile\nexcept tracekit.TracekitError as e:\n"
        "    print(type(e).__name__, e.exit_code, e)\n"
    )
    r = _run([str(env["py"]), "-c", code], env["dir"])
    assert r.returncode == 0 and r.stdout.startswith("MissingDependencyError 4 tracekit.profile records"), r.stderr
