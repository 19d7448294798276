"""The per-process cache of keys, accounts, users, the settings row and purpose profiles (core/config_cache.py): a
change made in a process applies there from the next request, one made in another process within
OVSITE_CONFIG_CACHE_SECONDS; a revoked or deleted key is refused by then everywhere; dev mode's rules hold with the
cache warm; a cached request sends only its own statements."""

import time

import httpx
import pytest
from django.conf import settings
from django.db import connection, transaction
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from rest_framework.test import APIClient

from core import accounts
from core.auth import authenticate_headers
from core.models import AccountUser, ApiKey, hash_key, new_key
from profiles.models import PurposeProfile, RetrievalSettings
from profiles.selectors import current_settings
from tests.live import child_env, database_env, start_ovsite

ROOT_KEY = "config-cache-root-key"
FIND = "/api/v1/search/find"
SEARCH = "/api/v1/search/search"


def find(key: str | None = None, **meta) -> int:
    headers = {"HTTP_X_API_KEY": key} if key else {}
    return APIClient().post(FIND, {"query": "deploy"}, format="json", **headers, **meta).status_code


@pytest.fixture
def acme(seeded):
    """An account whose admin `ann` holds a key, with a root key set: (ann's key)."""
    key = accounts.create_account(name="cache-acme", admin_user_id="ann")["user_key"]
    with override_settings(OVSITE_ROOT_API_KEY=ROOT_KEY):
        yield key


def test_a_key_rotated_through_the_admin_api_is_refused_from_the_next_request(acme):
    assert find(acme) == 200  # cached now
    response = APIClient().post(
        "/api/v1/admin/accounts/cache-acme/users/ann/key", {}, format="json", HTTP_X_API_KEY=ROOT_KEY
    )
    assert response.status_code == 200, response.content
    assert find(acme) == 401
    assert find(response.json()["result"]["user_key"]) == 200


def test_a_key_revoked_in_the_console_is_refused_from_the_next_request(acme, operator):
    assert find(acme) == 200
    key = ApiKey.objects.get(key_hash=hash_key(acme))
    response = operator.post(
        reverse("admin:ovsite_apikey_changelist"),
        {"action": "revoke_selected_keys", "_selected_action": [key.pk]},
        follow=True,
    )
    assert response.status_code == 200
    assert find(acme) == 401


def test_a_deleted_key_and_a_deleted_user_are_refused_from_the_next_request(acme):
    other = accounts.add_user(account_name="cache-acme", user_id="bo", role="user")["user_key"]
    assert find(acme) == find(other) == 200
    ApiKey.objects.filter(key_hash=hash_key(acme)).delete()
    AccountUser.objects.get(account__name="cache-acme", user_id="bo").delete()
    assert find(acme) == find(other) == 401


def caller_of(key: str):
    return authenticate_headers({"X-API-Key": key}, "127.0.0.1", [("X-API-Key", key)])[0]


def test_a_role_changed_applies_from_the_next_request(acme):
    assert caller_of(acme).role == "admin"  # cached
    user = AccountUser.objects.get(account__name="cache-acme", user_id="ann")
    user.role = "user"
    user.save()
    assert caller_of(acme).role == "user"
    AccountUser.objects.filter(pk=user.pk).update(role="admin")  # no signal: the queryset clears it
    assert caller_of(acme).role == "admin"


def test_a_key_issued_past_this_process_works_at_once(acme):
    """Only keys that exist are kept: a key refused a moment ago, then issued by another process (here by plain
    SQL, which this process hears nothing of), is served on its first use."""
    plain = new_key()
    assert find(plain) == 401
    user = AccountUser.objects.get(account__name="cache-acme", user_id="ann")
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {ApiKey._meta.db_table} (user_id, key_hash, created_at) VALUES (%s, %s, now())",
            [user.pk, hash_key(plain)],
        )
    assert find(plain) == 200


def test_the_root_key_reaches_an_account_made_after_it_was_refused(acme):
    headers = {"HTTP_X_OPENVIKING_ACCOUNT": "cache-later", "HTTP_X_OPENVIKING_USER": "lu"}
    assert find(ROOT_KEY, **headers) == 403  # no such account
    accounts.create_account(name="cache-later", admin_user_id="lu")
    assert find(ROOT_KEY, **headers) == 200


