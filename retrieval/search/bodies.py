"""The one read of an assembled block's bodies: exactly the planned levels of exactly the planned URIs."""

from collections.abc import Collection

from core.auth import Caller
from retrieval.search.query import visible_predicate
from retrieval.search.statements import prepared_cursor


def read_levels(
    *, caller: Caller, full: Collection[str], overview: Collection[str], parents: Collection[str] = ()
) -> tuple[dict[str, str], set[str]]:
    """(uri → content for the `full` URIs and overview for the `overview` ones, the documents among `parents`), in
    one query. A document is a directory parsed from one text into sections (it keeps its text's hash)."""
    visible = visible_predicate(caller)
    # Plain SQL on the compiled visibility rule: the ORM's Case/When composition cost more than the query.
    sql = (
        'SELECT "retrieval_context"."uri", CASE WHEN "retrieval_context"."uri" = ANY(%s) '
        'THEN "retrieval_context"."content" ELSE "retrieval_context"."overview" END, FALSE '
        f'FROM "retrieval_context" WHERE ({visible.sql}) AND "retrieval_context"."uri" = ANY(%s) '
        'UNION ALL SELECT "retrieval_context"."uri", NULL, TRUE '
        f'FROM "retrieval_context" WHERE ({visible.sql}) AND "retrieval_context"."uri" = ANY(%s) '
        'AND "retrieval_context"."kind" = %s AND "retrieval_context"."content_hash" <> %s'
    )
    texts, documents = {}, set()
    with prepared_cursor() as cursor:  # the same text on every request of this caller: planned once
        cursor.execute(
            sql, [list(full), *visible.params, [*full, *overview], *visible.params, list(parents), "dir", ""]
        )
        for uri, text, is_document in cursor.fetchall():
            if is_document:
                documents.add(uri)
            else:
                texts[uri] = text
    return texts, documents
