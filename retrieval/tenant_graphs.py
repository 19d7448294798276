"""The HNSW graph of a tenant's own (docs/retrieval.md, "Tenants"): a partial index `WHERE account_id = N`, built
for an account that holds OVSITE_TENANT_GRAPHS_FROM nodes or more but less than half the table. The model's graphs
(retrieval.models) span every account; walked for one small share of them, a filtered scan visits about
k / share nodes and stops at `hnsw.max_scan_tuples`. With its own graph an account's searches walk only its
nodes: the planner picks the partial index the statement's `account_id = N` (written in) implies, no code
chooses it. Below the size, searches are exact (retrieval.search.query.exact_search).

A tenant walks one graph whatever its size, where a store of one account walks one per search partition from
OVSITE_PARTITIONED_SEARCH_FROM nodes: a tenant holds under half the table, and at 400,000 hosted nodes the 53k
tenant's vector /find took 18.7 ms (recall@10 0.963) on one graph against 78.2 ms (1.000) on five
(bench/RESULTS.md, "scale, hosted"). Graphs of the earlier layout (`context_hnsw_t<id>_<partition>`) are dropped
once the account's one graph exists."""

import re
from dataclasses import dataclass

from django.conf import settings
from django.db import connection
from django.db.models import Q
from pgvector.django import HnswIndex

from retrieval.models import HNSW_EF_CONSTRUCTION, HNSW_M, Context

PREFIX = "context_hnsw_t"
NAME = re.compile(rf"^{PREFIX}(\d+)(?:_(\w+))?$")


def graph_name(account_id: int) -> str:
    return f"{PREFIX}{int(account_id)}"


def account_of(index_name: str) -> int | None:
    """The account of a tenant graph's name, the earlier layout's per-partition names too."""
    match = NAME.match(index_name)
    return int(match.group(1)) if match else None


def graph_accounts(names: set[str]) -> frozenset[int]:
    """The accounts whose one graph is among `names` (an earlier layout's partition graphs alone do not count)."""
    return frozenset(account for account in map(account_of, names) if graph_name(account) in names)


def graph_sql(account_id: int, concurrently: bool = True) -> str:
    """`CREATE INDEX` of a tenant graph: the model's HNSW parameters, the account's rows."""
    index = HnswIndex(
        name=graph_name(account_id),
        fields=["embedding"],
        m=HNSW_M,
        ef_construction=HNSW_EF_CONSTRUCTION,
        opclasses=["vector_cosine_ops"],
        condition=Q(account_id=int(account_id)),
    )
    with connection.schema_editor(collect_sql=True) as editor:
        sql = str(index.create_sql(Context, editor, concurrently=concurrently))
    return re.sub(r"^CREATE INDEX( CONCURRENTLY)? ", r"CREATE INDEX\1 IF NOT EXISTS ", sql, count=1)


@dataclass
class Plan:
    create: list[int]  # accounts
    drop: list[str]


def plan(sizes: dict[int, int], present: set[str]) -> Plan:
    """What to build and drop, given each account's searchable nodes and the tenant graphs present. A tenant is an
    account under half the table; its graph is dropped only below half the size that built it, so an account on
    the line is not rebuilt each hour, and an earlier layout's partition graphs go once the account's one graph
    exists (until then its searches walk them). Pure."""
    total = sum(sizes.values())
    threshold = settings.TENANT_GRAPHS_FROM
    create, keep = [], set()
    for account_id, size in sizes.items():
        if size >= threshold and 2 * size < total:
            name = graph_name(account_id)
            if name in present:
                keep.add(name)  # the earlier layout's graphs can go
            else:
                create.append(account_id)
                keep |= {other for other in present if account_of(other) == account_id}
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
    for account_id in todo.create:
        if log:
            log(f"building {graph_name(account_id)}")
        cursor.execute(graph_sql(account_id, concurrently))
    for name in todo.drop:
        cursor.execute(f'DROP INDEX {"CONCURRENTLY " if concurrently else ""}IF EXISTS "{name}"')
    return todo
