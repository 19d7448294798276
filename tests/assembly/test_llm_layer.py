"""The LLM layer of /search (RFC §3.2 L1 expansion, L3 rewrite; §3.7 timeouts) against a real HTTP fake of the
OpenAI API: bounded, recorded in LLMUsage, and degrading — never failing the request."""

import json
import re
import time

import pytest

from profiles.models import LLMUsage, RetrievalSettings
from sessions_app.models import Session

SEARCH = "/api/v1/search/search"
ME = "viking://user/default/memories"
KESTREL = f"{ME}/entities/kestrel.md"
QUERY = "when is it due?"  # scores ~0.02 against the Kestrel memory: only an expanded query can find it
EXPANDED = "Kestrel billing database migration cutover date"
OVERVIEW = "The user is planning Kestrel, the billing database migration."


@pytest.fixture
def corpus(api):
    api.write_all(
        {
            "viking://~/memories/entities/kestrel.md": (
                "Kestrel is the codename of the billing database migration to PostgreSQL 18; the cutover is "
                "planned for March 3."
            ),
            "viking://~/memories/events/2026/11/30/deploy.md": (
                "# Summary\nDeployed ovsite 0.3 to production on Nov 30; rollback plan was not needed."
            ),
            "viking://~/memories/preferences/reports.md": "Prefers reports that lead with the conclusion.",
            "viking://~/memories/experiences/migrations.md": (
                "Learned: run migrations before switching traffic, never after."
            ),
        }
    )
    return api


def start_session(api, sid="s1", overview=OVERVIEW):
    for role, content in (
        ("user", "Let's talk about the Kestrel migration."),
        ("assistant", "Sure. ASSISTANT-ONLY-TEXT"),
        ("user", "Who owns it?"),
    ):
        status, body = api.post(f"/api/v1/sessions/{sid}/messages", {"role": role, "content": content})
        assert status == 200, body
    Session.objects.filter(session_id=sid).update(archive_overview=overview)  # what a commit leaves behind
    return sid


def search(api, **body):
    status, result = api.post(SEARCH, body)
    assert status == 200, result
    return result["result"]


def context(api, **body):
    return search(api, mode="context", **body)


def uris(result) -> list[str]:
    if "entries" in result:
        return [e["uri"] for e in result["entries"]]
    return [hit["uri"] for key in ("memories", "resources", "skills") for hit in result[key]]


def answers(expansion=None, rewrite=None):
    """A fake chat reply per step, told apart by the system prompt; a callable gets the request body."""

    def reply(body):
        system = body["messages"][0]["content"]
        answer = expansion if "search queries" in system else rewrite
        return answer(body) if callable(answer) else answer

    return reply


def served(body) -> list[str]:
    return re.findall(r'<memory uri="([^"]+)"', body["messages"][-1]["content"])


def usage_rows(kind):
    return list(
        LLMUsage.objects.filter(kind=kind).values_list("model", "outcome", "prompt_tokens", "completion_tokens")
    )


def set_timeouts(**fields):
    RetrievalSettings.objects.filter(pk=1).update(**fields)


# L1 query expansion


def test_expansion_used_in_context_mode_finds_what_only_the_expanded_query_finds(corpus, fake_llm):
    sid = start_session(corpus)
    fake_llm.script.chat = answers(expansion=json.dumps({"queries": [EXPANDED]}))
    fake_llm.script.usage = (321, 12)
    plain = context(corpus, query=QUERY, session_id=sid, query_expansion="off")
    assert KESTREL not in uris(plain) and plain["stats"]["query_expansion"] == "off"
    assert fake_llm.script.chat_requests() == []

    result = context(corpus, query=QUERY, session_id=sid)
    assert result["stats"]["query_expansion"] == "used"
    assert result["stats"]["planned_queries"] == [QUERY, EXPANDED]
    assert KESTREL in uris(result)
    [request] = fake_llm.script.chat_requests()
    prompt = "\n".join(m["content"] for m in request["messages"])
    assert OVERVIEW in prompt and "Who owns it?" in prompt and "ASSISTANT-ONLY-TEXT" in prompt and QUERY in prompt
    assert request["model"] == "fake-planner" and request["response_format"] == {"type": "json_object"}
    assert usage_rows("expansion") == [("fake-planner", "ok", 321, 12)]


