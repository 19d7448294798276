"""/search mode="bootstrap" (RFC §3.6): the declared slot manifest on the context-mode kernel, end to end."""

from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from assembly import bootstrap
from profiles.models import RetrievalSettings
from retrieval.models import Context
from retrieval.tokenizers import counter_for
from retrieval.tokens import estimate_tokens
from sessions_app.models import Session

SEARCH = "/api/v1/search/search"
PROFILE = "viking://user/default/memories/profile.md"
SECRET = "zanzibarquux"  # a word only the preference's body (and so its abstract) contains
SESSION = "boot-1"


def aged(uri: str, days: float) -> None:
    Context.objects.filter(uri=uri).update(updated_at=timezone.now() - timedelta(days=days))


@pytest.fixture
def seeded_user(api):
    events = {day: f"viking://~/memories/events/2026/11/{day:02d}/e{day}.md" for day in (1, 2, 30)}
    api.write_all(
        {
            "viking://~/memories/profile.md": "# Profile\nName: Ada. Works on ovsite, a context server.\n"
            "Prefers terse answers.",
            "viking://~/memories/preferences/style.md": f"Always sign reviews with the word {SECRET}.",
            "viking://~/memories/entities/caddy.md": "Caddy fronts the RTMP ingest on port 1935.",
            "viking://resources/runbooks/restart.md": "# Restart the workers\nsystemctl restart ovsite-worker",
            events[1]: "# Summary\nDeployed 0.3 to production.",
            events[2]: "# Summary\nFixed the recall dedup bug.",
            events[30]: "# Summary\nPlanned the quarter.",
        }
    )
    for day, uri in events.items():
        aged(uri.replace("~", "user/default"), day)
    aged(PROFILE, 3)
    aged("viking://user/default/memories/preferences/style.md", 0.5)
    aged("viking://user/default/memories/entities/caddy.md", 4)
    aged("viking://resources/runbooks/restart.md", 5)
    status, body = api.post(
        f"/api/v1/sessions/{SESSION}/messages/batch",
        {
            "messages": [
                {"role": "user", "content": "Let us finish the MCP endpoint today."},
                {"role": "assistant", "content": "Agreed: tools first, then the README."},
            ]
        },
    )
    assert status == 200, body
    Session.objects.filter(session_id=SESSION).update(archive_overview="Earlier: designed the bootstrap slots.")
    return api


def boot(api, **body):
    status, result = api.post(SEARCH, {"mode": "bootstrap", **body})
    assert status == 200, result
    return result["result"]


def by_slot(result) -> dict[str, list[str]]:
    """The entries' URIs per slot: the manifest order is the render order."""
    uris, out = [e["uri"] for e in result["entries"]], {}
    for name in bootstrap.SLOTS:
        count = result["stats"]["slots"][name]["returned"]
        out[name], uris = uris[:count], uris[count:]
    return out


def slot_of(result, uri):
    return next(e for e in result["entries"] if e["uri"] == uri)


def test_bootstrap_fills_every_slot(seeded_user):
    result = boot(seeded_user, session_id=SESSION, max_tokens=2000)
    assert set(result) == {"entries", "rendered", "digest", "stats"} and result["digest"] == ""
    uris = [e["uri"] for e in result["entries"]]
    assert uris[0] == bootstrap.INSTRUCTIONS_URI
    assert uris[1] == PROFILE and slot_of(result, PROFILE)["detail"] == "full"
    continuity = slot_of(result, f"viking://session/{SESSION}")
    assert "Earlier: designed the bootstrap slots." in continuity["text"]
    assert "Agreed: tools first" in continuity["text"]
    assert {name: s["returned"] for name, s in result["stats"]["slots"].items()} == {
        "instructions": 1,
        "identity": 1,
        "continuity": 1,
        "working_state": 2,
        "listing": 4,
    }
    for entry in result["entries"]:
        assert f'<memory uri="{entry["uri"]}"' in result["rendered"]
    stats = result["stats"]
    assert stats["mode"] == "bootstrap" and stats["query_expansion"] == "off" and stats["planned_queries"] == []
    assert stats["rewrite"] == "off" and stats["dedup"]["turns"] == 0


