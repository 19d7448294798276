"""/find, the retrieval primitive: one query embedding, one SQL query with every filter pushed down, no LLM."""
import re
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone
from functools import cache, lru_cache

import numpy as np
from django.conf import settings
from django.db import connection
from django.db.backends.postgresql.base import ServerBindingCursor
from django.db.models import Q
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime
from psycopg import sql as pg_sql

from ovsite.auth import Caller
from ovsite.errors import InvalidArgument
from retrieval.embedders import embed_query
from retrieval.models import SEARCH_PARTITIONS, Context
from retrieval.selectors import visible_nodes
from retrieval.uris import MEMORY_CATEGORIES, parse_uri

CONTEXT_TYPES = ("memory", "resource", "skill")
RESULT_KEYS = {"memory": "memories", "resource": "resources", "skill": "skills"}
LEVEL_KINDS = {1: "dir", 2: "file"}
FILTER_FIELDS = ("category", "kind", "peer", "owner", "context_type")
_RELATIVE = re.compile(r"^(\d+)\s*([mhdw])$")
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


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

    def __post_init__(self):
        # DRF's FloatField lets "nan" through its range check (NaN compares false both ways); SQL would then
        # compare against NaN and silently drop the threshold.
        threshold = self.score_threshold
        if threshold is not None and not (isinstance(threshold, (int, float)) and 0.0 <= threshold <= 1.0):
            raise InvalidArgument("score_threshold must be a number in [0, 1]", loc=["score_threshold"],
                                  type_="out_of_range")


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
    return moment if timezone.is_aware(moment) else timezone.make_aware(moment, dt_timezone.utc)


def _filter_q(spec: dict) -> Q:
    q = Q()
    for key, value in spec.items():
        if key not in FILTER_FIELDS:
            raise InvalidArgument(f"filter field {key!r} is not one of {', '.join(FILTER_FIELDS)}",
                                  loc=["filter", key])
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


def scope_predicate(caller: Caller, spec: FindQuery) -> Predicate:
    """The scope and every filter of `spec` compiled once per request. Building and compiling an ORM queryset
    per sub-query cost more than the vector searches themselves (bench/RESULTS.md, profile of /search)."""
    unfiltered = not (spec.target_uris or spec.context_types or spec.levels or spec.tags or spec.since
                      or spec.until or spec.filter)
    return _unfiltered_scope(caller) if unfiltered else _compiled(scoped_rows(caller, spec))


@lru_cache(maxsize=4096)
def _unfiltered_scope(caller: Caller) -> Predicate:
    """Most searches carry no filter: their scope depends on the caller alone, so it is compiled once per caller
    and process (about a millisecond of ORM work per request otherwise)."""
    return _compiled(scoped_rows(caller, FindQuery(query="")))


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
    compiled = _compiled(Context.objects.filter(SEARCH_PARTITIONS[name]))
    literals = tuple(pg_sql.Literal(value).as_string().replace("%", "%%") for value in compiled.params)
    return Predicate(compiled.sql.replace("%%", "%%%%") % literals)


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
        possible = {"other"}.union(*(_target_partitions(parse_uri(raw, user_id=caller.user_id))
                                     for raw in spec.target_uris))
    return tuple(name for name in SEARCH_PARTITIONS if name in possible)


def peer_predicate(peers: tuple[str, ...]) -> Predicate:
    return Predicate('"retrieval_context"."peer" = ANY(%s)', (list(peers),))


HIT_COLUMNS = ("uri", "kind", "context_type", "category", "abstract", "tags")


def shared_vector(name: str, vector) -> tuple[Predicate, Predicate]:
    """(a named subquery holding the vector, the expression that reads it). A statement with several scans of one
    query vector then carries its ~7 KB of text once instead of once per scan; the HNSW scans take the read as a
    one-time parameter, as they would a literal."""
    return (Predicate(f"{name} AS MATERIALIZED (SELECT %s::vector AS vector)", (vector_text(vector),)),
            Predicate(f"(SELECT vector FROM {name})"))


