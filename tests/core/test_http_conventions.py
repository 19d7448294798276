"""HTTP conventions (issue 30, item 7): 405 is METHOD_NOT_ALLOWED with an Allow header, 415 is
UNSUPPORTED_MEDIA_TYPE, every error body carries the request id of the response's X-Request-ID header (DRF's
handler, Django's handlers, the MCP endpoint's refusals), the schema lists the codes, and a server on a fresh
machine starts and serves its first write without a warning."""

import json
import subprocess
import sys
import uuid

import httpx
import pytest
from django.test import RequestFactory
from django_guid.context import guid
from rest_framework.test import APIClient

from core import errors
from core.envelope import django_server_error
from core.openapi import ERROR_CODES
from tests.live import ROOT, child_env, database_env, start_asgi
from tests.mcp_server.test_mcp import INITIALIZE, post_mcp, tool_call

FIND = "/api/v1/search/find"
LS = "/api/v1/fs/ls"


@pytest.fixture
def client(db, settings):
    settings.OVSITE_ROOT_API_KEY = ""  # dev mode: the test client's loopback caller needs no key
    return APIClient()


def error_of(response, status: int, code: str) -> dict:
    body = response.json()
    assert response.status_code == status, body
    assert body["status"] == "error" and body["error"]["code"] == code, body
    return body["error"]


# 405 and 415 ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "method, path, allowed",
    [
        ("put", FIND, {"POST", "OPTIONS"}),
        ("delete", FIND, {"POST", "OPTIONS"}),
        ("post", LS, {"GET", "OPTIONS"}),
        ("delete", "/api/v1/admin/accounts", {"GET", "POST", "OPTIONS"}),
    ],
)
def test_wrong_method_is_405_method_not_allowed_with_the_allow_header(client, method, path, allowed):
    response = getattr(client, method)(path)
    error = error_of(response, 405, "METHOD_NOT_ALLOWED")
    assert method.upper() in error["message"]
    assert {m.strip() for m in response.headers["Allow"].split(",")} == allowed


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", "application/xml"])
def test_body_in_an_unparsed_media_type_is_415_unsupported_media_type(client, content_type):
    error = error_of(client.post(FIND, "query=q", content_type=content_type), 415, "UNSUPPORTED_MEDIA_TYPE")
    assert content_type in error["message"]


# the request id in every error body --------------------------------------------------------------------------

ERRORS = {  # one request per handler and status: (status, code, request)
    "drf-401": (401, "UNAUTHENTICATED", lambda c, h: APIClient(REMOTE_ADDR="203.0.113.9").get(LS, {"uri": "v"}, **h)),
    "drf-404": (404, "NOT_FOUND", lambda c, h: c.get(f"/api/v1/tasks/{uuid.uuid4()}", **h)),
    "drf-405": (405, "METHOD_NOT_ALLOWED", lambda c, h: c.put(FIND, **h)),
    "drf-415": (415, "UNSUPPORTED_MEDIA_TYPE", lambda c, h: c.post(FIND, "q", content_type="text/plain", **h)),
    "drf-422": (422, "INVALID_ARGUMENT", lambda c, h: c.post(FIND, {"limit": "many"}, format="json", **h)),
    "drf-400": (
        400,
        "INVALID_ARGUMENT",
        lambda c, h: c.post(FIND, b'{"query": "\xff"}', content_type="application/json", **h),
    ),
    "django-404": (404, "NOT_FOUND", lambda c, h: c.get("/no/such/route", **h)),
    "django-400": (400, "INVALID_ARGUMENT", lambda c, h: c.get("/health", HTTP_HOST="evil.example", **h)),
}


@pytest.mark.parametrize("case", ERRORS)
@pytest.mark.parametrize("sent_id", [None, uuid.uuid4().hex], ids=["made", "sent"])
def test_every_error_body_carries_the_request_id_of_its_header(client, case, sent_id):
    status, code, send = ERRORS[case]
    response = send(client, {"HTTP_X_REQUEST_ID": sent_id} if sent_id else {})
    error = error_of(response, status, code)
    assert error["request_id"] == response.headers["X-Request-ID"]
    assert error["request_id"] == (sent_id or error["request_id"]) and len(error["request_id"]) == 32


