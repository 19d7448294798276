"""A recall event traces its request (issue 27 §2): the query (cut or hashed per the settings), the request id of the
response header, the session, the threshold and the hits it cut, the entries served; and the console replays the
request now, as its caller, through the same service, beside what was served then."""

import uuid

import pytest
from django.urls import reverse

from core.models import AccountUser
from profiles.models import LLMUsage, PurposeProfile, RecallEvent, RetrievalSettings
from profiles.services import query_digest
from sessions_app.models import RecallLedgerEntry
from tests.profiles.test_recall_events import RECALL, SEARCH, post

QUERY = "how did the production deploy go?"


@pytest.fixture
def corpus(api):
    api.write_all(
        {
            "viking://~/memories/events/2026/11/30/deploy.md": "# Summary\nDeployed ovsite 0.3 to production on "
            "Nov 30.\n\n# Details\n" + "Canary first. " * 40,
            "viking://~/memories/entities/caddy.md": "Caddy fronts the RTMP ingest on port 1935.",
            "viking://~/memories/preferences/reports.md": "Prefers reports that lead with the conclusion.",
        }
    )
    return api


def replay_url(event) -> str:
    return reverse("admin:profiles_recallevent_replay", args=[event.pk])


def served(result) -> list[tuple]:
    return [(e["uri"], e["detail"], e["score"]) for e in result["entries"]]


def test_a_recall_event_carries_its_query_request_id_session_threshold_and_served_entries(corpus):
    corpus.post("/api/v1/sessions/s1/messages", {"role": "user", "content": "how did it go?"})
    result = post(corpus, RECALL, {"query": QUERY, "session_id": "s1", "max_tokens": 300})
    [event] = RecallEvent.objects.all()
    stats = result["stats"]
    assert event.request_id == corpus.last["X-Request-ID"] and uuid.UUID(event.request_id)
    assert (event.query, event.query_hashed, event.session_id) == (QUERY, False, "s1")
    assert [(e["uri"], e["detail"], e["score"]) for e in event.served] == served(result) != []
    assert event.hits_before_threshold == stats["candidates"] + stats["threshold"]["below"]
    # What the client sent, not what the preset filled in: a replay applies today's preset.
    assert event.request_params == {
        "body": {"query": QUERY, "session_id": "s1", "max_tokens": 300},
        "actor_peer": "",
        "user_id": "default",
        "role": "admin",
    }


def test_a_search_keeps_the_fields_it_was_sent_and_its_actor_peer(corpus):
    body = {"query": QUERY, "mode": "context", "purpose": "chat", "score_threshold": 0.6, "detail": "abstract"}
    post(corpus, SEARCH, body)
    corpus.post(SEARCH, {"mode": "bootstrap", "max_tokens": 900}, X_OpenViking_Actor_Peer="agent-7")
    search, bootstrap = RecallEvent.objects.order_by("id")
    assert search.request_params["body"] == body and search.threshold_source == "request"
    assert bootstrap.query == "" and bootstrap.request_params["body"] == {"mode": "bootstrap", "max_tokens": 900}
    assert bootstrap.request_params["actor_peer"] == "agent-7"


def test_the_query_is_cut_to_the_settings_length_and_the_replay_keeps_it_whole(corpus):
    RetrievalSettings.objects.filter(pk=1).update(recall_event_query_chars=10)
    post(corpus, RECALL, {"query": QUERY})
    event = RecallEvent.objects.get()
    assert event.query == QUERY[:10] and event.request_params["body"]["query"] == QUERY


def test_with_no_query_chars_the_event_keeps_neither_text_nor_parameters(corpus, operator):
    RetrievalSettings.objects.filter(pk=1).update(recall_event_query_chars=0)
    post(corpus, RECALL, {"query": QUERY})
    event = RecallEvent.objects.get()
    assert (event.query, event.request_params) == ("", None)
    assert "recall_event_query_chars was 0" in operator.get(replay_url(event)).content.decode()


def test_a_hashed_query_is_found_by_its_exact_text_but_neither_shown_nor_replayed(corpus, operator):
    RetrievalSettings.objects.filter(pk=1).update(recall_event_query_hashed=True)
    post(corpus, RECALL, {"query": QUERY})
    event = RecallEvent.objects.get()
    assert event.query_hashed and event.query == query_digest(QUERY) and len(event.query) == 64
    assert event.request_params is None and QUERY not in str(RecallEvent.objects.values().get())
    assert query_digest(QUERY) != query_digest(QUERY + "?")
    changelist = reverse("admin:profiles_recallevent_changelist")
    assert list(operator.get(changelist, {"q": QUERY}).context["cl"].result_list) == [event]
    assert list(operator.get(changelist, {"q": "production"}).context["cl"].result_list) == []
    page = operator.get(replay_url(event)).content.decode()
    assert 'id="replay-unavailable"' in page and "kept only as a hash" in page and 'id="replay-now"' not in page
    before = RecallEvent.objects.count()
    assert 'id="replay-unavailable"' in operator.post(replay_url(event)).content.decode()
    assert RecallEvent.objects.count() == before


