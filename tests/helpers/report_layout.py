"""Layout checks of an HTML report as headless Chromium rendered it (tests.helpers.browser): text that overlaps
other text in a chart, charts and tables with nothing in them, and colours on the timeline that no legend entry
names. Each check reads the rendered DOM and SVG only (nothing of tracekit's), so it holds whatever the page's
script does."""

from __future__ import annotations

import json

# Every text box of each plotly chart, by group (tick labels per axis, axis titles, legend entries, colour bar,
# mode-bar buttons): pairs from different groups that intersect, and neighbours within one group of unrotated
# tick labels that do.
OVERLAPS = r"""(() => {
  const groups = {
    xtick: '.xtick text', ytick: '.ytick text', y2tick: '.y2tick text',
    xtitle: '.g-xtitle text', ytitle: '.g-ytitle text', y2title: '.g-y2title text',
    legend: '.legend .traces', colorbar: '.colorbar text', modebar: '.modebar-btn'
  };
  const out = [];
  document.querySelectorAll('.chart').forEach(chart => {
    const boxes = [];
    for (const [g, sel] of Object.entries(groups)) {
      chart.querySelectorAll(sel).forEach(el => {
        const r = el.getBoundingClientRect();
        if (r.width < 1 || r.height < 1) return;
        const rotated = /rotate\((?!0[ ,)])/.test(el.getAttribute('transform') || '');
        boxes.push({g, r, rotated, text: (el.textContent || el.getAttribute('data-title') || '').slice(0, 40)});
      });
    }
    for (let i = 0; i < boxes.length; i++) {
      for (let j = i + 1; j < boxes.length; j++) {
        const a = boxes[i], b = boxes[j];
        if (a.g === b.g && (a.g === 'legend' || a.g === 'modebar' || a.rotated || b.rotated || a.g.endsWith('title'))) continue;
        const w = Math.min(a.r.right, b.r.right) - Math.max(a.r.left, b.r.left);
        const h = Math.min(a.r.bottom, b.r.bottom) - Math.max(a.r.top, b.r.top);
        if (w > 1 && h > 1) out.push([chart.id, a.g, a.text, b.g, b.text]);
      }
    }
  });
  return JSON.stringify(out);
})()"""

# Charts without a drawn point, tables without a row, heat maps of one cell.
EMPTY = r"""(() => {
  const out = [];
  document.querySelectorAll('.chart').forEach(c => {
    const traces = (c.data || []);
    const points = traces.reduce((n, t) => n + ((t.x || t.z || []).length || 0), 0);
    if (!traces.length || !points) out.push(['empty chart', c.id]);
    traces.filter(t => t.type === 'heatmap').forEach(t => {
      if (t.z.length * (t.z[0] || []).length < 2) out.push(['1x1 heat map', c.id]);
    });
  });
  document.querySelectorAll('main table').forEach(t => {
    if (!t.querySelector('tbody tr')) out.push(['header-only table', (t.closest('section') || {}).id, t.className]);
  });
  return JSON.stringify(out);
})()"""

# Per chart: the fill colours of its drawn bars and markers, the colours its legend shows, and bar outlines.
COLOURS = r"""((id) => {
  const c = document.getElementById(id);
  const norm = s => (s || '').replace(/\s+/g, '');
  const fills = new Set(), legend = new Set(), strokes = new Set();
  c.querySelectorAll('.trace.bars .point path').forEach(p => {
    fills.add(norm(p.style.fill));
    const w = parseFloat(p.style.strokeWidth || '0');
    if (w > 0 && p.style.stroke && norm(p.style.stroke) !== norm(p.style.fill)) strokes.add(norm(p.style.stroke));
  });
  c.querySelectorAll('.legend .traces .legendpoints path').forEach(p => legend.add(norm(p.style.fill)));
  return JSON.stringify({fills: [...fills], legend: [...legend], strokes: [...strokes]});
})"""


def overlaps(page) -> list:
    return json.loads(page.eval(OVERLAPS))


def empty_things(page) -> list:
    return json.loads(page.eval(EMPTY))


def colours(page, chart_id: str) -> dict:
    return json.loads(page.eval(f"{COLOURS}({json.dumps(chart_id)})"))


def resize(page, width: int) -> None:
    """The viewport at ``width`` px; plotly's responsive charts lay themselves out again (waited for)."""
    import time

    page.b._call(page.ws, "Emulation.setDeviceMetricsOverride", width=width, height=1000, deviceScaleFactor=1, mobile=False)
    page.width = width
    page.eval("window.dispatchEvent(new Event('resize'))")
    time.sleep(0.6)  # plotly's resize handler is debounced


def cell_texts(page, skip: str = "#critical-path, #whatif") -> list:
    """Every numeric cell as [header, text, data-value, data-key, data-unknown] (the header of its column), but those
    of the sections ``skip`` names (the critical path's tables, which another part of the report lays out)."""
    return json.loads(
        page.eval(
            r"""JSON.stringify(Array.from(document.querySelectorAll('main td.n .num[data-key], main td.n .num[data-derived]'))
      .filter(s => !s.closest('"""
            + skip.replace("'", "")
            + r"""')).map(s => {
      const td = s.closest('td'), table = td.closest('table');
      const th = table.querySelectorAll('thead th')[Array.from(td.parentNode.children).indexOf(td)];
      const key = s.dataset.key || s.dataset.derived;
      return [th ? th.textContent : '', s.textContent, s.dataset.value, key, s.dataset.unknown || null];
    }))"""
        )
    )
