"""Bad input gets a clear 4xx in the envelope: never a 500, never a partial write.

Each test runs in a rolled-back transaction (`db`) in dev mode (no root key: the loopback caller is
account/user `default`). Writes here are never processed (no commit, no task), which the checks do not need.
"""

import json
from urllib.parse import urlencode

import pytest
from django.test import override_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

FIND = "/api/v1/search/find"
WRITE = "/api/v1/content/write"
BATCH = "/api/v1/content/batch-write"
DOC = "viking://resources/docs/a.md"


class Client:
    def __init__(self):
        self.client = APIClient()

    def post(self, path, body):
        return self.client.post(path, json.dumps(body), content_type="application/json")

    def raw(self, path, data, content_type="application/json"):
        return self.client.post(path, data, content_type=content_type)

    def get(self, path, **params):
        return self.client.get(path, params)

    def delete(self, path, **params):
        return self.client.delete(f"{path}?{urlencode(params)}")

    def batch(self, body):
        """batch-write waits by default; nothing commits here, so it would poll until its timeout."""
        return self.post(BATCH, {"wait": False, **body})

    def write(self, uri, content="text"):
        response = self.post(WRITE, {"uri": uri, "content": content})
        assert response.status_code == 200, response.content
        return response.json()["result"]

    def exists(self, uri) -> bool:
        response = self.get("/api/v1/fs/stat", uri=uri)
        assert response.status_code in (200, 404), response.content
        return response.status_code == 200


@pytest.fixture
def c(db):
    with override_settings(OVSITE_ROOT_API_KEY=""):
        yield Client()


def assert_error(response, status, code):
    body = response.json()
    assert response.status_code == status, body
    assert set(body) == {"status", "error"} and body["status"] == "error", body
    assert set(body["error"]) == {"code", "message", "details", "request_id"}, body
    assert body["error"]["request_id"] == response.headers["X-Request-ID"], body
    assert body["error"]["code"] == code, body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"], body
    assert isinstance(body["error"]["details"], dict), body
    assert "Traceback" not in response.content.decode()
    return body["error"]


def assert_invalid(response, *loc):
    """422 INVALID_ARGUMENT whose validation_errors name `loc` (a prefix of one error's loc)."""
    error = assert_error(response, 422, "INVALID_ARGUMENT")
    errors = error["details"]["validation_errors"]
    assert errors and all(set(e) == {"loc", "message", "type"} for e in errors), errors
    assert any(e["loc"][: len(loc)] == list(loc) for e in errors), (loc, errors)
    return errors


def assert_invalid_uri(response, uri):
    error = assert_error(response, 400, "INVALID_URI")
    assert error["details"]["uri"] == uri
    return error


# /find ------------------------------------------------------------------------------------------------------


def test_find_rejects_unknown_fields_by_name(c):
    errors = assert_invalid(c.post(FIND, {"query": "q", "colour": "red"}), "colour")
    assert errors[0]["type"] == "extra_forbidden"


def test_find_names_every_unknown_field(c):
    errors = assert_invalid(c.post(FIND, {"query": "q", "alpha": 1, "beta": 2}))
    assert sorted(e["loc"][0] for e in errors) == ["alpha", "beta"]


@pytest.mark.parametrize("limit", [0, -1, -100, 1001, 10**12, "ten", 1.5, True, None, [], {}])
def test_find_rejects_bad_limit(c, limit):
    assert_invalid(c.post(FIND, {"query": "q", "limit": limit}), "limit")


@pytest.mark.parametrize("node_limit", [0, -5, 10**9, "x"])
def test_find_rejects_bad_node_limit(c, node_limit):
    assert_invalid(c.post(FIND, {"query": "q", "node_limit": node_limit}), "node_limit")


@pytest.mark.parametrize("threshold", [-0.01, 1.01, 2, -1e300, "high", "nan", "NaN", "inf", "-inf", [0.5], {}])
def test_find_rejects_score_threshold_outside_zero_one(c, threshold):
    assert_invalid(c.post(FIND, {"query": "q", "score_threshold": threshold}), "score_threshold")


@pytest.mark.parametrize("threshold", [0, 0.0, 1, 1.0, 0.5])
def test_find_accepts_score_threshold_bounds(c, threshold):
    assert c.post(FIND, {"query": "q", "score_threshold": threshold}).status_code == 200


