"""Tenants in a shared table (docs/retrieval.md, "Tenants"): an account holding a small share of the table is
searched exactly, through its B-tree, so a walk of graphs filtered to it cannot stop early and come back short; an
account past OVSITE_TENANT_GRAPHS_FROM nodes gets HNSW graphs and a GIN of its own (retrieval.tenant_graphs), which
its searches read; a store of one account keeps the model's graphs."""

import io

import numpy as np
import pytest
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from core.auth import Caller
from core.models import Account
from retrieval import tenant_graphs
from retrieval.embedders import get_embedder
from retrieval.models import SEARCH_PARTITIONS, Context
from retrieval.search import query as search_query
from retrieval.search.query import FindQuery, account_size, exact_search, scope_predicate, score_order_scans
from retrieval.search.ranking import by_bucket, ranking_for, score_order
from retrieval.search.statements import EVERYTHING, HIT_COLUMNS, SearchQuery, search_statement, statement_sql
from tests.conftest import hit_uris

QUERY = "which restaurant did we book for the team dinner"
TOPICS = ["dinner at a restaurant", "a deploy of the billing service", "a trip to the mountains", "a dentist visit"]
SMALL, BIG_A, BIG_B = 15, 200, 250  # the default account is the small tenant; two larger ones share the table
OWN = ("context_hnsw_t2", "context_gin_t2")  # account 2's tenant indexes
PARTS = (*(f"context_hnsw_t2_{p}" for p in SEARCH_PARTITIONS), "context_gin_t2")  # from PARTITIONED_SEARCH_FROM


def _memories(account: Account, count: int, label: str) -> None:
    texts = [f"{label} note {i}: {TOPICS[i % len(TOPICS)]}, item {i * 7 % 13}" for i in range(count)]
    vectors = get_embedder().embed(texts)
    now = timezone.now()
    Context.objects.bulk_create(
        Context(
            account=account,
            uri=f"viking://user/default/memories/events/{label}-{i}.md",
            parent_uri="viking://user/default/memories/events",
            kind="file",
            context_type="memory",
            category="events",
            owner="default",
            abstract=text,
            content=text,
            embedding=vector,
            state="ready",
            created_at=now,
            updated_at=now,
        )
        for i, (text, vector) in enumerate(zip(texts, vectors, strict=True))
    )


def _fresh_layout_reads() -> None:
    """The per-process reads the layout rule caches for a minute, read again now."""
    search_query._store_size_read[:] = [0.0, 0]
    search_query._account_sizes.clear()
    search_query._tenant_graphs_read[:] = [float("-inf"), frozenset()]


@pytest.fixture
def tenants(seeded, settings):
    """The default account (15 nodes) beside accounts of 200 and 250, with OVSITE_TENANT_GRAPHS_FROM at 100, and on
    this connection `hnsw.max_scan_tuples` at 60 and sorts priced out (enable_sort off): the planner then walks the
    shared graph for the small tenant, as it does in a large table, and the filtered walk stops long before it has
    seen the tenant's 15 (3 % of the table), as at 20,000 it does for a tenant of a few hundred among a million.
    An exact search sorts all the same: it has no other plan."""
    settings.TENANT_GRAPHS_FROM = 100
    accounts = {
        "default": Account.objects.get(name="default"),
        "big-a": Account.objects.create(name="big-a"),
        "big-b": Account.objects.create(name="big-b"),
    }
    for (name, account), count in zip(accounts.items(), (SMALL, BIG_A, BIG_B), strict=True):
        _memories(account, count, name)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE retrieval_context")
        cursor.execute("SET hnsw.max_scan_tuples = 60")
        cursor.execute("SET enable_sort = off")
    _fresh_layout_reads()
    yield accounts
    with connection.cursor() as cursor:
        cursor.execute("RESET hnsw.max_scan_tuples")
        cursor.execute("RESET enable_sort")
        for name in tenant_graphs.present_indexes(cursor):
            cursor.execute(f'DROP INDEX IF EXISTS "{name}"')
    _fresh_layout_reads()


def _exact_top(account: Account, k: int) -> list[str]:
    query = np.asarray(get_embedder().embed([QUERY])[0], dtype=np.float32)
    rows = Context.objects.filter(account=account).values_list("uri", "embedding")
    ranked = sorted(rows, key=lambda row: (-float(np.dot(query, np.asarray(row[1], dtype=np.float32))), row[0]))
    return [uri for uri, _ in ranked[:k]]


def _caller(account: Account) -> Caller:
    return Caller(account.id, account.name, "default", "admin")


