"""What a search reads: the request (`FindQuery`), its scope compiled to SQL once, and the partitions it walks."""

import itertools
import re
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cache, lru_cache

from django.conf import settings
from django.db import connection
from django.db.models import Q
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime
from psycopg import sql as pg_sql

from core.auth import Caller
from core.errors import InvalidArgument
from retrieval.models import SEARCH_PARTITIONS, Context
from retrieval.selectors import visible_nodes
from retrieval.tenant_graphs import graph_accounts, present_indexes
from retrieval.uris import MEMORY_CATEGORIES, parse_uri

CONTEXT_TYPES = ("memory", "resource", "skill")
RESULT_KEYS = {"memory": "memories", "resource": "resources", "skill": "skills"}
LEVEL_KINDS = {1: "dir", 2: "file"}
FILTER_FIELDS = ("category", "kind", "peer", "owner", "context_type")
_RELATIVE = re.compile(r"^(\d+)\s*([mhdw])$")
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
# hybrid: cosine and lexical coverage fused; vector: the k nearest by cosine; lexical: BM25 alone.
SEARCH_MODES = ("hybrid", "vector", "lexical")


@dataclass
class FindQuery:
    query: str
    target_uris: list[str] = field(default_factory=list)
    context_types: list[str] = field(default_factory=list)
    limit: int = 10
    score_threshold: float | None = None
    filter: dict = field(default_factory=dict)
    tags: list[str] = field(default_factory=list)
    since: datetime | None = None
    until: datetime | None = None
    time_field: str = "updated_at"
    levels: list[int] = field(default_factory=list)
    read_content: bool = False
    search_mode: str | None = None  # None: the operator's default (RetrievalSettings.search_mode)

    def __post_init__(self):
        # DRF's FloatField lets "nan" through its range check (NaN compares false both ways); SQL would then
        # compare against NaN and silently drop the threshold.
        threshold = self.score_threshold
        if threshold is not None and not (isinstance(threshold, (int, float)) and 0.0 <= threshold <= 1.0):
            raise InvalidArgument(
                "score_threshold must be a number in [0, 1]", loc=["score_threshold"], type_="out_of_range"
            )


def parse_time(value: str, name: str) -> datetime:
    """ISO 8601 date or datetime (UTC when naive), or a relative span back from now: 30m, 24h, 7d, 2w."""
    text = value.strip()
    relative = _RELATIVE.match(text)
    if relative:
        try:
            return timezone.now() - timedelta(**{_UNITS[relative.group(2)]: int(relative.group(1))})
        except OverflowError:
            raise InvalidArgument(f"{name} reaches back before year 1", loc=[name], type_="out_of_range") from None
    try:
        moment = parse_datetime(text)
        if moment is None:
            day = parse_date(text)
            moment = datetime(day.year, day.month, day.day) if day else None
    except ValueError:
        moment = None
    if moment is None:
        raise InvalidArgument(f"{name} must be an ISO 8601 date/datetime or a span like 7d", loc=[name])
    return moment if timezone.is_aware(moment) else timezone.make_aware(moment, UTC)


def _filter_q(spec: dict) -> Q:
    q = Q()
    for key, value in spec.items():
        if key not in FILTER_FIELDS:
            raise InvalidArgument(f"filter field {key!r} is not one of {', '.join(FILTER_FIELDS)}", loc=["filter", key])
        values = value if isinstance(value, list) else [value]
        if not values or not all(isinstance(v, str) for v in values):
            raise InvalidArgument("filter values are strings or lists of strings", loc=["filter", key])
        if any("\x00" in v for v in values):  # PostgreSQL text cannot hold NUL: refuse it here, not as a 500
            raise InvalidArgument("filter values may not contain NUL characters", loc=["filter", key])
        q &= Q(**{f"{key}__in": values})
    return q


def scoped_rows(caller: Caller, spec: FindQuery):
    """The visible, ready, embedded nodes that pass every filter of `spec` (no ordering, no limit)."""
    rows = visible_nodes(caller).filter(state="ready", embedding__isnull=False)
    if spec.target_uris:
        prefix = Q()
        for raw in spec.target_uris:
            target = parse_uri(raw, user_id=caller.user_id).uri
            prefix |= Q(uri=target) | Q(uri__startswith=target.rstrip("/") + "/")
        rows = rows.filter(prefix)
    if spec.context_types:
        rows = rows.filter(context_type__in=spec.context_types)
    if spec.levels:
        rows = rows.filter(kind__in=[LEVEL_KINDS[level] for level in spec.levels])
    if spec.tags:
        rows = rows.filter(tags__contains=spec.tags)
    if spec.since:
        rows = rows.filter(**{f"{spec.time_field}__gte": spec.since})
    if spec.until:
        rows = rows.filter(**{f"{spec.time_field}__lte": spec.until})
    if spec.filter:
        rows = rows.filter(_filter_q(spec.filter))
    return rows


