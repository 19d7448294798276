"""Secure defaults (issue 30, item 1): dev mode (no root key) serves only a direct loopback caller that sends no
key; a key nobody issued is refused in every mode; a proxied request in dev mode is refused with the way out; and
`manage.py check --deploy` fails on a dev-mode, debug or dev-secret deployment. On the REST API, the admin API and
the MCP endpoint alike."""

import asyncio
import subprocess
import sys

import httpx2
import pytest
from rest_framework.test import APIClient

from core import accounts
from tests.live import ROOT, child_env
from tests.mcp_server.test_mcp import INITIALIZE, post_mcp

ROOT_KEY = "secure-defaults-root-key"
LS = ("/api/v1/fs/ls", {"uri": "viking://"})
ADMIN = ("/api/v1/admin/accounts", {})
ROUTES = pytest.mark.parametrize("route", [LS, ADMIN], ids=["rest", "admin"])
PROXY_HEADERS = {"Forwarded": "for=203.0.113.9", "X-Forwarded-For": "203.0.113.9", "X-Real-IP": "203.0.113.9"}


@pytest.fixture
def dev_mode(settings):
    settings.OVSITE_ROOT_API_KEY = ""


@pytest.fixture
def root_mode(settings):
    settings.OVSITE_ROOT_API_KEY = ROOT_KEY


def get(route, *, key: str | None = None, bearer: bool = False, remote_addr: str | None = None, **headers):
    client = APIClient(**({"REMOTE_ADDR": remote_addr} if remote_addr else {}))
    if key is not None:
        headers["Authorization" if bearer else "X-API-Key"] = f"Bearer {key}" if bearer else key
    path, params = route
    return client.get(path, params, **{"HTTP_" + name.upper().replace("-", "_"): v for name, v in headers.items()})


def error_of(response, status: int, code: str) -> dict:
    body = response.json()
    assert response.status_code == status, body
    assert body["status"] == "error" and body["error"]["code"] == code, body
    return body["error"]


def assert_names_the_root_key(error: dict):
    assert "OVSITE_ROOT_API_KEY=" in error["message"] and "make run" in error["message"], error


# dev mode ---------------------------------------------------------------------------------------------------


@ROUTES
def test_keyless_loopback_caller_is_served_in_dev_mode(db, dev_mode, route):
    response = get(route)  # the test client's own REMOTE_ADDR, which dev-mode tests everywhere rely on
    assert response.wsgi_request.META["REMOTE_ADDR"] == "127.0.0.1"
    assert response.status_code == 200, response.content


@pytest.mark.parametrize("remote_addr", ["::1", "127.0.0.2"])
def test_every_loopback_address_is_served_in_dev_mode(db, dev_mode, remote_addr):
    assert get(LS, remote_addr=remote_addr).status_code == 200


@ROUTES
def test_keyless_remote_caller_is_unauthenticated_in_dev_mode(db, dev_mode, route):
    error = error_of(get(route, remote_addr="203.0.113.9"), 401, "UNAUTHENTICATED")
    assert error["details"] == {"reason": "dev_mode_not_loopback"}
    assert_names_the_root_key(error)


@ROUTES
@pytest.mark.parametrize("bearer", [False, True], ids=["x-api-key", "bearer"])
def test_unknown_key_is_unauthenticated_in_dev_mode(db, dev_mode, route, bearer):
    """A made-up key is not the keyless dev caller: a client's wrong key shows now, not in production."""
    error_of(get(route, key="made-up-key", bearer=bearer), 401, "UNAUTHENTICATED")


@ROUTES
@pytest.mark.parametrize("header", PROXY_HEADERS)
def test_each_proxy_header_is_refused_in_dev_mode_with_how_to_set_a_root_key(db, dev_mode, route, header):
    response = get(route, **{header: PROXY_HEADERS[header]})
    error = error_of(response, 401, "UNAUTHENTICATED")
    assert error["details"] == {"reason": "dev_mode_proxied", "proxy_headers": [header]}
    assert_names_the_root_key(error)
    assert response.headers["WWW-Authenticate"] == "Bearer"


def test_a_proxied_request_with_an_issued_key_is_refused_in_dev_mode(db, dev_mode):
    """Dev mode is for one machine; serving through a proxy is a deployment, which needs a root key."""
    key = accounts.create_account(name="acme", admin_user_id="alice")["user_key"]
    assert get(LS, key=key).status_code == 200
    error_of(get(LS, key=key, **{"X-Forwarded-For": "127.0.0.1"}), 401, "UNAUTHENTICATED")


# with a root key --------------------------------------------------------------------------------------------


@ROUTES
@pytest.mark.parametrize("bearer", [False, True], ids=["x-api-key", "bearer"])
def test_unknown_key_is_unauthenticated_with_a_root_key(db, root_mode, route, bearer):
    error_of(get(route, key="made-up-key", bearer=bearer), 401, "UNAUTHENTICATED")


@ROUTES
def test_keyless_loopback_caller_is_unauthenticated_with_a_root_key(db, root_mode, route):
    error_of(get(route), 401, "UNAUTHENTICATED")