def test_bootstrap_needs_no_embedder(seeded_user, settings):
    """No query, no semantic search: an embedder that cannot be reached changes nothing."""
    from retrieval.embedders import get_embedder

    expected = boot(seeded_user, max_tokens=1200)
    settings.EMBEDDING_URL = "http://127.0.0.1:9/v1"
    settings.EMBEDDING_MODEL = "unreachable"
    get_embedder.cache_clear()
    try:
        assert boot(seeded_user, max_tokens=1200) == expected
    finally:
        get_embedder.cache_clear()


@pytest.mark.parametrize("max_tokens", [64, 150, 400, 900, 1600, 6000])
def test_bootstrap_respects_the_budget(seeded_user, max_tokens):
    result = boot(seeded_user, session_id=SESSION, max_tokens=max_tokens)
    assert result["stats"]["used_tokens"] == counter_for("o200k").count(result["rendered"]) <= max_tokens
    assert sum(s["planned_tokens"] for s in result["stats"]["slots"].values()) <= max_tokens
    assert all(s["planned_tokens"] <= s["budget"] for s in result["stats"]["slots"].values())


def test_working_state_is_recent_events_oldest_first(seeded_user):
    events = by_slot(boot(seeded_user, max_tokens=3000))["working_state"]
    assert events == [
        "viking://user/default/memories/events/2026/11/02/e2.md",
        "viking://user/default/memories/events/2026/11/01/e1.md",
    ]  # day 30 is outside the 7 days
    RetrievalSettings.objects.filter(pk=1).update(bootstrap_working_state_max=1)
    events = by_slot(boot(seeded_user, max_tokens=3000))["working_state"]
    assert events == ["viking://user/default/memories/events/2026/11/01/e1.md"]  # the newest is kept


def test_listing_orders_by_last_update_newest_first(seeded_user):
    listing = by_slot(boot(seeded_user, max_tokens=3000))["listing"]
    assert listing == [
        "viking://user/default/memories/preferences/style.md",
        "viking://user/default/memories/entities/caddy.md",
        "viking://resources/runbooks/restart.md",
        "viking://user/default/memories/events/2026/11/30/e30.md",
    ]  # older than the working state
    aged("viking://resources/runbooks/restart.md", 0.1)
    listing = by_slot(boot(seeded_user, max_tokens=3000))["listing"]
    assert listing[0] == "viking://resources/runbooks/restart.md"
    assert PROFILE not in listing  # identity's, not listed twice


def test_the_newest_first_reads_walk_an_index_instead_of_sorting_the_store(seeded_user):
    """The listing and the working state read the newest rows first: an index in that order lets them stop after
    their cap, where a sort reads every visible row (10 ms at 10k nodes, bench/RESULTS.md). Sorting is ruled out
    for the check: on a table this small the planner would rather sort a handful."""
    with CaptureQueriesContext(connection) as queries:
        boot(seeded_user, max_tokens=3000)
    newest_first = [
        q["sql"] for q in queries.captured_queries if 'ORDER BY "retrieval_context"."updated_at" DESC' in q["sql"]
    ]
    assert len(newest_first) == 2  # the working state's events, the listing
    plans = []
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_sort = off")
        for sql in newest_first:
            cursor.execute(f"EXPLAIN {sql}")
            plans.append("\n".join(line for (line,) in cursor.fetchall()))
    assert all(
        "Sort" not in plan and ("context_account_updated" in plan or "context_account_bucket" in plan) for plan in plans
    ), plans


def test_listing_cap_keeps_the_newest(seeded_user):
    RetrievalSettings.objects.filter(pk=1).update(bootstrap_listing_max=2)
    result = boot(seeded_user, max_tokens=3000)
    assert by_slot(result)["listing"] == [
        "viking://user/default/memories/preferences/style.md",
        "viking://user/default/memories/entities/caddy.md",
    ]
    assert result["stats"]["slots"]["listing"]["candidates"] == 2


