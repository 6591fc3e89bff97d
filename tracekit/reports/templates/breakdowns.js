// The memory timeline charts of the single-rank breakdowns (templates/breakdowns.html). Runs once plotly (inlined
// after the page body) is there. Device names come from the trace: they go through esc() before plotly sees them.
document.addEventListener("DOMContentLoaded", function () {
  "use strict";
  var data = JSON.parse(document.getElementById("tracekit-breakdowns").textContent);
  if (typeof Plotly === "undefined") {  // --plotly cdn without network: report.js says so in each chart
    document.body.setAttribute("data-breakdowns-rendered", "1");
    return;
  }
  var esc = function (s) {
    return String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  };
  var byRank = {};
  data.memory.forEach(function (p) { (byRank[p.rank] = byRank[p.rank] || []).push(p); });
  Object.keys(byRank).forEach(function (rank) {
    var el = document.getElementById("chart-memory-timeline-" + rank);
    if (!el) { return; }
    var traces = [];
    byRank[rank].forEach(function (p) {
      traces.push({type: "scatter", mode: "lines", line: {shape: "hv"}, name: esc(p.device) + " allocated",
                   x: p.t_ms, y: p.allocated_bytes, hovertemplate: "%{x:.3f} ms: %{y:,} B<extra></extra>"});
      if (p.reserved_bytes.some(function (v) { return v > 0; })) {
        traces.push({type: "scatter", mode: "lines", line: {shape: "hv", dash: "dot"}, name: esc(p.device) + " reserved",
                     x: p.t_ms, y: p.reserved_bytes, hovertemplate: "%{x:.3f} ms: %{y:,} B<extra></extra>"});
      }
    });
    Plotly.newPlot(el, traces, {margin: {l: 70, r: 20, t: 10, b: 50}, font: {size: 12}, legend: {orientation: "h", y: 1.15},
                                xaxis: {title: {text: "ms from the first memory event"}},
                                yaxis: {title: {text: "bytes"}}, paper_bgcolor: "#fff", plot_bgcolor: "#fff"},
                   {displaylogo: false, responsive: true});
  });
  document.body.setAttribute("data-breakdowns-rendered", "1");
});
