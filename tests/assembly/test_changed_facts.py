"""Facts that change (issue 37, docs/retrieval.md "Facts that change"): where two memories tell one thing of one
subject, the newer comes first in a block, and the block says each memory's day."""

from retrieval.models import Context

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


def test_an_unrelated_older_memory_keeps_its_place(api):
    api.write_all(
        {
            "viking://~/memories/events/2026/01/10/editor.md": "I use VS Code as my editor for all my coding.",
            "viking://~/memories/events/2026/06/02/lunch.md": "Lunch with Dana at the ramen place.",
        }
    )
    result = entries(api, max_tokens=400, score_threshold=0)
    assert result["entries"][0]["uri"].endswith("/editor.md")


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
