"""Candidate providers (docs/retrieval.md): score order across domains, or per-bucket quotas — one SQL round trip
each, through retrieval.search."""

from dataclasses import dataclass, field

from assembly.planner import Candidate
from core.auth import Caller
from retrieval.models import BUCKET_CONDITIONS
from retrieval.search.fusion import Ranking
from retrieval.search.query import FindQuery, Predicate, peer_predicate
from retrieval.search.ranking import NEWER_FIRST, NOW_FIRST, asks_for_now, by_bucket, newer_first, score_order
from retrieval.search.statements import SearchQuery

COLUMNS = (
    "uri",
    "kind",
    "context_type",
    "category",
    "peer",
    "abstract",
    "abstract_tokens",
    "overview_tokens",
    "content_tokens",
    "event_time",
    "updated_at",
)
BUCKETS = tuple(BUCKET_CONDITIONS)  # each has its own partial HNSW index (retrieval.models)


@dataclass
class Candidates:
    items: list[Candidate]
    searched: dict = field(default_factory=dict)
    below_threshold: int = 0
    strong: bool | None = None  # whether the best candidate reached the relevance floor (None: no floor)


@dataclass(frozen=True)
class PeerPolicy:
    """Memories produced by another peer than the caller's actor can be excluded or down-weighted."""

    actor: str = ""
    scope: str = "all"  # "all" | "actor"
    other_peer_penalty: float = 0.0

    def restrict(self, where: Predicate) -> Predicate:
        return where & peer_predicate(("", self.actor)) if self.scope == "actor" else where

    def weight(self, peer: str) -> float:
        return 1.0 if peer in ("", self.actor) else 1.0 - self.other_peer_penalty


def _written_on(row: dict) -> str | None:
    """The day a memory was last written, where its URI does not already say its day (an event's does): what lets
    the reading model tell which of two statements is current, for the ~8 tokens of a `date` attribute."""
    if row["context_type"] != "memory" or row["event_time"] is not None:
        return None
    return row["updated_at"].date().isoformat()


def _candidates(rows: list[dict], peers: PeerPolicy, account_id: int, queries: list[SearchQuery]) -> list[Candidate]:
    """Rows in their fused order, another peer's down-weighted in score and place, a newer statement of one
    subject before an older (retrieval.search.ranking.newer_first), further down for a question about the present."""
    rule = NOW_FIRST if any(asks_for_now(query.text) for query in queries) else NEWER_FIRST
    # The weighted value is the rank's key, and what newer_first compares.
    weighted = sorted(
        ({**row, "fused": row["fused"] * peers.weight(row["peer"])} for row in rows),
        key=lambda row: (-row["fused"], row["uri"]),
    )
    return [
        Candidate(
            uri=row["uri"],
            category=row["category"],
            context_type=row["context_type"],
            kind=row["kind"],
            score=round(row["score"] * peers.weight(row["peer"]), 6),
            abstract=row["abstract"],
            abstract_tokens=row["abstract_tokens"],
            overview_tokens=row["overview_tokens"],
            content_tokens=row["content_tokens"],
            relevance=round(row["fused"], 6),
            date=_written_on(row),
        )
        for row in newer_first(weighted, account_id, rule)
    ]


def score_candidates(
    *,
    caller: Caller,
    scope: Predicate,
    spec: FindQuery,
    queries: list[SearchQuery],
    limit: int,
    peers: PeerPolicy,
    ranking: Ranking,
) -> Candidates:
    """No purpose, no quotas: one cross-domain search for all queries, best `limit` kept. `scope` is `spec`'s
    compiled scope (retrieval.search.query.scope_predicate)."""
    found = score_order(
        caller=caller,
        spec=spec,
        scope=peers.restrict(scope),
        queries=queries,
        limit=limit,
        columns=COLUMNS,
        ranking=ranking,
    )
    items = _candidates(found.rows, peers, caller.account_id, queries)
    return Candidates(
        items=items, searched={"all": len(items)}, below_threshold=found.below_threshold, strong=found.strong
    )


def quota_candidates(
    *,
    caller: Caller,
    scope: Predicate,
    spec: FindQuery,
    queries: list[SearchQuery],
    quotas: dict[str, int],
    peers: PeerPolicy,
    partitions: tuple[str, ...],
    ranking: Ranking,
    pool: int | None = None,
) -> Candidates:
    """Purpose or quotas: each bucket searched on its own so a weak bucket is not crowded out by a strong one;
    a bucket outside `partitions` (retrieval.search.query.search_partitions) has nothing to find. With a `pool`,
    the quotas are shares of it (retrieval.search.ranking.by_bucket)."""
    active = [(bucket, quotas[bucket]) for bucket in BUCKETS if quotas.get(bucket, 0) > 0 and bucket in partitions]
    found = by_bucket(
        caller=caller,
        spec=spec,
        scope=peers.restrict(scope),
        queries=queries,
        counts=active,
        columns=COLUMNS,
        ranking=ranking,
        pool=pool,
    )
    searched = {bucket: 0 for bucket, _ in active}
    for row in found.rows:
        searched[row["bucket"]] += 1
    return Candidates(
        items=_candidates(found.rows, peers, caller.account_id, queries),
        searched=searched,
        below_threshold=found.below_threshold,
        strong=found.strong,
    )