def nearest_select(where: Predicate, vector: Predicate, columns: tuple[str, ...], limit: int, label: str = "",
                   gate: bool = False) -> Predicate:
    """One k-nearest select under `where`, ordered by cosine distance (the HNSW index order).

    With `gate`, an uncorrelated EXISTS runs first as a one-time filter: an empty bucket then costs one index
    probe instead of an iterative HNSW scan that walks the whole index looking for rows that are not there."""
    selected = ", ".join(f'"retrieval_context"."{column}"' for column in columns)
    gate_sql = f' AND EXISTS (SELECT 1 FROM "retrieval_context" WHERE {where.sql})' if gate else ""
    sql = (f'(SELECT {selected}, ("retrieval_context"."embedding" <=> {vector.sql}) AS distance, %s AS bucket '
           f'FROM "retrieval_context" WHERE ({where.sql}){gate_sql} ORDER BY distance LIMIT %s)')
    params = vector.params + (label,) + where.params + (where.params if gate else ()) + (limit,)
    return Predicate(sql, params)



def score_order_scans(caller: Caller, spec: FindQuery) -> tuple[str, ...]:
    """What a search in score order walks: the search partitions it can reach, or () for the whole-table graph.
    Below OVSITE_PARTITIONED_SEARCH_FROM nodes one graph finds the exact top k in one scan; in a large store it
    misses most of it, and one graph per partition is what finds it (README, "HNSW: recall against speed")."""
    if _store_size() < settings.PARTITIONED_SEARCH_FROM:
        return ()
    return search_partitions(caller, spec)


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


def score_order_statement(scope: Predicate, vectors: list, limit: int, columns: tuple[str, ...],
                          partitions: tuple[str, ...]) -> tuple[list[Predicate], tuple[Predicate, ...]]:
    """The k-nearest scans of a search in score order (`score_order_scans`): one per partition and query vector,
    or one of the whole table per query vector when `partitions` is empty."""
    if partitions:
        return partition_statement(scope, vectors, [(name, limit) for name in partitions], columns)
    holders, reads = _shared_vectors(vectors)
    return [nearest_select(scope, read, columns, limit, "all") for read in reads], holders


def partition_statement(scope: Predicate, vectors: list, counts: list[tuple[str, int]],
                        columns: tuple[str, ...]) -> tuple[list[Predicate], tuple[Predicate, ...]]:
    """The selects and named subqueries of one statement with a k-nearest scan per (partition, count) and query
    vector, each vector carried once; a row's `bucket` is its partition. The buckets are gated; "other" is not:
    its index holds only the few nodes outside every bucket, and no B-tree answers its condition at once."""
    holders, reads = _shared_vectors(vectors)
    return ([nearest_select(scope & partition_predicate(name), read, columns, count, name, gate=name != "other")
             for name, count in counts for read in reads], holders)


def _shared_vectors(vectors: list) -> tuple[tuple[Predicate, ...], list[Predicate]]:
    """(the named subqueries holding each query vector, the expressions that read them): see `shared_vector`."""
    pairs = [shared_vector(f"query_{index}", vector) for index, vector in enumerate(vectors)]
    return tuple(holder for holder, _ in pairs), [read for _, read in pairs]


def fetch_union(selects: list[Predicate], common: tuple[Predicate, ...] = (), prepare: bool = False,
                limit: int | None = None, ef_search: int | None = None) -> list[dict]:
    """All selects in one statement (UNION ALL): one round trip, rows as dicts. `common` are the statement's
    named subqueries (`name AS (…)` of its WITH clause); with `limit`, only the nearest `limit` rows of them all
    come back. An `ef_search` other than the connection's applies to this statement alone. With `prepare` (and
    the connection's ef_search), the statement is bound server-side and prepared once it repeats (see
    `prepared_cursor`)."""
    if not selects:
        return []
    sql, params = union_statement(selects, common, limit)
    if ef_search is not None and ef_search != settings.HNSW_EF_SEARCH:
        with connection.cursor() as cursor:
            # One round trip, where BEGIN, SET LOCAL, the select and COMMIT were four: a multi-statement query
            # runs as one implicit transaction, so SET LOCAL ends with the select (inside an atomic block, with it).
            cursor.execute(f"SET LOCAL hnsw.ef_search = {int(ef_search)}; {sql}", params)
            cursor.nextset()
            return _rows(cursor)
    if prepare:
        with prepared_cursor() as cursor:
            cursor.execute(sql, params)
            return _rows(cursor)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return _rows(cursor)


