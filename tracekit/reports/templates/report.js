// Draws the report's charts from the JSON blob. Every string from a trace goes through esc() before plotly
// sees it: plotly reads a subset of HTML in labels, and trace names are untrusted text.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("tracekit-data").textContent);
  var esc = function (s) {
    return String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  };
  var clip = function (s, n) { s = String(s); return s.length > n ? s.slice(0, n - 1) + "\u2026" : s; };
  var COLORS = {compute: "#9e9e9e", hidden: "#1f77b4", exposed: "#d62728", wait: "#ff9f1c", transfer: "#2a9d8f"};
  var CONFIG = {displaylogo: false, responsive: true, modeBarButtonsToRemove: ["sendDataToCloud"]};
  var base = function (extra) {
    var l = {margin: {l: 60, r: 20, t: 10, b: 50}, barmode: "stack", font: {size: 12},
             legend: {orientation: "h", y: 1.12}, paper_bgcolor: "#fff", plot_bgcolor: "#fff"};
    for (var k in extra) { l[k] = extra[k]; }
    return l;
  };
  var draw = function (id, traces, layout) {
    var el = document.getElementById(id);
    if (el) { Plotly.newPlot(el, traces, layout, CONFIG); }
  };
  var us = {title: {text: "µs"}};

  var d = data.dims, labels = d.labels.map(esc);
  draw("chart-dims", [
    {type: "bar", name: "exposed", x: labels, y: d.exposed_us, marker: {color: COLORS.exposed}},
    {type: "bar", name: "hidden", x: labels, y: d.hidden_us, marker: {color: COLORS.hidden}}
  ], base({yaxis: us}));

  var h = data.heatmap;
  draw("chart-heatmap", [{type: "heatmap", z: h.z, x: h.steps.map(String), y: h.ranks.map(String),
    colorscale: "Reds", colorbar: {title: {text: "exposed µs"}},
    hovertemplate: "rank %{y}, step %{x}: %{z:.1f} µs exposed<extra></extra>"}],
    base({xaxis: {title: {text: "step"}, type: "category"}, yaxis: {title: {text: "rank"}, type: "category"},
          height: Math.max(260, 18 * h.ranks.length + 90)}));

  // Timeline: two lanes per rank (compute; communication hidden/exposed), horizontal bars from start to end.
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
  draw("chart-timeline", tlTraces, base({barmode: "overlay", bargap: 0.15,
    xaxis: {title: {text: tl.clock && tl.clock.common ? "µs from the step's earliest start, rank " +
      tl.clock.reference_rank + "'s clock (offsets applied)" : "µs from each rank's step start"}}, yaxis: {type: "category", autorange: "reversed", categoryarray: lanes},
    height: Math.max(300, 22 * lanes.length + 100), margin: {l: 110, r: 20, t: 10, b: 50}}));

  var t = data.top, tlab = t.labels.map(function (l, i) { return esc(clip(l + " " + t.names[i], 80)); });
  var hasWait = t.wait_us.some(function (v) { return v !== null; });
  var topTraces = hasWait ? [
    {type: "bar", orientation: "h", name: "wait (late peer)", y: tlab, x: t.wait_us, marker: {color: COLORS.wait}},
    {type: "bar", orientation: "h", name: "transfer", y: tlab, x: t.transfer_us, marker: {color: COLORS.transfer}}
  ] : [
    {type: "bar", orientation: "h", name: "exposed", y: tlab, x: t.exposed_us, marker: {color: COLORS.exposed}},
    {type: "bar", orientation: "h", name: "hidden", y: tlab, x: t.hidden_us, marker: {color: COLORS.hidden}}
  ];
  draw("chart-top", topTraces, base({xaxis: us, yaxis: {type: "category", autorange: "reversed", automargin: true},
    height: Math.max(260, 20 * tlab.length + 90)}));

  var s = data.stragglers;
  if (s.ranks.length || s.offset_ranks.length) {
    draw("chart-stragglers", [
      {type: "bar", name: "wait caused on peers", x: s.ranks.map(String), y: s.caused_wait_us, marker: {color: COLORS.wait}},
      {type: "scatter", mode: "markers", name: "clock offset ± spread", x: s.offset_ranks.map(String), y: s.offset_us,
       error_y: {type: "data", array: s.spread_us}, yaxis: "y2", marker: {color: "#333"}}
    ], base({barmode: "group", xaxis: {title: {text: "rank"}, type: "category"}, yaxis: us,
             yaxis2: {title: {text: "offset µs"}, overlaying: "y", side: "right"}}));
  }

  var m = data.memory;
  if (m) {
    draw("chart-memory", [
      {type: "bar", name: "measured", x: m.labels.map(esc), y: m.measured_bytes, marker: {color: COLORS.hidden}},
      {type: "bar", name: "model", x: m.labels.map(esc), y: m.model_bytes, marker: {color: COLORS.compute}}
    ], base({barmode: "group", yaxis: {title: {text: "bytes"}}}));
  }
  document.body.setAttribute("data-rendered", "1");
})();
