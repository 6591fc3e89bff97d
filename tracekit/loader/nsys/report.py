"""``.nsys-rep`` reports: converted to SQLite with ``nsys export --type sqlite`` into the cache directory when the
``nsys`` executable is on PATH (once per report version: the export is kept beside the Parquet cache and redone
when the report changes); without it, a one-line error that says how to export."""

from __future__ import annotations

import os
import shutil
import subprocess

from ...errors import TraceFormatError
from ..cache import cache_path, source_stamp

EXPORT_TIMEOUT_S = 3600


def exported(report: str, cache_dir: str | None) -> str:
    """The SQLite export of ``report`` (made now if missing or older than the report)."""
    stamp = source_stamp(report)
    if stamp is None:
        raise TraceFormatError(f"{report}: cannot read the report; check the path and permissions")
    nsys = shutil.which("nsys")
    if nsys is None:
        raise TraceFormatError(
            f"{report}: reading an .nsys-rep report needs Nsight Systems' `nsys` on PATH; export it with "
            f"`nsys export --type sqlite {report}` and pass the .sqlite file"
        )
    target = cache_path(report, cache_dir)[: -len(".parquet")] + ".sqlite"
    try:
        if os.path.isfile(target) and os.stat(target).st_mtime_ns >= stamp["mtime_ns"]:
            return target
        os.makedirs(os.path.dirname(target), exist_ok=True)
    except OSError as exc:
        raise TraceFormatError(
            f"{report}: cannot write its export to {target} ({exc.strerror or exc}); pass --cache-dir"
        ) from None
    tmp = f"{target}.{os.getpid()}.tmp.sqlite"
    cmd = [nsys, "export", "--type", "sqlite", "--force-overwrite", "true", "--output", tmp, report]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=EXPORT_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise TraceFormatError(
            f"{report}: `nsys export` did not run ({exc}); export it by hand with nsys export --type sqlite"
        ) from None
    if done.returncode != 0 or not os.path.isfile(tmp):
        last = (done.stderr or done.stdout or "").strip().splitlines()[-1:] or ["no output"]
        raise TraceFormatError(f"{report}: `nsys export --type sqlite` failed (exit {done.returncode}: {last[0][:200]})")
    os.replace(tmp, target)
    return target
