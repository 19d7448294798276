"""Searches in score order (/find, list mode, context without quotas) run their partition scans at their own
`hnsw.ef_search` (OVSITE_HNSW_WIDE_EF_SEARCH), set for the statement alone; the per-bucket scans of a purpose keep
the connection's (OVSITE_HNSW_EF_SEARCH)."""

import subprocess
import sys

import pytest
from django.conf import settings as django_settings
from django.db import connection
from django.test.utils import CaptureQueriesContext

from retrieval.search.query import Predicate
from retrieval.search.statements import Statement, fetch_statement
from tests.conftest import hit_uris
from tests.live import ROOT, child_env, database_env

DEPLOY = "viking://user/default/memories/events/deploy.md"


def _ef_statements(api, path, body) -> list[str]:
    with CaptureQueriesContext(connection) as queries:
        status, answer = api.post(path, body)
    assert status == 200, answer
    assert DEPLOY in str(answer["result"])
    return [q["sql"] for q in queries.captured_queries if "hnsw.ef_search" in q["sql"]]


@pytest.fixture
def memory(api):
    api.write(DEPLOY, "We deployed the billing service on Friday.")


@pytest.mark.parametrize(
    "path, body",
    [
        ("/api/v1/search/find", {"query": "billing deploy"}),
        ("/api/v1/search/search", {"query": "billing deploy", "mode": "list"}),
        ("/api/v1/search/search", {"query": "billing deploy", "mode": "context"}),
    ],
)
def test_searches_in_score_order_use_the_wide_ef_search(api, memory, settings, path, body):
    settings.HNSW_WIDE_EF_SEARCH = 321
    # Set for the search alone and set back, so the statement itself can be prepared.
    assert _ef_statements(api, path, body) == [
        "SET hnsw.ef_search = 321",
        f"SET hnsw.ef_search = {settings.HNSW_EF_SEARCH}",
    ]


@pytest.mark.django_db(transaction=True)
def test_the_wide_ef_search_holds_for_its_select_alone():
    setting = Predicate("(SELECT current_setting('hnsw.ef_search') AS ef)")
    statement = Statement(nearest=[setting], lexical=[], common=())
    assert fetch_statement(statement, ef_search=321, prepare=True) == [{"ef": "321"}]
    assert fetch_statement(statement) == [{"ef": str(django_settings.HNSW_EF_SEARCH)}]


@pytest.mark.django_db(transaction=True)
def test_a_failed_wide_search_leaves_the_connection_ef_search():
    with pytest.raises(Exception):
        fetch_statement(Statement(nearest=[Predicate("(SELECT 1 / 0 AS x)")], lexical=[], common=()), ef_search=321)
    assert fetch_statement(
        Statement(nearest=[Predicate("(SELECT current_setting('hnsw.ef_search') AS ef)")], lexical=[], common=())
    ) == [{"ef": str(django_settings.HNSW_EF_SEARCH)}]


def test_bucket_searches_keep_the_connection_ef_search(api, memory, settings):
    settings.HNSW_WIDE_EF_SEARCH = 321
    assert (
        _ef_statements(
            api, "/api/v1/search/search", {"query": "billing deploy", "mode": "context", "purpose": "coding"}
        )
        == []
    )


def test_a_wide_ef_search_equal_to_the_connection_sets_nothing(api, memory, settings):
    settings.HNSW_WIDE_EF_SEARCH = settings.HNSW_EF_SEARCH
    assert _ef_statements(api, "/api/v1/search/find", {"query": "billing deploy"}) == []


def test_the_search_finds_the_memory(api, memory):
    assert hit_uris(api.find("billing deploy")) == [DEPLOY]


@pytest.mark.parametrize(
    "name, value",
    [("OVSITE_HNSW_WIDE_EF_SEARCH", "1200"), ("OVSITE_HNSW_EF_SEARCH", "0"), ("OVSITE_HNSW_EF_SEARCH", "1001")],
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
