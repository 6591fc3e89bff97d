// Draws the report's charts from the JSON blob. Every string from a trace goes through esc() before plotly sees
// it: plotly reads a subset of HTML in labels, and trace names are untrusted text. A section with nothing to show
// has no chart element (the page says why instead); each duration axis reads in the unit the summary's values
// call for (data.*.axis: the µs values divided by its scale), the timeline in µs, as its lanes and the critical
// path are recorded.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("tracekit-data").textContent);
  if (typeof Plotly === "undefined") {  // --plotly cdn without network: the tables have every number
    Array.prototype.forEach.call(document.querySelectorAll(".chart"), function (el) {
      el.className += " no-plotly";
      el.textContent = "This chart needs plotly.js from the network (report written with --plotly cdn); every number is in the tables.";
    });
    document.body.setAttribute("data-rendered", "1");
    return;
  }
  var esc = function (s) {
    return String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  };
  var clip = function (s, n) { s = String(s); return s.length > n ? s.slice(0, n - 1) + "\u2026" : s; };
  var COLORS = {compute: "#9e9e9e", hidden: "#1f77b4", exposed: "#d62728", wait: "#ff9f1c", transfer: "#2a9d8f"};
  var CONFIG = {displaylogo: false, responsive: true, modeBarButtonsToRemove: ["sendDataToCloud", "lasso2d", "select2d"]};
  // The legend sits at the foot of the chart, left-aligned, under the axis title (above the plot it ran under
  // plotly's mode bar at narrow widths): the bottom margin holds the tick labels, the axis title and the legend.
  var LEGEND = {orientation: "h", x: 0, xanchor: "left", y: 0, yanchor: "bottom", yref: "container"};
  var base = function (extra) {
    var l = {margin: {l: 70, r: 30, t: 30, b: 100}, barmode: "stack", font: {size: 12}, legend: LEGEND,
             paper_bgcolor: "#fff", plot_bgcolor: "#fff"};
    for (var k in extra) { l[k] = extra[k]; }
    return l;
  };
  var draw = function (id, traces, layout) {
    var el = document.getElementById(id);
    if (el) { Plotly.newPlot(el, traces, layout, CONFIG); }
  };
  var scaled = function (xs, ax) {
    return xs.map(function (v) { return v === null || v === undefined ? null : v / ax.scale; });
  };
  var axisTitle = function (what, ax) { return {title: {text: what + " (" + ax.unit + ")", standoff: 8}, automargin: true}; };

  var d = data.dims;
  if (d.labels.length) {
    var labels = d.labels.map(esc);
    draw("chart-dims", [
      {type: "bar", name: "exposed", x: labels, y: scaled(d.exposed_us, d.axis), marker: {color: COLORS.exposed}},
      {type: "bar", name: "hidden", x: labels, y: scaled(d.hidden_us, d.axis), marker: {color: COLORS.hidden}}
    ], base({yaxis: axisTitle("communication over all ranks", d.axis), xaxis: {automargin: true}}));
  }

  var h = data.heatmap;
  draw("chart-heatmap", [{type: "heatmap", z: h.z.map(function (row) { return scaled(row, h.axis); }),
    x: h.steps.map(String), y: h.ranks.map(String), colorscale: "Reds",
    colorbar: {title: {text: "exposed " + h.axis.unit, side: "right"}},
    hovertemplate: "rank %{y}, step %{x}: %{z:.3f} " + h.axis.unit + " exposed<extra></extra>"}],
    base({xaxis: {title: {text: "step"}, type: "category", automargin: true},
          yaxis: {title: {text: "rank"}, type: "category", automargin: true},
          height: Math.max(260, 18 * h.ranks.length + 90)}));

  // Timeline: two lanes per rank (compute; communication hidden/exposed), horizontal bars from start to end, in µs.
  var tl = data.timeline, lanes = [], series = {compute: [], hidden: [], exposed: []};
  tl.ranks.forEach(function (r) {
    var cl = "r" + r.rank + " compute", ml = "r" + r.rank + " comm";
    lanes.push(cl, ml);
    ["compute", "hidden", "exposed"].forEach(function (c) {
      (r.intervals[c] || []).forEach(function (iv) {
        series[c].push({y: c === "compute" ? cl : ml, base: iv[0], x: iv[1] - iv[0]});
      });
    });
  });
  var tlTraces = ["compute", "hidden", "exposed"].map(function (c) {
    var s = series[c];
    return {type: "bar", orientation: "h", name: c === "compute" ? "compute" : c + " comm",
      y: s.map(function (p) { return p.y; }), x: s.map(function (p) { return p.x; }),
      base: s.map(function (p) { return p.base; }), marker: {color: COLORS[c]},
      customdata: s.map(function (p) { return [p.base, p.base + p.x]; }),
      hovertemplate: "%{y}: %{customdata[0]:.1f}–%{customdata[1]:.1f} µs<extra>" + c + "</extra>"};
  });
  var cpLane = typeof tracekitCriticalLane === "function" ? tracekitCriticalLane(data) : null;
  if (cpLane) { lanes.unshift(cpLane.lane); tlTraces = tlTraces.concat(cpLane.traces); }
  draw("chart-timeline", tlTraces, base({barmode: "overlay", bargap: 0.15,
    xaxis: {title: {text: tl.clock && tl.clock.common ? "µs from the step's earliest start, rank " +
      tl.clock.reference_rank + "'s clock (offsets applied)" : "µs from each rank's step start"},
      exponentformat: "none", separatethousands: true, automargin: true},
    yaxis: {type: "category", autorange: "reversed", categoryarray: lanes, automargin: true},
    height: Math.max(320, 22 * lanes.length + 160), margin: {l: 110, r: 30, t: 30, b: 110}}));
  var drawn = cpLane && document.getElementById("chart-timeline");
  document.body.setAttribute("data-critical-rendered", drawn ? String(cpLane.traces.length) : "none");

  var t = data.top;
  if (t.labels.length) {
    var tlab = t.labels.map(function (l, i) { return esc(clip(l + " " + t.names[i], 80)); });
    var hasWait = t.wait_us.some(function (v) { return v !== null; });
    var topTraces = hasWait ? [
      {type: "bar", orientation: "h", name: "wait (late peer)", y: tlab, x: scaled(t.wait_us, t.axis), marker: {color: COLORS.wait}},
      {type: "bar", orientation: "h", name: "transfer", y: tlab, x: scaled(t.transfer_us, t.axis), marker: {color: COLORS.transfer}}
    ] : [
      {type: "bar", orientation: "h", name: "exposed", y: tlab, x: scaled(t.exposed_us, t.axis), marker: {color: COLORS.exposed}},
      {type: "bar", orientation: "h", name: "hidden", y: tlab, x: scaled(t.hidden_us, t.axis), marker: {color: COLORS.hidden}}
    ];
    draw("chart-top", topTraces, base({xaxis: axisTitle("time in the collective", t.axis),
      yaxis: {type: "category", autorange: "reversed", automargin: true},
      height: Math.max(280, 20 * tlab.length + 150)}));
  }

  var s = data.stragglers;
  if (s.ranks.length || s.offset_ranks.length) {
    draw("chart-stragglers", [
      {type: "bar", name: "wait caused on peers", x: s.ranks.map(String), y: scaled(s.caused_wait_us, s.axis), marker: {color: COLORS.wait}},
      {type: "scatter", mode: "markers", name: "clock offset ± spread", x: s.offset_ranks.map(String),
       y: scaled(s.offset_us, s.offset_axis), error_y: {type: "data", array: scaled(s.spread_us, s.offset_axis)},
       yaxis: "y2", marker: {color: "#333"}}
    ], base({barmode: "group", xaxis: {title: {text: "rank"}, type: "category", automargin: true},
             yaxis: axisTitle("wait caused", s.axis),
             yaxis2: {title: {text: "clock offset (" + s.offset_axis.unit + ")", standoff: 8}, overlaying: "y", side: "right",
                      automargin: true, zeroline: false, showgrid: false}}));
  }

  var m = data.memory;
  if (m) {
    var ml = m.labels.map(esc);
    draw("chart-memory", [
      {type: "bar", name: "measured", x: ml, y: scaled(m.measured_bytes, m.axis), marker: {color: COLORS.hidden}},
      {type: "bar", name: "model", x: ml, y: scaled(m.model_bytes, m.axis), marker: {color: COLORS.compute}}
    ], base({barmode: "group", yaxis: axisTitle("saved for backward", m.axis), xaxis: {automargin: true}}));
  }
  document.body.setAttribute("data-rendered", "1");
})();
