"""Dashboards you can trust (issue 27 §4): every bucket of the range drawn (zero-filled), per day or per hour, an
empty state that says what will appear and how to produce it, hit rate and latency p50/p95/p99, the digest
rewrite's tokens per purpose and per model, a CSV per chart, and a link from the admin's sidebar."""

import csv
import datetime as dt
import io
from decimal import Decimal

import pytest
from django.urls import reverse
from django.utils import timezone

from core.models import Account
from profiles.models import LLMUsage, ModelPrice, RecallEvent, RetrievalSettings
from tests.profiles.test_console_admin import COST, TRAFFIC, at, traffic, usage  # noqa: F401 (fixtures)


def chart(response, chart_id: str) -> dict:
    return next(c for c in response.context["charts"] if c["id"] == chart_id)


def rows_of(response) -> list[list[str]]:
    assert response["Content-Type"].startswith("text/csv")
    return list(csv.reader(io.StringIO(response.content.decode())))


def test_every_day_of_the_range_is_drawn_a_quiet_day_as_zero(operator, traffic):  # noqa: F811
    response = operator.get(TRAFFIC)
    today = traffic.date()
    days = [(today - dt.timedelta(days=d)).isoformat() for d in range(29, -1, -1)]
    requests = chart(response, "requests")
    assert all(trace["x"] == days for trace in requests["traces"])
    per_day = [sum(trace["y"][i] for trace in requests["traces"]) for i in range(30)]
    assert per_day == [0] * 28 + [2, 2]  # the roll-up is 40 days old: outside the default range
    latency = chart(response, "latency")
    assert [t["name"] for t in latency["traces"]] == ["p50", "p95", "p99"]
    assert latency["traces"][0]["y"][:28] == [None] * 28  # no requests, no percentile: a gap, not a zero
    assert latency["layout"]["yaxis"]["rangemode"] == "tozero"
    eve = (today - dt.timedelta(days=30)).isoformat()
    assert latency["layout"]["xaxis"]["range"] == [f"{eve}T12:00", f"{today.isoformat()}T12:00"]  # the range, no more


def test_hit_rate_counts_requests_that_served_something(operator, traffic):  # noqa: F811
    at(traffic, RecallEvent, endpoint="recall", purpose="coding", returned=0, latency_ms=5.0)
    response = operator.get(TRAFFIC)
    total = response.context["traffic"]["total"]
    assert (total["events"], total["answered"], total["hit_rate"]) == (5, 4, 0.8)
    assert chart(response, "hit-rate")["traces"][0]["y"][-2:] == [100.0, pytest.approx(66.7)]
    assert total["latency_p99"] == pytest.approx(39.6)  # 5, 10, 20, 30, 40 ms
    page = response.content.decode()
    assert 'id="total-hit-rate">80 %<' in page and 'id="total-p99">39.60<' in page


def test_per_hour_lists_every_hour_of_the_range(operator, traffic):  # noqa: F811
    day = traffic.date().isoformat()
    response = operator.get(TRAFFIC, {"since": day, "until": day, "per": "hour"})
    [trace] = chart(response, "requests")["traces"]
    assert len(trace["x"]) == 24 and trace["x"][12] == f"{day}T12:00"
    assert trace["y"][12] == 2 and sum(trace["y"]) == 2
    assert chart(response, "requests")["layout"]["xaxis"]["tickformat"] == "%b %d %H:%M"
    too_long = operator.get(TRAFFIC, {"since": "2026-01-01", "until": "2026-01-20", "per": "hour"})
    assert "per hour, a range is at most 14 days" in too_long.content.decode()


def test_per_hour_puts_a_rolled_up_day_in_its_first_hour(operator, traffic):  # noqa: F811
    old = (traffic - dt.timedelta(days=40)).date()
    response = operator.get(TRAFFIC, {"since": old.isoformat(), "until": old.isoformat(), "per": "hour"})
    [trace] = chart(response, "requests")["traces"]
    assert trace["y"][0] == 10 and sum(trace["y"]) == 10


def test_each_chart_exports_its_own_csv(operator, traffic):  # noqa: F811
    day = traffic.date()
    rows = rows_of(operator.get(TRAFFIC, {"format": "csv", "chart": "latency"}))
    assert rows[0] == ["day", "p50", "p95", "p99"] and len(rows) == 31
    assert rows[-1][0] == day.isoformat() and float(rows[-1][1]) == pytest.approx(35.0)
    assert rows[1][1:] == ["", "", ""]  # a day without requests has no percentile
    requests = rows_of(operator.get(TRAFFIC, {"format": "csv", "chart": "requests"}))
    assert requests[0] == ["day", "recall · coding", "search · chat"] and requests[-1][1:] == ["2", "0"]
    by_endpoint = rows_of(operator.get(TRAFFIC, {"format": "csv", "chart": "endpoint-latency"}))
    assert [r[0] for r in by_endpoint] == ["endpoint", "recall", "search"]
    assert operator.get(TRAFFIC, {"format": "csv", "chart": "nonsense"}).status_code == 404
    page = operator.get(TRAFFIC).content.decode()
    assert 'href="?format=csv&amp;chart=latency"' in page and 'id="csv-latency"' in page