def test_the_event_page_links_the_session_the_request_id_and_the_replay(corpus, operator):
    corpus.post("/api/v1/sessions/s1/messages", {"role": "user", "content": "hi"})
    post(corpus, RECALL, {"query": QUERY, "session_id": "s1"})
    event = RecallEvent.objects.get()
    page = operator.get(reverse("admin:profiles_recallevent_change", args=[event.pk])).content.decode()
    sessions = reverse("admin:sessions_app_session_changelist")
    assert f'href="{sessions}?q=s1&amp;account__id__exact={event.account_id}"' in page
    assert event.request_id in page and replay_url(event) in page
    assert f"{event.hits_before_threshold} → {event.candidates}" in page
    found = operator.get(sessions, {"q": "s1", "account__id__exact": event.account_id}).context["cl"].result_list
    assert [s.session_id for s in found] == ["s1"]


def test_replay_runs_the_request_now_beside_what_was_served_and_leaves_no_trace(corpus, operator):
    then = post(corpus, RECALL, {"query": QUERY, "max_tokens": 400})
    event = RecallEvent.objects.get()
    page = operator.get(replay_url(event))
    assert page.status_code == 200 and 'id="replay-now"' in page.content.decode()
    assert RecallEvent.objects.count() == 1  # showing the page runs nothing

    same = operator.post(replay_url(event))
    assert same.context["replay"].error == "" and {r["change"] for r in same.context["rows"]} == {"same"}
    assert [r["uri"] for r in same.context["rows"]] == [uri for uri, _, _ in served(then)]
    assert same.context["replay"].result["rendered"] == then["rendered"]

    # The operator raises /recall's threshold: replayed now, the request's entries are cut by it.
    RetrievalSettings.objects.filter(pk=1).update(recall_score_threshold=0.99)
    raised = operator.post(replay_url(event))
    assert {r["change"] for r in raised.context["rows"]} == {"gone"}
    assert raised.context["now_stats"]["threshold"] == "0.9900"
    assert raised.context["now_stats"]["threshold source"] == "recall_preset"
    assert 'id="replay-compare"' in raised.content.decode()
    assert RecallEvent.objects.count() == 1  # a replay is not traffic


def test_replay_leaves_the_sessions_dedup_ledger_as_it_was(corpus, operator):
    corpus.post("/api/v1/sessions/s1/messages", {"role": "user", "content": "how did it go?"})
    post(corpus, RECALL, {"query": QUERY, "session_id": "s1"})
    ledger = list(RecallLedgerEntry.objects.values_list("uri", "detail", "msg_index"))
    assert ledger
    response = operator.post(replay_url(RecallEvent.objects.get()))
    assert response.context["replay"].result is not None
    assert list(RecallLedgerEntry.objects.values_list("uri", "detail", "msg_index")) == ledger


def test_replay_refused_now_is_shown_not_a_500(corpus, operator):
    post(corpus, SEARCH, {"query": QUERY, "mode": "context", "purpose": "chat"})
    PurposeProfile.objects.filter(name="chat").update(enabled=False)
    response = operator.post(replay_url(RecallEvent.objects.get()))
    assert response.status_code == 200
    assert "purpose 'chat' is not an enabled purpose profile" in response.context["replay"].error
    assert 'id="replay-error"' in response.content.decode()


def test_replay_needs_the_user_still_in_the_account(corpus, operator):
    post(corpus, RECALL, {"query": QUERY})
    AccountUser.objects.filter(user_id="default").delete()
    page = operator.post(replay_url(RecallEvent.objects.get())).content.decode()
    assert "no longer a member of account" in page and 'id="replay-unavailable"' in page


def test_replay_action_opens_the_replay_of_one_event(corpus, operator):
    post(corpus, RECALL, {"query": QUERY})
    post(corpus, RECALL, {"query": "caddy port"})
    first, second = RecallEvent.objects.order_by("id")
    changelist = reverse("admin:profiles_recallevent_changelist")
    response = operator.post(changelist, {"action": "replay", "_selected_action": [first.pk]})
    assert response.status_code == 302 and response["Location"] == replay_url(first)
    both = operator.post(changelist, {"action": "replay", "_selected_action": [first.pk, second.pk]}, follow=True)
    assert "Select one event to replay." in both.content.decode()


def test_llm_calls_carry_their_requests_id_and_replays_keep_theirs(corpus, operator, fake_llm):
    fake_llm.script.usage = (120, 30)
    post(corpus, RECALL, {"query": QUERY, "rewrite": True})
    event = RecallEvent.objects.get()
    [call] = LLMUsage.objects.filter(kind="rewrite")
    assert call.request_id == event.request_id != ""
    response = operator.post(replay_url(event))
    assert response.context["replay"].llm_calls == 1
    replayed = LLMUsage.objects.filter(kind="rewrite").exclude(pk=call.pk).get()
    assert replayed.request_id == response["X-Request-ID"] and replayed.prompt_tokens == 120