@dataclass(frozen=True)
class Predicate:
    """A compiled SQL condition on `retrieval_context` and its parameters."""

    sql: str
    params: tuple = ()

    def __and__(self, other: "Predicate") -> "Predicate":
        return Predicate(f"({self.sql}) AND ({other.sql})", self.params + other.params)


def _compiled(rows) -> Predicate:
    compiler = rows.query.get_compiler(using=rows.db)
    sql, params = compiler.compile(rows.query.where)
    return Predicate(sql, tuple(params))


def _written_in(predicate: Predicate) -> Predicate:
    """`predicate` with its values written in as SQL literals (none left as parameters)."""
    literals = tuple(pg_sql.Literal(value).as_string().replace("%", "%%") for value in predicate.params)
    return Predicate(predicate.sql.replace("%%", "%%%%") % literals)


def scope_predicate(caller: Caller, spec: FindQuery) -> Predicate:
    """The scope and every filter of `spec` compiled once per request. Building and compiling an ORM queryset
    per sub-query cost more than the vector searches themselves (bench/RESULTS.md, profile of /search)."""
    unfiltered = not (
        spec.target_uris or spec.context_types or spec.levels or spec.tags or spec.since or spec.until or spec.filter
    )
    return _unfiltered_scope(caller) if unfiltered else _compiled(scoped_rows(caller, spec))


@lru_cache(maxsize=4096)
def _unfiltered_scope(caller: Caller) -> Predicate:
    """Most searches carry no filter: their scope depends on the caller alone, so it is compiled once per caller
    and process (about a millisecond of ORM work per request otherwise), its values written in: a statement over
    it has no parameter the planner estimates from (the query's vector and terms are read through named
    subqueries), so its generic plan is the plan its values call for, and a prepared search of this caller runs it
    after five executions instead of being planned every time (retrieval.search.ranking)."""
    return _written_in(_compiled(scoped_rows(caller, FindQuery(query=""))))


@lru_cache(maxsize=4096)
def visible_predicate(caller: Caller) -> Predicate:
    """`visible_nodes` compiled, once per caller and process: the one visibility rule, for plain-SQL reads on the
    hot path."""
    return _compiled(visible_nodes(caller))


@cache
def partition_predicate(name: str) -> Predicate:
    """Constant per search partition, so compiled once per process, its values written in as SQL literals: the
    planner proves the partition's partial HNSW index from them, which it cannot do from parameters in a prepared
    statement's generic plan."""
    return _written_in(_compiled(Context.objects.filter(SEARCH_PARTITIONS[name])))


def _target_partitions(target) -> set[str]:
    """The partitions a node at or under `target` (a VikingUri) is in by the URI rules, whose categories name them
    (VikingUri.category: a memory category, "resources" or "skills"); above an owner's type folders, any."""
    if target.space != "resources" and len(target.segments) < 3:
        return set(SEARCH_PARTITIONS)
    if target.context_type != "memory":
        return {target.category}
    if target.category:
        return {"entities" if target.category == "profile" else target.category}
    return set(MEMORY_CATEGORIES)


def search_partitions(caller: Caller, spec: FindQuery) -> tuple[str, ...]:
    """The partitions a search under `spec` walks: all but those its target URIs rule out. A filter on a type or
    category needs no pruning here: the partition's gate (`nearest_select`) answers it from a B-tree at once,
    where under a URI prefix it could scan the whole prefix. "other" is always walked: its nodes follow no URI
    rule."""
    possible = set(SEARCH_PARTITIONS)
    if spec.target_uris:
        possible = {"other"}.union(
            *(_target_partitions(parse_uri(raw, user_id=caller.user_id)) for raw in spec.target_uris)
        )
    return tuple(name for name in SEARCH_PARTITIONS if name in possible)


def peer_predicate(peers: tuple[str, ...]) -> Predicate:
    return Predicate('"retrieval_context"."peer" = ANY(%s)', (list(peers),))


def score_order_scans(caller: Caller, spec: FindQuery) -> tuple[str, ...]:
    """What a search in score order walks: the search partitions it can reach, or () for one scan of the scope.
    Below OVSITE_PARTITIONED_SEARCH_FROM nodes one graph finds the exact top k in one scan; in a large store it
    misses most of it, and one graph per partition is what finds it (README, "HNSW: recall against speed"). The
    size that decides is the table's, or a tenant's with graphs of its own (retrieval.tenant_graphs), which are
    what it walks; a tenant searched exactly needs one scan (`exact_search`)."""
    account = caller.account_id
    if exact_search(account):
        return ()
    size = account_size(account) if account in tenant_graph_accounts() else _store_size()
    if size < settings.PARTITIONED_SEARCH_FROM:
        return ()
    return search_partitions(caller, spec)