def test_the_server_error_handler_body_carries_the_request_id(db):
    """Django calls handler500 inside django-guid's middleware, with the request's id set, as here."""
    request_id = uuid.uuid4().hex
    token = guid.set(request_id)
    try:
        response = django_server_error(RequestFactory().get("/"))
    finally:
        guid.reset(token)
    assert response.status_code == 500
    assert json.loads(response.content)["error"] == {
        "code": "INTERNAL",
        "message": "internal error",
        "details": {},
        "request_id": request_id,
    }


@pytest.mark.parametrize("sent_id", [None, uuid.uuid4().hex], ids=["made", "sent"])
def test_mcp_refusals_carry_the_request_id_of_their_header(live_url, seeded, settings, sent_id):
    settings.OVSITE_ROOT_API_KEY = "http-conventions-root-key"
    response = post_mcp(
        live_url, INITIALIZE, {"X-API-Key": "made-up", **({"X-Request-ID": sent_id} if sent_id else {})}
    )
    assert response.status_code == 401 and response.headers["WWW-Authenticate"] == "Bearer"
    error = response.json()["error"]
    assert error["code"] == "UNAUTHENTICATED" and error["request_id"] == response.headers["X-Request-ID"], error
    assert error["request_id"] == (sent_id or error["request_id"])


def test_mcp_tool_errors_leave_the_request_id_to_the_header(live_url, seeded, settings):
    """A tool error's text goes to the model, to whom an id is noise; the HTTP answer names the request."""
    settings.OVSITE_ROOT_API_KEY = ""
    response = post_mcp(live_url, tool_call("read", {"uris": ["not-a-uri"]}))
    result = response.json()["result"]
    assert response.status_code == 200 and result["isError"], result
    assert set(json.loads(result["content"][0]["text"])["error"]) == {"code", "message", "details"}


# the codes in the schema -------------------------------------------------------------------------------------


def all_subclasses(cls) -> list[type]:
    return [sub for direct in cls.__subclasses__() for sub in (direct, *all_subclasses(direct))]


def test_every_error_code_is_in_the_schema_list():
    codes = {cls.code for cls in (errors.OvsiteError, *all_subclasses(errors.OvsiteError))}
    assert codes == set(ERROR_CODES)
    assert {"METHOD_NOT_ALLOWED", "UNSUPPORTED_MEDIA_TYPE"} <= codes


def test_the_served_schema_lists_the_codes_and_the_request_id(client):
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    responses = schema["paths"][FIND]["post"]["responses"]
    for status in ("405", "415"):
        assert responses[status]["content"]["application/json"]["schema"] == {
            "$ref": "#/components/schemas/ErrorEnvelope"
        }
    error = schema["components"]["schemas"]["ErrorEnvelope"]["properties"]["error"]
    assert {"METHOD_NOT_ALLOWED", "UNSUPPORTED_MEDIA_TYPE"} <= set(error["properties"]["code"]["enum"])
    assert "request_id" in error["required"]


# a quiet start -----------------------------------------------------------------------------------------------


def fresh_machine_env() -> dict:
    """What `make run` sees on a machine where nothing is configured, on the test database."""
    env = {
        name: value
        for name, value in child_env().items()
        if not name.startswith(("OVSITE_", "CELERY_", "EMBEDDING_", "LLM_", "DJANGO_SUPERUSER_"))
    }
    return {**env, **database_env()}


def test_manage_py_check_is_quiet_on_a_fresh_machine():
    result = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env=fresh_machine_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0 and result.stderr == "", result.stderr
    assert result.stdout == "System check identified no issues (0 silenced).\n"


def test_the_server_starts_and_serves_a_first_write_without_a_warning(seeded, tmp_path):
    """The first write queues its task eagerly, through the in-memory broker: kombu used to warn there that the
    broker URL names no host."""
    server, url = start_asgi(tmp_path, fresh_machine_env())
    try:
        written = httpx.post(
            f"{url}/api/v1/content/write",
            timeout=120,
            json={"uri": "viking://resources/quiet.md", "content": "A quiet start."},
        )
        listed = post_mcp(url, tool_call("ls", {"uri": "viking://resources"}))
    finally:
        server.stop()
    assert written.status_code == 200, written.text
    assert listed.status_code == 200 and not listed.json()["result"]["isError"], listed.text
    log = server.log.read_text()
    assert "WARNING" not in log and "Warning" not in log, log
