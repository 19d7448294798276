"""One RecallEvent per assembly (/search context, /recall, bootstrap, and the MCP tools), never failing it, and the
roll-up that prunes them."""

import datetime as dt
import json

import pytest
from django.conf import settings as django_settings
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIRequestFactory

from assembly.service import run_search
from assembly.views import recall_view, search_view
from core.auth import authenticate_headers
from profiles.models import RecallDaily, RecallEvent, RetrievalSettings
from profiles.tasks import roll_up_old_recall_events
from sessions_app.models import Session

SEARCH, RECALL = "/api/v1/search/search", "/api/v1/search/recall"
EVENT_FIELDS = (
    "endpoint",
    "purpose",
    "max_tokens",
    "used_tokens",
    "candidates",
    "returned",
    "dropped",
    "cooled",
    "tier_full",
    "tier_overview",
    "tier_abstract",
    "tier_uri",
    "query_expansion",
    "rewrite",
    "search_mode",
    "score_threshold",
    "threshold_source",
    "below_threshold",
    "relevance_strong",
)


@pytest.fixture
def corpus(api):
    api.write_all(
        {
            "viking://~/memories/events/2026/11/30/deploy.md": (
                "# Summary\nDeployed ovsite 0.3 to production on Nov 30.\n\n# Details\n" + "Canary first. " * 60
            ),
            "viking://~/memories/preferences/reports.md": "Prefers reports that lead with the conclusion.",
            "viking://~/memories/entities/caddy.md": "Caddy fronts the RTMP ingest on port 1935.",
            "viking://resources/runbooks/restart.md": "# Restart the workers\nsystemctl restart ovsite-worker",
        }
    )
    return api


def post(api, path, body):
    status, result = api.post(path, body)
    assert status == 200, result
    return result["result"]


def event_of(stats: dict, endpoint: str) -> dict:
    tiers = stats["tier_counts"]
    return {
        "endpoint": endpoint,
        "purpose": stats["purpose"] or "",
        "max_tokens": stats["max_tokens"],
        "used_tokens": stats["used_tokens"],
        "candidates": stats["candidates"],
        "returned": stats["returned"],
        "dropped": stats["dropped"],
        "cooled": stats["dedup"]["cooled"],
        "tier_full": tiers["full"],
        "tier_overview": tiers["overview"],
        "tier_abstract": tiers["abstract"],
        "tier_uri": tiers["uri"],
        "query_expansion": stats["query_expansion"],
        "rewrite": stats["rewrite"],
        "search_mode": stats["search_mode"],
        "score_threshold": stats["threshold"]["score_threshold"],
        "threshold_source": stats["threshold"]["source"],
        "below_threshold": stats["threshold"]["below"],
        "relevance_strong": stats["threshold"]["strong"],
    }


def test_search_context_records_one_event_matching_its_stats(corpus):
    result = post(
        corpus, SEARCH, {"query": "production deploy", "mode": "context", "max_tokens": 200, "purpose": "chat"}
    )
    [event] = RecallEvent.objects.values(*EVENT_FIELDS, "latency_ms", "account__name")
    assert {k: event[k] for k in EVENT_FIELDS} == event_of(result["stats"], "search")
    assert event["account__name"] == "default" and event["latency_ms"] > 0
    assert sum(event[f"tier_{t}"] for t in ("full", "overview", "abstract", "uri")) == event["returned"] > 0


def test_recall_records_its_endpoint_and_preset_purpose_with_cooled_entries(corpus):
    body = {"query": "production deploy", "session_id": "s1"}
    corpus.post("/api/v1/sessions/s1/messages", {"role": "user", "content": "how did it go?"})
    first = post(corpus, RECALL, body)
    Session.objects.filter(session_id="s1").update(total_message_count=2)  # the next turn
    second = post(corpus, RECALL, body)
    assert second["stats"]["dedup"]["cooled"] > 0
    events = list(RecallEvent.objects.order_by("id").values(*EVENT_FIELDS))
    assert events == [event_of(first["stats"], "recall"), event_of(second["stats"], "recall")]
    assert events[0]["purpose"] == "coding" and events[1]["cooled"] == second["stats"]["dedup"]["cooled"]


def test_list_mode_and_find_record_nothing(corpus):
    post(corpus, SEARCH, {"query": "deploy"})
    post(corpus, "/api/v1/search/find", {"query": "deploy"})
    assert not RecallEvent.objects.exists()


def test_recording_can_be_switched_off_in_the_settings(corpus):
    RetrievalSettings.objects.filter(pk=1).update(record_recall_events=False)
    post(corpus, SEARCH, {"query": "deploy", "mode": "context"})
    assert not RecallEvent.objects.exists()
    assert "record;" not in corpus.last["Server-Timing"]


