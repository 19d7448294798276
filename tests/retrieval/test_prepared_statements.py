"""Vector searches (one scan per search partition) are bound server-side and prepared once per connection
(settings.DB_PREPARED_STATEMENTS): the plan is made once, still on each partition's partial HNSW index, and it
answers exactly as the unprepared statement."""

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from assembly.candidates import BUCKETS
from core.auth import Caller
from core.models import Account
from retrieval.embedders import embed_query
from retrieval.models import SEARCH_PARTITIONS, Context
from retrieval.search.query import FindQuery, partition_predicate, scope_predicate
from retrieval.search.statements import (
    EVERYTHING,
    SearchQuery,
    fetch_statement,
    search_statement,
    statement_sql,
    vector_text,
)

MEMORIES = {
    "viking://user/default/memories/events/deploy.md": "We deployed the billing service on Friday.",
    "viking://user/default/memories/entities/alice.md": "Alice leads the billing team.",
    "viking://user/default/memories/preferences/editor.md": "Prefers vim with a dark theme.",
    "viking://user/default/memories/experiences/rollback.md": "A rollback of billing took ten minutes.",
}
CODING = {"query": "billing deploy", "mode": "context", "purpose": "coding", "score_threshold": 0}


def _prepared_searches() -> list[tuple[str, int, int]]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements WHERE statement LIKE %s",
            ["%UNION ALL%context_type%"],
        )
        return cursor.fetchall()


def _generic_plan(statement: str) -> str:
    # Sorting is ruled out for the check: on a table this small the planner would rather sort a handful of rows.
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_sort = off")
        cursor.execute(f"EXPLAIN (GENERIC_PLAN) {statement}")
        return "\n".join(line for (line,) in cursor.fetchall())


@pytest.mark.parametrize(
    "path, body, partitions",
    [
        ("/api/v1/search/search", CODING, BUCKETS),
        ("/api/v1/search/find", {"query": "billing deploy", "limit": 4}, tuple(SEARCH_PARTITIONS)),
        (
            "/api/v1/search/search",
            {"query": "billing deploy", "mode": "context", "score_threshold": 0},
            tuple(SEARCH_PARTITIONS),
        ),
    ],
)
def test_a_repeated_search_is_prepared_once_and_runs_its_generic_plan(api, settings, path, body, partitions):
    # A search with an ef_search of its own sets it in its statement, which binds client-side.
    settings.HNSW_WIDE_EF_SEARCH = settings.HNSW_HYBRID_EF_SEARCH = settings.HNSW_EF_SEARCH
    settings.PARTITIONED_SEARCH_FROM = 0  # searches in score order walk the partitions, as in a large store
    for uri, text in MEMORIES.items():
        api.write(uri, text)
    # After five custom plans PostgreSQL takes the generic plan only if its estimated cost is not above theirs, both
    # from the table's statistics. Left as earlier tests' rows made them (another account's thousand nodes, analyzed
    # whenever autovacuum ran), the generic plan is costed for that average account and this small one keeps custom
    # plans (0 generic / 7 custom): statistics of what the table holds make the choice the one a store makes.
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE retrieval_context")
    answers = []
    for _ in range(8):
        status, answer = api.post(path, body)
        assert status == 200, answer
        result = answer["result"]
        answers.append([entry["uri"] for entry in result.get("entries", result.get("memories"))])
    assert all(uris == answers[0] for uris in answers) and set(answers[0]) == set(MEMORIES)
    [(statement, generic, custom)] = _prepared_searches()  # one statement text, whatever the query vector
    assert generic + custom >= 7 and generic >= 1
    # The generic plan can still scan each partition's partial index: parameters in place of the partition values
    # would leave the planner nothing to prove the index predicates with.
    plan = _generic_plan(statement)
    assert all(f"Index Scan using context_hnsw_{name} " in plan for name in partitions), plan


def test_prepared_and_client_bound_statements_answer_the_same_rows(api):
    for uri, text in MEMORIES.items():
        api.write(uri, text)
    account = Account.objects.get(name="default")
    caller = Caller(account.id, "default", "default", "admin")
    scope = scope_predicate(caller, FindQuery(query=""))
    active = [(name, 3) for name in SEARCH_PARTITIONS]
    for query in ("billing deploy", "dark editor theme", "who leads the team"):
        statement = search_statement(
            scope, [SearchQuery(query, embed_query(query))], ("uri", "category"), active, active
        )
        client_bound = fetch_statement(statement)
        for _ in range(3):  # the first runs plan it; later runs use the prepared statement
            assert fetch_statement(statement, prepare=True) == client_bound
        assert {row["uri"] for row in client_bound} == set(MEMORIES)


def test_a_prepared_search_is_logged_like_any_other_statement(api):
    api.write(*next(iter(MEMORIES.items())))
    with CaptureQueriesContext(connection) as queries:
        status, _ = api.post("/api/v1/search/search", CODING)
    assert status == 200
    assert any("UNION ALL" in query["sql"] and "context_type" in query["sql"] for query in queries.captured_queries)


def test_partition_conditions_are_written_in_as_literals_and_select_what_the_orm_selects(api):
    for uri, text in MEMORIES.items():
        api.write(uri, text)
    Context.objects.filter(uri=next(iter(MEMORIES))).update(category="misfiled")  # one node for "other"
    for name, condition in SEARCH_PARTITIONS.items():
        predicate = partition_predicate(name)
        assert predicate.params == ()
        with connection.cursor() as cursor:
            cursor.execute(f'SELECT "retrieval_context"."uri" FROM "retrieval_context" WHERE {predicate.sql}')
            assert {uri for (uri,) in cursor.fetchall()} == set(
                Context.objects.filter(condition).values_list("uri", flat=True)
            )


def test_an_unfiltered_search_binds_its_query_alone_and_a_filtered_one_is_planned_for_its_values(api):
    """A caller's scope and the limits are written in, so the generic plan of an unfiltered search is the plan its
    values call for (PostgreSQL keeps it after five executions); a filter's values are parameters whose plan depends
    on them, so a filtered search is not prepared."""
    api.write_all(MEMORIES)
    account = Account.objects.get(name="default")
    caller = Caller(account.id, "default", "default", "admin")
    scope = scope_predicate(caller, FindQuery(query=""))
    assert scope.params == ()
    vector = embed_query("billing")
    statement = search_statement(scope, [SearchQuery("billing", vector)], ("uri",), [(EVERYTHING, 3)], [])
    assert statement_sql(statement, limit=3)[1] == [vector_text(vector)]
    for _ in range(3):
        assert api.find("billing deploy", since="30d")["total"] > 0
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE %s", ['%"updated_at" >=%'])
        assert cursor.fetchone()[0] == 0
