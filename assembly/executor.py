"""The executor: fetches exactly the planned levels for exactly the planned URIs, in one query."""

from collections.abc import Collection

from assembly.planner import Plan, PlannedEntry
from core.auth import Caller
from retrieval.search.bodies import read_levels
from retrieval.tokens import truncate_to_tokens


def fetch_bodies(
    *, caller: Caller, plan: Plan, family: str, parents: Collection[str] = ()
) -> tuple[dict[str, str], set[str]]:
    """(uri → body text at its planned tier, the documents among `parents`), in one query, none when neither is
    needed. Abstracts and declared slot bodies came with the candidates. The merge stage joins sections of one
    document served side by side."""
    bodies = {e.candidate.uri: e.candidate.abstract for e in plan.entries if e.tier == "abstract"}
    bodies.update(
        {
            e.candidate.uri: _planned_part(e.candidate.body, e, family)
            for e in plan.entries
            if e.tier == "full" and e.candidate.body is not None
        }
    )
    deep = {e.candidate.uri: e for e in plan.entries if e.tier in ("overview", "full") and e.candidate.body is None}
    if not deep and not parents:
        return bodies, set()
    texts, documents = read_levels(
        caller=caller,
        full=[uri for uri, e in deep.items() if e.tier == "full"],
        overview=[uri for uri, e in deep.items() if e.tier == "overview"],
        parents=parents,
    )
    bodies.update({uri: _planned_part(text, deep[uri], family) for uri, text in texts.items()})
    return bodies, documents


def _planned_part(text: str, entry: PlannedEntry, family: str) -> str:
    """The text as planned: whole when the plan took all of it by its stored count, else a head cut to the
    planned tokens. The stored count is exact (docs/tokens.md) and the estimator's may differ, so cutting a whole
    text to its own count by the estimate could drop its end; the exact fit keeps the budget."""
    stored = entry.candidate.overview_tokens if entry.tier == "overview" else entry.candidate.content_tokens
    return text if entry.body_tokens >= stored else truncate_to_tokens(text, entry.body_tokens, family)