@pytest.mark.parametrize("path, view", [(SEARCH, search_view), (RECALL, recall_view)])
def test_rest_records_once_the_response_is_sent_not_before(corpus, path, view):
    """The INSERT is off the caller's latency: the server calls close() when the client has the whole answer."""
    request = APIRequestFactory().post(
        path, {"query": "deploy", "mode": "context"}, format="json", REMOTE_ADDR="127.0.0.1"
    )
    response = view(request)
    response.render()
    assert response.status_code == 200 and "record;" not in response["Server-Timing"]
    assert not RecallEvent.objects.exists()
    response.close()
    [event] = RecallEvent.objects.values(*EVENT_FIELDS)
    assert event == event_of(json.loads(response.content)["result"]["stats"], path.rsplit("/", 1)[1])


def test_without_a_response_to_wait_for_the_event_is_recorded_at_once(corpus):
    """The MCP tools answer through the same service without an HTTP response of Django's: recorded inline."""
    caller = authenticate_headers({}, "127.0.0.1", [])[0]
    result, timings = run_search(caller=caller, body={"query": "deploy", "mode": "context"})
    assert "record;dur=" in timings.header()["Server-Timing"]
    [event] = RecallEvent.objects.values(*EVENT_FIELDS)
    assert event == event_of(result["stats"], "search")


def test_a_failing_insert_never_fails_the_request(corpus, caplog):
    table = RecallEvent._meta.db_table
    with connection.cursor() as cursor:  # a real failure of the INSERT, in the database
        cursor.execute(f"ALTER TABLE {table} ADD CONSTRAINT refuse_all CHECK (false) NOT VALID")
    try:
        expected = post(corpus, SEARCH, {"query": "deploy", "mode": "context"})
        recalled = post(corpus, RECALL, {"query": "deploy"})
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"ALTER TABLE {table} DROP CONSTRAINT refuse_all")
    assert expected["entries"] and recalled["entries"] is not None
    assert not RecallEvent.objects.exists()
    assert "could not record a recall event" in caplog.text
    assert post(corpus, SEARCH, {"query": "deploy", "mode": "context"}) == expected  # and the next one records
    assert RecallEvent.objects.count() == 1


def make_event(when: dt.datetime, **fields) -> RecallEvent:
    event = RecallEvent.objects.create(
        **{
            "endpoint": "search",
            "purpose": "coding",
            "max_tokens": 1600,
            "used_tokens": 400,
            "returned": 3,
            "dropped": 1,
            "cooled": 0,
            "latency_ms": 10.0,
            **fields,
        }
    )
    RecallEvent.objects.filter(pk=event.pk).update(created_at=when)  # created_at is auto_now_add
    return event


def test_roll_up_folds_old_events_into_daily_totals_and_keeps_recent_ones(seeded):
    RetrievalSettings.objects.filter(pk=1).update(recall_event_retention_days=7)
    now = timezone.now()
    old_day = (now - dt.timedelta(days=10)).replace(hour=12)
    make_event(old_day, used_tokens=300, latency_ms=4.0)
    make_event(old_day + dt.timedelta(hours=1), used_tokens=500, dropped=2, cooled=1, latency_ms=6.0)
    make_event(old_day, endpoint="recall", purpose="chat")
    recent = make_event(now - dt.timedelta(days=1))

    # get() without Celery's "inside a task" guard: that flag is process-wide, and eager tasks on concurrent threads
    # (an earlier module's live server) can leave it set, since celery's denied_join_result is not thread-safe.
    assert roll_up_old_recall_events.delay().get(disable_sync_subtasks=False) == 3
    assert list(RecallEvent.objects.values_list("id", flat=True)) == [recent.id]
    rows = {(r.endpoint, r.purpose): r for r in RecallDaily.objects.all()}
    search = rows[("search", "coding")]
    assert (
        search.day,
        search.requests,
        search.used_tokens,
        search.max_tokens,
        search.returned,
        search.dropped,
        search.cooled,
        search.latency_ms_sum,
    ) == (old_day.date(), 2, 800, 3200, 6, 3, 1, 10.0)
    assert rows[("recall", "chat")].requests == 1

    make_event(old_day + dt.timedelta(hours=2), used_tokens=100)  # a late arrival for a day already rolled up
    assert roll_up_old_recall_events() == 1
    search.refresh_from_db()
    assert (search.requests, search.used_tokens) == (3, 900)
    assert roll_up_old_recall_events() == 0


def test_the_roll_up_runs_on_the_beat_schedule():
    [entry] = [
        e
        for e in django_settings.CELERY_BEAT_SCHEDULE.values()
        if e["task"] == "profiles.tasks.roll_up_old_recall_events"
    ]
    assert entry["schedule"] <= 24 * 3600
    from ovsite.celery import app

    app.loader.import_default_modules()
    assert "profiles.tasks.roll_up_old_recall_events" in app.tasks
