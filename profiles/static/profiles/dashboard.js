// Draws the charts that profiles/dashboards.py describes, with the vendored plotly.js (profiles/static/plotly/), in
// the admin's colours (its CSS variables), so the charts read the same in light and dark mode.
document.addEventListener("DOMContentLoaded", function () {
  var data = document.getElementById("dashboard-charts");
  if (!data) return;  // the empty state draws nothing
  var charts = JSON.parse(data.textContent);
  var style = getComputedStyle(document.documentElement);
  var colour = function (name) { return style.getPropertyValue(name).trim(); };
  var grid = colour("--hairline-color");
  document.querySelectorAll("[data-chart]").forEach(function (element) {
    var chart = charts[Number(element.dataset.chart)];
    // The right margin holds the last day's tick label, slanted to the right when the days are many: plotly hides
    // a label that would pass the chart's edge, and with 16 px the last day had none.
    var layout = Object.assign({margin: {t: 40, r: 56, b: 56, l: 64},
                                legend: {orientation: "h", y: 1.02, yanchor: "bottom"},
                                paper_bgcolor: "rgba(0,0,0,0)", plot_bgcolor: "rgba(0,0,0,0)",
                                font: {color: colour("--body-fg")}}, chart.layout);
    layout.xaxis = Object.assign({gridcolor: grid}, layout.xaxis);
    layout.yaxis = Object.assign({gridcolor: grid, zerolinecolor: grid}, layout.yaxis);
    Plotly.newPlot(element, chart.traces, layout, {displayModeBar: false, responsive: true});
  });
});
