// The critical path of the timeline's step as a highlighted lane on top of the timeline chart, one bar colour per
// kind (tracekit.reports.html_critical). Names from the trace go through esc() before plotly sees them. Defined
// before report.js runs, which draws the lane with the timeline in one plot: added afterwards, plotly redrew the
// whole timeline for it (seconds with 20,000 bars).
var tracekitCriticalLane = function (data) {
  "use strict";
  var cp = data.critical;
  if (!cp) { return null; }
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
  return {lane: lane, traces: traces};
};
