"""Rate limiting per API key (DRF throttling), at the rate the operator sets in the retrieval settings."""

from concurrent.futures import ThreadPoolExecutor

import pytest
from django.core.cache import cache
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from core import accounts
from profiles.models import RetrievalSettings
from profiles.throttling import admit_key

ROOT_KEY = "rate-root-key"


@pytest.fixture
def keys(seeded):
    cache.clear()
    acme = accounts.create_account(name="rate-acme", admin_user_id="ann")["user_key"]
    other = accounts.create_account(name="rate-other", admin_user_id="ole")["user_key"]
    with override_settings(OVSITE_ROOT_API_KEY=ROOT_KEY):
        yield acme, other
    cache.clear()


def limit(per_minute: int) -> None:
    RetrievalSettings.objects.filter(pk=1).update(api_rate_limit_per_minute=per_minute)


def ls(key: str):
    return APIClient().get("/api/v1/fs/ls", {"uri": "viking://"}, HTTP_X_API_KEY=key)


def test_default_is_no_limit(keys):
    assert RetrievalSettings.objects.get(pk=1).api_rate_limit_per_minute == 0
    assert {ls(keys[0]).status_code for _ in range(30)} == {200}


def test_key_over_its_rate_gets_429_with_the_envelope_and_retry_after(keys):
    limit(3)
    assert [ls(keys[0]).status_code for _ in range(3)] == [200, 200, 200]
    response = ls(keys[0])
    assert response.status_code == 429
    body = response.json()
    assert body["status"] == "error" and body["error"]["code"] == "RESOURCE_EXHAUSTED", body
    assert body["error"]["message"] and body["error"]["details"] == {}
    assert 1 <= int(response["Retry-After"]) <= 60


def test_another_key_is_unaffected(keys):
    limit(2)
    while ls(keys[0]).status_code != 429:
        pass
    assert [ls(keys[1]).status_code for _ in range(2)] == [200, 200]
    assert ls(keys[0]).status_code == 429


def test_every_route_counts_against_the_same_key(keys):
    limit(2)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {keys[0]}")
    assert client.post("/api/v1/search/find", {"query": "x"}, format="json").status_code == 200
    assert client.get("/api/v1/sessions").status_code == 200
    assert client.get("/api/v1/system/status").status_code == 429


def test_operator_change_applies_to_the_next_request(keys):
    limit(1)
    assert [ls(keys[0]).status_code for _ in range(2)] == [200, 429]
    limit(0)
    assert ls(keys[0]).status_code == 200


def test_rejected_key_is_401_not_counted(keys):
    limit(1)
    assert {ls("ovk_unknown").status_code for _ in range(3)} == {401}
    assert ls(keys[0]).status_code == 200


@pytest.mark.parametrize("path", ["/api/v1/search/search", "/api/v1/search/recall"])
def test_a_keyed_context_request_reads_the_settings_row_once(keys, path):
    """The rate limit reads the operator's row, and the search takes it from the request instead of again."""
    limit(1000)
    table = RetrievalSettings._meta.db_table
    with CaptureQueriesContext(connection) as queries:
        response = APIClient().post(path, {"query": "deploy", "mode": "context"}, format="json", HTTP_X_API_KEY=keys[0])
    assert response.status_code == 200, response.content
    assert sum(table in query["sql"] for query in queries.captured_queries) == 1


def test_a_keyed_request_counts_its_rate_in_one_statement_without_waiting_for_the_flush(keys):
    """The database cache's table is counted in one upsert that commits asynchronously; through the cache API the
    count took a read, a COUNT(*) of the table and a BEGIN/SELECT/UPDATE/COMMIT whose commit waited for the WAL."""
    limit(1000)
    with CaptureQueriesContext(connection) as queries:
        assert ls(keys[0]).status_code == 200
    counting = [query["sql"] for query in queries.captured_queries if "ovsite_cache" in query["sql"]]
    assert len(counting) == 1 and "synchronous_commit" in counting[0], counting
    assert not any(query["sql"] in ("BEGIN", "COMMIT") for query in queries.captured_queries)


def test_concurrent_requests_of_one_key_are_admitted_up_to_the_rate_exactly(keys):
    """Six threads of eight calls at a rate of ten: ten admitted, whatever the interleaving (a read, then a write
    of the count, would admit requests that read the same count)."""
    limit(10)

    def calls(_):
        try:
            return [admit_key(keys[0]) is None for _ in range(8)]
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=6) as pool:
        admitted = [ok for batch in pool.map(calls, range(6)) for ok in batch]
    assert admitted.count(True) == 10
    wait = admit_key(keys[0])
    assert wait is not None and 0 < wait <= 60


@override_settings(CACHES={"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}})
def test_another_cache_counts_through_the_cache_api(keys):
    limit(2)
    assert [ls(keys[0]).status_code for _ in range(3)] == [200, 200, 429]
    assert ls(keys[1]).status_code == 200