@pytest.mark.parametrize(
    "field, value",
    [
        ("query", ["a"]),
        ("query", {"a": 1}),
        ("query", True),
        ("target_uri", 5),
        ("target_uri", [1, 2]),
        ("target_uri", {"uri": "viking://"}),
        ("context_type", 5),
        ("context_type", [None]),
        ("tags", "ops"),
        ("tags", [1]),
        ("tags", [["ops"]]),
        ("tags", ["x" * 65]),
        ("filter", "category=events"),
        ("filter", ["category"]),
        ("read_content", "maybe"),
        ("read_content", [True]),
        ("time_field", "mtime"),
        ("time_field", 3),
        ("since", 20240101),
        ("until", ["2024-01-01"]),
    ],
)
def test_find_rejects_wrong_types(c, field, value):
    assert_invalid(c.post(FIND, {"query": "q", field: value}), field)


@pytest.mark.parametrize("query", ["", " ", "\n\t "])
def test_find_rejects_empty_query(c, query):
    assert_invalid(c.post(FIND, {"query": query}), "query")


def test_find_rejects_missing_query(c):
    assert_invalid(c.post(FIND, {"limit": 3}), "query")


def test_find_rejects_overlong_query(c):
    assert_invalid(c.post(FIND, {"query": "q" * 8001}), "query")


@pytest.mark.parametrize("context_type", ["memo", "memory,bogus", ["resource", "file"], "MEMORY"])
def test_find_rejects_unknown_context_type(c, context_type):
    assert_invalid(c.post(FIND, {"query": "q", "context_type": context_type}), "context_type")


@pytest.mark.parametrize("level", [0, 3, -1, "file", "2", [1, 5], True, [True], 1.0])
def test_find_rejects_bad_level(c, level):
    assert_invalid(c.post(FIND, {"query": "q", "level": level}), "level")


@pytest.mark.parametrize("field", ["since", "until"])
@pytest.mark.parametrize(
    "value",
    [
        "yesterday",
        "2024-13-01",
        "2024-02-30",
        "2024-01-01T25:00:00",
        "7y",
        "-7d",
        "9999999999d",
        "999999999w",
        "99999999999999999999m",
        "2024-01-01T00:00:00+99:00",
    ],
)
def test_find_rejects_bad_time_bounds(c, field, value):
    assert_invalid(c.post(FIND, {"query": "q", field: value}), field)


@pytest.mark.parametrize(
    "value", ["2024-01-01", "2024-01-01T10:00:00", "2024-01-01T10:00:00+02:00", "7d", "30m", "0001-01-01", "9999-12-31"]
)
def test_find_accepts_good_time_bounds(c, value):
    assert c.post(FIND, {"query": "q", "since": value}).status_code == 200


def test_find_rejects_unknown_filter_field(c):
    assert_invalid(c.post(FIND, {"query": "q", "filter": {"colour": "red"}}), "filter", "colour")


@pytest.mark.parametrize("value", [1, None, [], [1], {"eq": "x"}, ["ok", 2]])
def test_find_rejects_non_string_filter_values(c, value):
    assert_invalid(c.post(FIND, {"query": "q", "filter": {"category": value}}), "filter", "category")


def test_find_rejects_nul_in_filter_values(c):
    assert_invalid(c.post(FIND, {"query": "q", "filter": {"category": "events\x00"}}), "filter", "category")


def test_find_rejects_image_url_without_an_image_embedder(c):
    assert_invalid(c.post(FIND, {"query": "q", "image_url": "https://example.com/cat.png"}), "image_url")


def test_find_rejects_nul_in_query(c):
    assert_invalid(c.post(FIND, {"query": "coffee\x00"}), "query")


@pytest.mark.parametrize(
    "uri",
    [
        "http://resources/x",
        "viking://nowhere",
        "viking://resources/../x",
        "viking://resources//x",
        "viking://user%2Fbob",
        "resources",
    ],
)
def test_find_rejects_invalid_target_uri(c, uri):
    assert_invalid_uri(c.post(FIND, {"query": "q", "target_uri": uri}), uri)


def test_find_rejects_invalid_uri_in_a_target_list(c):
    assert_invalid_uri(c.post(FIND, {"query": "q", "target_uri": ["viking://resources", "viking://x"]}), "viking://x")


