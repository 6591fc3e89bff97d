"""HTA 0.5.0's own Python environment: its critical path fails under pandas 3 (the project's venv has it), so a
separate venv with ``pandas<3`` is made on first use and reused. It sees the project venv's packages (HTA 0.5.0
itself, numpy, ...) through a ``.pth`` file behind its own site-packages, so only pandas 2 is installed into it
(one wheel, instead of HTA's whole dependency tree). ``TRACEKIT_HTA_VENV`` names where it lives (default
``.hta-venv`` at the repository root, git-ignored)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REQUIREMENTS = ("pandas<3",)  # HolisticTraceAnalysis==0.5.0 comes from the project venv (the test extra)


def hta_python() -> tuple[str | None, str]:
    """(the environment's python, "") once it exists and imports hta, or (None, why it could not be made)."""
    where = Path(os.environ.get("TRACEKIT_HTA_VENV", ROOT / ".hta-venv"))
    py = where / "bin" / "python"
    marker = where / ".ready"
    if marker.exists() and py.exists():
        return str(py), ""
    try:
        if not py.exists():
            subprocess.run([sys.executable, "-m", "venv", str(where)], check=True, capture_output=True, timeout=300)
        _see_project_packages(py)
        subprocess.run([str(py), "-m", "pip", "install", "-q", *REQUIREMENTS], check=True, capture_output=True, timeout=1800)
        subprocess.run([str(py), "-c", "import hta, pandas; assert pandas.__version__ < '3'"], check=True, capture_output=True)
    except (subprocess.SubprocessError, OSError) as exc:
        err = getattr(exc, "stderr", b"") or b""
        return None, f"HTA's environment ({' '.join(REQUIREMENTS)}) could not be made at {where}: {err.decode()[-300:] or exc}"
    marker.write_text("ok\n")
    return str(py), ""


def _see_project_packages(py: Path) -> None:
    """A .pth in the new venv's site-packages naming the project venv's: appended to sys.path after the venv's
    own packages, so pandas 2 installed there wins over the project's pandas 3."""
    import sysconfig

    own = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], check=True, capture_output=True, text=True
    ).stdout.strip()
    Path(own, "_tracekit_project.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")


def run_hta(trace: str, annotation: str, instances: list[int], timeout: int = 600) -> list[dict]:
    """HTA's critical path of each instance of ``annotation`` in the single-rank ``trace`` (hta_critical_path.py)."""
    import json

    py, why = hta_python()
    if py is None:
        raise RuntimeError(why)
    script = Path(__file__).with_name("hta_critical_path.py")
    res = subprocess.run(
        [py, str(script), trace, annotation, *map(str, instances)], capture_output=True, text=True, timeout=timeout, check=True
    )
    return json.loads(res.stdout.strip().splitlines()[-1])
