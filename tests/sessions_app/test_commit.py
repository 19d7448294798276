"""Session commit (docs/design.md §6): archive into archive_overview, memory extraction with an LLM, over HTTP and
the SDK, with the fake OpenAI server for the LLM and the real store and embedder."""

import json
import re
import uuid
from datetime import UTC, date, datetime

import pytest

from core.models import Account
from profiles.models import LLMUsage
from retrieval.models import Context, ProcessingTask
from sessions_app.commit import ARCHIVE_MAX_CHARS, bounded_archive, run_commit
from sessions_app.extraction import memory_from, slugify

TALK = [
    ("user", "I always indent code with tabs, never spaces."),
    ("assistant", "Noted: tabs for indentation."),
    ("user", "Alice leads the billing team and owns its deploys."),
    ("assistant", "Thanks, I will ask Alice about billing deploys."),
    ("user", "We shipped billing 2.0 to production today."),
    ("assistant", "Congratulations on the billing 2.0 release."),
]
TABS = {
    "category": "preferences",
    "title": "Indentation with tabs",
    "content": "The user indents code with tabs, never with spaces.",
}
ALICE = {
    "category": "entities",
    "title": "Alice, billing lead",
    "content": "Alice leads the billing team and owns the billing deploys.",
}
RELEASE = {
    "category": "events",
    "title": "Billing 2.0 released",
    "date": "2026-03-14",
    "content": "Billing 2.0 was shipped to production.",
}
CONDENSED = "The user and the assistant talked about code style, the billing team and the billing 2.0 release."


def add(api, session_id, messages=TALK):
    body = {"messages": [{"role": role, "content": text} for role, text in messages]}
    status, result = api.post(f"/api/v1/sessions/{session_id}/messages/batch", body)
    assert status == 200, result


def commit(api, session_id, **body):
    status, result = api.post(f"/api/v1/sessions/{session_id}/commit", body)
    assert status == 200, result
    return result["result"]


def session(api, session_id):
    return api.get(f"/api/v1/sessions/{session_id}")[1]["result"]


def is_extraction(body) -> bool:
    return "extract long-term memories" in body["messages"][0]["content"]


def llm_answers(fake, extraction, summary=CONDENSED):
    """The fake LLM answers extraction calls with `extraction` (a dict → JSON, or raw text) and summaries with
    `summary`."""
    fake.script.chat = lambda body: (
        (extraction if isinstance(extraction, str) else json.dumps(extraction)) if is_extraction(body) else summary
    )


def memory_files(user="default"):
    return list(
        Context.objects.filter(uri__startswith=f"viking://user/{user}/memories/", kind="file")
        .order_by("uri")
        .values_list("uri", flat=True)
    )


# without an LLM ----------------------------------------------------------------------------------------------


def test_commit_without_an_llm_archives_only(api):
    add(api, "s1")
    result = commit(api, "s1", keep_recent_count=2)
    assert result["status"] == "accepted" and result["archived"] is True
    assert (result["archived_messages"], result["message_count"], result["total_message_count"]) == (4, 2, 6)
    assert (result["extraction"], result["archive_summary"], result["memories_extracted"]) == ("off", "off", 0)
    assert result["memory_uris"] == [] and result["error"] == ""

    stored = session(api, "s1")
    assert stored["total_message_count"] == 6 and stored["message_count"] == 2
    overview = stored["archive_overview"]
    assert overview.startswith("## Messages 0–3, archived ")
    assert "- user: I always indent code with tabs, never spaces." in overview
    assert "billing 2.0" not in overview  # the kept messages are not archived
    context = api.get("/api/v1/sessions/s1/context")[1]["result"]
    assert [m["index"] for m in context["messages"]] == [4, 5] and context["archive_overview"] == overview

    status, task = api.get(f"/api/v1/tasks/{result['task_id']}")
    assert status == 200 and (task["result"]["kind"], task["result"]["status"], task["result"]["uris"]) == (
        "commit",
        "done",
        [],
    )
    assert memory_files() == [] and LLMUsage.objects.count() == 0