@pytest.mark.parametrize(
    "body, check",
    [
        ({"target_uri": "viking://nowhere"}, lambda r: assert_invalid_uri(r, "viking://nowhere")),
        ({"filter": {"colour": "red"}}, lambda r: assert_invalid(r, "filter", "colour")),
    ],
    ids=["target_uri", "filter"],
)
def test_find_refuses_bad_targets_and_filters_before_embedding(c, remote_embedder, body, check):
    """A bad request stays a 4xx (not 503) when the embedder is down, and costs no embedding call."""
    remote_embedder.script.mode = "error"
    check(c.post(FIND, {"query": "q", **body}))
    assert not [r for r in remote_embedder.script.requests if r["path"].endswith("/embeddings")]


# bodies -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", [FIND, WRITE, BATCH, "/api/v1/fs/mkdir"])
@pytest.mark.parametrize("raw", ["{", "{'query': 'q'}", "not json", '{"query": "q",}', "NaN", '{"limit": Infinity}'])
def test_non_json_body_is_rejected(c, path, raw):
    errors = assert_invalid(c.raw(path, raw), "body")
    assert errors[0]["type"] == "parse_error"


@pytest.mark.parametrize("path", [FIND, WRITE, BATCH, "/api/v1/fs/mkdir"])
@pytest.mark.parametrize("raw", ["[]", '[{"query": "q"}]', '"query"', "42", "true", "null"])
def test_non_object_json_body_is_rejected(c, path, raw):
    assert_error(c.raw(path, raw), 422, "INVALID_ARGUMENT")


def test_body_with_unsupported_media_type_is_rejected(c):
    assert_error(c.raw(FIND, "query=q", content_type="text/plain"), 415, "UNSUPPORTED_MEDIA_TYPE")


# /content/write ---------------------------------------------------------------------------------------------


def test_write_rejects_unknown_fields_by_name(c):
    errors = assert_invalid(c.post(WRITE, {"uri": DOC, "content": "x", "overwrite": True}), "overwrite")
    assert errors[0]["type"] == "extra_forbidden"
    assert not c.exists(DOC)


@pytest.mark.parametrize(
    "field, value",
    [
        ("content", None),
        ("content", 5),
        ("content", ["x"]),
        ("uri", 5),
        ("uri", None),
        ("mode", "delete"),
        ("tags", "ops"),
        ("tags", ["x" * 65]),
        ("tags", ["t"] * 33),
        ("wait", "sometimes"),
        ("timeout", -1),
        ("timeout", 601),
        ("tag_mode", "merge"),
    ],
)
def test_write_rejects_wrong_types(c, field, value):
    assert_invalid(c.post(WRITE, {"uri": DOC, "content": "x", field: value}), field)
    assert not c.exists(DOC)


@pytest.mark.parametrize("missing", ["uri", "content"])
def test_write_rejects_missing_fields(c, missing):
    body = {"uri": DOC, "content": "x"}
    body.pop(missing)
    assert_invalid(c.post(WRITE, body), missing)


@pytest.mark.parametrize("content", ["a\x00b", "\x00"])
def test_write_rejects_nul_in_content(c, content):
    assert_invalid(c.post(WRITE, {"uri": DOC, "content": content}), "content")
    assert not c.exists(DOC)


@pytest.mark.parametrize(
    "uri",
    [
        "http://resources/x.md",
        "viking://nowhere/x.md",
        "viking://resources/../x.md",
        "viking://resources/a//x.md",
        "viking://resources/a%2Fx.md",
        "viking://resources/%2e%2e/x.md",
        "viking://~/memories/random/x.md",
        "viking://resources",
        "viking://~",
        "viking://~/memories",
        "viking://",
        "viking://user/a b/x.md",
    ],
)
def test_write_rejects_invalid_uri(c, uri):
    assert_invalid_uri(c.post(WRITE, {"uri": uri, "content": "x"}), uri)


def test_write_rejects_nul_in_uri(c):
    response = c.post(WRITE, {"uri": "viking://resources/a\x00.md", "content": "x"})
    assert response.status_code in (400, 422)
    assert_error(response, response.status_code, response.json()["error"]["code"])


def test_write_rejects_uri_that_only_grows_too_long_once_tilde_expands(c):
    uri = "viking://~/resources/" + "/".join(["a" * 200] * 4)
    uri += "/" + "b" * (1024 - len(uri) - 1)
    assert len(uri) == 1024
    assert_error(c.post(WRITE, {"uri": uri, "content": "x"}), 400, "INVALID_URI")


