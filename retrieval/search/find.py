"""/find, the retrieval primitive: one query embedding, one SQL statement with every filter pushed down, no LLM."""

from core.auth import Caller
from retrieval.embedders import embed_query
from retrieval.search.query import RESULT_KEYS, FindQuery, Predicate, scope_predicate
from retrieval.search.ranking import ranking_for, score_order
from retrieval.search.statements import HIT_COLUMNS, SearchQuery


def ranked_hits(
    caller: Caller,
    spec: FindQuery,
    queries: list[SearchQuery],
    scope: Predicate | None = None,
    settings_row=None,
) -> list[dict]:
    """The `spec.limit` best hits for any of `queries` in score order (`retrieval.search.ranking.score_order`);
    `settings_row`, the operator's settings when the request has read them already (the rate limit does)."""
    columns = HIT_COLUMNS + (("content",) if spec.read_content else ())
    where = scope if scope is not None else scope_predicate(caller, spec)
    return score_order(
        caller=caller,
        spec=spec,
        scope=where,
        queries=queries,
        limit=spec.limit,
        columns=columns,
        ranking=ranking_for(spec, settings_row),
    ).rows


def hit_body(row: dict) -> dict:
    hit = {
        "context_type": row["context_type"],
        "uri": row["uri"],
        "level": 1 if row["kind"] == "dir" else 2,
        "score": row["score"],
        "relevance": round(row["fused"], 6),
        "abstract": row["abstract"],
        "tags": row["tags"],
    }
    if "content" in row:
        hit["content"] = row["content"]
    return hit


def group_hits(rows: list[dict]) -> dict:
    result = {"memories": [], "resources": [], "skills": []}
    for row in rows:
        result[RESULT_KEYS[row["context_type"]]].append(hit_body(row))
    result["total"] = len(rows)
    return result


def find(*, caller: Caller, spec: FindQuery, settings_row=None) -> dict:
    # Compiling the scope validates target URIs and filters: a bad request is refused before the embedding is
    # paid for, and stays a 4xx even when the embedder is down.
    scope = scope_predicate(caller, spec)
    queries = [SearchQuery(spec.query, embed_query(spec.query))]
    return group_hits(ranked_hits(caller, spec, queries, scope, settings_row))