def test_the_turn_clock_keeps_counting_after_a_commit(api):
    add(api, "s2")
    commit(api, "s2")
    add(api, "s2", [("user", "one more")])
    stored = session(api, "s2")
    assert (stored["total_message_count"], stored["message_count"]) == (7, 1)
    assert api.get("/api/v1/sessions/s2/context")[1]["result"]["messages"][0]["index"] == 6


@pytest.mark.parametrize("keep, archived, left", [(0, 6, 0), (5, 1, 5), (6, 0, 6), (100, 0, 6)])
def test_keep_recent_count_is_honoured(api, keep, archived, left):
    add(api, "keep")
    result = commit(api, "keep", keep_recent_count=keep)
    assert (result["archived_messages"], result["message_count"]) == (archived, left)
    kept = api.get("/api/v1/sessions/keep/context")[1]["result"]["messages"]
    assert [m["index"] for m in kept] == list(range(6 - left, 6))
    assert bool(session(api, "keep")["archive_overview"]) == (archived > 0)


def test_repeated_commits_append_digests_and_the_overview_stays_bounded(api):
    for round_ in range(12):
        add(api, "long", [("user", f"round {round_}: " + "lorem ipsum dolor " * 40)] * 3)
        commit(api, "long")
    overview = session(api, "long")["archive_overview"]
    assert len(overview) <= ARCHIVE_MAX_CHARS
    assert re.match(r"\[… \d+ earlier characters of this archive were cut\]\n", overview)
    assert "round 11:" in overview and "round 0:" not in overview  # the newest are kept
    assert overview.rstrip().endswith("…")  # each archived message is clipped in the digest


def test_bounded_archive_cuts_at_a_line_and_states_the_cut():
    text = "\n".join(f"line {i:03d}" for i in range(500))
    cut = bounded_archive(text, limit=200)
    assert len(cut) <= 200 and cut.endswith("line 499")
    marker, first_kept = cut.split("\n")[:2]
    assert first_kept.startswith("line ") and int(marker.split()[1]) == len(text) - len(cut) + len(marker) + 1
    assert bounded_archive("short", limit=200) == "short"


def test_commit_validation_and_missing_session(api):
    add(api, "v")
    for body, loc in [
        ({"keep_recent_count": -1}, ["keep_recent_count"]),
        ({"retention_mode": "turn_budget"}, ["retention_mode"]),
        ({"extraction_metadata": {"event": {"tags": ["x" * 65]}}}, ["extraction_metadata", "event", "tags", 0]),
        ({"extraction_metadata": {"other": 1}}, ["extraction_metadata", "other"]),
    ]:
        status, result = api.post("/api/v1/sessions/v/commit", body)
        assert status == 422 and loc in [e["loc"] for e in result["error"]["details"]["validation_errors"]], result
    assert session(api, "v")["message_count"] == 6  # nothing was archived by a refused request
    status, result = api.post("/api/v1/sessions/ghost/commit", {})
    assert status == 404 and result["error"]["code"] == "NOT_FOUND"
    assert commit(api, "v", enable_working_memory=True, telemetry=True)["archived"] is True


# with an LLM -------------------------------------------------------------------------------------------------


def test_commit_with_an_llm_extracts_memories_that_context_search_finds(api, fake_llm):
    llm_answers(fake_llm, {"memories": [TABS, ALICE, RELEASE]})
    add(api, "llm")
    result = commit(api, "llm", keep_recent_count=0)
    assert (result["extraction"], result["archive_summary"]) == ("ok", "ok")
    assert (result["memories_extracted"], result["memories_skipped"], result["memories_deduplicated"]) == (3, 0, 0)
    expected = [
        "viking://user/default/memories/entities/alice-billing-lead.md",
        "viking://user/default/memories/events/2026/03/14/billing-2-0-released.md",
        "viking://user/default/memories/preferences/indentation-with-tabs.md",
    ]
    assert sorted(result["memory_uris"]) == expected == memory_files()
    assert set(Context.objects.filter(uri__in=expected).values_list("state", flat=True)) == {"ready"}
    assert session(api, "llm")["archive_overview"] == CONDENSED

    status, task = api.get(f"/api/v1/tasks/{result['task_id']}")
    assert task["result"]["status"] == "done" and sorted(task["result"]["uris"]) == expected

    extraction = next(body for body in fake_llm.script.chat_requests() if is_extraction(body))
    assert extraction["response_format"] == {"type": "json_object"}
    assert "I always indent code with tabs" in extraction["messages"][1]["content"]
    # One extraction and one archive overview; the memories are short and their folders structural: no more.
    assert sorted(LLMUsage.objects.values_list("kind", "outcome", "prompt_tokens")) == [
        ("extraction", "ok", 11),
        ("summary", "ok", 11),
    ]

    status, found = api.post(
        "/api/v1/search/search",
        {
            "query": "does the user indent with tabs or spaces?",
            "mode": "context",
            "query_expansion": "off",
            "rewrite": False,
        },
    )
    assert status == 200, found
    entries = found["result"]["entries"]
    assert entries[0]["uri"] == expected[2] and "tabs" in entries[0]["text"]