def test_write_rejects_content_over_the_limit(c):
    with override_settings(OVSITE_MAX_CONTENT_BYTES=16):
        error = assert_error(c.post(WRITE, {"uri": DOC, "content": "x" * 17}), 413, "RESOURCE_EXHAUSTED")
    assert error["details"]["limit_bytes"] == 16
    assert not c.exists(DOC)


def test_write_of_a_file_where_a_directory_exists_conflicts(c):
    c.write("viking://resources/docs/a.md")
    error = assert_error(c.post(WRITE, {"uri": "viking://resources/docs", "content": "x"}), 409, "CONFLICT")
    assert error["details"]["uri"] == "viking://resources/docs"
    assert c.exists("viking://resources/docs/a.md")


def test_write_below_an_existing_file_conflicts(c):
    c.write(DOC)
    assert_error(c.post(WRITE, {"uri": DOC + "/inner.md", "content": "x"}), 409, "CONFLICT")
    assert not c.exists(DOC + "/inner.md")


def test_create_mode_on_an_existing_file_conflicts(c):
    c.write(DOC, "first")
    assert_error(c.post(WRITE, {"uri": DOC, "content": "second", "mode": "create"}), 409, "CONFLICT")
    assert c.get("/api/v1/content/read", uri=DOC).json()["result"] == "first"


def test_mkdir_where_a_file_exists_conflicts(c):
    c.write(DOC)
    assert_error(c.post("/api/v1/fs/mkdir", {"uri": DOC}), 409, "CONFLICT")


def test_mkdir_rejects_unknown_fields(c):
    assert_invalid(c.post("/api/v1/fs/mkdir", {"uri": "viking://resources/d", "parents": True}), "parents")


# batch-write: all or nothing --------------------------------------------------------------------------------

GOOD_OPS = [
    {"uri": "viking://resources/batch/one.md", "content": "one"},
    {"uri": "viking://~/memories/events/two.md", "content": "two"},
]
WRITTEN_BY_GOOD_OPS = [
    "viking://resources/batch/one.md",
    "viking://resources/batch",
    "viking://user/default/memories/events/two.md",
    "viking://user/default/memories/events",
]


def assert_nothing_written(c):
    assert [uri for uri in WRITTEN_BY_GOOD_OPS if c.exists(uri)] == []


def test_batch_with_valid_operations_writes_them_all(c):
    """Positive control for the all-or-nothing tests below."""
    response = c.batch({"operations": GOOD_OPS})
    assert response.status_code == 200, response.content
    assert all(c.exists(uri) for uri in WRITTEN_BY_GOOD_OPS)


def test_batch_whose_last_operation_has_an_unknown_field_writes_nothing(c):
    ops = GOOD_OPS + [{"uri": "viking://resources/batch/three.md", "content": "3", "colour": "red"}]
    assert_invalid(c.batch({"operations": ops}), "operations", 2, "colour")
    assert_nothing_written(c)


def test_batch_whose_last_operation_has_an_invalid_uri_writes_nothing(c):
    ops = GOOD_OPS + [{"uri": "viking://resources/../three.md", "content": "3"}]
    assert_invalid_uri(c.batch({"operations": ops}), "viking://resources/../three.md")
    assert_nothing_written(c)


def test_batch_whose_last_operation_has_nul_content_writes_nothing(c):
    ops = GOOD_OPS + [{"uri": "viking://resources/batch/three.md", "content": "\x00"}]
    assert_invalid(c.batch({"operations": ops}), "operations", 2, "content")
    assert_nothing_written(c)


def test_batch_whose_last_operation_targets_another_user_writes_nothing(c):
    ops = GOOD_OPS + [{"uri": "viking://user/someone-else/memories/events/x.md", "content": "3"}]
    assert_error(c.batch({"operations": ops}), 403, "PERMISSION_DENIED")
    assert_nothing_written(c)


def test_batch_whose_last_operation_hits_a_directory_writes_nothing(c):
    c.write("viking://resources/existing/child.md")
    ops = GOOD_OPS + [{"uri": "viking://resources/existing", "content": "3"}]
    assert_error(c.batch({"operations": ops}), 409, "CONFLICT")
    assert_nothing_written(c)


def test_batch_whose_last_operation_creates_an_existing_file_writes_nothing(c):
    c.write(DOC, "original")
    ops = GOOD_OPS + [{"uri": DOC, "content": "3", "mode": "create"}]
    assert_error(c.batch({"operations": ops}), 409, "CONFLICT")
    assert_nothing_written(c)
    assert c.get("/api/v1/content/read", uri=DOC).json()["result"] == "original"


