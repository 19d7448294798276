"""The bootstrap's reads in retrieval/search/bootstrap.py: only what the caller sees, ready files only, newest first
with ties by URI, each read stopped at its limit (per peer when peers are named)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from core.auth import Caller
from core.models import Account
from retrieval.models import Context
from retrieval.search.bootstrap import newest_events, newest_files, ready_file_content

NOW = timezone.now()
EVENTS = "viking://user/{owner}/memories/events/2026/12/01/{name}.md"
PROFILE = "viking://user/{owner}/memories/profile.md"


@pytest.fixture
def store(seeded):
    account = Account.objects.get(name="default")
    other_account = Account.objects.create(name="other")

    def node(uri, *, hours, owner="default", account=account, category="events", state="ready", peer=""):
        context_type = "memory" if "/memories/" in uri else "resource"
        Context.objects.create(
            account=account,
            uri=uri.format(owner=owner),
            parent_uri="",
            kind="file",
            context_type=context_type,
            category=category if context_type == "memory" else "",
            owner=owner if uri.startswith("viking://user/") else "",
            peer=peer,
            abstract=f"abstract of {uri}",
            content=f"content of {uri}",
            state=state,
            created_at=NOW,
            updated_at=NOW - timedelta(hours=hours),
        )

    def event(name, **fields):
        node(EVENTS.replace("{name}", name), **fields)

    for name, hours in (("e1", 1), ("e2", 2), ("tie-b", 3), ("tie-a", 3)):
        event(name, hours=hours)
    event("bob", hours=0.5, owner="bob")  # another user's private space
    event("elsewhere", hours=0.5, account=other_account)
    event("pending", hours=0.5, state="pending")
    event("old", hours=24 * 30)
    for name, hours in (("a1", 1.5), ("a2", 2.5), ("a3", 3.5)):
        event(name, hours=hours, peer="bot-a")
    event("b1", hours=0.2, peer="bot-b")
    node(PROFILE, hours=0.1, category="profile")
    node(PROFILE, hours=0.1, category="profile", owner="bob")
    node("viking://resources/runbook.md", hours=0.3)
    node("viking://user/{owner}/memories/entities/caddy.md", hours=0.4, category="entities")
    return Caller(account.id, account.name, "default", "admin")


def names(rows) -> list[str]:
    return [row.uri.rsplit("/", 1)[1].removesuffix(".md") for row in rows]


def test_newest_events_are_the_callers_ready_events_newest_first_ties_by_uri(store):
    since = NOW - timedelta(days=7)
    assert names(newest_events(store, since=since, limit=20)) == [
        "b1", "e1", "a1", "e2", "a2", "tie-a", "tie-b", "a3"
    ]  # fmt: skip
    assert names(newest_events(store, since=since, limit=3)) == ["b1", "e1", "a1"]


def test_newest_events_of_named_peers_take_each_peers_newest_limit(store):
    rows = newest_events(store, since=NOW - timedelta(days=7), limit=2, peers=("bot-a", ""))
    assert names(rows) == ["e1", "a1", "e2", "a2"]  # bot-b's is another peer's; one round trip, merged newest first
    assert {row.peer for row in rows} == {"bot-a", ""}


def test_newest_files_skip_profiles_and_the_given_uris_and_stop_at_the_limit(store):
    since_all = newest_files(store, skip=(), limit=4)
    assert names(since_all) == ["b1", "runbook", "caddy", "e1"]
    skipped = newest_files(store, skip={since_all[1].uri}, limit=2)
    assert names(skipped) == ["b1", "caddy"]


def test_ready_file_content_reads_only_what_the_caller_sees(store):
    assert ready_file_content(store, PROFILE.format(owner="default")).startswith("content of")
    assert ready_file_content(store, PROFILE.format(owner="bob")) is None
    assert ready_file_content(store, EVENTS.format(owner="default", name="pending")) is None
