"""Facts that change (issue 37, docs/retrieval.md "Facts that change"): where two memories tell one thing of one
subject, the newer comes first in a block, and the block says each memory's day."""

import datetime as dt

from retrieval.models import Context
from retrieval.search.ranking import NOW_FIRST, asks_for_now, newer_first_order

SEARCH = "/api/v1/search/search"
QUESTION = "Which editor do I use for coding?"


def entries(api, **body):
    status, result = api.post(SEARCH, {"query": QUESTION, "mode": "context", **body})
    assert status == 200, result
    return result["result"]


def test_the_newer_statement_of_a_changed_fact_comes_first_in_the_block(api):
    api.write_all(
        {
            "viking://~/memories/events/2026/01/10/editor.md": "The editor I use for coding is VS Code.",
            "viking://~/memories/events/2026/06/02/editor-switch.md": "The editor I use for coding is Neovim now.",
            "viking://~/memories/events/2026/03/01/lunch.md": "Lunch with Dana at the ramen place.",
        }
    )
    # The search's own order puts the old statement first (its vector is a little nearer the question's).
    found = api.find(QUESTION)
    assert [hit["uri"].rsplit("/", 1)[1] for hit in found["memories"][:2]] == ["editor.md", "editor-switch.md"]
    result = entries(api, max_tokens=400)
    assert [e["uri"].rsplit("/", 1)[1] for e in result["entries"][:2]] == ["editor-switch.md", "editor.md"]
    # An event's URI says its day: no date attribute is spent on it.
    assert "date=" not in result["rendered"] and "2026/06/02" in result["rendered"]


def memory_row(uri, fused, day):
    return {"uri": uri, "fused": fused, "event_time": dt.datetime(2026, 1, day, tzinfo=dt.UTC), "updated_at": None}


def test_only_a_same_subject_pair_close_in_relevance_and_rank_is_reordered():
    """newer_first's rule on hand-built rows: each condition, taken away, leaves the order as it was."""
    old, other, new = memory_row("old", 0.80, 1), memory_row("other", 0.79, 5), memory_row("new", 0.77, 9)
    same = {frozenset(("old", "new"))}
    assert [r["uri"] for r in newer_first_order([old, other, new], same)] == ["new", "old", "other"]
    assert newer_first_order([old, other, new], set()) == [old, other, new]  # not one subject
    far = memory_row("new", 0.70, 9)  # answers clearly less well
    assert newer_first_order([old, other, far], same) == [old, other, far]
    older = memory_row("new", 0.77, 1)  # not newer (same day)
    assert newer_first_order([old, other, older], same) == [old, other, older]
    between = [memory_row(f"x{n}", 0.79, 5) for n in range(3)]  # more than 3 ranks apart
    assert newer_first_order([old, *between, new], same) == [old, *between, new]


def test_a_question_about_now_puts_the_newer_statement_first_however_far_it_ranks():
    """Asked about the present, the newest statement of a subject comes first among the first ten, past the fused
    gap and the reach an ordinary question keeps (the gate's Chinese conversations: current first 0.720 / 0.760 →
    0.840 / 0.880 at 400 / 1600)."""
    old, new = memory_row("old", 0.80, 1), memory_row("new", 0.62, 9)
    between = [memory_row(f"x{n}", 0.75 - n / 100, 5) for n in range(5)]
    same = {frozenset(("old", "new"))}
    assert newer_first_order([old, *between, new], same) == [old, *between, new]
    moved = newer_first_order([old, *between, new], same, NOW_FIRST)
    assert [r["uri"] for r in moved] == ["new", "old", *(r["uri"] for r in between)]
    assert newer_first_order([old, *between, new], set(), NOW_FIRST) == [old, *between, new]
    for question in (
        "Which editor do I use now?",
        "Where does she currently live?",
        "佳宁现在住在哪个城市？",
        "目前的版本是多少？",
    ):
        assert asks_for_now(question), question
    for question in ("Which editor did I use in 2024?", "When did she know about it?", "现场的人是谁？"):
        assert not asks_for_now(question), question


def test_asked_about_now_the_block_puts_the_newer_statement_first(api):
    api.write_all(
        {
            "viking://~/memories/events/2026/01/10/editor.md": "The editor I use for coding is VS Code, for years.",
            "viking://~/memories/events/2026/03/01/lunch.md": "Lunch with Dana at the ramen place.",
            "viking://~/memories/events/2026/06/02/editor-switch.md": "I moved to Neovim as my editor for coding.",
        }
    )
    body = {"mode": "context", "max_tokens": 400}
    status, plain = api.post(SEARCH, {"query": "Which editor do I use for coding?", **body})
    status_now, now = api.post(SEARCH, {"query": "Which editor do I use for coding now?", **body})
    assert status == status_now == 200
    order = [e["uri"].rsplit("/", 1)[1] for e in plain["result"]["entries"]]
    assert order.index("editor.md") < order.index("editor-switch.md"), order  # the rule an ordinary question keeps
    assert now["result"]["entries"][0]["uri"].endswith("/editor-switch.md"), now["result"]["entries"]


def test_a_memory_without_a_day_in_its_uri_is_dated_by_its_last_write(api):
    api.write("viking://~/memories/preferences/editor.md", "Edits code in Neovim with LazyVim.")
    row = Context.objects.get(uri__endswith="/preferences/editor.md")
    [entry] = entries(api, max_tokens=400)["entries"]
    assert entry["date"] == row.updated_at.date().isoformat()


def test_an_event_takes_its_day_from_its_uri():
    from retrieval.services import event_time

    assert event_time("viking://user/u/memories/events/2026/06/02/editor-switch.md").isoformat() == (
        "2026-06-02T00:00:00+00:00"
    )
    assert event_time("viking://user/u/memories/events/2026/02/31/x.md") is None
    assert event_time("viking://user/u/memories/preferences/editor.md") is None


def test_a_written_event_stores_its_day(api):
    api.write("viking://~/memories/events/2026/06/02/editor-switch.md", "Switched to Neovim.")
    row = Context.objects.get(uri__endswith="/editor-switch.md")
    assert row.event_time.date().isoformat() == "2026-06-02"
