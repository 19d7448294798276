"""Peers (docs/design.md §3, RFC §3.2, §3.6): memories carry the peer that produced them — from the actor peer header of
a content write, from the messages of a session commit — and context mode and bootstrap read it: `peer_scope`,
`other_peer_penalty` and the working state's peer:user split. Real store, real embedder, the fake LLM for
extraction."""

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from profiles.models import RetrievalSettings
from retrieval.models import Context
from tests.mcp_server.test_mcp import mcp_session

SEARCH = "/api/v1/search/search"
EVENTS = "viking://~/memories/events/2026/12/01"
STORED_EVENTS = EVENTS.replace("~", "user/default")
BOT_A, BOT_B = {"x_openviking_actor_peer": "bot-a"}, {"x_openviking_actor_peer": "bot-b"}


def peer_of(uri: str) -> str:
    return Context.objects.get(uri=uri.replace("viking://~/", "viking://user/default/")).peer


def write(api, uri, content, **headers):
    status, body = api.post("/api/v1/content/write", {"uri": uri, "content": content}, **headers)
    assert status == 200, body


def batch_write(api, files: dict[str, str], **headers):
    status, body = api.post(
        "/api/v1/content/batch-write",
        {"operations": [{"uri": uri, "content": text} for uri, text in files.items()]},
        **headers,
    )
    assert status == 200, body


# the write path ----------------------------------------------------------------------------------------------


def test_a_memory_written_with_an_actor_peer_header_carries_that_peer(api):
    write(api, "viking://~/memories/entities/caddy.md", "Caddy fronts the RTMP ingest.", **BOT_A)
    batch_write(
        api,
        {
            f"{EVENTS}/deploy.md": "# Summary\nDeployed 0.3.",
            "viking://~/memories/preferences/tabs.md": "Indents with tabs.",
        },
        **BOT_B,
    )
    assert peer_of("viking://~/memories/entities/caddy.md") == "bot-a"
    assert peer_of(f"{EVENTS}/deploy.md") == peer_of("viking://~/memories/preferences/tabs.md") == "bot-b"
    # the folders above them are structure, nobody's statement; resources and skills are shared whatever the header
    write(api, "viking://resources/runbooks/restart.md", "# Restart\nsystemctl restart ovsite-worker", **BOT_A)
    write(api, "viking://agent/default/skills/deploy/SKILL.md", "# Deploy\nRun the canary first.", **BOT_A)
    assert set(Context.objects.exclude(context_type="memory", kind="file").values_list("peer", flat=True)) == {""}


def test_the_last_writer_of_a_memory_is_its_peer(api):
    uri = "viking://~/memories/entities/caddy.md"
    write(api, uri, "Caddy fronts the RTMP ingest.", **BOT_A)
    write(api, uri, "Caddy fronts the RTMP ingest.", **BOT_B)  # the same text, restated by another peer
    assert peer_of(uri) == "bot-b"
    write(api, uri, "Caddy fronts the RTMP ingest on port 1935.")  # the user's own edit: no header
    assert peer_of(uri) == ""


def test_an_actor_peer_longer_than_a_stored_peer_is_refused_not_cut(api):
    status, body = api.post(
        "/api/v1/content/write",
        {"uri": "viking://~/memories/entities/x.md", "content": "x"},
        x_openviking_actor_peer="p" * 65,
    )
    assert status == 422 and body["error"]["details"]["validation_errors"][0]["loc"] == ["X-OpenViking-Actor-Peer"]
    assert not Context.objects.exists()


TALK = [
    ("user", "We shipped billing 2.0 to production today."),
    ("assistant", "Congratulations on the billing 2.0 release."),
]
RELEASE = {
    "category": "events",
    "title": "Billing 2.0 released",
    "date": "2026-03-14",
    "content": "Billing 2.0 was shipped to production.",
}
RELEASE_URI = "viking://user/default/memories/events/2026/03/14/billing-2-0-released.md"


def commit_with_peers(api, fake_llm, peers: tuple[str | None, str | None], **headers) -> str:
    """Adds TALK with the messages' `peer_id`s (None: not sent), commits, and returns the extracted memory's peer."""
    fake_llm.script.chat = lambda body: (
        json.dumps({"memories": [RELEASE]})
        if "extract long-term memories" in body["messages"][0]["content"]
        else "summary"
    )
    messages = [
        {"role": role, "content": text, **({"peer_id": peer} if peer is not None else {})}
        for (role, text), peer in zip(TALK, peers, strict=True)
    ]
    status, body = api.post("/api/v1/sessions/s/messages/batch", {"messages": messages})
    assert status == 200, body
    status, body = api.post("/api/v1/sessions/s/commit", {}, **headers)
    assert status == 200 and body["result"]["memory_uris"] == [RELEASE_URI], body
    return Context.objects.get(uri=RELEASE_URI).peer


def test_extracted_memories_carry_the_peer_their_messages_name(api, fake_llm):
    # the user's message names no peer; the assistant's is bot-a's: the conversation was with bot-a
    assert commit_with_peers(api, fake_llm, (None, "bot-a")) == "bot-a"


def test_the_messages_peer_wins_over_the_commit_requests_actor_peer(api, fake_llm):
    assert commit_with_peers(api, fake_llm, ("", "bot-a"), **BOT_B) == "bot-a"


def test_messages_without_a_peer_take_the_commit_requests_actor_peer(api, fake_llm):
    assert commit_with_peers(api, fake_llm, (None, None), **BOT_B) == "bot-b"


