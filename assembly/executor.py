"""The executor: fetches exactly the planned levels for exactly the planned URIs, in one query."""
from collections.abc import Collection

from assembly.planner import Plan
from ovsite.auth import Caller
from retrieval.search.bodies import read_levels
from retrieval.tokens import truncate_to_tokens


def fetch_bodies(*, caller: Caller, plan: Plan, family: str,
                 parents: Collection[str] = ()) -> tuple[dict[str, str], set[str]]:
    """(uri → body text at its planned tier, the documents among `parents`), in one query, none when neither is
    needed. Abstracts and declared slot bodies came with the candidates. The merge stage joins sections of one
    document served side by side."""
    bodies = {e.candidate.uri: e.candidate.abstract for e in plan.entries if e.tier == "abstract"}
    bodies.update({e.candidate.uri: truncate_to_tokens(e.candidate.body, e.body_tokens, family)
                   for e in plan.entries if e.tier == "full" and e.candidate.body is not None})
    deep = {e.candidate.uri: e for e in plan.entries
            if e.tier in ("overview", "full") and e.candidate.body is None}
    if not deep and not parents:
        return bodies, set()
    texts, documents = read_levels(caller=caller, full=[uri for uri, e in deep.items() if e.tier == "full"],
                                   overview=[uri for uri, e in deep.items() if e.tier == "overview"],
                                   parents=parents)
    bodies.update({uri: truncate_to_tokens(text, deep[uri].body_tokens, family) for uri, text in texts.items()})
    return bodies, documents
