"""The executor: fetches exactly the planned levels for exactly the planned URIs, in one query."""
from django.db import connection

from assembly.planner import Plan
from ovsite.auth import Caller
from retrieval.find import visible_predicate
from retrieval.tokens import truncate_to_tokens


def fetch_bodies(*, caller: Caller, plan: Plan, family: str) -> dict[str, str]:
    """uri → body text at its planned tier. Abstracts and declared slot bodies came with the candidates; no query
    when nothing deeper."""
    bodies = {e.candidate.uri: e.candidate.abstract for e in plan.entries if e.tier == "abstract"}
    bodies.update({e.candidate.uri: truncate_to_tokens(e.candidate.body, e.body_tokens, family)
                   for e in plan.entries if e.tier == "full" and e.candidate.body is not None})
    deep = {e.candidate.uri: e for e in plan.entries
            if e.tier in ("overview", "full") and e.candidate.body is None}
    if deep:
        full = [uri for uri, e in deep.items() if e.tier == "full"]
        overview = [uri for uri, e in deep.items() if e.tier == "overview"]
        visible = visible_predicate(caller)
        # Plain SQL on the compiled visibility rule: the ORM's Case/When composition cost more than the query.
        sql = ('SELECT "retrieval_context"."uri", CASE WHEN "retrieval_context"."uri" = ANY(%s) '
               'THEN "retrieval_context"."content" ELSE "retrieval_context"."overview" END '
               f'FROM "retrieval_context" WHERE ({visible.sql}) AND "retrieval_context"."uri" = ANY(%s)')
        with connection.cursor() as cursor:
            cursor.execute(sql, [full, *visible.params, full + overview])
            for uri, text in cursor.fetchall():
                bodies[uri] = truncate_to_tokens(text, deep[uri].body_tokens, family)
    return bodies


def documents_among(*, caller: Caller, uris: set[str]) -> set[str]:
    """The URIs among `uris` that are documents parsed into sections (a directory that keeps its text's hash).
    Plain SQL for the same reason as above: the ORM query cost more than the merge it serves."""
    if not uris:
        return set()
    visible = visible_predicate(caller)
    sql = ('SELECT "retrieval_context"."uri" FROM "retrieval_context" '
           f'WHERE ({visible.sql}) AND "retrieval_context"."uri" = ANY(%s) AND "retrieval_context"."kind" = %s '
           'AND "retrieval_context"."content_hash" <> %s')
    with connection.cursor() as cursor:
        cursor.execute(sql, [*visible.params, list(uris), "dir", ""])
        return {uri for (uri,) in cursor.fetchall()}
