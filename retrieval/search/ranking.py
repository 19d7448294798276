"""The two searches every surface is made of, each one statement: score order across domains (/find, list mode,
context without a purpose) and per bucket (purposes and quotas)."""

import itertools
import re
from dataclasses import dataclass

from django.conf import settings

from core.auth import Caller
from profiles.selectors import current_settings
from retrieval.search.fusion import Ranking, above_threshold, fuse, relevance_cut
from retrieval.search.query import (
    FindQuery,
    Predicate,
    account_size,
    exact_search,
    same_subject_pairs,
    score_order_scans,
)
from retrieval.search.statements import EVERYTHING, SearchQuery, fetch_statement, search_statement


@dataclass
class Found:
    """Rows best first, each with its `score`; `below_threshold` counts the rows the threshold cut; `strong` is
    whether the best row reached the relevance floor (None without one)."""

    rows: list[dict]
    below_threshold: int
    ranking: Ranking
    strong: bool | None = None


def ranking_for(spec: FindQuery, settings_row=None, relevance_floor: float | None = None) -> Ranking:
    """The request's search_mode, else the operator's; the fusion weight and rescue are the operator's; the
    relevance floor is the caller's (/recall's defaults)."""
    settings_row = settings_row or current_settings()
    mode = spec.search_mode or settings_row.search_mode
    # A BM25 order has no chance level: the floor is for hybrid and vector searches (retrieval.search.calibration).
    return Ranking(
        mode=mode,
        lexical_weight=settings_row.hybrid_lexical_weight,
        rescue_coverage=settings_row.lexical_rescue_coverage,
        relevance_floor=relevance_floor if mode != "lexical" else None,
    )


def prepared(scope: Predicate) -> bool:
    """Whether a search over `scope` is prepared (`fetch_statement`): a caller's scope without a filter is, its values
    written in (`retrieval.search.query.scope_predicate`), and PostgreSQL runs its generic plan after five
    executions; planning a hybrid search took 0.55–1.2 ms a request (bench/RESULTS.md, request_path). A filter's values
    stay parameters (a relative `since` changes with every request) and the plan depends on them: a generic plan,
    costed for any values, walked an HNSW graph where the values called for a B-tree and answered otherwise, so a
    filtered search is planned for its values each time, unprepared."""
    return not scope.params


# A hybrid search fuses at least this many of each side's best before it keeps its `limit`: a node ranked 15th by
# cosine and 12th by BM25 is often the best of both. /find@10's evidence recall with 10 / 20 / 30 / 50 of each:
# generated conversations 0.735 / 0.768 / 0.774 / 0.774, LoCoMo's first 400 questions 0.587 / 0.604 / 0.601 / 0.601,
# the statement 1.3 ms faster at 30 than at 50 (docs/retrieval.md).
HYBRID_DEPTH = 30


def score_order_ef_search(mode: str) -> int:
    """How wide a search in score order walks its graphs: a hybrid search's lexical side brings back what a
    narrower walk misses (ovsite/settings.py, HNSW_HYBRID_EF_SEARCH)."""
    return settings.HNSW_HYBRID_EF_SEARCH if mode == "hybrid" else settings.HNSW_WIDE_EF_SEARCH


def score_order(
    *,
    caller: Caller,
    spec: FindQuery,
    scope: Predicate,
    queries: list[SearchQuery],
    limit: int,
    columns: tuple[str, ...],
    ranking: Ranking,
) -> Found:
    """The `limit` best of `scope` for any of `queries`, fused, above `spec.score_threshold`. The k-nearest
    side walks the whole table's graph or the search partitions (`score_order_scans`), or a small tenant's rows
    exactly (`exact_search`); the full-text side reads the one GIN index, BM25 over the matches."""
    depth = max(limit, HYBRID_DEPTH) if ranking.mode == "hybrid" else limit
    partitions = score_order_scans(caller, spec)
    nearest = [(label, depth) for label in partitions or (EVERYTHING,)] if ranking.nearest else []
    lexical = [(EVERYTHING, depth)] if ranking.lexical else []
    statement = search_statement(
        scope,
        queries,
        columns,
        nearest,
        lexical,
        account_size(caller.account_id) if lexical else 0,
        ef_search=score_order_ef_search(ranking.mode),
        exact=exact_search(caller.account_id),
    )
    # One query: its nearest `depth` of all partitions are the answer, so only they come back.
    rows = fetch_statement(statement, prepare=prepared(scope), limit=depth if len(queries) == 1 else None)
    texts = tuple(query.text for query in queries)
    kept, below = above_threshold(fuse(rows, ranking, grouped=False, texts=texts), spec.score_threshold, ranking)
    served, strong = relevance_cut(kept[:limit], ranking.relevance_floor)
    return Found(served, below, ranking, strong)


