"""Sessions, messages and the recall ledger (docs/design.md §3–4 and docs/assembly.md "Cross-turn dedup"), over HTTP
and through the real SDK."""

import logging
import threading

import pytest
from django.db import connection, connections
from django.test import override_settings
from openviking_sdk import ContextPart, TextPart
from openviking_sdk.errors import ConflictError, InvalidArgumentError, NotFoundError
from rest_framework.test import APIClient

from core.auth import Caller
from core.models import Account
from retrieval.tokens import estimate_tokens
from sessions_app import ledger
from sessions_app.models import Message, RecallLedgerEntry, Session
from sessions_app.selectors import find_session, recent_messages
from sessions_app.services import MAX_MESSAGE_BYTES, NewMessage, add_messages
from tests.conftest import Api

ROOT_KEY = "root-test-key"


def default_caller(user_id="default") -> Caller:
    account, _ = Account.objects.get_or_create(name="default")  # transactional tests flush it
    return Caller(account.id, account.name, user_id, "admin")


def add(api, session_id, content, role="user", **extra):
    status, body = api.post(f"/api/v1/sessions/{session_id}/messages", {"role": role, "content": content, **extra})
    assert status == 200, body
    return body["result"]


def get_session(api, session_id, **params):
    return api.get(f"/api/v1/sessions/{session_id}", **params)


def context(api, session_id, token_budget):
    status, body = api.get(f"/api/v1/sessions/{session_id}/context", token_budget=token_budget)
    assert status == 200, body
    return body["result"]


def assert_invalid(status, body, loc=None):
    assert status == 422, body
    assert body["status"] == "error" and body["error"]["code"] == "INVALID_ARGUMENT"
    errors = body["error"]["details"]["validation_errors"]
    if loc is not None:
        assert loc in [e["loc"] for e in errors], errors


# routes ------------------------------------------------------------------------------------------------------


def test_create_get_list_and_delete(api):
    status, body = api.post("/api/v1/sessions", {})
    assert status == 200 and body["status"] == "ok"
    generated = body["result"]["session_id"]
    assert len(generated) == 32 and int(generated, 16) >= 0

    status, body = api.post("/api/v1/sessions", {"session_id": "chat:2024-01.a_b"})
    assert status == 200
    created = body["result"]
    assert created["session_id"] == "chat:2024-01.a_b" and created["user"] == "default"
    assert created["total_message_count"] == 0 and created["message_count"] == 0

    status, body = api.post("/api/v1/sessions", {"session_id": "chat:2024-01.a_b"})
    assert status == 409 and body["error"]["code"] == "CONFLICT"

    status, body = get_session(api, "chat:2024-01.a_b")
    assert status == 200
    assert set(body["result"]) == {
        "session_id",
        "user",
        "total_message_count",
        "message_count",
        "archive_overview",
        "created_at",
        "updated_at",
    }
    assert body["result"]["archive_overview"] == ""

    status, body = api.get("/api/v1/sessions")
    assert status == 200
    assert {s["session_id"] for s in body["result"]} == {generated, "chat:2024-01.a_b"}

    api.last = api.client.delete("/api/v1/sessions/chat:2024-01.a_b")
    assert api.last.status_code == 200 and api.last.json()["result"] == {"session_id": "chat:2024-01.a_b"}
    status, body = get_session(api, "chat:2024-01.a_b")
    assert status == 404 and body["error"]["code"] == "NOT_FOUND"
    assert api.client.delete("/api/v1/sessions/chat:2024-01.a_b").status_code == 404


def test_get_with_auto_create_creates_and_without_it_is_not_found(api):
    status, body = get_session(api, "hook-1")
    assert status == 404 and body["error"]["details"] == {"resource": "hook-1", "type": "session"}
    status, body = get_session(api, "hook-1", auto_create="true")
    assert status == 200 and body["result"]["session_id"] == "hook-1"
    assert get_session(api, "hook-1")[0] == 200
    assert get_session(api, "hook-1", auto_create="true")[0] == 200  # idempotent
    assert Session.objects.filter(session_id="hook-1").count() == 1


