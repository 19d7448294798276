"""The root key on a data route (issue 39, "the newcomer's hour"): it acts as the user that X-OpenViking-Account and
X-OpenViking-User name; without them it is refused with those headers' names (422 INVALID_ARGUMENT,
`details.reason` `root_key_names_no_user`), where it answered an empty result for account `default`, user
`default`, and said nothing of it. The admin API takes the root key alone, as before."""

import httpx2
import pytest
from django.test import override_settings
from rest_framework.test import APIClient

from tests.conftest import Api, hit_uris

ROOT_KEY = "root-key-data-routes"
FIND = "/api/v1/search/find"
ACCOUNT, USER = "X-OpenViking-Account", "X-OpenViking-User"


def keyed(key: str, **headers) -> Api:
    client = APIClient()
    client.credentials(HTTP_X_API_KEY=key, **{"HTTP_" + k.upper().replace("-", "_"): v for k, v in headers.items()})
    return Api(client)


@pytest.fixture
def acme(seeded):
    """Account `acme` with alice, who has one memory; the root key is set."""
    with override_settings(OVSITE_ROOT_API_KEY=ROOT_KEY):
        root = keyed(ROOT_KEY)
        status, body = root.post("/api/v1/admin/accounts", {"account_id": "acme", "admin_user_id": "alice"})
        assert status == 200, body
        alice = keyed(body["result"]["user_key"])
        alice.write("viking://~/memories/preferences/coffee.md", "Alice drinks black coffee.", wait=True)
        yield alice


def assert_names_the_headers(status, body, missing: list[str]):
    assert status == 422 and body["error"]["code"] == "INVALID_ARGUMENT", body
    error = body["error"]
    assert error["details"]["reason"] == "root_key_names_no_user" and error["details"]["headers"] == missing, error
    assert f"{ACCOUNT}: <account>" in error["message"] and f"{USER}: <user>" in error["message"], error
    assert [e["loc"] for e in error["details"]["validation_errors"]] == [["header", h] for h in missing], error


def test_the_root_key_alone_on_a_data_route_is_refused_naming_the_headers(acme):
    status, body = keyed(ROOT_KEY).post(FIND, {"query": "coffee"})
    assert_names_the_headers(status, body, [ACCOUNT, USER])


def test_the_root_key_with_an_account_but_no_user_is_refused_naming_the_user_header(acme):
    status, body = keyed(ROOT_KEY, **{ACCOUNT: "acme"}).post(FIND, {"query": "coffee"})
    assert_names_the_headers(status, body, [USER])


def test_the_root_key_naming_account_and_user_searches_that_users_space(acme):
    result = keyed(ROOT_KEY, **{ACCOUNT: "acme", USER: "alice"}).find("what does alice drink?")
    assert hit_uris(result) == ["viking://user/alice/memories/preferences/coffee.md"]


def test_the_root_key_alone_still_reaches_the_admin_api(acme):
    status, body = keyed(ROOT_KEY).get("/api/v1/admin/accounts")
    assert status == 200 and "acme" in [row["account_id"] for row in body["result"]], body


def test_a_users_own_key_needs_no_header(acme):
    assert hit_uris(acme.find("coffee")) == ["viking://user/alice/memories/preferences/coffee.md"]


def test_mcp_refuses_the_root_key_alone_the_same_way(live_url, acme):
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    headers = {"X-API-Key": ROOT_KEY, "Accept": "application/json, text/event-stream"}
    with override_settings(OVSITE_ROOT_API_KEY=ROOT_KEY):
        response = httpx2.post(f"{live_url}/mcp", json=initialize, headers=headers, timeout=30)
    assert_names_the_headers(response.status_code, response.json(), [ACCOUNT, USER])