def test_a_small_tenant_beside_big_ones_gets_its_exact_top_k(api, tenants):
    assert exact_search(tenants["default"].id)
    found = hit_uris(api.find(QUERY, limit=10, search_mode="vector"))
    assert found == _exact_top(tenants["default"], 10)


def test_a_small_tenants_hybrid_search_is_not_short(api, tenants):
    assert len(hit_uris(api.find(QUERY, limit=10))) == 10


def test_a_small_tenants_bucket_search_gets_its_exact_top_k(tenants):
    caller, spec = _caller(tenants["default"]), FindQuery(query=QUERY, search_mode="vector")
    found = by_bucket(
        caller=caller,
        spec=spec,
        scope=scope_predicate(caller, spec),
        queries=[SearchQuery(QUERY, get_embedder().embed([QUERY])[0])],
        counts=[("events", 10)],
        columns=HIT_COLUMNS,
        ranking=ranking_for(spec),
    )
    assert [row["uri"] for row in found.rows] == _exact_top(tenants["default"], 10)


def _plan_of_vector_search(caller: Caller, lexical: bool = False) -> str:
    """EXPLAIN of /find's statement, vector mode or with its lexical side (hybrid)."""
    spec = FindQuery(query=QUERY)
    statement = search_statement(
        scope_predicate(caller, spec),
        [SearchQuery(QUERY, get_embedder().embed([QUERY])[0])],
        HIT_COLUMNS,
        [(scan, 10) for scan in score_order_scans(caller, spec) or (EVERYTHING,)],
        [(EVERYTHING, 10)] if lexical else [],
        account_size(caller.account_id) if lexical else 0,
        exact=exact_search(caller.account_id),
    )
    sql, params = statement_sql(statement, 10)
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + sql, params)
        return "\n".join(row for (row,) in cursor.fetchall())


def test_a_tenant_past_the_size_walks_a_graph_of_its_own(tenants):
    big = tenants["big-a"]
    assert not exact_search(big.id)
    with connection.cursor() as cursor:
        built = tenant_graphs.refresh(cursor, concurrently=False)
        cursor.execute("ANALYZE retrieval_context")
    # big-b holds more than half the table: the model's indexes are its own
    assert built.create == [tenant_graphs.graph_name(big.id), tenant_graphs.gin_name(big.id)]
    _fresh_layout_reads()
    assert tenant_graphs.graph_name(big.id) in _plan_of_vector_search(_caller(big))
    spec = FindQuery(query=QUERY, search_mode="vector")
    found = by_bucket(
        caller=_caller(big),
        spec=spec,
        scope=scope_predicate(_caller(big), spec),
        queries=[SearchQuery(QUERY, get_embedder().embed([QUERY])[0])],
        counts=[("events", 10)],
        columns=HIT_COLUMNS,
        ranking=ranking_for(spec),
    )
    assert [row["uri"] for row in found.rows] == _exact_top(big, 10)


def test_a_tenant_past_the_partitioned_size_walks_its_partition_graphs(tenants, settings):
    """A tenant of OVSITE_PARTITIONED_SEARCH_FROM nodes walks a graph of its own per search partition, as a store of
    one account walks the model's: at a million hosted nodes one graph of the 67k and 134k tenants found no more
    than 0.95 of their exact top 10 at any ef_search."""
    settings.PARTITIONED_SEARCH_FROM = 150
    big = tenants["big-a"]  # 200 nodes
    with connection.cursor() as cursor:
        built = tenant_graphs.refresh(cursor, concurrently=False)
        cursor.execute("ANALYZE retrieval_context")
        assert tenant_graphs.present_indexes(cursor) == set(built.create)
    assert built.create == [*(tenant_graphs.graph_name(big.id, p) for p in SEARCH_PARTITIONS), f"context_gin_t{big.id}"]
    _fresh_layout_reads()
    assert score_order_scans(_caller(big), FindQuery(query=QUERY)) == tuple(SEARCH_PARTITIONS)
    assert tenant_graphs.graph_name(big.id, "events") in _plan_of_vector_search(_caller(big))
    for mode in ("hybrid", "vector"):
        spec = FindQuery(query=QUERY, search_mode=mode)
        found = score_order(
            caller=_caller(big),
            spec=spec,
            scope=scope_predicate(_caller(big), spec),
            queries=[SearchQuery(QUERY, get_embedder().embed([QUERY])[0])],
            limit=10,
            columns=HIT_COLUMNS,
            ranking=ranking_for(spec),
        )
        assert len(found.rows) == 10