def test_adding_a_message_creates_the_session(api):
    result = add(api, "fresh", "Hello there.")
    assert result == {"session_id": "fresh", "message_count": 1, "added": 1}
    session = get_session(api, "fresh")[1]["result"]
    assert session["total_message_count"] == 1 and session["message_count"] == 1


def test_parts_are_stored_raw_and_their_text_joined_as_content(api):
    parts = [
        {"type": "text", "text": "First line."},
        {"type": "context", "uri": "viking://resources/doc.md", "context_type": "resource", "abstract": "A doc."},
        {"type": "text", "text": "Second line."},
    ]
    status, body = api.post("/api/v1/sessions/p/messages", {"role": "assistant", "parts": parts, "peer_id": "bot-1"})
    assert status == 200, body
    message = Message.objects.get(session__session_id="p")
    assert message.content == "First line.\nSecond line."
    assert message.parts == parts and message.peer_id == "bot-1" and message.role == "assistant"
    shown = context(api, "p", 1000)["messages"][0]
    assert shown["content"] == "First line.\nSecond line." and shown["parts"] == parts and shown["index"] == 0


def test_parts_win_over_content_and_non_text_parts_may_stand_alone(api):
    status, _ = api.post(
        "/api/v1/sessions/p/messages",
        {"role": "user", "content": "ignored", "parts": [{"type": "text", "text": "kept"}]},
    )
    assert status == 200
    tool = [{"type": "tool", "tool_id": "t1", "tool_name": "grep", "tool_output": "3 matches"}]
    status, _ = api.post("/api/v1/sessions/p/messages", {"role": "tool", "parts": tool})
    assert status == 200
    assert list(
        Message.objects.filter(session__session_id="p").order_by("index").values_list("content", flat=True)
    ) == ["kept", ""]


def test_the_turn_clock_counts_single_and_batch_adds_and_restarts_after_delete(api):
    for text in ("one", "two", "three"):
        add(api, "clock", text)
    status, body = api.post(
        "/api/v1/sessions/clock/messages/batch",
        {
            "messages": [
                {"role": "assistant", "content": "four"},
                {"role": "user", "parts": [{"type": "text", "text": "five"}]},
            ]
        },
    )
    assert status == 200 and body["result"] == {"session_id": "clock", "message_count": 5, "added": 2}
    messages = context(api, "clock", 10_000)["messages"]
    assert [(m["index"], m["content"]) for m in messages] == [
        (0, "one"),
        (1, "two"),
        (2, "three"),
        (3, "four"),
        (4, "five"),
    ]
    assert get_session(api, "clock")[1]["result"]["total_message_count"] == 5

    assert api.client.delete("/api/v1/sessions/clock").status_code == 200
    assert not Message.objects.filter(session__session_id="clock").exists()
    assert get_session(api, "clock", auto_create="true")[1]["result"]["total_message_count"] == 0
    assert add(api, "clock", "again")["message_count"] == 1
    assert context(api, "clock", 10_000)["messages"][0]["index"] == 0


def test_message_count_is_what_is_stored_while_the_turn_clock_never_goes_back(api):
    for text in ("a", "b", "c"):
        add(api, "kept", text)
    Message.objects.filter(session__session_id="kept", index=0).delete()  # what a commit's archive does
    session = get_session(api, "kept")[1]["result"]
    assert session["message_count"] == 2 and session["total_message_count"] == 3
    assert add(api, "kept", "d")["message_count"] == 4


def test_a_batch_with_one_invalid_message_writes_nothing(api):
    add(api, "atomic", "before")
    batch = [
        {"role": "user", "content": "ok"},
        {"role": "user", "content": "ok too"},
        {"role": "narrator", "content": "bad role"},
    ]
    status, body = api.post("/api/v1/sessions/atomic/messages/batch", {"messages": batch})
    assert_invalid(status, body, ["messages", 2, "role"])

    too_big = [{"role": "user", "content": "fine"}, {"role": "user", "content": "x" * (MAX_MESSAGE_BYTES + 1)}]
    status, body = api.post("/api/v1/sessions/atomic/messages/batch", {"messages": too_big})
    assert status == 413 and body["error"]["code"] == "RESOURCE_EXHAUSTED"
    assert body["error"]["details"] == {"index": 1, "limit_bytes": MAX_MESSAGE_BYTES}

    assert get_session(api, "atomic")[1]["result"]["total_message_count"] == 1
    assert Message.objects.filter(session__session_id="atomic").count() == 1
    status, _ = api.post("/api/v1/sessions/never/messages/batch", {"messages": batch})
    assert status == 422 and not Session.objects.filter(session_id="never").exists()