def test_expansion_used_in_list_mode_merges_the_queries_hits(corpus, fake_llm):
    sid = start_session(corpus)
    fake_llm.script.chat = answers(expansion=json.dumps({"queries": [EXPANDED]}))
    plain = search(corpus, query=QUERY, score_threshold=0.65)
    assert KESTREL not in uris(plain) and "query_plan" not in plain
    result = search(corpus, query=QUERY, session_id=sid, score_threshold=0.65)
    assert result["query_plan"] == {"queries": [QUERY, EXPANDED], "query_expansion": "used"}
    assert KESTREL in uris(result) and result["total"] == len(uris(result))
    scores = [h["score"] for key in ("memories", "resources", "skills") for h in result[key]]
    assert all(s >= 0.3 for s in scores)


def test_expanded_queries_are_embedded_in_one_embedder_call(corpus, remote_embedder, fake_llm):
    sid = start_session(corpus)
    fake_llm.script.chat = answers(expansion=json.dumps({"queries": [EXPANDED, "Kestrel owner"]}))
    before = len(fake_llm.script.requests)
    context(corpus, query=QUERY, session_id=sid)
    embeddings = [r["body"] for r in fake_llm.script.requests[before:] if r["path"].endswith("/embeddings")]
    assert [e["input"] for e in embeddings] == [[QUERY, EXPANDED, "Kestrel owner"]]


def test_expansion_timeout_from_the_settings_row_falls_back_to_the_original_query(corpus, fake_llm):
    sid = start_session(corpus)
    set_timeouts(recall_intent_timeout_s=0.5)  # an operator's change applies to the next request
    fake_llm.script.chat = answers(expansion=json.dumps({"queries": [EXPANDED]}))
    fake_llm.script.delay_s = 3
    result = context(corpus, query=QUERY, session_id=sid)
    assert result["stats"]["query_expansion"] == "failed" and result["stats"]["planned_queries"] == [QUERY]
    assert usage_rows("expansion") == [("fake-planner", "timeout", 0, 0)]


def test_expansion_http_500_falls_back(corpus, fake_llm):
    sid = start_session(corpus)
    fake_llm.script.mode = "error"
    result = search(corpus, query=QUERY, session_id=sid)
    assert result["query_plan"] == {"queries": [QUERY], "query_expansion": "failed"}
    assert usage_rows("expansion")[0][1] == "error"


@pytest.mark.parametrize(
    "answer",
    [
        "not json {",
        '["a list"]',
        '{"queries": "one string"}',
        '{"queries": [1, 2]}',
        '{"queries": ["  "]}',
        '{"other": []}',
        json.dumps({"queries": ["x" * 600]}),
    ],
)
def test_malformed_expansion_answers_are_invalid_and_fall_back(corpus, fake_llm, answer):
    sid = start_session(corpus)
    fake_llm.script.chat = answers(expansion=answer)
    result = context(corpus, query=QUERY, session_id=sid)
    assert result["stats"]["query_expansion"] == "failed" and result["stats"]["planned_queries"] == [QUERY]
    assert usage_rows("expansion")[0][1] == "invalid"


def test_more_queries_than_allowed_are_truncated_after_dedup_and_trim(corpus, fake_llm):
    sid = start_session(corpus)
    fake_llm.script.chat = answers(
        expansion=json.dumps(
            {"queries": ["When is it due?", f"  {EXPANDED}\n", EXPANDED.upper(), "Kestrel owner", "fourth", "fifth"]}
        )
    )
    result = context(corpus, query=QUERY, session_id=sid)
    # the original first, then 2 rewrites: the copy of the original and the case-variant are not queries
    assert result["stats"]["planned_queries"] == [QUERY, EXPANDED, "Kestrel owner"]
    assert result["stats"]["query_expansion"] == "used"
    set_timeouts(max_expansion_queries=2)
    again = context(corpus, query=QUERY, session_id=sid)
    assert again["stats"]["planned_queries"] == [QUERY, EXPANDED]