def test_dev_mode_refuses_what_it_refused_with_the_keyless_caller_cached(seeded):
    assert find() == 200  # the dev-mode caller is cached now
    assert find(new_key()) == 401  # a key nobody issued
    assert find(HTTP_X_FORWARDED_FOR="203.0.113.9") == 401  # through a proxy
    assert find(REMOTE_ADDR="203.0.113.9") == 401  # not loopback
    assert find() == 200


def test_settings_and_profiles_changed_apply_from_the_next_request(api):
    body = {"query": "deploy", "mode": "context", "purpose": "coding"}
    assert api.post(SEARCH, body)[1]["result"]["stats"]["max_tokens"] == 1600
    RetrievalSettings.objects.filter(pk=1).update(default_max_tokens=700)  # no signal: the queryset clears it
    PurposeProfile.objects.filter(name="coding").update(max_tokens=900)
    assert api.post(SEARCH, {**body, "purpose": "chat"})[1]["result"]["stats"]["max_tokens"] == 700
    assert api.post(SEARCH, body)[1]["result"]["stats"]["max_tokens"] == 900
    PurposeProfile.objects.filter(name="coding").update(enabled=False)
    status, refused = api.post(SEARCH, body)
    assert status == 422 and refused["error"]["code"] == "INVALID_ARGUMENT", refused


def test_nothing_read_inside_a_transaction_is_kept(seeded):
    before = current_settings().default_max_tokens
    with pytest.raises(RuntimeError), transaction.atomic():
        RetrievalSettings.objects.filter(pk=1).update(default_max_tokens=before + 1)
        assert current_settings().default_max_tokens == before + 1
        raise RuntimeError("roll back")
    assert current_settings().default_max_tokens == before


def test_a_caller_gets_its_own_settings_instance(seeded):
    first = current_settings()
    first.default_max_tokens = 12345
    assert current_settings().default_max_tokens != 12345


@pytest.mark.parametrize("path,body", [(FIND, {}), (SEARCH, {"mode": "list"})])
def test_a_cached_request_sends_only_its_search_statement(acme, path, body):
    """Dev mode: the search itself; with a key under a rate limit, the count of the key besides."""
    with override_settings(OVSITE_ROOT_API_KEY=""):
        APIClient().post(path, {"query": "deploy", **body}, format="json")
        with CaptureQueriesContext(connection) as sent:
            assert APIClient().post(path, {"query": "deploy", **body}, format="json").status_code == 200
    assert len(sent.captured_queries) == 1, [query["sql"][:80] for query in sent.captured_queries]
    RetrievalSettings.objects.filter(pk=1).update(api_rate_limit_per_minute=1000)
    APIClient().post(path, {"query": "deploy", **body}, format="json", HTTP_X_API_KEY=acme)
    with CaptureQueriesContext(connection) as sent:
        response = APIClient().post(path, {"query": "deploy", **body}, format="json", HTTP_X_API_KEY=acme)
    assert response.status_code == 200
    assert len(sent.captured_queries) == 2, [query["sql"][:80] for query in sent.captured_queries]


# Across processes ---------------------------------------------------------------------------------------------


def test_a_key_revoked_in_one_server_process_is_refused_by_another_within_the_bound(acme, tmp_path):
    env = child_env(
        **database_env(), OVSITE_ROOT_API_KEY=ROOT_KEY, OVSITE_CONFIG_CACHE_SECONDS=settings.OVSITE_CONFIG_CACHE_SECONDS
    )
    started = []
    try:
        for name in ("revoker", "other"):
            (tmp_path / name).mkdir()
            started.append(start_ovsite(tmp_path / name, env, threads=2))
        (revoker, revoker_url), (_, other_url) = started
        with httpx.Client(timeout=60, headers={"X-API-Key": acme}) as client:
            for url in (revoker_url, other_url):  # both have the key cached
                assert client.post(url + FIND, json={"query": "deploy"}).status_code == 200
            rotated = client.post(
                revoker_url + "/api/v1/admin/accounts/cache-acme/users/ann/key", headers={"X-API-Key": ROOT_KEY}
            )
            assert rotated.status_code == 200, rotated.text
            assert client.post(revoker_url + FIND, json={"query": "deploy"}).status_code == 401  # at once
            time.sleep(settings.OVSITE_CONFIG_CACHE_SECONDS + 0.2)
            assert client.post(other_url + FIND, json={"query": "deploy"}).status_code == 401
    finally:
        for process, _ in started:
            process.stop()