@pytest.mark.parametrize("session_id", ["has%20space", "a" * 129, "..", "emoji%F0%9F%98%80", "tab%09"])
def test_a_bad_session_id_is_422(api, session_id):
    assert_invalid(*get_session(api, session_id, auto_create="true"), ["session_id"])
    assert_invalid(
        *api.post(f"/api/v1/sessions/{session_id}/messages", {"role": "user", "content": "hi"}), ["session_id"]
    )
    assert not Session.objects.exists()


def test_a_bad_session_id_on_create_is_422(api):
    assert_invalid(*api.post("/api/v1/sessions", {"session_id": "no spaces"}), ["session_id"])
    assert_invalid(*api.post("/api/v1/sessions", {"session_id": "x" * 129}), ["session_id"])
    assert_invalid(*api.post("/api/v1/sessions", {"id": "wrong-field"}), ["id"])


@pytest.mark.parametrize(
    "message, loc",
    [
        ({"role": "user"}, ["content"]),
        ({"role": "user", "parts": []}, ["content"]),
        ({"role": "user", "content": None}, ["content"]),
        ({"role": "user", "content": 5}, ["content"]),
        ({"content": "no role"}, ["role"]),
        ({"role": "robot", "content": "x"}, ["role"]),
        ({"role": "user", "content": "x", "colour": "blue"}, ["colour"]),
        ({"role": "user", "parts": "not a list"}, ["parts"]),
        ({"role": "user", "parts": [{"text": "no type"}]}, ["parts"]),
        ({"role": "user", "parts": [{"type": "text"}]}, ["parts"]),
        ({"role": "user", "content": "x", "peer_id": "p" * 65}, ["peer_id"]),
        ({"role": "user", "content": "nul \x00 inside"}, ["content"]),
        ({"role": "user", "parts": [{"type": "tool", "tool_output": "nul \x00 inside"}]}, [0, "parts"]),
    ],
)
def test_invalid_messages_are_422(api, message, loc):
    status, body = api.post("/api/v1/sessions/v/messages", message)
    assert_invalid(status, body, loc)
    assert not Session.objects.exists()


def test_sdk_metadata_fields_are_accepted(api):
    status, body = api.post(
        "/api/v1/sessions/meta/messages",
        {
            "role": "user",
            "content": "hi",
            "created_at": "2024-01-01T00:00:00Z",
            "turn_id": "t1",
            "message_kind": "user_query",
            "source_message_ids": ["m0"],
            "options": {},
        },
    )
    assert status == 200, body


def test_an_oversized_message_is_413_and_an_empty_batch_422(api):
    status, body = api.post("/api/v1/sessions/big/messages", {"role": "user", "content": "é" * MAX_MESSAGE_BYTES})
    assert status == 413 and body["error"]["code"] == "RESOURCE_EXHAUSTED"
    assert_invalid(*api.post("/api/v1/sessions/big/messages/batch", {"messages": []}), ["messages", "non_field_errors"])
    assert not Session.objects.exists()


def test_bad_query_parameters_are_422(api):
    add(api, "q", "hi")
    assert_invalid(*api.get("/api/v1/sessions/q/context", token_budget=-1), ["token_budget"])
    assert_invalid(*api.get("/api/v1/sessions/q/context", token_budget="lots"), ["token_budget"])
    assert_invalid(*api.get("/api/v1/sessions/q", auto_create="perhaps"), ["auto_create"])
    assert_invalid(*api.get("/api/v1/sessions/q", colour="blue"), ["colour"])
    assert_invalid(*api.get("/api/v1/sessions", limit=0), ["limit"])