@pytest.mark.parametrize("header", PROXY_HEADERS)
def test_proxy_headers_are_fine_with_a_root_key(db, root_mode, header):
    key = accounts.create_account(name="acme", admin_user_id="alice")["user_key"]
    assert get(LS, key=key, **{header: PROXY_HEADERS[header]}).status_code == 200
    assert get(ADMIN, key=ROOT_KEY, **{header: PROXY_HEADERS[header]}).status_code == 200


# the MCP endpoint, over HTTP --------------------------------------------------------------------------------


def test_mcp_serves_the_keyless_loopback_caller_in_dev_mode(live_url, seeded, dev_mode):
    response = post_mcp(live_url, INITIALIZE)
    assert response.status_code == 200 and response.json()["result"]["serverInfo"]["name"] == "ovsite", response.text


@pytest.mark.parametrize("headers", [{"X-API-Key": "made-up-key"}, {"Authorization": "Bearer made-up-key"}])
@pytest.mark.parametrize("mode", ["dev_mode", "root_mode"])
def test_mcp_refuses_an_unknown_key(live_url, seeded, request, mode, headers):
    request.getfixturevalue(mode)
    response = post_mcp(live_url, INITIALIZE, headers)
    assert response.status_code == 401 and response.json()["error"]["code"] == "UNAUTHENTICATED", response.text


@pytest.mark.parametrize("header", PROXY_HEADERS)
def test_mcp_refuses_each_proxy_header_in_dev_mode(live_url, seeded, dev_mode, header):
    """uvicorn takes X-Forwarded-For from a loopback peer as the client's address; the header is refused anyway."""
    response = post_mcp(live_url, INITIALIZE, {header: PROXY_HEADERS[header]})
    assert response.status_code == 401, response.text
    error = response.json()["error"]
    assert error["code"] == "UNAUTHENTICATED" and error["details"]["reason"] == "dev_mode_proxied", error
    assert_names_the_root_key(error)


def test_mcp_accepts_proxy_headers_with_a_root_key(live_url, seeded, root_mode):
    key = accounts.create_account(name="acme", admin_user_id="alice")["user_key"]
    response = post_mcp(live_url, INITIALIZE, {"X-API-Key": key, **PROXY_HEADERS})
    assert response.status_code == 200, response.text


def test_mcp_refuses_a_keyless_remote_caller_in_dev_mode(dev_mode):
    """A remote peer, which a test cannot be over a loopback socket: the ASGI app called with that client address."""
    from mcp_server.app import build_application
    from ovsite.asgi import django_application

    async def post():
        transport = httpx2.ASGITransport(build_application(django_application), client=("203.0.113.9", 50000))
        async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            return await http.post("/mcp", json=INITIALIZE, headers={"Accept": "application/json, text/event-stream"})

    response = asyncio.run(post())
    assert response.status_code == 401, response.text
    error = response.json()["error"]
    assert error["code"] == "UNAUTHENTICATED" and error["details"] == {"reason": "dev_mode_not_loopback"}, error


# manage.py check --deploy -----------------------------------------------------------------------------------

DEPLOYMENT = {
    "OVSITE_ROOT_API_KEY": "a-long-random-root-key-0123456789",
    "OVSITE_SECRET_KEY": "a-long-random-secret-key-0123456789-abcdefghijklmnopqrstuvwxyz-ABCDEFGH",
}


def check_deploy(**overrides) -> subprocess.CompletedProcess:
    env = child_env(**DEPLOYMENT)
    env.pop("OVSITE_DEBUG", None)
    for name, value in overrides.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def ovsite_ids(result: subprocess.CompletedProcess) -> set[str]:
    return {f"ovsite.E00{n}" for n in range(10) if f"(ovsite.E00{n})" in result.stdout + result.stderr}


@pytest.mark.slow  # manage.py check --deploy in a subprocess
def test_check_deploy_passes_a_configured_deployment():
    result = check_deploy()
    assert result.returncode == 0 and not ovsite_ids(result), result.stdout + result.stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    "overrides, expected",
    [
        ({"OVSITE_SECRET_KEY": None}, {"ovsite.E001"}),
        ({"OVSITE_ROOT_API_KEY": None}, {"ovsite.E002"}),
        ({"OVSITE_ROOT_API_KEY": ""}, {"ovsite.E002"}),
        ({"OVSITE_DEBUG": "true"}, {"ovsite.E003"}),
        (
            {"OVSITE_SECRET_KEY": None, "OVSITE_ROOT_API_KEY": None, "OVSITE_DEBUG": "true"},
            {"ovsite.E001", "ovsite.E002", "ovsite.E003"},
        ),
    ],
    ids=["dev-secret", "no-root-key", "empty-root-key", "debug", "fresh-machine-with-debug"],
)
def test_check_deploy_fails(overrides, expected):
    result = check_deploy(**overrides)
    assert result.returncode == 1 and ovsite_ids(result) == expected, result.stdout + result.stderr
