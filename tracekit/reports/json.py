"""The JSON reporter: writes the summary as it is (sorted keys, no NaN), so a diff or a gate can read it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .base import Rendered, check_summary


class JsonReporter:
    format = "json"
    suffix = ".json"

    def render(self, summary: Mapping, out: Path, **_: Any) -> Rendered:
        check_summary(summary)
        out = Path(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(summary, indent=1, sort_keys=True, allow_nan=False) + "\n", encoding="utf-8")
        return Rendered(out, out.stat().st_size)