def by_bucket(
    *,
    caller: Caller,
    spec: FindQuery,
    scope: Predicate,
    queries: list[SearchQuery],
    counts: list[tuple[str, int]],
    columns: tuple[str, ...],
    ranking: Ranking,
    pool: int | None = None,
) -> Found:
    """Each bucket's `count` best for any of `queries` (buckets searched on their own, so a weak bucket is not
    crowded out by a strong one), fused within the bucket, above `spec.score_threshold`; rows carry their
    `bucket`, best first. With a `pool`, the counts are shares of it: places a bucket cannot fill (it holds too
    few candidates) go to the best of the others, so a store of one kind still fills its pool."""
    fetch = [(bucket, max(count, pool or 0)) for bucket, count in counts]
    statement = search_statement(
        scope,
        queries,
        columns,
        fetch if ranking.nearest else [],
        fetch if ranking.lexical else [],
        account_size(caller.account_id) if ranking.lexical else 0,
        exact=exact_search(caller.account_id),
    )
    kept, below = above_threshold(
        fuse(
            fetch_statement(statement, prepare=prepared(scope)),
            ranking,
            grouped=True,
            texts=tuple(query.text for query in queries),
        ),
        spec.score_threshold,
        ranking,
    )
    room = dict(counts)
    chosen, spare = set(), []
    for index, row in enumerate(kept):
        if room[row["bucket"]] > 0:
            room[row["bucket"]] -= 1
            chosen.add(index)
        else:
            spare.append(index)
    if pool is not None:
        chosen.update(spare[: max(0, pool - len(chosen))])
    served, strong = relevance_cut([kept[index] for index in sorted(chosen)], ranking.relevance_floor)
    return Found(served, below, ranking, strong)


# Two memories that a search ranks together, with vectors at least this near, may tell one thing of one subject
# (where one lives, which editor one uses). On the gate's Chinese conversations the 26 pairs of a changed fact's old
# and new statements are at 0.28–0.81 (median 0.62, a quarter under 0.55); 2,000 random pairs of their turns at
# median 0.21, 99th percentile 0.54 (docs/retrieval.md, "Facts that change").
SAME_SUBJECT_COSINE = 0.55


@dataclass(frozen=True)
class NewerFirst:
    depth: int  # how far down the ranking pairs are looked for
    reach: int  # ranks a newer statement may move up
    gap: float  # the largest fused gap between the two statements


# And they answer a question about equally well: fused values this close. Chat turns of one conversation are often
# as near as 0.55; moving a newer one up past rows between pushed evidence out of 400-token blocks (the generated
# conversations lost 1.9 points at a gap of 0.1 and 10 ranks, 0.2 at this gap and reach).
NEWER_FIRST = NewerFirst(depth=10, reach=3, gap=0.05)
# A question about the present wants the newest statement of a subject wherever it ranks among the first twenty.
NOW_FIRST = NewerFirst(depth=20, reach=20, gap=float("inf"))


def _when(row: dict):
    return row["event_time"] or row["updated_at"]


# Words by which a question asks about the present state ("which editor do I use now?", "现在住在哪？").
_ASKS_FOR_NOW = re.compile(
    r"\b(?:now|currently|nowadays|these days|at the moment)\b|现在|目前|如今|当前", re.IGNORECASE
)


def asks_for_now(text: str) -> bool:
    return bool(_ASKS_FOR_NOW.search(text))


def newer_first(rows: list[dict], account_id: int, rule: NewerFirst = NEWER_FIRST) -> list[dict]:
    """`rows` (best first) with each memory among the first `rule.depth` moved up to just before the best-ranked
    older memory of its subject at most `rule.reach` ranks above it: where a fact changed, the newer statement comes
    first and the older follows. Of one subject: vectors at least SAME_SUBJECT_COSINE near and fused values within
    `rule.gap` (NOW_FIRST, for a question about the present, has no gap and no reach within its depth). A memory's
    time is its event day, else when it was last written. The vectors are compared (one statement) only for
    memories that have such a partner by time and fused value."""
    head = rows[: rule.depth]
    memories = [row for row in head if row["context_type"] == "memory" and row["kind"] == "file"]
    paired = {
        row["uri"]
        for a, b in itertools.combinations(memories, 2)
        if _when(a) != _when(b) and abs(a["fused"] - b["fused"]) <= rule.gap
        for row in (a, b)
    }
    if not paired:
        return rows
    pairs = same_subject_pairs(account_id, sorted(paired), SAME_SUBJECT_COSINE)
    return newer_first_order(head, pairs, rule) + rows[rule.depth :]


def newer_first_order(head: list[dict], pairs: set[frozenset[str]], rule: NewerFirst = NEWER_FIRST) -> list[dict]:
    """`newer_first`'s moves, given the pairs of URIs of one subject. Pure."""
    order = list(head)
    for row in head:
        place = order.index(row)
        older = [
            at
            for at in range(max(0, place - rule.reach), place)
            if frozenset((order[at]["uri"], row["uri"])) in pairs
            and _when(order[at]) < _when(row)
            and order[at]["fused"] - row["fused"] <= rule.gap
        ]
        if older:
            order.insert(older[0], order.pop(place))
    return order
