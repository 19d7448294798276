"""Candidate providers (DESIGN.md §5): score order across domains, or per-bucket quotas — one SQL round trip."""
from dataclasses import dataclass, field

from django.conf import settings

from assembly.planner import Candidate
from retrieval.find import FindQuery, Predicate, fetch_union, partition_statement, peer_predicate, score_order_statement
from retrieval.models import BUCKET_CONDITIONS

COLUMNS = ("uri", "kind", "context_type", "category", "peer", "abstract", "overview_tokens", "content_tokens")
BUCKETS = tuple(BUCKET_CONDITIONS)  # each has its own partial HNSW index (retrieval.models)


@dataclass
class Candidates:
    items: list[Candidate]
    searched: dict = field(default_factory=dict)


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


def _candidate(row: dict, peers: PeerPolicy) -> Candidate:
    score = min(1.0, max(0.0, 1.0 - row["distance"])) * peers.weight(row["peer"])
    return Candidate(uri=row["uri"], category=row["category"], context_type=row["context_type"], kind=row["kind"],
                     score=round(score, 6), abstract=row["abstract"],
                     overview_tokens=row["overview_tokens"], content_tokens=row["content_tokens"])


def _best_by_uri(rows: list[dict], peers: PeerPolicy, threshold: float | None) -> dict[str, tuple[str, Candidate]]:
    """Merges hits of several queries: each URI once, at its best score. The threshold cuts the k nearest here,
    not in SQL (see retrieval.find.above_threshold)."""
    best: dict[str, tuple[str, Candidate]] = {}
    for row in rows:
        if threshold and 1.0 - row["distance"] < threshold:
            continue
        candidate = _candidate(row, peers)
        if row["uri"] not in best or candidate.score > best[row["uri"]][1].score:
            best[row["uri"]] = (row["bucket"], candidate)
    return best


def _score_order(items):
    return sorted(items, key=lambda c: (-c.score, c.uri))


def score_candidates(*, scope: Predicate, spec: FindQuery, vectors: list[list[float]], limit: int,
                     peers: PeerPolicy, partitions: tuple[str, ...]) -> Candidates:
    """No purpose, no quotas: one cross-domain search per query (the scans of /find), merged by max score, best
    `limit` kept. `scope` is `spec`'s compiled scope (retrieval.find.scope_predicate), `partitions` what the
    search walks (retrieval.find.score_order_scans)."""
    selects, common = score_order_statement(peers.restrict(scope), vectors, limit, COLUMNS, partitions)
    # One query: its nearest `limit` of all partitions are the answer, so only they come back.
    rows = fetch_union(selects, common=common, prepare=True, limit=limit if len(vectors) == 1 else None,
                       ef_search=settings.HNSW_WIDE_EF_SEARCH)
    items = _score_order(c for _, c in _best_by_uri(rows, peers, spec.score_threshold).values())[:limit]
    return Candidates(items=items, searched={"all": len(items)})


def quota_candidates(*, scope: Predicate, spec: FindQuery, vectors: list[list[float]], quotas: dict[str, int],
                     peers: PeerPolicy, partitions: tuple[str, ...]) -> Candidates:
    """Purpose or quotas: each bucket searched on its own so a weak bucket is not crowded out by a strong one;
    a bucket outside `partitions` (retrieval.find.search_partitions) has nothing to find."""
    active = [(bucket, quotas[bucket]) for bucket in BUCKETS if quotas.get(bucket, 0) > 0 and bucket in partitions]
    selects, common = partition_statement(peers.restrict(scope), vectors, active, COLUMNS)
    rows = fetch_union(selects, common=common, prepare=True)
    by_bucket: dict[str, list[Candidate]] = {bucket: [] for bucket, _ in active}
    for bucket, candidate in _best_by_uri(rows, peers, spec.score_threshold).values():
        by_bucket[bucket].append(candidate)
    items, searched = [], {}
    for bucket, count in active:
        kept = _score_order(by_bucket[bucket])[:count]
        searched[bucket] = len(kept)
        items.extend(kept)
    return Candidates(items=_score_order(items), searched=searched)
