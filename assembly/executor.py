"""The executor: fetches exactly the planned levels for exactly the planned URIs, in one query."""
from django.db.models import Case, F, TextField, Value, When

from assembly.planner import Plan
from ovsite.auth import Caller
from retrieval.selectors import visible_nodes
from retrieval.tokens import truncate_to_tokens


def fetch_bodies(*, caller: Caller, plan: Plan, family: str) -> dict[str, str]:
    """uri → body text at its planned tier. Abstracts came with the candidates; no query when nothing deeper."""
    bodies = {e.candidate.uri: e.candidate.abstract for e in plan.entries if e.tier == "abstract"}
    deep = {e.candidate.uri: e for e in plan.entries if e.tier in ("overview", "full")}
    if deep:
        full = [uri for uri, e in deep.items() if e.tier == "full"]
        overview = [uri for uri, e in deep.items() if e.tier == "overview"]
        body = Case(When(uri__in=full, then=F("content")), When(uri__in=overview, then=F("overview")),
                    default=Value(""), output_field=TextField())
        for uri, text in visible_nodes(caller).filter(uri__in=list(deep)).annotate(body=body).values_list("uri",
                                                                                                          "body"):
            bodies[uri] = truncate_to_tokens(text, deep[uri].body_tokens, family)
    return bodies
