"""The scripts and styles an HTML report carries: plotly.js (the vendored cartesian partial bundle, assets/README.md),
inlined so that the page opens offline, or for ``--plotly cdn`` a script tag for the same version on Plotly's CDN
(a page of tens of kB that draws its charts only where that host can be reached); the page's own script and
stylesheet (templates/) are always inlined."""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

from ..errors import ConfigError

PLOTLY_VERSION = "4.1.1"
PLOTLY_BUNDLE = "plotly-cartesian.min.js"  # bar, scatter and heatmap are all the report draws
PLOTLY_CDN = f"https://cdn.plot.ly/plotly-cartesian-{PLOTLY_VERSION}.min.js"
PLOTLY_MODES = ("inline", "cdn")


@lru_cache(maxsize=1)
def plotly_js() -> str:
    """The vendored bundle's text."""
    return (resources.files("tracekit.reports") / "assets" / PLOTLY_BUNDLE).read_text(encoding="utf-8")


def template_text(name: str) -> str:
    return (resources.files("tracekit.reports") / "templates" / name).read_text(encoding="utf-8")


def plotly_context(mode: str) -> dict:
    """What base.html reads: ``plotly_inline`` (the bundle, or "") and ``plotly_src`` (the CDN address, or "")."""
    if mode not in PLOTLY_MODES:
        raise ConfigError(f"report: --plotly {mode!r} is not one of {', '.join(PLOTLY_MODES)}")
    if mode == "cdn":
        return {"plotly_inline": "", "plotly_src": PLOTLY_CDN, "plotly_host": PLOTLY_CDN.split("/", 3)[2]}
    return {"plotly_inline": plotly_js(), "plotly_src": "", "plotly_host": ""}