def exact_search(account_id: int) -> bool:
    """Whether the account's vector searches are exact scans (every row of its scope, through its B-tree, sorted by
    distance) instead of HNSW walks: a tenant, holding less than half the table, of fewer than
    OVSITE_TENANT_GRAPHS_FROM nodes. The graphs it shares with larger accounts would be walked for a small share
    of their nodes (k / share visits, cut at `hnsw.max_scan_tuples`: short answers, missed neighbours), while
    sorting its own few thousand rows costs a few milliseconds and finds the exact top k. A store of one account
    keeps its graphs at every size, and so does a table smaller than OVSITE_TENANT_GRAPHS_FROM (by PostgreSQL's
    estimate), whose graph a filtered walk covers whole within `hnsw.max_scan_tuples`."""
    size, store = account_size(account_id), _store_size()
    return size < settings.TENANT_GRAPHS_FROM <= store and 2 * size < store


_tenant_graphs_read: list = [float("-inf"), frozenset()]  # (when, accounts): read again after a minute


def tenant_graph_accounts() -> frozenset[int]:
    """The accounts with HNSW graphs of their own (retrieval.tenant_graphs), by the indexes' names: read at most
    once a minute per process."""
    now = time.monotonic()
    if now - _tenant_graphs_read[0] > 60:
        with connection.cursor() as cursor:
            _tenant_graphs_read[:] = [now, graph_accounts(present_indexes(cursor))]
    return _tenant_graphs_read[1]


_store_size_read = [0.0, 0]  # (when, rows): read again after a minute


def _store_size() -> int:
    """PostgreSQL's estimate of the table's rows (kept by ANALYZE, autovacuum and index builds): no count per
    request. Never analyzed (-1) counts as empty."""
    now = time.monotonic()
    if now - _store_size_read[0] > 60:
        with connection.cursor() as cursor:
            cursor.execute("SELECT reltuples FROM pg_class WHERE oid = %s::regclass", [Context._meta.db_table])
            _store_size_read[:] = [now, max(0, int(cursor.fetchone()[0]))]
    return _store_size_read[1]


_term_shares_read: list = [float("-inf"), []]  # (when, [(lexeme, share)]): read again after a minute


def store_term_shares() -> list[tuple[str, float]]:
    """The store's common lexemes with the share of nodes holding each, most common first, by PostgreSQL's
    statistics of the lexemes column (its most common elements, kept by ANALYZE and autovacuum): read at most once
    a minute per process and passed to each search as parameters. Read in every statement, the statistics' thousand
    common elements cost a hybrid /find at 10k nodes 0.8 ms of execution and 0.45 ms of planning (EXPLAIN ANALYZE
    of both statements on 104 queries, one run)."""
    now = time.monotonic()
    if now - _term_shares_read[0] > 60:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT elem, freq FROM pg_stats, "
                "unnest(most_common_elems::text::text[], most_common_elem_freqs) AS common(elem, freq) "
                "WHERE schemaname = current_schema() AND tablename = %s AND attname = 'lexemes' "
                "AND elem IS NOT NULL ORDER BY freq DESC, elem",
                [Context._meta.db_table],
            )
            _term_shares_read[:] = [now, cursor.fetchall()]
    return _term_shares_read[1]


def store_stop_words(share: float) -> list[str]:
    """The lexemes more than `share` of the store holds (`store_term_shares`): its first entries, read no further."""
    return [term for term, _ in itertools.takewhile(lambda common: common[1] > share, store_term_shares())]


_account_sizes: dict[int, tuple[float, int]] = {}  # account → (when, searchable nodes): counted again after a minute


def account_size(account_id: int) -> int:
    """The account's searchable nodes, BM25's N (retrieval.search.statements.lexical_terms): counted at most once
    a minute per process, not per request, since idf moves little as a store grows."""
    now = time.monotonic()
    read = _account_sizes.get(account_id)
    if read is None or now - read[0] > 60:
        with connection.cursor() as cursor:
            cursor.execute(
                'SELECT count(*) FROM "retrieval_context" WHERE "account_id" = %s AND "state" = %s',
                [account_id, "ready"],
            )
            read = _account_sizes[account_id] = (now, cursor.fetchone()[0])
    return read[1]


def same_subject_pairs(account_id: int, uris: list[str], cosine: float) -> set[frozenset[str]]:
    """The pairs of `uris` (files of the account) whose stored vectors are at least `cosine` near: one statement,
    the pairs computed by PostgreSQL on the rows the (account, uri) index finds."""
    with connection.cursor() as cursor:
        cursor.execute(
            'SELECT a."uri", b."uri" FROM "retrieval_context" a JOIN "retrieval_context" b '
            'ON b."account_id" = a."account_id" AND b."uri" > a."uri" '
            'WHERE a."account_id" = %s AND a."uri" = ANY(%s) AND b."uri" = ANY(%s) '
            'AND 1 - (a."embedding" <=> b."embedding") >= %s',
            [account_id, uris, uris, cosine],
        )
        return {frozenset(pair) for pair in cursor.fetchall()}
