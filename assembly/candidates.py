"""Candidate providers (DESIGN.md §5): score order across domains, or per-bucket quotas — one SQL round trip."""
from dataclasses import dataclass, field

from django.conf import settings

from assembly.planner import Candidate
from ovsite.auth import Caller
from retrieval.find import (FindQuery, Predicate, bucket_label, bucket_predicate, fetch_union, nearest_select,
                            peer_predicate, scope_predicate, shared_vector, vector_literal)
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


def score_candidates(*, caller: Caller, spec: FindQuery, vectors: list[list[float]], limit: int,
                     peers: PeerPolicy) -> Candidates:
    """No purpose, no quotas: one cross-domain search per query, merged by max score, best `limit` kept."""
    where = peers.restrict(scope_predicate(caller, spec))
    rows = fetch_union([nearest_select(where, vector_literal(vector), COLUMNS, limit, "all") for vector in vectors],
                       settings.HNSW_WIDE_EF_SEARCH)
    items = _score_order(c for _, c in _best_by_uri(rows, peers, spec.score_threshold).values())[:limit]
    return Candidates(items=items, searched={"all": len(items)})


def _pooled(threshold: float | None) -> bool:
    return settings.QUOTA_POOL_SIZE > 0 and bool(threshold) and threshold >= settings.QUOTA_POOL_MIN_THRESHOLD


def _pool(name: str, scope: Predicate, vector: Predicate) -> Predicate:
    """The whole scope's QUOTA_POOL_SIZE nearest rows, each labelled with its bucket, materialised once."""
    selected = ", ".join(f'"retrieval_context"."{column}"' for column in COLUMNS)
    label = bucket_label()
    return Predicate(f'{name} AS MATERIALIZED (SELECT {selected}, ("retrieval_context"."embedding" <=> {vector.sql}) '
                     f'AS distance, {label.sql} AS bucket FROM "retrieval_context" WHERE {scope.sql} '
                     f'ORDER BY distance LIMIT %s)',
                     vector.params + label.params + scope.params + (settings.QUOTA_POOL_SIZE,))


def _pool_leaves_short(name: str, bucket: str, count: int, threshold: float) -> Predicate:
    """The pool holds every row above the threshold once it also holds one below it, or once it is smaller than
    asked (the scope ran out); otherwise a bucket with fewer than `count` rows above the threshold in it may have
    more outside it, and only then is the bucket's own index scanned."""
    return Predicate(f"(SELECT count(*) FROM {name} WHERE bucket = %s AND 1.0 - distance >= %s) < %s "
                     f"AND (SELECT count(*) FROM {name}) = %s "
                     f"AND NOT EXISTS (SELECT 1 FROM {name} WHERE 1.0 - distance < %s)",
                     (bucket, threshold, count, settings.QUOTA_POOL_SIZE, threshold))


def quota_statement(scope: Predicate, vectors: list, active: list[tuple[str, int]],
                    threshold: float | None) -> tuple[list[Predicate], tuple[Predicate, ...]]:
    """One statement (selects, named subqueries). Without a pool: one k-nearest scan per bucket and query. With
    one: a whole-index scan per query, and a bucket's own scan only where that scan leaves the bucket short."""
    shared = [shared_vector(f"query_{index}", vector) for index, vector in enumerate(vectors)]
    common = tuple(holder for holder, _ in shared)
    reads = [read for _, read in shared]
    if not _pooled(threshold):
        return [nearest_select(scope & bucket_predicate(bucket), read, COLUMNS, count, bucket, gate=True)
                for bucket, count in active for read in reads], common
    names = [f"pool_{index}" for index in range(len(vectors))]
    selected = ", ".join(f'"{column}"' for column in COLUMNS)
    pools = [Predicate(f"(SELECT {selected}, distance, bucket FROM {name})") for name in names]
    fallbacks = [nearest_select(scope & bucket_predicate(bucket), read, COLUMNS, count, bucket, gate=True,
                                only_if=_pool_leaves_short(name, bucket, count, threshold))
                 for bucket, count in active for name, read in zip(names, reads)]
    return pools + fallbacks, common + tuple(_pool(name, scope, read) for name, read in zip(names, reads))


def quota_candidates(*, caller: Caller, spec: FindQuery, vectors: list[list[float]], quotas: dict[str, int],
                     peers: PeerPolicy) -> Candidates:
    """Purpose or quotas: each bucket filled on its own so a weak bucket is not crowded out by a strong one."""
    active = [(bucket, quotas[bucket]) for bucket in BUCKETS if quotas.get(bucket, 0) > 0]
    scope = peers.restrict(scope_predicate(caller, spec))
    selects, common = quota_statement(scope, vectors, active, spec.score_threshold)
    rows = fetch_union(selects, common=common)
    by_bucket: dict[str, list[Candidate]] = {bucket: [] for bucket, _ in active}
    for bucket, candidate in _best_by_uri(rows, peers, spec.score_threshold).values():
        if bucket in by_bucket:  # pool rows of buckets the request does not ask for, or of none
            by_bucket[bucket].append(candidate)
    items, searched = [], {}
    for bucket, count in active:
        kept = _score_order(by_bucket[bucket])[:count]
        searched[bucket] = len(kept)
        items.extend(kept)
    return Candidates(items=_score_order(items), searched=searched)
