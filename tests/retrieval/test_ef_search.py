"""Searches in score order (/find, list mode, context without quotas) walk the HNSW graphs at their own
`hnsw.ef_search` (OVSITE_HNSW_HYBRID_EF_SEARCH in hybrid mode, OVSITE_HNSW_WIDE_EF_SEARCH in vector mode), the
per-bucket scans of a purpose at OVSITE_HNSW_EF_SEARCH: each
search statement sets it for itself (retrieval.search.statements.shared_vector), in the search's one round trip,
and the connection keeps its own."""

import subprocess
import sys

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from core.auth import Caller
from core.models import Account
from retrieval.embedders import embed_query
from retrieval.search.query import FindQuery, scope_predicate
from retrieval.search.statements import EVERYTHING, SearchQuery, fetch_statement, search_statement
from tests.conftest import hit_uris
from tests.live import ROOT, child_env, database_env

DEPLOY = "viking://user/default/memories/events/deploy.md"
MEMORIES = {
    DEPLOY: "We deployed the billing service on Friday.",
    "viking://user/default/memories/entities/alice.md": "Alice leads the billing team.",
    "viking://user/default/memories/preferences/editor.md": "Prefers vim with a dark theme.",
    "viking://user/default/memories/experiences/rollback.md": "A rollback of billing took ten minutes.",
}


def _statements(api, path, body) -> list[str]:
    """The SQL a request sent that names hnsw.ef_search."""
    with CaptureQueriesContext(connection) as queries:
        status, answer = api.post(path, body)
    assert status == 200, answer
    assert DEPLOY in str(answer["result"])
    return [q["sql"] for q in queries.captured_queries if "hnsw.ef_search" in q["sql"]]


def _set_in_statement(ef_search: int) -> str:
    return f"set_config('hnsw.ef_search', '{ef_search}', true)"


@pytest.fixture
def memory(api):
    api.write(DEPLOY, MEMORIES[DEPLOY])


@pytest.mark.parametrize(
    "path, body",
    [
        ("/api/v1/search/find", {"query": "billing deploy"}),
        ("/api/v1/search/search", {"query": "billing deploy", "mode": "list"}),
        ("/api/v1/search/search", {"query": "billing deploy", "mode": "context"}),
    ],
)
@pytest.mark.parametrize("search_mode, ef_search", [("hybrid", 123), ("vector", 321)])
def test_searches_in_score_order_set_their_mode_ef_search_in_their_one_statement(
    api, memory, settings, path, body, search_mode, ef_search
):
    settings.HNSW_HYBRID_EF_SEARCH, settings.HNSW_WIDE_EF_SEARCH = 123, 321
    # No SET before and after: the search statement itself, one round trip, which can be prepared.
    [statement] = _statements(api, path, {**body, "search_mode": search_mode})
    assert _set_in_statement(ef_search) in statement and not statement.lstrip().upper().startswith("SET")


def test_bucket_searches_walk_at_the_connection_setting(api, memory, settings):
    settings.HNSW_WIDE_EF_SEARCH = 321
    body = {"query": "billing deploy", "mode": "context", "purpose": "coding"}
    [statement] = _statements(api, "/api/v1/search/search", body)
    assert _set_in_statement(settings.HNSW_EF_SEARCH) in statement and _set_in_statement(321) not in statement


def _walk(ef_search: int) -> list[str]:
    """The nearest nodes of the whole-table graph walked at `ef_search` (set by the statement)."""
    account = Account.objects.get(name="default")
    scope = scope_predicate(Caller(account.id, "default", "default", "admin"), FindQuery(query=""))
    query = SearchQuery("billing", embed_query("billing"))
    statement = search_statement(scope, [query], ("uri",), [(EVERYTHING, len(MEMORIES))], [], ef_search=ef_search)
    return [row["uri"] for row in fetch_statement(statement, prepare=True, limit=len(MEMORIES))]


def _show_ef_search() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SHOW hnsw.ef_search")
        return cursor.fetchone()[0]


def test_the_scans_walk_at_the_statement_ef_search_and_the_connection_keeps_its_own(api):
    api.write_all(MEMORIES)
    with connection.cursor() as cursor:
        # Without iterative scans a graph walked at ef_search k returns at most k rows; sorting is ruled out so that
        # the planner walks the graph on a table this small. The connection walks at 1.
        cursor.execute("SET hnsw.iterative_scan = off; SET enable_sort = off; SET hnsw.ef_search = 1")
    try:
        # At most one row at 1; at 1000 the statement's walk finds more (the graph also holds the entries of rows
        # earlier tests deleted, which a walk visits but does not return, so not necessarily all).
        assert len(_walk(ef_search=1)) <= 1 < len(_walk(ef_search=1000))
        assert _show_ef_search() == "1"  # each statement's setting lasted for its own transaction alone
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET hnsw.iterative_scan; RESET enable_sort; RESET hnsw.ef_search")


def test_the_search_finds_the_memory(api, memory):
    assert hit_uris(api.find("billing deploy")) == [DEPLOY]


@pytest.mark.parametrize(
    "name, value",
    [
        ("OVSITE_HNSW_WIDE_EF_SEARCH", "1200"),
        ("OVSITE_HNSW_HYBRID_EF_SEARCH", "0"),
        ("OVSITE_HNSW_EF_SEARCH", "0"),
        ("OVSITE_HNSW_EF_SEARCH", "1001"),
    ],
)
def test_an_ef_search_pgvector_refuses_stops_the_start_not_every_search(name, value):
    """pgvector takes hnsw.ef_search in 1..1000: outside it every search would answer 500."""
    started = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=child_env(**database_env(), **{name: value}),
        timeout=120,
    )
    assert started.returncode != 0
    assert f"{name} must be between 1 and 1000" in started.stderr