def test_concurrent_appends_to_a_new_session_take_consecutive_indexes(api):
    caller = default_caller()
    errors = []

    def append(worker):
        try:
            for i in range(5):
                add_messages(caller=caller, session_id="race", messages=[NewMessage("user", f"{worker}-{i}")] * 2)
        except Exception as exc:  # collected, so that the assertion below shows it
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=append, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    session = Session.objects.get(session_id="race")
    assert session.total_message_count == 40
    assert sorted(Message.objects.filter(session=session).values_list("index", flat=True)) == list(range(40))
    pairs = list(Message.objects.filter(session=session).order_by("index").values_list("content", flat=True))
    assert all(pairs[i] == pairs[i + 1] for i in range(0, 40, 2))  # each call's messages stay adjacent


def test_the_admin_shows_sessions_messages_and_the_ledger_read_only(api, admin_client):
    add(api, "inspect-me", "A message worth reading.")
    session = Session.objects.get(session_id="inspect-me")
    served_at(session, [(1, "viking://resources/served.md", "abstract")])
    page = admin_client.get("/admin/sessions_app/session/", {"q": "inspect"})
    assert page.status_code == 200 and b"inspect-me" in page.content
    page = admin_client.get(f"/admin/sessions_app/session/{session.pk}/change/")
    assert page.status_code == 200 and b"A message worth reading." in page.content
    page = admin_client.get("/admin/sessions_app/recallledgerentry/", {"q": "served.md"})
    assert page.status_code == 200 and b"viking://resources/served.md" in page.content
    assert admin_client.get("/admin/sessions_app/session/add/").status_code == 403
    assert admin_client.post(f"/admin/sessions_app/session/{session.pk}/delete/", {"post": "yes"}).status_code == 403


# context -----------------------------------------------------------------------------------------------------


def test_context_keeps_the_newest_messages_that_fit_and_drops_the_oldest(api):
    texts = [f"Message number {i}: " + "word " * (10 * (i + 1)) for i in range(5)]
    for text in texts:
        add(api, "budget", text)
    costs = [estimate_tokens(t) for t in texts]

    budget = costs[3] + costs[4]
    result = context(api, "budget", budget)
    assert [m["content"] for m in result["messages"]] == texts[3:]
    assert result["estimated_tokens"] == budget and result["total_message_count"] == 5
    assert [m["estimated_tokens"] for m in result["messages"]] == costs[3:]

    one_short = context(api, "budget", budget - 1)
    assert [m["index"] for m in one_short["messages"]] == [4]
    assert context(api, "budget", costs[4] - 1)["messages"] == []
    assert len(context(api, "budget", sum(costs))["messages"]) == 5


def test_context_adds_the_archive_overview_only_when_it_fits_after_the_messages(api):
    add(api, "arch", "Latest question about the deploy.")
    overview = "Earlier the user set up the billing service and its CI pipeline."
    Session.objects.filter(session_id="arch").update(archive_overview=overview)
    message_tokens = estimate_tokens("Latest question about the deploy.")
    roomy = context(api, "arch", 10_000)
    assert roomy["archive_overview"] == overview
    assert roomy["estimated_tokens"] == message_tokens + estimate_tokens(overview)
    tight = context(api, "arch", message_tokens)
    assert tight["archive_overview"] == "" and len(tight["messages"]) == 1
    assert tight["estimated_tokens"] == message_tokens


def test_context_of_a_missing_session_is_not_found(api):
    status, body = api.get("/api/v1/sessions/nowhere/context", token_budget=100)
    assert status == 404 and body["error"]["code"] == "NOT_FOUND"


# isolation ---------------------------------------------------------------------------------------------------


def keyed(key, **headers) -> Api:
    client = APIClient()
    client.credentials(HTTP_X_API_KEY=key, **{"HTTP_" + k.upper().replace("-", "_"): v for k, v in headers.items()})
    return Api(client)


