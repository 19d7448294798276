"""One key header, once (core/auth.py `check_credential_headers`): a request that gives `X-API-Key` or `Authorization`
more than once, gives both, or spells `X-API-Key` with underscores is refused with 401 UNAUTHENTICATED, a
`details.reason` and how to send the key, on the REST API and on the MCP endpoint, under each server ovsite is served
by: uvicorn on `ovsite.asgi:application` (`make run`, the Procfile) and gunicorn on `ovsite.wsgi`. The header lines go
over the wire as written here (httpx, headers as a list of pairs).

What the rule reads depends on the server (uvicorn: the lines as received, for REST and /mcp; gunicorn: its environ,
repeated lines joined, underscore names dropped), not on the mode, which is decided after it: each server runs in one
mode, between them both. gunicorn has the root key, where a dropped underscore header is a 401 and so cannot pass for
the key's caller (in dev mode the keyless caller's listing is the key's)."""

from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from core import accounts
from core.auth import check_credential_headers
from core.errors import Unauthenticated
from tests.live import child_env, database_env, start_asgi, start_ovsite
from tests.mcp_server.test_mcp import INITIALIZE, POST_HEADERS

ROOT_KEY = "key-headers-root-key"
UVICORN, GUNICORN = "uvicorn-dev", "gunicorn-root"  # gunicorn serves no /mcp
ON_EVERY_SERVER = pytest.mark.parametrize("server", [UVICORN, GUNICORN])

# name: (the header lines, given the issued key K; the refusal's reason)
REFUSED = {
    "x-api-key-twice": (lambda k: [("X-API-Key", k), ("X-API-Key", k)], "duplicate_key_header"),
    "x-api-key-twice-other-first": (lambda k: [("X-API-Key", "made-up"), ("X-API-Key", k)], "duplicate_key_header"),
    "x-api-key-as-a-list": (lambda k: [("X-API-Key", f"{k},{k}")], "duplicate_key_header"),
    "bearer-twice": (
        lambda k: [("Authorization", f"Bearer {k}"), ("Authorization", f"Bearer {k}")],
        "duplicate_key_header",
    ),
    "both-forms": (lambda k: [("X-API-Key", k), ("Authorization", f"Bearer {k}")], "two_key_forms"),
    "both-forms-bearer-first": (lambda k: [("Authorization", f"Bearer {k}"), ("X-API-Key", k)], "two_key_forms"),
}
UNDERSCORE_NAMES = ["X_API_KEY", "x_api_key", "X-API_KEY", "X_API-Key"]
ACCEPTED = {"x-api-key": lambda k: [("X-API-Key", k)], "bearer": lambda k: [("Authorization", f"Bearer {k}")]}


@pytest.fixture(scope="module")
def servers(django_db_setup, tmp_path_factory):
    """{UVICORN: url, GUNICORN: url}: ovsite under each, on the test database, started side by side once for the
    module."""

    def start(name: str, log_dir) -> tuple:
        kind, mode = name.split("-")
        env = child_env(**database_env(), OVSITE_ROOT_API_KEY=ROOT_KEY if mode == "root" else "")
        return start_asgi(log_dir, env) if kind == "uvicorn" else start_ovsite(log_dir, env, threads=2)

    with ThreadPoolExecutor(2) as pool:
        starting = {name: pool.submit(start, name, tmp_path_factory.mktemp(name)) for name in (UVICORN, GUNICORN)}
    started = {name: future.result() for name, future in starting.items() if future.exception() is None}
    try:
        for future in starting.values():
            future.result()  # one that did not come up fails the module, once the other is stopped
        yield {name: url for name, (_, url) in started.items()}
    finally:
        for process, _ in started.values():
            process.stop()


@pytest.fixture
def key(seeded):
    return accounts.create_account(name="acme", admin_user_id="alice")["user_key"]


def rest(url: str, lines: list[tuple[str, str]]) -> httpx.Response:
    return httpx.get(f"{url}/api/v1/fs/ls", params={"uri": "viking://"}, headers=lines, timeout=60)


def mcp(url: str, lines: list[tuple[str, str]]) -> httpx.Response:
    return httpx.post(f"{url}/mcp", json=INITIALIZE, headers=[*POST_HEADERS.items(), *lines], timeout=60)


