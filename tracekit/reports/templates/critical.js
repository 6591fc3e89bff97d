// The critical path of the timeline's step as a highlighted lane on top of the timeline chart, one bar colour per
// kind (tracekit.reports.html_critical). Names from the trace go through esc() before plotly sees them.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("tracekit-data").textContent);
  var cp = data.critical, el = document.getElementById("chart-timeline");
  if (!cp || !el || !el.data) { document.body.setAttribute("data-critical-rendered", "none"); return; }
  var esc = function (s) {
    return String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  };
  var COLORS = {compute: "#6a3d9a", comm_transfer: "#2a9d8f", comm_wait: "#ff9f1c", host: "#8d6e63",
                memcpy: "#17becf", idle: "#c7c7c7"};
  var lane = "critical path";
  var traces = Object.keys(COLORS).map(function (k) {
    var s = cp.segments.filter(function (b) { return b[2] === k; });
    return {type: "bar", orientation: "h", name: "path: " + k, y: s.map(function () { return lane; }),
      x: s.map(function (b) { return b[1]; }), base: s.map(function (b) { return b[0]; }),
      marker: {color: COLORS[k], line: {width: 0}},  // an outline read as black blocks on short segments
      customdata: s.map(function (b) {
        return [b[0], b[0] + b[1], b[3] === null ? "" : "rank " + b[3], esc(b[4]), esc(b[5])];
      }),
      hovertemplate: "%{customdata[2]} %{customdata[3]}: %{customdata[4]}<br>%{customdata[0]:.1f}–%{customdata[1]:.1f} µs" +
        "<extra>" + k + "</extra>"};
  }).filter(function (t) { return t.x.length; });
  var cats = [lane].concat((el.layout.yaxis && el.layout.yaxis.categoryarray) || []);
  Plotly.addTraces(el, traces);
  Plotly.relayout(el, {"yaxis.categoryarray": cats, height: (el.layout.height || 300) + 30});
  document.body.setAttribute("data-critical-rendered", String(traces.length));
})();