def test_sessions_are_scoped_to_account_and_user(api):
    add(api, "shared-id", "default's message")
    with override_settings(OVSITE_ROOT_API_KEY=ROOT_KEY):
        root = keyed(ROOT_KEY)
        status, body = root.post("/api/v1/admin/accounts", {"account_id": "acme", "admin_user_id": "alice"})
        assert status == 200, body
        alice = keyed(body["result"]["user_key"])

        # Another account: the same id is a different session.
        assert get_session(alice, "shared-id")[0] == 404
        assert add(alice, "shared-id", "alice's message")["message_count"] == 1
        assert [s["session_id"] for s in alice.get("/api/v1/sessions")[1]["result"]] == ["shared-id"]
        assert context(alice, "shared-id", 1000)["messages"][0]["content"] == "alice's message"

        # Another user of the same account: alice's session does not exist for bob, and her id is free for him
        # (a 409 there would tell bob which ids alice uses).
        bob = keyed(ROOT_KEY, **{"X-OpenViking-Account": "acme", "X-OpenViking-User": "bob"})
        assert get_session(bob, "shared-id")[0] == 404
        assert bob.get("/api/v1/sessions/shared-id/context")[0] == 404
        assert bob.client.delete("/api/v1/sessions/shared-id").status_code == 404
        assert bob.get("/api/v1/sessions")[1]["result"] == []
        assert bob.post("/api/v1/sessions", {"session_id": "shared-id"})[0] == 200
        assert add(bob, "shared-id", "bob's message")["message_count"] == 1
        assert [m["content"] for m in context(bob, "shared-id", 1000)["messages"]] == ["bob's message"]
        assert [m["content"] for m in context(alice, "shared-id", 1000)["messages"]] == ["alice's message"]

        assert alice.client.delete("/api/v1/sessions/shared-id").status_code == 200
        assert APIClient().get("/api/v1/sessions").status_code == 401
    status, body = get_session(api, "shared-id")
    assert status == 200 and body["result"]["total_message_count"] == 1
    assert context(api, "shared-id", 1000)["messages"][0]["content"] == "default's message"


def test_find_session_and_recent_messages(api):
    for i in range(25):
        add(api, "recent", f"message {i}", role="user" if i % 2 == 0 else "assistant")
    caller = default_caller()
    session = find_session(caller=caller, session_id="recent")
    assert session is not None and session.total_message_count == 25
    assert find_session(caller=default_caller("someone-else"), session_id="recent") is None
    assert find_session(caller=caller, session_id="absent") is None

    recent = recent_messages(session=session)
    assert [m["index"] for m in recent] == list(range(5, 25))
    assert recent[-1] == {"role": "user", "content": "message 24", "index": 24}
    assert [m["content"] for m in recent_messages(session=session, limit=2)] == ["message 23", "message 24"]


# ledger ------------------------------------------------------------------------------------------------------


def make_session(session_id="ledger", total=0) -> Session:
    return Session.objects.create(
        account_id=default_caller().account_id, session_id=session_id, user="default", total_message_count=total
    )


def served_at(session, rows):
    RecallLedgerEntry.objects.bulk_create(
        [RecallLedgerEntry(session=session, uri=uri, detail=detail, msg_index=turn) for turn, uri, detail in rows]
    )


def test_cooled_uris_covers_the_last_n_turns_with_the_last_detail_served(db, django_assert_num_queries):
    session = make_session(total=10)
    served_at(session, [(5, "a", "full"), (7, "b", "abstract"), (9, "a", "uri"), (10, "c", "overview")])
    served_at(make_session("other", total=10), [(10, "d", "full")])
    with django_assert_num_queries(0):
        assert ledger.cooled_uris(session=session, turns=0) == {}
    with django_assert_num_queries(1):
        assert ledger.cooled_uris(session=session, turns=1) == {"c": "overview"}
    assert ledger.cooled_uris(session=session, turns=2) == {"a": "uri", "c": "overview"}
    assert ledger.cooled_uris(session=session, turns=4) == {"b": "abstract", "a": "uri", "c": "overview"}
    assert ledger.cooled_uris(session=session, turns=5) == {"b": "abstract", "a": "uri", "c": "overview"}
    assert ledger.cooled_uris(session=session, turns=6) == {"a": "uri", "b": "abstract", "c": "overview"}
    assert ledger.cooled_uris(session=session, turns=100) == {"a": "uri", "b": "abstract", "c": "overview"}