def test_preference_bodies_never_leak(seeded_user):
    result = boot(seeded_user, session_id=SESSION, max_tokens=32000)
    preference = slot_of(result, "viking://user/default/memories/preferences/style.md")
    assert preference["detail"] == "uri" and preference["text"] == ""
    assert SECRET not in result["rendered"] and SECRET not in str(result["entries"])
    assert 'type="preferences" score="1.00" detail="uri" />' in result["rendered"]


def test_oversized_profile_is_cut_at_the_head_with_a_pointer(seeded_user):
    profile = "# Profile\nName: Ada.\n" + "".join(f"- fact {i}: likes topic number {i}.\n" for i in range(2000))
    seeded_user.write("viking://~/memories/profile.md", profile)
    result = boot(seeded_user, max_tokens=1600)
    identity = slot_of(result, PROFILE)
    share = result["stats"]["slots"]["identity"]["budget"]
    assert identity["detail"] == "full"
    assert identity["text"].startswith("# Profile\nName: Ada.\n- fact 0:")
    assert identity["text"].endswith(bootstrap.CUT_POINTER.format(PROFILE))
    assert result["stats"]["slots"]["identity"]["planned_tokens"] <= share < estimate_tokens(profile)
    assert result["stats"]["used_tokens"] <= 1600


def test_small_profile_is_served_whole(seeded_user):
    identity = slot_of(boot(seeded_user, max_tokens=1600), PROFILE)
    assert identity["text"] == Context.objects.get(uri=PROFILE).content


def test_instructions_content_hash_is_stable_and_follows_the_template(seeded_user, tmp_path, monkeypatch):
    first, second = boot(seeded_user), boot(seeded_user)
    assert first["stats"]["instructions"] == second["stats"]["instructions"]
    info = first["stats"]["instructions"]
    assert info["uri"] == bootstrap.INSTRUCTIONS_URI and info["version"] == "bootstrap-instructions-1"
    assert len(info["content_hash"]) == 64
    assert slot_of(first, bootstrap.INSTRUCTIONS_URI)["text"] == bootstrap.load_instructions().text
    template = tmp_path / "instructions.md"
    template.write_text("version: bootstrap-instructions-2\n\nExpand a URI with read.\n")
    monkeypatch.setattr(bootstrap, "INSTRUCTIONS_TEMPLATE", template)
    changed = boot(seeded_user)
    assert changed["stats"]["instructions"]["content_hash"] != info["content_hash"]
    assert changed["stats"]["instructions"]["version"] == "bootstrap-instructions-2"
    assert slot_of(changed, bootstrap.INSTRUCTIONS_URI)["text"] == "Expand a URI with read."


def test_default_shares_serve_the_shipped_instructions_whole(seeded_user):
    """The shipped template fits its default share of the default budget, so no client gets it cut."""
    entry = slot_of(boot(seeded_user), bootstrap.INSTRUCTIONS_URI)
    assert entry["detail"] == "full" and entry["text"] == bootstrap.load_instructions().text


def test_unused_shares_pass_to_the_listing(seeded_user):
    """Without a session the continuity share is not lost: the listing, last in the manifest, gets it."""
    slots = boot(seeded_user, max_tokens=1600)["stats"]["slots"]
    assert slots["continuity"]["returned"] == 0
    assert slots["listing"]["budget"] > int(1600 * 0.15)


def test_exclude_uris_applies_to_bootstrap(seeded_user):
    result = boot(seeded_user, max_tokens=3000, exclude_uris=[PROFILE, bootstrap.INSTRUCTIONS_URI])
    assert PROFILE not in result["rendered"] and bootstrap.INSTRUCTIONS_URI not in result["rendered"]
    assert result["stats"]["excluded"] == 2
    assert result["stats"]["instructions"]["content_hash"]  # a cached client still learns whether it changed


def test_bootstrap_of_an_empty_store_is_the_instructions_alone(api):
    result = boot(api)
    assert [e["uri"] for e in result["entries"]] == [bootstrap.INSTRUCTIONS_URI]


