"""HNSW graphs of a tenant's own (docs/retrieval.md, "Tenants"): partial indexes `WHERE account_id = N`, built for
an account that holds OVSITE_TENANT_GRAPHS_FROM nodes or more but less than half the table. The model's graphs
(retrieval.models) span every account; walked for one small share of them, a filtered scan visits about
k / share nodes and stops at `hnsw.max_scan_tuples`. With its own graphs an account's searches walk only its
nodes: the planner picks the partial index the statement's `account_id = N` (written in) implies, no code
chooses it. Below the size, searches are exact (retrieval.search.query.exact_search)."""

import re
from dataclasses import dataclass

from django.conf import settings
from django.db import connection
from django.db.models import Q
from pgvector.django import HnswIndex

from retrieval.models import HNSW_EF_CONSTRUCTION, HNSW_M, SEARCH_PARTITIONS, Context

PREFIX = "context_hnsw_t"
NAME = re.compile(rf"^{PREFIX}(\d+)(?:_(\w+))?$")


def graph_name(account_id: int, partition: str | None = None) -> str:
    return f"{PREFIX}{int(account_id)}" + (f"_{partition}" if partition else "")


def account_of(index_name: str) -> int | None:
    match = NAME.match(index_name)
    return int(match.group(1)) if match else None


def wanted_graphs(size: int) -> list[str | None]:
    """The graphs an account of `size` nodes walks as a tenant: one for the account, or from
    OVSITE_PARTITIONED_SEARCH_FROM nodes one per search partition (None: the whole account), as a single-account
    store of that size walks the model's (retrieval.search.query.score_order_scans)."""
    return list(SEARCH_PARTITIONS) if size >= settings.PARTITIONED_SEARCH_FROM else [None]


def graph_sql(account_id: int, partition: str | None = None, concurrently: bool = True) -> str:
    """`CREATE INDEX` of one tenant graph: the model's HNSW parameters, the account's rows (of one partition)."""
    condition = Q(account_id=int(account_id))
    index = HnswIndex(
        name=graph_name(account_id, partition),
        fields=["embedding"],
        m=HNSW_M,
        ef_construction=HNSW_EF_CONSTRUCTION,
        opclasses=["vector_cosine_ops"],
        condition=condition & SEARCH_PARTITIONS[partition] if partition else condition,
    )
    with connection.schema_editor(collect_sql=True) as editor:
        sql = str(index.create_sql(Context, editor, concurrently=concurrently))
    return re.sub(r"^CREATE INDEX( CONCURRENTLY)? ", r"CREATE INDEX\1 IF NOT EXISTS ", sql, count=1)


@dataclass
class Plan:
    create: list[tuple[int, str | None]]
    drop: list[str]


def plan(sizes: dict[int, int], present: set[str]) -> Plan:
    """What to build and drop, given each account's searchable nodes and the tenant graphs present. A tenant is an
    account under half the table; its graphs are dropped only below half the size that built them, so an account
    on the line is not rebuilt each hour, and when its layout changes (past OVSITE_PARTITIONED_SEARCH_FROM) the old
    graphs go once the new ones exist. Pure."""
    total = sum(sizes.values())
    threshold = settings.TENANT_GRAPHS_FROM
    create, keep = [], set()
    for account_id, size in sizes.items():
        if size >= threshold and 2 * size < total:
            wanted = wanted_graphs(size)
            names = {graph_name(account_id, p) for p in wanted}
            create += [(account_id, p) for p in wanted if graph_name(account_id, p) not in present]
            if names <= present:
                keep |= names  # complete: the other layout's graphs can go
            else:
                keep |= {name for name in present if account_of(name) == account_id}
        elif size >= threshold // 2:
            keep |= {name for name in present if account_of(name) == account_id}
    return Plan(create=create, drop=sorted(present - keep))


def present_graphs(cursor) -> set[str]:
    cursor.execute(
        "SELECT indexname FROM pg_indexes WHERE tablename = %s AND indexname LIKE %s",
        [Context._meta.db_table, PREFIX + "%"],
    )
    return {name for (name,) in cursor.fetchall() if NAME.match(name)}


def account_sizes(cursor) -> dict[int, int]:
    cursor.execute(
        'SELECT "account_id", count(*) FROM "retrieval_context" WHERE "state" = %s GROUP BY "account_id"', ["ready"]
    )
    return dict(cursor.fetchall())


def refresh(cursor=None, concurrently: bool = True, log=None) -> Plan:
    """Builds the tenant graphs that are missing and drops those no longer wanted (`plan`). `cursor`: a Django or
    psycopg cursor in autocommit (CREATE INDEX CONCURRENTLY runs outside a transaction). Each build scans the table
    once and walks the account's rows (bench/RESULTS.md, "scale, hosted", gives their times)."""
    if cursor is None:
        with connection.cursor() as own:
            return refresh(own, concurrently, log)
    todo = plan(account_sizes(cursor), present_graphs(cursor))
    for account_id, partition in todo.create:
        if log:
            log(f"building {graph_name(account_id, partition)}")
        cursor.execute(graph_sql(account_id, partition, concurrently))
    for name in todo.drop:
        cursor.execute(f'DROP INDEX {"CONCURRENTLY " if concurrently else ""}IF EXISTS "{name}"')
    return todo