def test_a_tenant_past_the_size_reads_its_matches_from_a_gin_of_its_own(tenants):
    """The model's GIN lists every account's holders of the query's terms, which the account's B-tree bitmap then
    cuts down; a tenant's own GIN lists only its own."""
    big = tenants["big-a"]
    with connection.cursor() as cursor:
        tenant_graphs.refresh(cursor, concurrently=False)
        cursor.execute("ANALYZE retrieval_context")
    _fresh_layout_reads()
    plan = _plan_of_vector_search(_caller(big), lexical=True)
    assert f"Bitmap Index Scan on {tenant_graphs.gin_name(big.id)}" in plan, plan
    assert "context_lexemes_gin" not in plan, plan
    spec = FindQuery(query=QUERY)  # hybrid
    found = score_order(
        caller=_caller(big),
        spec=spec,
        scope=scope_predicate(_caller(big), spec),
        queries=[SearchQuery(QUERY, get_embedder().embed([QUERY])[0])],
        limit=10,
        columns=HIT_COLUMNS,
        ranking=ranking_for(spec),
    )
    assert len(found.rows) == 10


def test_a_small_tenants_search_walks_no_graph(tenants):
    plan = _plan_of_vector_search(_caller(tenants["default"]))
    assert "hnsw" not in plan, plan


def test_a_store_of_one_account_keeps_its_graphs(api, settings):
    api.write_all({f"viking://~/memories/entities/n{i}.md": f"Note {i} on {TOPICS[i % 4]}." for i in range(12)})
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE retrieval_context")
    settings.TENANT_GRAPHS_FROM = 10**9
    _fresh_layout_reads()
    try:
        assert not exact_search(Account.objects.get(name="default").id)
    finally:
        _fresh_layout_reads()


@pytest.mark.parametrize(
    "sizes, present, create, drop",
    [
        # a tenant past the size gets its graph and GIN; the majority account and the small ones none
        ({1: 500, 2: 150, 3: 20}, set(), list(OWN), []),
        ({1: 500, 2: 150, 3: 20}, {"context_hnsw_t2"}, ["context_gin_t2"], []),
        ({1: 150}, set(), [], []),
        # from PARTITIONED_SEARCH_FROM (here 300) a graph per partition; the account's old one goes once they exist
        ({1: 700, 2: 300, 3: 20}, set(OWN), list(PARTS[:-1]), []),
        ({1: 700, 2: 300, 3: 20}, {*OWN, *PARTS[:2]}, list(PARTS[2:-1]), []),
        ({1: 700, 2: 300, 3: 20}, {*OWN, *PARTS}, [], ["context_hnsw_t2"]),
        # and back under it (but over half of it): one graph again, the partitions' go once it exists
        ({1: 700, 2: 200, 3: 20}, {*PARTS}, ["context_hnsw_t2"], []),
        ({1: 700, 2: 200, 3: 20}, {*OWN, *PARTS}, [], sorted(PARTS[:-1])),
        # under the size but over half of it: kept (no rebuild on the line); under half, or gone: dropped
        ({1: 500, 2: 80}, set(OWN), [], []),
        ({1: 500, 2: 40}, {*OWN, "context_hnsw_t9"}, [], sorted({*OWN, "context_hnsw_t9"})),
    ],
)
def test_the_tenant_graph_plan(settings, sizes, present, create, drop):
    settings.TENANT_GRAPHS_FROM, settings.PARTITIONED_SEARCH_FROM = 100, 300
    todo = tenant_graphs.plan(sizes, present)
    assert todo.create == create and todo.drop == drop


def test_a_gin_alone_is_no_graph_of_the_accounts():
    assert tenant_graphs.graph_accounts({*PARTS, "context_gin_t4", "context_hnsw_t3"}) == {2, 3}


def test_the_command_builds_a_tenants_graph_concurrently_and_drops_it_once_unwanted(tenants, settings):
    out = io.StringIO()
    call_command("tenant_graphs", stdout=out)
    assert "built 2 tenant indexes, dropped 0" in out.getvalue()
    big = tenants["big-a"].id
    with connection.cursor() as cursor:
        assert tenant_graphs.present_indexes(cursor) == {tenant_graphs.graph_name(big), tenant_graphs.gin_name(big)}
    settings.TENANT_GRAPHS_FROM = 1000  # big-a (200) is now under half the size: its graph goes
    call_command("tenant_graphs", stdout=out)
    assert "built 0 tenant indexes, dropped 2" in out.getvalue()
    with connection.cursor() as cursor:
        assert tenant_graphs.present_indexes(cursor) == set()