@pytest.fixture
def rewrites(seeded):
    """Digest rewrites of two purposes and two models, tied to their requests' events by request id, and one call
    whose event is gone."""
    today = timezone.now().replace(hour=12, minute=0)
    account = Account.objects.get(name="default")
    for request_id, purpose, model, prompt in (
        ("r-chat", "chat", "planner-a", 1000),
        ("r-coding", "coding", "planner-a", 300),
        ("r-coding-2", "coding", "planner-b", 200),
        ("r-gone", None, "planner-b", 50),
    ):
        if purpose is not None:
            at(today, RecallEvent, endpoint="recall", purpose=purpose, request_id=request_id, returned=2)
        at(
            today,
            LLMUsage,
            kind="rewrite",
            model=model,
            account=account,
            prompt_tokens=prompt,
            completion_tokens=10,
            outcome="ok",
            request_id=request_id,
        )
    at(today, LLMUsage, kind="expansion", model="planner-a", prompt_tokens=99, outcome="ok", request_id="r-chat")
    ModelPrice.objects.create(model="planner-a", prompt_per_million=Decimal("1"), completion_per_million=Decimal("2"))
    return today


def test_rewrite_tokens_and_money_per_purpose_and_per_model(operator, rewrites):
    response = operator.get(COST)
    tables = {table: dict(rows) for table, _, rows in response.context["cost_tables"]}
    purposes = tables["rewrite-purpose"]
    assert {k: (r["calls"], r["prompt_tokens"]) for k, r in purposes.items()} == {
        "chat": (1, 1000),
        "coding": (2, 500),
        "(unknown)": (1, 50),
    }
    assert purposes["chat"]["money"] == "0.0010 USD"  # 1000 × 1/M + 10 × 2/M = 0.00102
    assert {k: r["prompt_tokens"] for k, r in tables["rewrite-model"].items()} == {"planner-a": 1300, "planner-b": 250}
    [coding] = [t for t in chart(response, "rewrite-purposes")["traces"] if t["name"] == "coding"]
    assert coding["y"][-1] == 520
    rows = rows_of(operator.get(COST, {"format": "csv", "chart": "rewrite-models"}))
    assert rows[0] == ["day", "planner-a", "planner-b"] and rows[-1][1:] == ["1320", "270"]


def test_an_empty_database_shows_what_will_appear_and_how_to_produce_it(operator):
    for url, heading in ((TRAFFIC, "No recall events from"), (COST, "No LLM calls from")):
        response = operator.get(url)
        page = response.content.decode()
        assert response.status_code == 200 and 'id="empty-state"' in page and heading in page
        assert "/api/v1/search/recall" in page and response.context["charts"] == []
        assert 'id="dashboard-charts"' not in page and 'id="latest"' not in page
    assert 'id="llm-off"' in operator.get(COST).content.decode()  # no LLM configured in the tests
    assert 'id="recording-off"' not in operator.get(TRAFFIC).content.decode()
    RetrievalSettings.objects.filter(pk=1).update(record_recall_events=False)
    assert 'id="recording-off"' in operator.get(TRAFFIC).content.decode()


def test_an_empty_range_points_at_the_latest_event(operator):
    at(timezone.now() - dt.timedelta(days=90), RecallEvent, endpoint="search", latency_ms=3.0)
    page = operator.get(TRAFFIC).content.decode()
    assert 'id="empty-state"' in page and 'id="latest"' in page


def test_the_sidebar_and_the_index_link_the_dashboards_and_the_settings_history(operator):
    history = reverse("admin:profiles_retrievalsettings_history", args=[1])
    for page in (reverse("admin:index"), reverse("admin:profiles_recallevent_changelist")):
        response = operator.get(page)
        [dashboards] = [app for app in response.context["available_apps"] if app["app_label"] == "dashboards"]
        assert [m["admin_url"] for m in dashboards["models"]] == [TRAFFIC, COST, history]
    sidebar = operator.get(reverse("admin:profiles_recallevent_changelist")).content.decode()
    assert 'id="nav-sidebar"' in sidebar and f'href="{TRAFFIC}"' in sidebar
    assert operator.get(reverse("admin:app_list", args=["profiles"])).status_code == 200
