"""Hostile request bodies and parameters (issue 7, item 3): oversized bodies, overlong queries, out-of-range
budgets, deeply nested JSON, invalid UTF-8 and NUL characters. Every one is a 4xx in the error envelope, never a
500, and a refused write leaves every table as it was.

Each test runs in a rolled-back transaction in dev mode (no root key: the loopback caller is `default`/`default`).
"""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from core.models import Account, AccountUser, ApiKey
from core.parsers import MAX_JSON_DEPTH
from retrieval.models import Context, ProcessingTask
from sessions_app.models import Commit, Message, Session

WRITE = "/api/v1/content/write"
BATCH = "/api/v1/content/batch-write"
FIND = "/api/v1/search/find"
SEARCH = "/api/v1/search/search"
RECALL = "/api/v1/search/recall"
MESSAGES = "/api/v1/sessions/s1/messages"
DOC = "viking://resources/docs/a.md"
MODELS = (Context, ProcessingTask, Session, Message, Commit, Account, AccountUser, ApiKey)


@pytest.fixture
def client(db, settings):
    settings.OVSITE_ROOT_API_KEY = ""
    return APIClient()


def rows() -> dict[str, int]:
    return {model.__name__: model.objects.count() for model in MODELS}


@pytest.fixture
def unchanged(client):
    """Asserts, after the test, that no table gained or lost a row."""
    before = rows()
    yield
    assert rows() == before


def post(client, path, body, content_type="application/json"):
    return client.post(path, body if isinstance(body, (str, bytes)) else json.dumps(body), content_type=content_type)


def error_of(response, status, code) -> dict:
    assert response.status_code == status, response.content[:500]
    body = response.json()
    assert set(body) == {"status", "error"} and body["status"] == "error", body
    assert set(body["error"]) == {"code", "message", "details", "request_id"} and body["error"]["code"] == code, body
    assert body["error"]["message"] and isinstance(body["error"]["details"], dict), body
    return body["error"]


def invalid_at(response, *loc) -> dict:
    error = error_of(response, 422, "INVALID_ARGUMENT")
    assert any(e["loc"][: len(loc)] == list(loc) for e in error["details"]["validation_errors"]), error
    return error


def assert_4xx_envelope(response):
    assert 400 <= response.status_code < 500, response.content[:500]
    error_of(response, response.status_code, response.json()["error"]["code"])


# request body size --------------------------------------------------------------------------------------------


def test_default_body_limit_is_ten_mebibytes(settings):
    assert settings.DATA_UPLOAD_MAX_MEMORY_SIZE == 10 * 1024 * 1024


def test_body_over_the_limit_is_413_and_writes_nothing(client, settings, unchanged):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 4096
    error = error_of(post(client, WRITE, {"uri": DOC, "content": "x" * 5000}), 413, "RESOURCE_EXHAUSTED")
    assert error["details"] == {"limit_bytes": 4096}


def test_body_at_the_limit_is_read(client, settings):
    body = json.dumps({"uri": DOC, "content": ""})
    body = body.replace('""', '"' + "x" * (1024 - len(body)) + '"')
    assert len(body) == 1024
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024
    assert post(client, WRITE, body).status_code == 200


def test_body_over_the_default_limit_is_413(client, unchanged):
    content = "x" * (10 * 1024 * 1024)
    error_of(post(client, MESSAGES, {"role": "user", "content": content}), 413, "RESOURCE_EXHAUSTED")


def test_declared_length_over_the_limit_is_413_before_reading(client, settings, unchanged):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 4096
    response = client.generic(
        "POST",
        WRITE,
        json.dumps({"uri": DOC, "content": "x"}),
        content_type="application/json",
        CONTENT_LENGTH="999999999",
    )
    error_of(response, 413, "RESOURCE_EXHAUSTED")