def test_the_mcp_remember_tool_commits_with_its_actor_peer(api, fake_llm, live_url):
    fake_llm.script.chat = lambda body: (
        json.dumps({"memories": [RELEASE]})
        if "extract long-term memories" in body["messages"][0]["content"]
        else "summary"
    )

    async def actions(client):
        return await client.call_tool(
            "remember", {"session_id": "s", "messages": [{"role": role, "content": text} for role, text in TALK]}
        )

    result = mcp_session(live_url, actions, headers={"X-OpenViking-Actor-Peer": "bot-b"})
    assert not result.is_error, result.content
    assert Context.objects.get(uri=RELEASE_URI).peer == "bot-b"


def test_messages_of_several_peers_take_the_commit_requests_actor_peer_or_none(api, fake_llm):
    assert commit_with_peers(api, fake_llm, ("bot-a", "bot-c"), **BOT_B) == "bot-b"
    assert api.delete("/api/v1/fs", uri=RELEASE_URI)[0] == 200
    assert commit_with_peers(api, fake_llm, ("bot-a", "bot-c")) == ""


# context mode --------------------------------------------------------------------------------------------------


@pytest.fixture
def peer_memories(api):
    """The same deploy told three times: by the user (no peer), by bot-a and by bot-b, bot-b's the closest match
    to DEPLOY_QUESTION."""
    write(api, "viking://~/memories/experiences/deploy-user.md", "Deploys go out on Tuesdays after the standup.")
    write(api, "viking://~/memories/experiences/deploy-a.md", "The deploy of ovsite 0.3 used a canary stage.", **BOT_A)
    write(
        api,
        "viking://~/memories/experiences/deploy-b.md",
        "How the production deploy of ovsite 0.3 went: the canary stage passed and no rollback was needed.",
        **BOT_B,
    )
    return api


DEPLOY_QUESTION = "how did the production deploy of ovsite 0.3 go?"


def context(api, headers=BOT_A, **body) -> dict[str, float]:
    """Entries by name, in the order served. Ranked by cosine alone: the lexical side's stop words come from the
    table's statistics (docs/retrieval.md), which whatever ran on the test database before has left."""
    status, result = api.post(
        SEARCH,
        {"mode": "context", "query": DEPLOY_QUESTION, "query_expansion": "off", "search_mode": "vector", **body},
        **headers,
    )
    assert status == 200, result
    return {entry["uri"].rsplit("/", 1)[1].removesuffix(".md"): entry["score"] for entry in result["result"]["entries"]}


def test_peer_scope_actor_keeps_the_actors_and_the_users_memories(peer_memories):
    assert {"deploy-user", "deploy-a", "deploy-b"} <= set(context(peer_memories))
    scoped = context(peer_memories, peer_scope="actor")
    assert {"deploy-user", "deploy-a"} <= set(scoped) and "deploy-b" not in scoped
    # the same through a purpose's buckets
    assert "deploy-b" not in context(peer_memories, peer_scope="actor", purpose="coding")


def test_other_peer_penalty_demotes_another_peers_memory_in_rank_and_score(peer_memories):
    plain = context(peer_memories)
    assert next(iter(plain)) == "deploy-b"  # the closest match leads without a penalty
    demoted = context(peer_memories, other_peer_penalty=0.9)
    assert list(demoted)[-1] == "deploy-b"
    assert demoted["deploy-b"] == pytest.approx(plain["deploy-b"] * 0.1, abs=1e-6)
    assert demoted["deploy-a"] == plain["deploy-a"] and demoted["deploy-user"] == plain["deploy-user"]
    # for bot-b it is bot-a's memory that is another peer's
    assert context(peer_memories, headers=BOT_B, other_peer_penalty=0.9)["deploy-a"] == pytest.approx(
        plain["deploy-a"] * 0.1, abs=1e-6
    )


# bootstrap -----------------------------------------------------------------------------------------------------


def test_working_state_splits_the_actors_and_the_users_events_about_8_to_2(api):
    """Twelve events of bot-a, four of the user's own, one of bot-b (the newest), all written over HTTP: the
    working state of 10 holds bot-a's newest eight and the user's newest two, oldest first; bot-b's is left out."""
    batch_write(api, {f"{EVENTS}/a{n:02d}.md": f"# Summary\nBot A event {n}." for n in range(12)}, **BOT_A)
    batch_write(api, {f"{EVENTS}/u{n:02d}.md": f"# Summary\nUser event {n}." for n in range(4)})
    write(api, f"{EVENTS}/b00.md", "# Summary\nBot B event.", **BOT_B)
    for row in Context.objects.filter(uri__startswith=STORED_EVENTS + "/", kind="file"):
        name = row.uri.rsplit("/", 1)[1]
        hours = 0.5 if name.startswith("b") else int(name[1:3]) + (1 if name.startswith("a") else 1.5)
        Context.objects.filter(pk=row.pk).update(updated_at=timezone.now() - timedelta(hours=hours))
    RetrievalSettings.objects.filter(pk=1).update(bootstrap_working_state_max=10)

    def working_state(**headers) -> list[str]:
        status, body = api.post(SEARCH, {"mode": "bootstrap", "max_tokens": 4000}, **headers)
        assert status == 200, body
        result = body["result"]
        before = sum(result["stats"]["slots"][name]["returned"] for name in ("instructions", "identity", "continuity"))
        count = result["stats"]["slots"]["working_state"]["returned"]
        return [e["uri"].rsplit("/", 1)[1].removesuffix(".md") for e in result["entries"][before : before + count]]

    kept = working_state(**BOT_A)
    assert sorted(kept) == [f"a{n:02d}" for n in range(8)] + ["u00", "u01"]
    assert kept[0] == "a07" and kept[-1] == "a00"  # oldest first
    assert "b00" in working_state()  # without an actor peer: the newest of everyone's