def assert_refused(response: httpx.Response, reason: str) -> dict:
    assert response.status_code == 401, response.text
    error = response.json()["error"]
    assert error["code"] == "UNAUTHENTICATED" and error["details"]["reason"] == reason, error
    assert "`X-API-Key: K` or `Authorization: Bearer K`" in error["message"] and "once" in error["message"], error
    assert response.headers["WWW-Authenticate"] == "Bearer"
    assert error["request_id"] == response.headers["X-Request-ID"]
    return error


def without_request_id(response: httpx.Response) -> tuple[int, dict]:
    body = response.json()
    if body["status"] == "error":
        body["error"].pop("request_id")
    return response.status_code, body


# the rule ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", REFUSED)
def test_the_rule_refuses(case):
    lines, reason = REFUSED[case]
    with pytest.raises(Unauthenticated) as refused:
        check_credential_headers([(name.lower(), value) for name, value in lines("K")])
    assert refused.value.details["reason"] == reason


@pytest.mark.parametrize("name", UNDERSCORE_NAMES)
def test_the_rule_refuses_underscore_names(name):
    with pytest.raises(Unauthenticated) as refused:
        check_credential_headers([(name, "K")])
    assert refused.value.details == {"reason": "underscore_header", "header": name}


@pytest.mark.parametrize(
    "lines",
    [
        [],
        [("X-API-Key", "K")],
        [("x-api-key", "K")],
        [("Authorization", "Bearer K")],
        [("X_Other", "1"), ("a", "b")],
        # A proxy's Basic credentials beside the key (the SDK's ldap and oidc modes send this pair): no second key.
        [("X-API-Key", "K"), ("Authorization", "Basic dXNlcjpwdw==")],
    ],
)
def test_the_rule_lets_one_key_header_through(lines):
    check_credential_headers(lines)


# REST, under each server ------------------------------------------------------------------------------------


@ON_EVERY_SERVER
@pytest.mark.parametrize("form", ACCEPTED)
def test_rest_serves_one_key_header_once(servers, key, server, form):
    """The control: the key the refusals below carry is good."""
    assert rest(servers[server], ACCEPTED[form](key)).status_code == 200


@ON_EVERY_SERVER
@pytest.mark.parametrize("case", REFUSED)
def test_rest_refuses_a_key_header_twice_or_in_two_forms(servers, key, server, case):
    """Under gunicorn too: it hands the app repeated lines joined by commas, which the rule refuses alike."""
    lines, reason = REFUSED[case]
    error = assert_refused(rest(servers[server], lines(key)), reason)
    assert error["details"].get("header", "X-API-Key") in error["message"], error


@pytest.mark.parametrize("name", UNDERSCORE_NAMES)
def test_rest_refuses_an_underscore_key_header_under_uvicorn(servers, key, name):
    """uvicorn passes the name on and a2wsgi maps it onto HTTP_X_API_KEY, as X-API-Key's: it was taken as the key."""
    error = assert_refused(rest(servers[UVICORN], [(name, key)]), "underscore_header")
    assert error["details"]["header"].lower() == name.lower(), error


@pytest.mark.parametrize("name", UNDERSCORE_NAMES)
def test_gunicorn_drops_an_underscore_key_header_before_the_app_sees_it(servers, key, name):
    """gunicorn 22+ drops a header whose name has an underscore (`header_map = "drop"`): the request is the keyless
    one (a 401 for the missing key), never the key's caller, and an `X-API-Key` beside it is the only key."""
    url = servers[GUNICORN]
    assert without_request_id(rest(url, [(name, key)])) == without_request_id(rest(url, []))
    assert rest(url, [(name, "made-up"), ("X-API-Key", key)]).status_code == 200


# MCP, under uvicorn -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("form", ACCEPTED)
def test_mcp_serves_one_key_header_once(servers, key, form):
    response = mcp(servers[UVICORN], ACCEPTED[form](key))
    assert response.status_code == 200 and response.json()["result"]["serverInfo"]["name"] == "ovsite", response.text


@pytest.mark.parametrize("case", REFUSED)
def test_mcp_refuses_a_key_header_twice_or_in_two_forms(servers, key, case):
    """MCP read the first of two X-API-Key lines (Starlette's Headers.get) and X-API-Key before Authorization."""
    lines, reason = REFUSED[case]
    assert_refused(mcp(servers[UVICORN], lines(key)), reason)


@pytest.mark.parametrize("name", UNDERSCORE_NAMES)
def test_mcp_refuses_an_underscore_key_header(servers, key, name):
    assert_refused(mcp(servers[UVICORN], [(name, key)]), "underscore_header")