def test_batch_whose_last_operation_repeats_a_uri_writes_nothing(c):
    ops = GOOD_OPS + [{"uri": "viking://resources/batch/one.md", "content": "again"}]
    assert_invalid(c.batch({"operations": ops}), "operations")
    assert_nothing_written(c)


def test_batch_whose_last_operation_nests_under_an_earlier_file_writes_nothing(c):
    ops = GOOD_OPS + [{"uri": "viking://resources/batch/one.md/three.md", "content": "3"}]
    assert_error(c.batch({"operations": ops}), 409, "CONFLICT")
    assert_nothing_written(c)


def test_batch_whose_last_operation_is_outside_root_uri_writes_nothing(c):
    ops = [
        {"uri": "viking://resources/batch/one.md", "content": "one"},
        {"uri": "viking://resources/elsewhere/x.md", "content": "x"},
    ]
    assert_invalid(c.batch({"root_uri": "viking://resources/batch", "operations": ops}), "operations")
    assert_nothing_written(c)


@pytest.mark.parametrize("operations", [[], None, "ops", [None], [[]], {"uri": DOC, "content": "x"}])
def test_batch_rejects_bad_operations(c, operations):
    assert_invalid(c.batch({"operations": operations}), "operations")


# fs ---------------------------------------------------------------------------------------------------------


def test_rm_of_a_non_empty_directory_without_recursive_conflicts(c):
    c.write("viking://resources/docs/a.md")
    error = assert_error(c.delete("/api/v1/fs", uri="viking://resources/docs"), 409, "CONFLICT")
    assert error["details"]["uri"] == "viking://resources/docs"
    assert c.exists("viking://resources/docs/a.md")


def test_rm_of_a_missing_node_is_not_found(c):
    assert_error(c.delete("/api/v1/fs", uri="viking://resources/ghost.md"), 404, "NOT_FOUND")


@pytest.mark.parametrize("uri", ["viking://resources", "viking://", "viking://~", "viking://resources/../x"])
def test_rm_rejects_roots_and_invalid_uris(c, uri):
    assert_error(c.delete("/api/v1/fs", uri=uri), 400, "INVALID_URI")


def test_rm_rejects_a_bad_recursive_flag(c):
    assert_invalid(c.delete("/api/v1/fs", uri=DOC, recursive="perhaps"), "recursive")


@pytest.mark.parametrize(
    "route",
    [
        "/api/v1/content/read",
        "/api/v1/content/abstract",
        "/api/v1/content/overview",
        "/api/v1/fs/stat",
        "/api/v1/fs/ls",
        "/api/v1/fs/tree",
    ],
)
def test_read_routes_require_a_uri(c, route):
    assert_invalid(c.get(route), "uri")


@pytest.mark.parametrize("route", ["/api/v1/content/read", "/api/v1/fs/stat", "/api/v1/fs/ls"])
def test_read_routes_reject_unknown_parameters(c, route):
    assert_invalid(c.get(route, uri=DOC, colour="red"), "colour")


@pytest.mark.parametrize(
    "route", ["/api/v1/content/read", "/api/v1/content/abstract", "/api/v1/fs/stat", "/api/v1/fs/ls", "/api/v1/fs/tree"]
)
@pytest.mark.parametrize("uri", ["viking://nowhere", "viking://resources/../x", "http://x", "viking://user%2Fx"])
def test_read_routes_reject_invalid_uris(c, route, uri):
    assert_invalid_uri(c.get(route, uri=uri), uri)


@pytest.mark.parametrize("route", ["/api/v1/content/read", "/api/v1/fs/stat", "/api/v1/fs/ls"])
def test_read_routes_report_missing_nodes(c, route):
    error = assert_error(c.get(route, uri="viking://resources/ghost"), 404, "NOT_FOUND")
    assert error["details"]["resource"] == "viking://resources/ghost"


def test_read_of_a_directory_is_invalid(c):
    c.write(DOC)
    assert_invalid(c.get("/api/v1/content/read", uri="viking://resources/docs"), "uri")


def test_ls_of_a_file_is_invalid(c):
    c.write(DOC)
    assert_invalid(c.get("/api/v1/fs/ls", uri=DOC), "uri")