def test_events_live_under_their_date_and_start_with_a_summary_heading(api, fake_llm):
    undated = {"category": "events", "title": "Retro held", "content": "The team held the billing retro."}
    misdated = {
        "category": "events",
        "title": "Rota moved",
        "date": "2026-13-40",
        "content": "The on-call rota moved to Mondays.",
    }
    llm_answers(fake_llm, {"memories": [RELEASE, undated, misdated]})
    add(api, "ev")
    result = commit(api, "ev")
    today = datetime.now(UTC).strftime("%Y/%m/%d")  # the day of the newest archived message
    assert sorted(result["memory_uris"]) == [
        "viking://user/default/memories/events/2026/03/14/billing-2-0-released.md",
        f"viking://user/default/memories/events/{today}/retro-held.md",
        f"viking://user/default/memories/events/{today}/rota-moved.md",
    ]
    for uri in result["memory_uris"]:
        assert api.get("/api/v1/content/read", uri=uri)[1]["result"].startswith("# Summary\n")
    stat = api.get("/api/v1/fs/stat", uri=result["memory_uris"][0])[1]["result"]
    assert stat["category"] == "events" and stat["abstract"] == "Billing 2.0 was shipped to production."


def test_bad_json_still_archives_and_reports_extraction_failed(api, fake_llm):
    llm_answers(fake_llm, "Sure! Here are the memories: tabs, Alice.")
    add(api, "bad")
    result = commit(api, "bad")
    assert result["archived"] is True and result["archived_messages"] == 6 and result["message_count"] == 0
    assert result["extraction"] == "failed" and "invalid" in result["error"]
    assert result["archive_summary"] == "ok" and session(api, "bad")["archive_overview"] == CONDENSED
    assert memory_files() == []
    task = api.get(f"/api/v1/tasks/{result['task_id']}")[1]["result"]
    assert task["status"] == "failed" and "memory extraction failed (invalid)" in task["error"]
    assert LLMUsage.objects.get(kind="extraction").outcome == "invalid"


def test_an_unreachable_llm_still_archives_with_one_failed_call(api, fake_llm):
    fake_llm.script.mode = "error"
    add(api, "down")
    result = commit(api, "down", keep_recent_count=1)
    assert result["archived"] is True and (result["archived_messages"], result["message_count"]) == (5, 1)
    assert (result["extraction"], result["archive_summary"]) == ("failed", "failed")
    assert session(api, "down")["archive_overview"].startswith("## Messages 0–4")  # the deterministic digest
    assert list(LLMUsage.objects.values_list("kind", "outcome")) == [("extraction", "error")]


def test_nothing_to_archive_makes_no_llm_call(api, fake_llm):
    add(api, "idle", TALK[:2])
    result = commit(api, "idle", keep_recent_count=2)
    assert (result["archived_messages"], result["extraction"], result["archive_summary"]) == (0, "skipped", "skipped")
    assert LLMUsage.objects.count() == 0 and session(api, "idle")["archive_overview"] == ""


def test_a_commit_whose_session_was_deleted_does_not_stay_pending(api):
    account, _ = Account.objects.get_or_create(name="default")  # transactional tests flush it
    task = ProcessingTask.objects.create(id=uuid.uuid4(), account=account, kind="commit")
    assert run_commit(commit_id=str(task.id)) == "gone"
    task.refresh_from_db()
    assert task.status == "failed" and task.error == "the session was deleted"