def test_oversized_multipart_fields_are_413(client, settings, unchanged):
    """Django's own check (RequestDataTooBig) on the non-file fields of an upload becomes the 413 envelope."""
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 4096
    response = client.post(
        "/api/v1/resources/temp_upload", {"file": SimpleUploadedFile("a.md", b"# A\n"), "note": "x" * 5000}
    )
    assert error_of(response, 413, "RESOURCE_EXHAUSTED")["details"] == {"limit_bytes": 4096}


# query length and budget bounds --------------------------------------------------------------------------------


@pytest.mark.parametrize("path,extra", [(FIND, {}), (SEARCH, {}), (SEARCH, {"mode": "context"}), (RECALL, {})])
def test_overlong_query_is_422(client, path, extra):
    invalid_at(post(client, path, {"query": "q" * 8001, **extra}), "query")


@pytest.mark.parametrize(
    "path,body,field",
    [
        (SEARCH, {"mode": "context", "max_tokens": 63}, "max_tokens"),
        (SEARCH, {"mode": "context", "max_tokens": 32001}, "max_tokens"),
        (SEARCH, {"mode": "context", "max_tokens": -1}, "max_tokens"),
        (SEARCH, {"mode": "context", "max_tokens": 10**30}, "max_tokens"),
        (SEARCH, {"mode": "context", "max_tokens": "many"}, "max_tokens"),
        (SEARCH, {"mode": "context", "max_tokens": 100.5}, "max_tokens"),
        (RECALL, {"max_tokens": 63}, "max_tokens"),
        (RECALL, {"max_tokens": 32001}, "max_tokens"),
        (RECALL, {"max_chars": 0}, "max_chars"),
        (RECALL, {"max_chars": "long"}, "max_chars"),
        (FIND, {"limit": 0}, "limit"),
        (FIND, {"limit": 1001}, "limit"),
        (FIND, {"limit": 10**30}, "limit"),
        (FIND, {"node_limit": 1001}, "node_limit"),
        (SEARCH, {"limit": -5}, "limit"),
        (RECALL, {"limit": 1001}, "limit"),
        (SEARCH, {"mode": "context", "dedup_turns": 101}, "dedup_turns"),
        (SEARCH, {"mode": "context", "rewrite_max_bullets": 21}, "rewrite_max_bullets"),
        (SEARCH, {"mode": "context", "exclude_uris": [DOC] * 201}, "exclude_uris"),
        (SEARCH, {"mode": "bootstrap", "max_tokens": 32001}, "max_tokens"),
    ],
)
def test_out_of_range_budgets_and_limits_are_422(client, path, body, field):
    invalid_at(post(client, path, {"query": "coffee", **body}), field)


def test_session_context_budget_out_of_range_is_422(client):
    for budget in ("-1", "10000001", "lots"):
        invalid_at(client.get("/api/v1/sessions/s1/context", {"token_budget": budget}), "token_budget")


# deeply nested JSON ---------------------------------------------------------------------------------------------


def nested(levels: int) -> str:
    return '{"a": ' * levels + "1" + "}" * levels


@pytest.mark.parametrize("levels", [MAX_JSON_DEPTH, 1000, 10_000])
@pytest.mark.parametrize("path", [FIND, SEARCH, RECALL])
def test_deeply_nested_filter_is_422(client, path, levels):
    response = post(client, path, '{"query": "coffee", "filter": ' + nested(levels) + "}")
    error = invalid_at(response, "body")
    assert "nested deeper" in error["message"]


def test_filter_nested_within_the_depth_limit_is_validated_as_usual(client):
    invalid_at(post(client, FIND, '{"query": "coffee", "filter": ' + nested(MAX_JSON_DEPTH - 2) + "}"), "filter")


def test_deeply_nested_message_parts_write_nothing(client, unchanged):
    body = '{"role": "user", "parts": [{"type": "tool", "tool_output": ' + nested(10_000) + "}]}"
    invalid_at(post(client, MESSAGES, body), "body")


