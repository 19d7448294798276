"""The dashboards' time axes in a real browser (issue 39, "the newcomer's hour"): every day of the range has its tick
label, the last one included. plotly hides a label that would pass the chart's edge, and the last day's, slanted to
the right when the days are many, had no room in a 16 px right margin."""

import datetime as dt

import pytest

from tests.browser import chromium, shot, wait
from tests.profiles.test_console_browser import charts_drawn, log_in, seeded_usage  # noqa: F401 (a fixture)

TICK_LABELS = """
    const out = {};
    for (const chart of document.querySelectorAll('.dashboard-chart')) {
      const edge = chart.querySelector('svg.main-svg').getBoundingClientRect();
      out[chart.id] = [...chart.querySelectorAll('.xtick text')].map(label => {
        const box = label.getBoundingClientRect();
        return {text: label.textContent, shown: getComputedStyle(label).display !== 'none',
                inside: box.width > 0 && box.left >= edge.left && box.right <= edge.right};
      });
    }
    return out;
"""


@pytest.fixture
def browser():
    driver = chromium()
    yield driver
    driver.quit()


@pytest.mark.parametrize("days", [30, 31, 7])
def test_every_day_of_a_time_chart_has_its_label_the_last_one_included(
    browser,
    live_server,
    seeded_usage,  # noqa: F811
    days,
):
    until = dt.datetime.now(dt.UTC).date()
    since = until - dt.timedelta(days=days - 1)
    log_in(browser, live_server)
    browser.get(f"{live_server.url}/admin/dashboards/recall-traffic/?since={since}&until={until}")
    wait(browser, charts_drawn)
    shot(browser, f"dashboard-axes-{days}-days")
    expected = [(since + dt.timedelta(days=n)).strftime("%b %d") for n in range(days)]
    time_charts = {name: labels for name, labels in browser.execute_script(TICK_LABELS).items() if len(labels) > 1}
    assert len(time_charts) >= 6, time_charts.keys()
    for name, labels in time_charts.items():
        assert [label["text"] for label in labels] == expected, name
        hidden = [label["text"] for label in labels if not (label["shown"] and label["inside"])]
        assert not hidden, f"{name}: labels hidden or cut at the chart's edge: {hidden}"
