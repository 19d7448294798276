"""Sections of one document served side by side become one entry when that saves tokens (issue 10, docs/design.md §5).

Pure: rendered entries and the URIs of the documents among their parents in, entries out. A merged entry is the
document's (`uri`), lists its sections in `sections` (document order) and gives each section's text under its own
URI, so every section stays citable; the rendered text never grows, so the budget invariant holds.
"""

from assembly.render import render_block, render_blocks
from retrieval.tokens import estimate_tokens


def parent_uri(uri: str) -> str:
    return uri.rsplit("/", 1)[0]


def merge_sections(entries: list[dict], documents: set[str], family: str) -> list[dict]:
    """Entries in the same order, the sections of one document at one tier merged at the place of the best of
    them; a group stays apart when its merged block would not cost fewer tokens than its blocks."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for entry in entries:
        if entry["detail"] != "uri" and parent_uri(entry["uri"]) in documents:
            groups.setdefault((parent_uri(entry["uri"]), entry["detail"]), []).append(entry)
    replaced: dict[int, dict | None] = {}
    for (document, tier), members in groups.items():
        if len(members) < 2:
            continue
        merged = _merged(document, tier, members)
        if estimate_tokens(merged["block"], family) >= estimate_tokens(
            render_blocks([m["block"] for m in members]), family
        ):
            continue
        replaced[id(members[0])] = merged
        replaced.update({id(m): None for m in members[1:]})
    out = [replaced.get(id(entry), entry) for entry in entries]
    out = [entry for entry in out if entry is not None]
    # The estimator rounds per byte class, so compare the whole texts once more rather than trust the sums.
    if estimate_tokens(render_blocks([e["block"] for e in out]), family) > estimate_tokens(
        render_blocks([e["block"] for e in entries]), family
    ):
        return entries
    return out


def _merged(document: str, tier: str, members: list[dict]) -> dict:
    ordered = sorted(members, key=lambda m: m["uri"])  # section names start with their position
    text = "\n\n".join(f"{m['uri']}\n{m['text']}" for m in ordered)
    best = max(members, key=lambda m: m["score"])
    merged = {
        "uri": document,
        "category": best["category"],
        "score": best["score"],
        "detail": tier,
        "text": text,
        "abstract": "",
        "date": best.get("date"),
        "sections": [m["uri"] for m in ordered],
        "block": render_block(document, best["category"], best["score"], tier, text, best.get("date")),
    }
    relevances = [m["relevance"] for m in members if "relevance" in m]
    if relevances:
        merged["relevance"] = max(relevances)
    return merged