def test_invalid_items_are_skipped_and_counted(api, fake_llm):
    llm_answers(
        fake_llm,
        {
            "memories": [
                TABS,
                {"category": "gossip", "title": "x", "content": "y"},
                {"category": "entities", "title": "no content"},
                "just a string",
                {"category": "entities", "title": 5, "content": "z"},
                {"category": "preferences", "title": "   ", "content": "blank title"},
            ]
        },
    )
    add(api, "items")
    result = commit(api, "items")
    assert (result["extraction"], result["memories_extracted"], result["memories_skipped"]) == ("ok", 1, 5)
    assert memory_files() == ["viking://user/default/memories/preferences/indentation-with-tabs.md"]


def test_a_near_duplicate_is_not_written_twice(api, fake_llm):
    llm_answers(fake_llm, {"memories": [TABS]})
    add(api, "dup")
    assert commit(api, "dup")["memories_extracted"] == 1
    # Another name, nearly the same words; the same memory again; and a copy within one answer.
    restated = {
        **TABS,
        "title": "Tabs for indentation",
        "content": "The user indents code with tabs and never with spaces.",
    }
    llm_answers(fake_llm, {"memories": [restated, TABS, {**ALICE}, {**ALICE, "title": "Alice leads billing"}]})
    add(api, "dup")
    result = commit(api, "dup")
    assert (result["memories_extracted"], result["memories_deduplicated"]) == (1, 3)
    assert memory_files() == [
        "viking://user/default/memories/entities/alice-billing-lead.md",
        "viking://user/default/memories/preferences/indentation-with-tabs.md",
    ]


def test_a_new_statement_under_an_existing_name_replaces_it(api, fake_llm):
    llm_answers(fake_llm, {"memories": [TABS]})
    add(api, "upd")
    commit(api, "upd")
    changed = {**TABS, "content": "The user switched to four spaces for Python code; tabs only in Makefiles."}
    llm_answers(fake_llm, {"memories": [changed]})
    add(api, "upd")
    result = commit(api, "upd")
    assert result["memories_extracted"] == 1 and result["memories_deduplicated"] == 0
    uri = "viking://user/default/memories/preferences/indentation-with-tabs.md"
    assert api.get("/api/v1/content/read", uri=uri)[1]["result"] == changed["content"] + "\n"


def test_memory_items_make_valid_files():
    day = date(2026, 1, 2)
    chinese = memory_from(
        {"category": "preferences", "title": "喜欢 绿茶", "content": "用户喜欢绿茶。"}, user_id="u", default_day=day
    )
    assert chinese.uri == "viking://user/u/memories/preferences/喜欢-绿茶.md"
    assert slugify("!!!").startswith("memory-") and slugify("A/B: c..d") == "a-b-c-d"
    long = memory_from(
        {"category": "entities", "title": "t" * 500, "content": "c" * 9000}, user_id="u", default_day=day
    )
    assert len(long.uri.rsplit("/", 1)[1]) <= 63 and len(long.content) <= 2001
    assert (
        memory_from({"category": "events", "title": "nul", "content": "a\x00b"}, user_id="u", default_day=day) is None
    )


# the real SDK ------------------------------------------------------------------------------------------------


def test_sdk_session_commit(seeded, sdk, fake_llm):
    llm_answers(fake_llm, {"memories": [RELEASE, TABS]})
    sdk_session = sdk.session("sdk-commit")
    sdk.create_session("sdk-commit")
    sdk_session.batch_add_messages([{"role": role, "content": text} for role, text in TALK])
    result = sdk_session.commit(keep_recent_count=2, options={"event_tags": ["release"]})
    assert result["status"] == "accepted" and result["archived"] is True and result["extraction"] == "ok"
    assert result["archived_messages"] == 4 and result["memories_extracted"] == 2
    task = sdk.get_task(result["task_id"])
    assert task["kind"] == "commit" and task["status"] == "done"
    loaded = sdk_session.load()
    assert (loaded["message_count"], loaded["total_message_count"]) == (2, 6) and loaded["archive_overview"]
    tags = dict(Context.objects.filter(uri__in=result["memory_uris"]).values_list("category", "tags"))
    assert tags == {"events": ["release"], "preferences": []}
    assert ProcessingTask.objects.get(id=result["task_id"]).kind == "commit"