def test_deeply_nested_arrays_write_nothing(client, unchanged):
    body = '{"uri": "' + DOC + '", "content": "x", "tags": ' + "[" * 10_000 + "]" * 10_000 + "}"
    invalid_at(post(client, WRITE, body), "body")


def test_deeply_nested_skill_data_writes_nothing(client, unchanged):
    invalid_at(post(client, "/api/v1/skills", '{"data": ' + nested(5000) + "}"), "body")


# invalid UTF-8 --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path,body",
    [
        (WRITE, b'{"uri": "viking://resources/docs/a.md", "content": "caf\xe9"}'),
        (BATCH, b'{"operations": [{"uri": "viking://resources/docs/a.md", "content": "\xff\xfe"}], "wait": false}'),
        (MESSAGES, b'{"role": "user", "content": "\xc3\x28"}'),
        ("/api/v1/sessions", b'{"session_id": "s\xed\xa0\x80"}'),  # an encoded surrogate is not UTF-8
        (FIND, b'{"query": "\xf0\x28\x8c\x28"}'),
        (RECALL, b'{"query": "\x80"}'),
    ],
)
def test_invalid_utf8_body_is_400_and_writes_nothing(client, unchanged, path, body):
    error = error_of(post(client, path, body), 400, "INVALID_ARGUMENT")
    assert "UTF-8" in error["message"] and isinstance(error["details"]["byte"], int)


# NUL characters --------------------------------------------------------------------------------------------------

NUL_WRITES = [
    (WRITE, {"uri": DOC, "content": "a\x00b"}),
    (WRITE, {"uri": "viking://resources/docs/a\x00.md", "content": "x"}),
    (WRITE, {"uri": DOC, "content": "x", "tags": ["t\x00"]}),
    (BATCH, {"operations": [{"uri": DOC, "content": "\x00"}], "wait": False}),
    (BATCH, {"operations": [{"uri": DOC, "content": "x", "tags": ["\x00"]}], "wait": False}),
    (BATCH, {"root_uri": "viking://resources/\x00", "operations": [{"uri": DOC, "content": "x"}], "wait": False}),
    ("/api/v1/fs/mkdir", {"uri": "viking://resources/d\x00"}),
    ("/api/v1/fs/mkdir", {"uri": "viking://resources/d", "description": "\x00"}),
    (MESSAGES, {"role": "user", "content": "nul \x00 inside"}),
    (MESSAGES, {"role": "user", "content": "x", "peer_id": "p\x00"}),
    (MESSAGES, {"role": "user", "parts": [{"type": "text", "text": "\x00"}]}),
    (MESSAGES, {"role": "user", "parts": [{"type": "tool", "tool\x00": "x"}]}),
    (MESSAGES, {"role": "user\x00", "content": "x"}),
    (
        "/api/v1/sessions/s1/messages/batch",
        {"messages": [{"role": "user", "content": "ok"}, {"role": "user", "content": "\x00"}]},
    ),
    ("/api/v1/sessions", {"session_id": "s\x00"}),
    ("/api/v1/sessions/s%00/messages", {"role": "user", "content": "x"}),
    ("/api/v1/skills", {"data": "---\nname: s\x00\ndescription: d\n---\nbody"}),
    ("/api/v1/skills", {"data": {"name": "s", "description": "d", "content": "\x00"}}),
    ("/api/v1/skills", {"data": "---\nname: s\ndescription: d\n---\nbody", "target_uri": "viking://\x00"}),
    ("/api/v1/resources", {"temp_file_id": "\x00"}),
    ("/api/v1/admin/accounts", {"account_id": "a\x00", "admin_user_id": "u"}),
    ("/api/v1/admin/accounts/default/users", {"user_id": "u\x00"}),
    ("/api/v1/admin/accounts/a%00/users", {"user_id": "u"}),
    ("/api/v1/admin/accounts/default/users/u%00/key", {}),
]


@pytest.mark.parametrize("path,body", NUL_WRITES)
def test_nul_in_a_write_is_4xx_and_writes_nothing(client, unchanged, path, body):
    assert_4xx_envelope(post(client, path, body))