def test_an_empty_answer_is_used_with_the_original_alone(corpus, fake_llm):
    sid = start_session(corpus)
    fake_llm.script.chat = answers(expansion='{"queries": []}')
    result = search(corpus, query=QUERY, session_id=sid)
    assert result["query_plan"] == {"queries": [QUERY], "query_expansion": "used"}


def test_no_expansion_without_session_context(corpus, fake_llm):
    corpus.post("/api/v1/sessions", {"session_id": "empty"})
    for sid in ("empty", "unknown-session"):
        result = context(corpus, query=QUERY, session_id=sid)
        assert result["stats"]["query_expansion"] == "off" and result["stats"]["planned_queries"] == [QUERY]
        listed = search(corpus, query=QUERY, session_id=sid)
        assert listed["query_plan"] == {"queries": [QUERY], "query_expansion": "off"}
    assert fake_llm.script.chat_requests() == []


def test_list_mode_without_session_id_is_still_find_bytes(corpus, fake_llm):
    body = {"query": QUERY, "limit": 3}
    corpus.post("/api/v1/search/find", body)
    find_bytes = corpus.last.content
    corpus.post(SEARCH, body)
    assert corpus.last.content == find_bytes and fake_llm.script.chat_requests() == []


# L3 rewrite


def cite_all(body):
    return "\n".join(f"- fact {i} ({uri})" for i, uri in enumerate(served(body)))


def test_rewrite_ok_keeps_rendered_and_reports_usage(corpus, fake_llm):
    sid = start_session(corpus)
    fake_llm.script.chat = answers(expansion='{"queries": []}', rewrite=cite_all)
    fake_llm.script.usage = (1234, 56)
    plain = context(corpus, query="billing migration", session_id=sid, query_expansion="off")
    result = context(
        corpus, query="billing migration", session_id=sid, query_expansion="off", rewrite=True, rewrite_max_bullets=3
    )
    assert result["rendered"] == plain["rendered"] and result["entries"] == plain["entries"]
    assert result["stats"]["rewrite"] == "ok"
    assert result["stats"]["rewrite_usage"] == {"prompt_tokens": 1234, "completion_tokens": 56}
    expected = [f"- fact {i} ({e['uri']})" for i, e in enumerate(result["entries"][:3])]
    assert result["digest"].split("\n") == expected
    [request] = fake_llm.script.chat_requests()
    prompt = request["messages"][-1]["content"]
    assert result["rendered"] in prompt and OVERVIEW in prompt and "Who owns it?" in prompt
    assert "ASSISTANT-ONLY-TEXT" not in prompt  # the slice is the overview and recent user messages only
    assert request["model"] == "fake-planner" and request["max_tokens"] > 0
    assert usage_rows("rewrite") == [("fake-planner", "ok", 1234, 56)]


def test_uncited_and_foreign_bullets_are_dropped(corpus, fake_llm):
    def reply(body):
        first, *rest = served(body)
        return "\n".join(
            [
                "Here is your digest:",
                f"- cites a served memory ({first}).",
                "- cites nothing at all",
                f"- cites one that was not served ({ME}/entities/ghost.md)",
                f"- cites a served one and a foreign one ({first}) (viking://resources/secret.md)",
                f"* another marker, still kept ({rest[0]})",
            ]
        )

    fake_llm.script.chat = answers(rewrite=reply)
    result = context(corpus, query="billing migration", rewrite=True)
    first, second = (e["uri"] for e in result["entries"][:2])
    assert result["digest"] == f"- cites a served memory ({first}).\n- another marker, still kept ({second})"
    assert result["stats"]["rewrite"] == "ok"


