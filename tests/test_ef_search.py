"""Every vector search runs at the connection's `hnsw.ef_search` (OVSITE_HNSW_EF_SEARCH): one scan per search
partition, none of them with a width of its own."""
import subprocess
import sys

import pytest
from django.conf import settings as django_settings
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.conftest import hit_uris
from tests.live import ROOT, child_env, database_env

DEPLOY = "viking://user/default/memories/events/deploy.md"


@pytest.fixture
def memory(api):
    api.write(DEPLOY, "We deployed the billing service on Friday.")


@pytest.mark.parametrize("path, body", [
    ("/api/v1/search/find", {"query": "billing deploy"}),
    ("/api/v1/search/search", {"query": "billing deploy", "mode": "list"}),
    ("/api/v1/search/search", {"query": "billing deploy", "mode": "context"}),
    ("/api/v1/search/search", {"query": "billing deploy", "mode": "context", "purpose": "coding"}),
])
def test_searches_run_at_the_connection_ef_search(api, memory, path, body):
    with CaptureQueriesContext(connection) as queries:
        status, answer = api.post(path, body)
    assert status == 200, answer
    assert DEPLOY in str(answer["result"])
    assert not [q["sql"] for q in queries.captured_queries if "hnsw.ef_search" in q["sql"]]
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('hnsw.ef_search')")
        assert cursor.fetchone()[0] == str(django_settings.HNSW_EF_SEARCH)


def test_the_search_finds_the_memory(api, memory):
    assert hit_uris(api.find("billing deploy")) == [DEPLOY]


@pytest.mark.parametrize("value", ["0", "1200"])
def test_an_ef_search_pgvector_refuses_stops_the_start_not_every_search(value):
    """pgvector takes hnsw.ef_search in 1..1000: outside it every search would answer 500."""
    started = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, capture_output=True, text=True,
                             env=child_env(**database_env(), OVSITE_HNSW_EF_SEARCH=value), timeout=120)
    assert started.returncode != 0
    assert "OVSITE_HNSW_EF_SEARCH must be between 1 and 1000" in started.stderr