def test_record_served_inserts_on_the_current_turn_and_prunes_old_turns(db):
    session = make_session(total=150)
    served_at(session, [(49, "old", "full"), (50, "edge", "full"), (120, "mid", "abstract")])
    ledger.record_served(session=session, served=[("x", "full"), ("y", "uri")])
    rows = set(RecallLedgerEntry.objects.filter(session=session).values_list("msg_index", "uri", "detail"))
    assert rows == {(50, "edge", "full"), (120, "mid", "abstract"), (150, "x", "full"), (150, "y", "uri")}
    assert ledger.cooled_uris(session=session, turns=1) == {"x": "full", "y": "uri"}


def test_record_served_with_nothing_served_is_a_no_op(db, django_assert_num_queries):
    session = make_session()
    with django_assert_num_queries(0):
        ledger.record_served(session=session, served=[])


def test_record_served_swallows_a_database_error_and_rolls_back_only_itself(db, caplog):
    session = make_session(total=200)
    served_at(session, [(10, "prunable", "full")])
    with caplog.at_level(logging.WARNING, logger="ovsite"):
        ledger.record_served(session=session, served=[("ok", "full"), ("u" * 2000, "full")])  # too long a URI
    assert "recall ledger: could not record 2 entries" in caplog.text
    # The savepoint was rolled back, the caller's transaction still works and nothing half-written remains.
    assert list(RecallLedgerEntry.objects.filter(session=session).values_list("uri", flat=True)) == ["prunable"]


def test_record_served_swallows_a_vanished_session(transactional_db, caplog):
    session = make_session(total=3)
    Session.objects.filter(pk=session.pk).delete()  # deleted by another request between find and record
    with caplog.at_level(logging.WARNING, logger="ovsite"):
        ledger.record_served(session=session, served=[("viking://resources/a.md", "abstract")])
    assert "could not record 1 entries" in caplog.text
    assert not RecallLedgerEntry.objects.exists()
    assert connection.is_usable()


# the real SDK ------------------------------------------------------------------------------------------------


def test_sdk_session_round_trip(sdk):
    generated = sdk.create_session()
    assert len(generated["session_id"]) == 32
    assert sdk.create_session("sdk-1")["session_id"] == "sdk-1"
    with pytest.raises(ConflictError):
        sdk.create_session("sdk-1")

    assert sdk.add_message("sdk-1", "user", content="How do I deploy billing?")["message_count"] == 1
    added = sdk.add_message(
        "sdk-1",
        "assistant",
        parts=[
            TextPart(text="Run the pipeline."),
            ContextPart(uri="viking://resources/deploy.md", context_type="resource"),
        ],
        options={"created_at": "2024-05-01T10:00:00Z", "turn_id": "t1"},
        peer_id="bot",
    )
    assert added == {"session_id": "sdk-1", "message_count": 2, "added": 1}
    batch = sdk.batch_add_messages(
        "sdk-1",
        [
            {"role": "user", "content": "And rollback?"},
            {"role": "assistant", "parts": [{"type": "text", "text": "Revert."}]},
        ],
    )
    assert batch["message_count"] == 4 and batch["added"] == 2

    loaded = sdk.get_session("sdk-1")
    assert loaded["total_message_count"] == 4 and loaded["message_count"] == 4 and loaded["user"] == "default"
    with pytest.raises(NotFoundError):
        sdk.get_session("sdk-missing")
    assert sdk.get_session("sdk-auto", auto_create=True)["total_message_count"] == 0
    assert {s["session_id"] for s in sdk.list_sessions()} == {generated["session_id"], "sdk-1", "sdk-auto"}

    full = sdk.get_session_context("sdk-1")
    assert [m["content"] for m in full["messages"]] == [
        "How do I deploy billing?",
        "Run the pipeline.",
        "And rollback?",
        "Revert.",
    ]
    assert full["messages"][1]["peer_id"] == "bot" and full["messages"][1]["parts"][1]["type"] == "context"
    newest = sdk.get_session_context("sdk-1", token_budget=estimate_tokens("Revert."))
    assert [m["content"] for m in newest["messages"]] == ["Revert."] and newest["total_message_count"] == 4

    with pytest.raises(InvalidArgumentError):
        sdk.add_message("sdk-1", "narrator", content="not a role")
    sdk.delete_session("sdk-1")
    with pytest.raises(NotFoundError):
        sdk.get_session("sdk-1")
