"""The executor: fetches exactly the planned levels for exactly the planned URIs, in one query."""
from collections.abc import Collection

from assembly.planner import Plan
from ovsite.auth import Caller
from retrieval.find import prepared_cursor, visible_predicate
from retrieval.tokens import truncate_to_tokens


def fetch_bodies(*, caller: Caller, plan: Plan, family: str,
                 parents: Collection[str] = ()) -> tuple[dict[str, str], set[str]]:
    """(uri → body text at its planned tier, the documents among `parents`), in one query, none when neither is
    needed. Abstracts and declared slot bodies came with the candidates. A document is a directory parsed from one
    text into sections (it keeps its text's hash): the merge stage joins sections of one served side by side."""
    bodies = {e.candidate.uri: e.candidate.abstract for e in plan.entries if e.tier == "abstract"}
    bodies.update({e.candidate.uri: truncate_to_tokens(e.candidate.body, e.body_tokens, family)
                   for e in plan.entries if e.tier == "full" and e.candidate.body is not None})
    deep = {e.candidate.uri: e for e in plan.entries
            if e.tier in ("overview", "full") and e.candidate.body is None}
    if not deep and not parents:
        return bodies, set()
    full = [uri for uri, e in deep.items() if e.tier == "full"]
    visible = visible_predicate(caller)
    # Plain SQL on the compiled visibility rule: the ORM's Case/When composition cost more than the query.
    sql = ('SELECT "retrieval_context"."uri", CASE WHEN "retrieval_context"."uri" = ANY(%s) '
           'THEN "retrieval_context"."content" ELSE "retrieval_context"."overview" END, FALSE '
           f'FROM "retrieval_context" WHERE ({visible.sql}) AND "retrieval_context"."uri" = ANY(%s) '
           'UNION ALL SELECT "retrieval_context"."uri", NULL, TRUE '
           f'FROM "retrieval_context" WHERE ({visible.sql}) AND "retrieval_context"."uri" = ANY(%s) '
           'AND "retrieval_context"."kind" = %s AND "retrieval_context"."content_hash" <> %s')
    documents = set()
    with prepared_cursor() as cursor:  # the same text on every request of this caller: planned once
        cursor.execute(sql, [full, *visible.params, list(deep), *visible.params, list(parents), "dir", ""])
        for uri, text, is_document in cursor.fetchall():
            if is_document:
                documents.add(uri)
            else:
                bodies[uri] = truncate_to_tokens(text, deep[uri].body_tokens, family)
    return bodies, documents