@pytest.mark.parametrize(
    "params, field",
    [({"offset": -1}, "offset"), ({"offset": "x"}, "offset"), ({"limit": -2}, "limit"), ({"raw": "x"}, "raw")],
)
def test_read_rejects_bad_paging(c, params, field):
    c.write(DOC)
    assert_invalid(c.get("/api/v1/content/read", uri=DOC, **params), field)


@pytest.mark.parametrize(
    "params, field",
    [
        ({"offset": -1}, "offset"),
        ({"offset": 10**30}, "offset"),
        ({"offset": 2**63}, "offset"),
        ({"node_limit": 0}, "node_limit"),
        ({"node_limit": 10**6}, "node_limit"),
        ({"limit": 0}, "limit"),
        ({"recursive": "perhaps"}, "recursive"),
        ({"abs_limit": -2}, "abs_limit"),
    ],
)
def test_ls_rejects_bad_paging(c, params, field):
    c.write(DOC)
    assert_invalid(c.get("/api/v1/fs/ls", uri="viking://resources", **params), field)


@pytest.mark.parametrize("level_limit", [0, 33, "deep"])
def test_tree_rejects_bad_level_limit(c, level_limit):
    assert_invalid(c.get("/api/v1/fs/tree", uri="viking://resources", level_limit=level_limit), "level_limit")


# routing ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/nope",
        "/api/v1/search/finder",
        "/api/v2/search/find",
        "/nothing",
        "/api/v1/tasks/not-a-uuid",
        "/api/v1/content/read/extra",
    ],
)
def test_unknown_route_is_a_not_found_envelope(c, path):
    assert_error(c.get(path), 404, "NOT_FOUND")


def test_unknown_task_is_not_found(c):
    assert_error(c.get("/api/v1/tasks/00000000-0000-4000-8000-000000000000"), 404, "NOT_FOUND")


@pytest.mark.parametrize(
    "method, path",
    [
        ("get", FIND),
        ("put", FIND),
        ("delete", FIND),
        ("get", WRITE),
        ("patch", WRITE),
        ("get", BATCH),
        ("post", "/api/v1/fs/ls"),
        ("post", "/api/v1/fs/stat"),
        ("put", "/api/v1/fs"),
        ("get", "/api/v1/fs/mkdir"),
        ("delete", "/api/v1/content/read"),
    ],
)
def test_wrong_method_is_a_405_envelope(c, method, path):
    response = getattr(c.client, method)(path)
    error = assert_error(response, 405, "METHOD_NOT_ALLOWED")
    assert method.upper() in error["message"] and method.upper() not in response.headers["Allow"]


# never a 500 ------------------------------------------------------------------------------------------------

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30)
    | st.sampled_from(["viking://resources", "viking://~/memories", "7d", "memory", "file"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6,
)
FIND_FIELDS = [
    "query",
    "target_uri",
    "context_type",
    "limit",
    "node_limit",
    "score_threshold",
    "filter",
    "tags",
    "since",
    "until",
    "time_field",
    "level",
    "read_content",
]
WRITE_FIELDS = ["uri", "content", "mode", "tags", "tag_mode", "timeout"]  # wait=true would poll: never here


def assert_handled(response):
    assert response.status_code < 500, response.content
    if response.status_code >= 400:
        assert_error(response, response.status_code, response.json()["error"]["code"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.dictionaries(st.sampled_from(FIND_FIELDS), JSON_VALUES, max_size=5))
def test_find_never_answers_500_to_any_json_object(c, body):
    assert_handled(c.post(FIND, {"query": "q", **body} if "query" not in body else body))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    body=st.dictionaries(st.sampled_from(WRITE_FIELDS), JSON_VALUES, max_size=5),
    uri=st.text(max_size=60).map(lambda s: "viking://" + s),
)
def test_write_never_answers_500_to_any_json_object(c, body, uri):
    with override_settings(OVSITE_MAX_CONTENT_BYTES=4096):
        assert_handled(c.post(WRITE, {"uri": uri, "content": "x", **body}))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    uri=st.text(max_size=60).map(lambda s: "viking://" + s) | st.text(max_size=40),
    route=st.sampled_from(
        [
            "/api/v1/content/read",
            "/api/v1/content/abstract",
            "/api/v1/content/overview",
            "/api/v1/fs/stat",
            "/api/v1/fs/ls",
            "/api/v1/fs/tree",
        ]
    ),
)
def test_read_routes_never_answer_500_to_any_uri(c, uri, route):
    assert_handled(c.get(route, uri=uri))