@pytest.mark.parametrize(
    "field,value",
    [
        ("query", "what now?"),
        ("purpose", "coding"),
        ("quotas", {"events": 1}),
        ("detail", "full"),
        ("rewrite", True),
        ("target_uri", "viking://~"),
        ("filter", {"category": "events"}),
        ("since", "7d"),
        ("score_threshold", 0.5),
        ("dedup_turns", 3),
        ("read_content", True),
    ],
)
def test_retrieval_fields_are_refused_in_bootstrap(api, field, value):
    status, body = api.post(SEARCH, {"mode": "bootstrap", field: value})
    assert status == 422, body
    assert body["error"]["code"] == "INVALID_ARGUMENT"
    assert [e["loc"] for e in body["error"]["details"]["validation_errors"]] == [[field]]


def test_harmless_fields_are_ignored_and_listed(api):
    result = boot(api, limit=10, target_uri="", query="", level=2, query_expansion="off")
    assert result["stats"]["ignored"] == ["limit", "level", "query_expansion"]


def test_unknown_fields_are_still_refused_in_bootstrap(api):
    status, body = api.post(SEARCH, {"mode": "bootstrap", "slots": ["identity"]})
    assert status == 422 and body["error"]["details"]["validation_errors"][0]["loc"] == ["slots"]


@pytest.mark.parametrize(
    "cap,share,peer_found,user_found,expected",
    [
        (5, 0.8, 9, 9, (4, 1)),  # RFC §3.6: peer:user ≈ 8:2
        (10, 0.8, 9, 9, (8, 2)),
        (5, 0.8, 1, 9, (1, 4)),  # places the peer cannot fill go to the user
        (5, 0.8, 9, 0, (5, 0)),  # and the other way round
        (5, 0.8, 2, 1, (2, 1)),
        (5, 0.0, 9, 9, (0, 5)),
    ],
)
def test_peer_places_split_the_cap(cap, share, peer_found, user_found, expected):
    assert bootstrap.peer_places(cap, share, peer_found, user_found) == expected


@pytest.fixture
def peer_events(api):
    """Six events of the actor peer `bot-a`, three of the user (no peer), one of another peer; newest first by
    their number of hours."""
    events = [("a", "bot-a", hours) for hours in (1, 2, 3, 4, 5, 6)] + [("u", "", hours) for hours in (7, 8, 9)]
    events.append(("b", "bot-b", 0.5))
    for name, peer, hours in events:
        uri = f"viking://~/memories/events/2026/12/01/{name}{hours}.md"
        api.write(uri, f"# Summary\nEvent {name}{hours}.")
        stored = uri.replace("~", "user/default")
        Context.objects.filter(uri=stored).update(peer=peer, updated_at=timezone.now() - timedelta(hours=hours))
    RetrievalSettings.objects.filter(pk=1).update(bootstrap_working_state_max=5)
    return api


def working_state(api, **headers) -> list[str]:
    status, body = api.post(SEARCH, {"mode": "bootstrap", "max_tokens": 3000}, **headers)
    assert status == 200, body
    names = by_slot(body["result"])["working_state"]
    return [uri.rsplit("/", 1)[1].removesuffix(".md") for uri in names]


def test_working_state_with_an_actor_peer_splits_peer_and_user_events(peer_events):
    # the newest four of bot-a's and the newest of the user's, oldest first; bot-b's is another peer's state
    assert working_state(peer_events, x_openviking_actor_peer="bot-a") == ["u7", "a4", "a3", "a2", "a1"]
    RetrievalSettings.objects.filter(pk=1).update(bootstrap_working_state_peer_share=0.4)
    assert working_state(peer_events, x_openviking_actor_peer="bot-a") == ["u9", "u8", "u7", "a2", "a1"]


def test_working_state_peer_places_left_empty_go_to_the_user(peer_events):
    Context.objects.filter(peer="bot-a").exclude(uri__endswith="/a1.md").update(peer="bot-c")
    assert working_state(peer_events, x_openviking_actor_peer="bot-a") == ["u9", "u8", "u7", "a1"]


def test_working_state_without_a_peer_is_the_newest_events_of_everyone(peer_events):
    assert working_state(peer_events) == ["a4", "a3", "a2", "a1", "b0.5"]