def test_bullets_beyond_the_cap_are_cut(corpus, fake_llm):
    fake_llm.script.chat = answers(rewrite=lambda body: "\n".join(f"- b{i} ({served(body)[0]})" for i in range(9)))
    result = context(corpus, query="billing migration", rewrite=True, rewrite_max_bullets=2)
    assert len(result["digest"].split("\n")) == 2


def test_rewrite_with_no_valid_bullet_is_empty(corpus, fake_llm):
    fake_llm.script.chat = answers(rewrite="- nothing here cites anything\n- nor here (viking://resources/x.md)")
    result = context(corpus, query="billing migration", rewrite=True)
    assert result["stats"]["rewrite"] == "empty" and result["digest"] == "" and result["rendered"]
    assert result["stats"]["rewrite_usage"] == {"prompt_tokens": 11, "completion_tokens": 7}


def test_rewrite_timeout_and_error_leave_rendered(corpus, fake_llm):
    plain = context(corpus, query="billing migration")
    set_timeouts(recall_rewrite_timeout_s=0.5)
    fake_llm.script.chat, fake_llm.script.delay_s = answers(rewrite=cite_all), 3
    timed_out = context(corpus, query="billing migration", rewrite=True)
    assert (timed_out["stats"]["rewrite"], timed_out["digest"]) == ("timeout", "")
    assert timed_out["rendered"] == plain["rendered"]
    fake_llm.script.delay_s, fake_llm.script.mode = 0, "error"
    failed = context(corpus, query="billing migration", rewrite=True)
    assert (failed["stats"]["rewrite"], failed["digest"]) == ("failed", "")
    assert failed["rendered"] == plain["rendered"]
    assert [row[1] for row in usage_rows("rewrite")] == ["timeout", "error"]


def test_rewrite_auto_needs_a_query_planner_model(corpus, fake_llm, settings):
    fake_llm.script.chat = answers(rewrite=cite_all)
    assert context(corpus, query="billing migration", rewrite="auto")["stats"]["rewrite"] == "ok"
    settings.QUERY_PLANNER_MODEL = ""
    assert context(corpus, query="billing migration", rewrite="auto")["stats"]["rewrite"] == "off"
    assert context(corpus, query="billing migration", rewrite=True)["stats"]["rewrite"] == "ok"


def test_rewrite_with_nothing_served_makes_no_call(api, fake_llm):
    result = context(api, query="billing migration", rewrite=True)
    assert result["entries"] == [] and result["stats"]["rewrite"] == "empty"
    assert fake_llm.script.chat_requests() == []


# no LLM, and a hanging one


def test_without_an_llm_both_steps_are_off(corpus):
    sid = start_session(corpus)
    result = context(corpus, query=QUERY, session_id=sid, rewrite=True)
    stats = result["stats"]
    assert (stats["query_expansion"], stats["rewrite"], result["digest"]) == ("off", "off", "")
    assert stats["rewrite_usage"] == {"prompt_tokens": 0, "completion_tokens": 0}
    assert stats["planned_queries"] == [QUERY]
    assert search(corpus, query=QUERY, session_id=sid)["query_plan"]["query_expansion"] == "off"
    assert not LLMUsage.objects.exists()


def test_a_hanging_llm_costs_the_timeouts_not_the_hang(corpus, fake_llm):
    sid = start_session(corpus)
    set_timeouts(recall_intent_timeout_s=1, recall_rewrite_timeout_s=1)
    fake_llm.script.delay_s = 30
    started = time.perf_counter()
    status, body = corpus.post(
        SEARCH, {"mode": "context", "query": "billing migration", "session_id": sid, "rewrite": True}
    )
    elapsed = time.perf_counter() - started
    assert status == 200 and body["result"]["rendered"] and elapsed < 10
    stats = body["result"]["stats"]
    assert (stats["query_expansion"], stats["rewrite"]) == ("failed", "timeout")
