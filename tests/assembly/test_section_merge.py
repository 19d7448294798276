"""Sections of one document served together become one entry when that saves tokens (issue 10 §4): the pure
merge stage, its budget invariant, and the pipeline around it (citations, ledger, stats)."""

from hypothesis import given, settings
from hypothesis import strategies as st

from assembly.merge import merge_sections
from assembly.render import render_block, render_blocks
from retrieval.models import Context
from sessions_app.models import RecallLedgerEntry
from tests.assembly.test_budget_invariant import FAMILIES, texts
from tests.retrieval.test_section_ingest import runbook

DOC = "viking://resources/runbook.md"


def entry(uri: str, score: float, text: str, detail: str = "abstract", category: str = "resources") -> dict:
    return {
        "uri": uri,
        "category": category,
        "score": score,
        "detail": detail,
        "text": text,
        "abstract": text,
        "block": render_block(uri, category, score, detail, text),
    }


def rendered_tokens(entries, family="o200k"):
    from retrieval.tokens import estimate_tokens

    return estimate_tokens(render_blocks([e["block"] for e in entries]), family)


def test_sections_of_one_document_merge_in_document_order_at_the_best_ones_place():
    entries = [
        entry(f"{DOC}/05-restart", 0.9, "Restart with systemctl."),
        entry("viking://resources/faq.md", 0.8, "FAQ."),
        entry(f"{DOC}/02-install", 0.7, "Install with apt."),
    ]
    merged = merge_sections(entries, {DOC}, "o200k")
    assert [e["uri"] for e in merged] == [DOC, "viking://resources/faq.md"]
    assert merged[0]["sections"] == [f"{DOC}/02-install", f"{DOC}/05-restart"]
    assert merged[0]["score"] == 0.9 and merged[0]["detail"] == "abstract"
    assert merged[0]["text"] == f"{DOC}/02-install\nInstall with apt.\n\n{DOC}/05-restart\nRestart with systemctl."
    assert rendered_tokens(merged) < rendered_tokens(entries)


def test_files_of_a_plain_folder_other_tiers_and_uri_lines_stay_apart():
    folder = "viking://resources/notes"
    entries = [
        entry(f"{folder}/a.md", 0.9, "A."),
        entry(f"{folder}/b.md", 0.8, "B."),
        entry(f"{DOC}/01-intro", 0.7, "Intro."),
        entry(f"{DOC}/02-install", 0.6, "", detail="uri"),
        entry(f"{DOC}/03-deploy", 0.5, "Deploy the release.", detail="full"),
    ]
    assert merge_sections(entries, {DOC}, "o200k") == entries


def test_a_merge_that_would_not_save_tokens_is_not_made():
    # A very long document URI repeated in front of every section costs more than the element shells it saves.
    doc = "viking://resources/" + "a-very-long-folder-name/" * 12 + "runbook.md"
    entries = [entry(f"{doc}/01-x", 0.9, "x"), entry(f"{doc}/02-y", 0.8, "y")]
    assert merge_sections(entries, {doc}, "o200k") == entries


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 3), st.integers(1, 5), st.floats(0, 1), texts, st.sampled_from(["abstract", "full", "uri"])
        ),
        max_size=12,
    ),
    st.sampled_from(FAMILIES),
)
def test_merging_never_grows_rendered_and_keeps_every_uri(items, family):
    docs = [f"viking://resources/doc{d}.md" for d in range(4)]
    seen, entries = set(), []
    for doc, section, score, text, detail in items:
        uri = f"{docs[doc]}/{section:02d}-part"
        if uri not in seen:
            seen.add(uri)
            entries.append(entry(uri, score, "" if detail == "uri" else text, detail))
    merged = merge_sections(entries, set(docs[:3]), family)
    assert rendered_tokens(merged, family) <= rendered_tokens(entries, family)
    served = [uri for e in merged for uri in e.get("sections", [e["uri"]])]
    assert sorted(served) == sorted(e["uri"] for e in entries)
    rendered = render_blocks([e["block"] for e in merged])
    assert all(uri in rendered for uri in served)


def _context(api, **body):
    status, result = api.post("/api/v1/search/search", {"mode": "context", **body})
    assert status == 200, result
    return result["result"]


def test_a_served_document_entry_cites_its_sections_and_the_ledger_cools_each(api):
    api.write(DOC, runbook(), wait=True)
    api.post("/api/v1/sessions", {"session_id": "s1"})
    api.post("/api/v1/sessions/s1/messages", {"role": "user", "content": "workers are stuck"})
    result = _context(
        api, query="restart the billing workers and rotate credentials", max_tokens=1600, session_id="s1", dedup_turns=2
    )
    merged = [e for e in result["entries"] if "sections" in e]
    assert merged and merged[0]["uri"] == DOC and len(merged[0]["sections"]) >= 2
    sections = set(Context.objects.filter(parent_uri=DOC).values_list("uri", flat=True))
    assert set(merged[0]["sections"]) <= sections
    assert all(uri in result["rendered"] for uri in merged[0]["sections"])
    stats = result["stats"]
    assert stats["merged"]["entries"] == len(merged) and stats["merged"]["saved_tokens"] > 0
    assert stats["used_tokens"] <= 1600 and stats["dropped"] == 0
    assert set(merged[0]["sections"]) <= set(RecallLedgerEntry.objects.values_list("uri", flat=True))


def test_a_lone_section_is_served_as_itself(api):
    api.write(DOC, runbook(), wait=True)
    result = _context(api, query="How do I restart the billing workers?", max_tokens=130)
    first = result["entries"][0]
    assert first["uri"] == f"{DOC}/05-restart-the-workers" and "sections" not in first
    assert [e["detail"] for e in result["entries"][1:]] == ["uri"] * (len(result["entries"]) - 1)
    assert result["stats"]["merged"]["entries"] == 0