def union_statement(selects: list[Predicate], common: tuple[Predicate, ...] = (),
                    limit: int | None = None) -> tuple[str, list]:
    with_sql = f"WITH {', '.join(part.sql for part in common)} " if common else ""
    union = " UNION ALL ".join(select.sql for select in selects)
    params = [param for part in (*common, *selects) for param in part.params]
    if limit is None:
        return with_sql + union, params
    # Materialized, so the rows are sorted here and not merged as if each scan's were in order: relaxed_order scans
    # return them only nearly so (pgvector's README).
    nearest = f"nearest AS MATERIALIZED ({union})"
    with_sql = f"WITH {', '.join([*(part.sql for part in common), nearest])} "
    return f"{with_sql}SELECT * FROM nearest ORDER BY distance, uri LIMIT %s", [*params, limit]


def _rows(cursor) -> list[dict]:
    names = [column.name for column in cursor.description]
    return [dict(zip(names, row)) for row in cursor.fetchall()]


def prepared_cursor():
    """A Django cursor over psycopg's server-side binding cursor, which prepares a statement text it has seen
    `prepare_threshold` times before on its connection (settings.DB_PREPARED_STATEMENTS; Django's own cursors bind
    client-side and never prepare). For a statement whose text repeats with new values, such as the per-bucket
    quota search, the plan is made once per connection instead of once per request. The same checks as
    `connection.cursor()`: health, thread sharing, query logging."""
    connection.close_if_health_check_failed()
    connection.ensure_connection()
    connection.validate_thread_sharing()
    with connection.wrap_database_errors:
        cursor = ServerBindingCursor(connection.connection)
    return connection.make_debug_cursor(cursor) if connection.queries_logged else connection.make_cursor(cursor)


def vector_text(vector) -> str:
    """pgvector's text form of a query vector. Nine significant digits give back every float32 exactly, and one
    format for the whole vector is about 5× faster than pgvector's float-by-float conversion, its text a third
    shorter for PostgreSQL to parse."""
    values = np.asarray(vector, dtype=np.float32).tolist()
    return "[" + _vector_format(len(values)) % tuple(values) + "]"


@cache
def _vector_format(dimensions: int) -> str:
    return ",".join(["%.9g"] * dimensions)


def above_threshold(rows: list[dict], threshold: float | None) -> list[dict]:
    """The threshold is applied to the k nearest, not inside the index scan: the nearest rows above a threshold
    are the k nearest cut at it, and in SQL it makes an iterative HNSW scan walk the whole index looking for k
    rows that pass when few do."""
    return rows if not threshold else [row for row in rows if row["score"] >= threshold]


def ranked_hits(caller: Caller, spec: FindQuery, vector, scope: Predicate | None = None) -> list[dict]:
    """One SQL statement: the nearest neighbours by cosine distance within the filters (`score_order_scans`),
    best first."""
    columns = HIT_COLUMNS + (("content",) if spec.read_content else ())
    where = scope if scope is not None else scope_predicate(caller, spec)
    selects, common = score_order_statement(where, [vector], spec.limit, columns, score_order_scans(caller, spec))
    found = fetch_union(selects, common=common, prepare=True, limit=spec.limit,
                        ef_search=settings.HNSW_WIDE_EF_SEARCH)
    for row in found:
        del row["bucket"]
        row["score"] = round(min(1.0, max(0.0, 1.0 - row.pop("distance"))), 6)
    found = above_threshold(found, spec.score_threshold)
    # relaxed_order iterative scans may return neighbours slightly out of order: settle it here.
    found.sort(key=lambda row: (-row["score"], row["uri"]))
    return found


def hit_body(row: dict) -> dict:
    hit = {"context_type": row["context_type"], "uri": row["uri"], "level": 1 if row["kind"] == "dir" else 2,
           "score": row["score"], "abstract": row["abstract"], "tags": row["tags"]}
    if "content" in row:
        hit["content"] = row["content"]
    return hit


def group_hits(rows: list[dict]) -> dict:
    result = {"memories": [], "resources": [], "skills": []}
    for row in rows:
        result[RESULT_KEYS[row["context_type"]]].append(hit_body(row))
    result["total"] = len(rows)
    return result


def find(*, caller: Caller, spec: FindQuery) -> dict:
    # Compiling the scope validates target URIs and filters: a bad request is refused before the embedding is
    # paid for, and stays a 4xx even when the embedder is down.
    scope = scope_predicate(caller, spec)
    return group_hits(ranked_hits(caller, spec, embed_query(spec.query), scope))
