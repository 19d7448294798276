// Draws the charts that profiles/dashboards.py describes, with the vendored plotly.js (profiles/static/plotly/).
document.addEventListener("DOMContentLoaded", function () {
  var charts = JSON.parse(document.getElementById("dashboard-charts").textContent);
  document.querySelectorAll("[data-chart]").forEach(function (element) {
    var chart = charts[Number(element.dataset.chart)];
    var layout = Object.assign({title: {text: chart.title}, margin: {t: 48, r: 16, b: 48, l: 64},
                                legend: {orientation: "h"}}, chart.layout);
    Plotly.newPlot(element, chart.traces, layout, {displayModeBar: false, responsive: true});
  });
});
