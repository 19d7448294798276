"""The indexes of a tenant's own (docs/retrieval.md, "Tenants"), built for an account that holds
OVSITE_TENANT_GRAPHS_FROM nodes or more but less than half the table: HNSW graphs and a GIN index of its lexemes,
partial indexes `WHERE account_id = N`. The model's graphs and GIN span every account. Walked for one small share of
them, a filtered HNSW scan visits about k / share nodes and stops at `hnsw.max_scan_tuples`; the GIN lists every
account's holders of a term, which the account's B-tree bitmap (a TID per row of the account) then cuts down: at
400,000 hosted nodes 12.7 ms of a 26.7k tenant's 19.5 ms hybrid statement, 11 of them that bitmap, against 1.0 ms
from a GIN of its own (EXPLAIN ANALYZE, one query, a loaded machine). With indexes of its own an account's searches
read only its rows: the planner picks the partial indexes the statement's `account_id = N` (written in) implies, no
code chooses them. Below the size, searches are exact (retrieval.search.query.exact_search) and its matches are
tested on its own rows.

A tenant's graph is one for the account, or from OVSITE_PARTITIONED_SEARCH_FROM nodes one per search partition, as
a store of one account walks the model's: at a million hosted nodes one graph of the 67k and 134k tenants found
0.91 and 0.90 of their exact top 10 at ef_search 200 and no more than 0.95 at 600 or 800, their partition graphs
0.96-1.00 at 100 (bench/RESULTS.md, "scale, hosted")."""

import re
from dataclasses import dataclass

from django.conf import settings
from django.contrib.postgres.indexes import GinIndex
from django.db import connection
from django.db.models import Q
from pgvector.django import HnswIndex

from retrieval.models import HNSW_EF_CONSTRUCTION, HNSW_M, SEARCH_PARTITIONS, Context

PREFIX, GIN_PREFIX = "context_hnsw_t", "context_gin_t"
NAME = re.compile(rf"^(?:{PREFIX}|{GIN_PREFIX})(\d+)(?:_(\w+))?$")


def graph_name(account_id: int, partition: str | None = None) -> str:
    return f"{PREFIX}{int(account_id)}" + (f"_{partition}" if partition else "")


def gin_name(account_id: int) -> str:
    return f"{GIN_PREFIX}{int(account_id)}"


def account_of(index_name: str) -> int | None:
    match = NAME.match(index_name)
    return int(match.group(1)) if match else None


def graph_accounts(names: set[str]) -> frozenset[int]:
    """The accounts with graphs of their own among `names` (a GIN alone does not count)."""
    return frozenset(account_of(name) for name in names if name.startswith(PREFIX) and NAME.match(name))


def wanted_indexes(account_id: int, size: int) -> tuple[str, ...]:
    """The indexes a tenant of `size` nodes has: its graph, or from OVSITE_PARTITIONED_SEARCH_FROM nodes one per
    search partition (retrieval.search.query.score_order_scans), then its GIN."""
    partitions = list(SEARCH_PARTITIONS) if size >= settings.PARTITIONED_SEARCH_FROM else [None]
    return (*(graph_name(account_id, partition) for partition in partitions), gin_name(account_id))


def index_sql(name: str, concurrently: bool = True) -> str:
    """`CREATE INDEX` of a tenant index by its name (`graph_name`: the model's HNSW parameters, over the account's
    rows of one partition or all; `gin_name`: the model's GIN of lexemes, over the account's rows)."""
    account_id, partition = int(NAME.match(name).group(1)), NAME.match(name).group(2)
    condition = Q(account_id=account_id)
    if name == gin_name(account_id):
        index = GinIndex(name=name, fields=["lexemes"], condition=condition)
    elif name == graph_name(account_id, partition):
        index = HnswIndex(
            name=name,
            fields=["embedding"],
            m=HNSW_M,
            ef_construction=HNSW_EF_CONSTRUCTION,
            opclasses=["vector_cosine_ops"],
            condition=condition & SEARCH_PARTITIONS[partition] if partition else condition,
        )
    else:
        raise ValueError(f"not a tenant index: {name}")
    with connection.schema_editor(collect_sql=True) as editor:
        sql = str(index.create_sql(Context, editor, concurrently=concurrently))
    return re.sub(r"^CREATE INDEX( CONCURRENTLY)? ", r"CREATE INDEX\1 IF NOT EXISTS ", sql, count=1)


@dataclass
class Plan:
    create: list[str]  # index names
    drop: list[str]


def plan(sizes: dict[int, int], present: set[str]) -> Plan:
    """What to build and drop, given each account's searchable nodes and the tenant indexes present. A tenant is an
    account under half the table; its indexes are dropped only below half the size that built them, so an account
    on the line is not rebuilt each hour, and when its layout changes (past OVSITE_PARTITIONED_SEARCH_FROM) the old
    graphs go once the new ones exist. Pure."""
    total = sum(sizes.values())
    threshold = settings.TENANT_GRAPHS_FROM
    create, keep = [], set()
    for account_id, size in sizes.items():
        if size >= threshold and 2 * size < total:
            wanted = wanted_indexes(account_id, size)
            create += [name for name in wanted if name not in present]
            if present.issuperset(wanted[:-1]):
                keep |= present.intersection(wanted)  # its graphs complete: the other layout's can go
            else:
                keep |= {name for name in present if account_of(name) == account_id}
        elif size >= threshold // 2:
            keep |= {name for name in present if account_of(name) == account_id}
    return Plan(create=create, drop=sorted(present - keep))


def present_indexes(cursor) -> set[str]:
    cursor.execute(
        "SELECT indexname FROM pg_indexes WHERE tablename = %s AND (indexname LIKE %s OR indexname LIKE %s)",
        [Context._meta.db_table, PREFIX + "%", GIN_PREFIX + "%"],
    )
    return {name for (name,) in cursor.fetchall() if NAME.match(name)}


def account_sizes(cursor) -> dict[int, int]:
    cursor.execute(
        'SELECT "account_id", count(*) FROM "retrieval_context" WHERE "state" = %s GROUP BY "account_id"', ["ready"]
    )
    return dict(cursor.fetchall())


def refresh(cursor=None, concurrently: bool = True, log=None) -> Plan:
    """Builds the tenant indexes that are missing and drops those no longer wanted (`plan`). `cursor`: a Django or
    psycopg cursor in autocommit (CREATE INDEX CONCURRENTLY runs outside a transaction). Each build scans the table
    once and indexes the account's rows (bench/RESULTS.md, "scale, hosted", gives their times)."""
    if cursor is None:
        with connection.cursor() as own:
            return refresh(own, concurrently, log)
    todo = plan(account_sizes(cursor), present_indexes(cursor))
    for name in todo.create:
        if log:
            log(f"building {name}")
        cursor.execute(index_sql(name, concurrently))
    for name in todo.drop:
        cursor.execute(f'DROP INDEX {"CONCURRENTLY " if concurrently else ""}IF EXISTS "{name}"')
    return todo