def test_nul_in_a_commit_is_4xx_and_changes_nothing(client):
    assert post(client, MESSAGES, {"role": "user", "content": "hello"}).status_code == 200
    before = rows()
    response = post(client, "/api/v1/sessions/s1/commit", {"extraction_metadata": {"event": {"tags": ["\x00"]}}})
    assert_4xx_envelope(response)
    assert rows() == before


NUL_QUERY_FIELDS = [
    ("query", "coffee\x00"),
    ("filter", {"category": "events\x00"}),
    ("tags", ["\x00"]),
    ("since", "2024\x00"),
    ("context_type", "memory\x00"),
]
# Context mode refuses any target_uri; list mode takes one, and must refuse a NUL in it.
NUL_QUERIES = [
    (path, extra, field, value)
    for path, extra in [(FIND, {}), (SEARCH, {})]
    for field, value in NUL_QUERY_FIELDS + [("target_uri", "viking://resources/\x00")]
] + [
    (path, extra, field, value)
    for path, extra in [(SEARCH, {"mode": "context"}), (RECALL, {})]
    for field, value in NUL_QUERY_FIELDS
]


@pytest.mark.parametrize("path,extra,field,value", NUL_QUERIES)
def test_nul_in_a_query_is_4xx(client, unchanged, path, extra, field, value):
    assert_4xx_envelope(post(client, path, {"query": "coffee", **extra, field: value}))


@pytest.mark.parametrize(
    "path,field,value",
    [
        (SEARCH, "session_id", "s\x00"),
        (SEARCH, "exclude_uris", ["viking://resources/\x00"]),
        (SEARCH, "purpose", "chat\x00"),
        (RECALL, "session_id", "s\x00"),
        (RECALL, "exclude_uris", ["\x00"]),
    ],
)
def test_nul_in_context_parameters_is_4xx(client, unchanged, path, field, value):
    assert_4xx_envelope(post(client, path, {"query": "coffee", "mode": "context", field: value}))


READS = [
    "/api/v1/content/read",
    "/api/v1/content/abstract",
    "/api/v1/content/overview",
    "/api/v1/fs/stat",
    "/api/v1/fs/ls",
    "/api/v1/fs/tree",
]


@pytest.mark.parametrize("path", READS)
@pytest.mark.parametrize("uri", ["viking://resources/docs/a\x00.md", "\x00", "viking://resources\x00"])
def test_nul_in_a_read_uri_is_4xx(client, path, uri):
    assert_4xx_envelope(client.get(path, {"uri": uri}))


@pytest.mark.parametrize("path", READS)
def test_nul_in_a_read_parameter_name_is_4xx(client, path):
    assert_4xx_envelope(client.get(path, {"uri": "viking://resources", "x\x00": "1"}))


@pytest.mark.parametrize("path", ["/api/v1/fs/ls", "/api/v1/fs/tree"])
def test_nul_in_listing_tags_is_4xx(client, path):
    assert_4xx_envelope(client.get(path, {"uri": "viking://resources", "tags": "\x00"}))


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/sessions/s%00",
        "/api/v1/sessions/s%00/context",
        "/api/v1/skills?target_uri=viking://%00",
        "/api/v1/sessions?limit=1%00",
    ],
)
def test_nul_in_other_get_parameters_is_4xx(client, path):
    assert_4xx_envelope(client.get(path))


def test_nul_in_a_removal_is_4xx_and_removes_nothing(client):
    assert post(client, WRITE, {"uri": DOC, "content": "kept"}).status_code == 200
    before = rows()
    for uri in ("viking://resources/docs/a.md\x00", "viking://resources/docs\x00"):
        assert_4xx_envelope(client.delete("/api/v1/fs?" + f"uri={uri.replace(chr(0), '%00')}&recursive=true"))
    assert_4xx_envelope(client.delete("/api/v1/sessions/s%00"))
    assert rows() == before
