"""The served OpenAPI schema is one a person can read and a client generator can use (issue 26): a surface tag, a
readable unique operationId and a one-line summary on every operation, one ErrorEnvelope component that every
4xx/5xx response refers to, examples on the search surfaces that are real exchanges, and a valid OpenAPI 3.0
document. The reference page's own checks are in test_api_docs_browser.py."""

import json
import re

import pytest
from openapi_schema_validator import OAS30Validator
from openapi_spec_validator import validate as validate_spec

from core.openapi import ERROR_ENVELOPE, OPERATIONS, TAGS
from core.openapi_examples import CORPUS, EXAMPLES

ERROR_REF = {"$ref": "#/components/schemas/ErrorEnvelope"}
SEARCH_SURFACES = {
    ("POST", "/api/v1/search/find"): ["Hits"],
    ("POST", "/api/v1/search/search"): ["List", "Context", "Bootstrap"],
    ("POST", "/api/v1/search/recall"): ["Recall"],
}
# drf-spectacular's own ids: the path's words and DRF's action (`api_v1_search_find_create`, `health_retrieve`), a
# numeral suffix on a collision (`api_v1_sessions_retrieve_2`).
GENERATED_ID = re.compile(r"^api_v\d+_|_(retrieve|update|partial_update|destroy)$|_\d+$")
READABLE_ID = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$")


@pytest.fixture
def schema(client, db):
    response = client.get("/api/schema/", HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    return response.json()


def operations(schema):
    for path, methods in schema["paths"].items():
        for method, operation in methods.items():
            yield method.upper(), path, operation


def validator(schema, subschema) -> OAS30Validator:
    """Validates against `subschema` with the document's components in reach of its `$ref`s."""
    return OAS30Validator({**subschema, "components": schema["components"]})


def test_the_schema_is_a_valid_openapi_30_document(schema):
    validate_spec(schema)


def test_every_operation_has_an_entry_and_no_entry_is_stale(schema):
    served = {(method, path) for method, path, _ in operations(schema)}
    missing = sorted(served - set(OPERATIONS))
    assert not missing, f"operations with no (operationId, summary) entry in core.openapi.OPERATIONS: {missing}"
    assert not sorted(set(OPERATIONS) - served), "core.openapi.OPERATIONS names routes the schema no longer has"


def test_every_operation_has_a_readable_unique_operation_id(schema):
    ids = [(operation.get("operationId", ""), method, path) for method, path, operation in operations(schema)]
    generated = [(i, m, p) for i, m, p in ids if GENERATED_ID.search(i) or not READABLE_ID.match(i)]
    assert not generated, f"generated or unreadable operationIds: {generated}"
    counts = {}
    for operation_id, method, path in ids:
        counts.setdefault(operation_id, []).append(f"{method} {path}")
    assert not {i: where for i, where in counts.items() if len(where) > 1}


def test_every_operation_has_a_one_line_summary(schema):
    bad = [
        (method, path, operation.get("summary"))
        for method, path, operation in operations(schema)
        if not operation.get("summary", "").strip() or "\n" in operation["summary"]
    ]
    assert not bad, f"operations without a one-line summary: {bad}"


def test_every_operation_is_tagged_with_its_surface(schema):
    tags = {f"{method} {path}": operation.get("tags") for method, path, operation in operations(schema)}
    assert all(len(t) == 1 and t[0] in TAGS for t in tags.values()), tags
    assert tags["POST /api/v1/search/find"] == tags["POST /api/v1/search/recall"] == ["search"]
    assert tags["POST /api/v1/sessions/{session_id}/commit"] == ["sessions"]
    assert tags["DELETE /api/v1/fs"] == tags["GET /api/v1/fs/ls"] == ["fs"]
    assert tags["GET /health"] == tags["GET /ready"] == tags["GET /api/v1/tasks/{task_id}"] == ["system"]
    assert tags["POST /api/v1/admin/accounts/{account}/users"] == ["admin"]
    # The top-level list describes each surface, in the reference's order.
    assert [t["name"] for t in schema["tags"]] == list(TAGS)
    assert all(t["description"] for t in schema["tags"])


def test_every_error_response_refers_to_the_one_error_envelope(schema):
    wrong = []
    for method, path, operation in operations(schema):
        for status, response in operation["responses"].items():
            if int(status) >= 400:
                if response["content"] != {"application/json": {"schema": ERROR_REF}} or not response["description"]:
                    wrong.append((method, path, status))
    assert not wrong, f"error responses that do not refer to ErrorEnvelope (with a description): {wrong}"
    assert schema["components"]["schemas"]["ErrorEnvelope"] == json.loads(json.dumps(ERROR_ENVELOPE))
    # One component: no error envelope written out anywhere else in the document.
    inline = json.dumps({**schema, "components": {**schema["components"], "schemas": {}}})
    assert '"enum": ["error"]' not in inline


def test_the_error_envelope_is_what_an_error_answer_is(schema, api):
    """The component and its example against a real 422: core.envelope.error_body is the shape it describes."""
    status, body = api.post("/api/v1/search/find", {"query": "deploy", "limit": 1001})
    assert status == 422
    envelope = schema["components"]["schemas"]["ErrorEnvelope"]
    validator(schema, envelope).validate(body)
    example = envelope["example"]
    validator(schema, envelope).validate(example)
    assert body["error"]["request_id"] == api.last.headers["X-Request-ID"]
    assert {**body["error"], "request_id": ""} == {**example["error"], "request_id": ""}


def examples_of(schema, method: str, path: str) -> tuple[dict, dict]:
    operation = schema["paths"][path][method.lower()]
    requests = operation["requestBody"]["content"]["application/json"].get("examples", {})
    responses = operation["responses"]["200"]["content"]["application/json"].get("examples", {})
    return requests, responses


@pytest.mark.parametrize("method, path", list(SEARCH_SURFACES))
def test_the_search_surfaces_have_examples_that_fit_their_schemas(schema, method, path):
    requests, responses = examples_of(schema, method, path)
    assert list(requests) == list(responses) == SEARCH_SURFACES[method, path]
    operation = schema["paths"][path][method.lower()]
    request_schema = operation["requestBody"]["content"]["application/json"]["schema"]
    response_schema = operation["responses"]["200"]["content"]["application/json"]["schema"]
    for name in requests:
        assert requests[name]["summary"] and responses[name]["summary"]
        validator(schema, request_schema).validate(requests[name]["value"])
        validator(schema, response_schema).validate(responses[name]["value"])


def served(result: dict) -> list:
    """What an answer serves, without the scores (the embedder's last digits are the machine's)."""
    if "entries" in result:
        return [(e["uri"], e["category"], e["detail"]) for e in result["entries"]]
    return {bucket: [hit["uri"] for hit in result[bucket]] for bucket in ("memories", "resources", "skills")}


def test_each_search_example_is_what_the_server_answers_over_its_corpus(api):
    api.write_all(CORPUS)
    paths = {operation_id: path for (_, path), (operation_id, _) in OPERATIONS.items()}
    for operation_id, examples in EXAMPLES.items():
        for example in examples:
            status, body = api.post(paths[operation_id], example.request)
            assert status == 200, (operation_id, example.name, body)
            assert served(body["result"]) == served(example.response["result"]), (operation_id, example.name)
            if "entries" in body["result"]:
                assert set(example.response["result"]["stats"]) <= set(body["result"]["stats"])


@pytest.mark.parametrize("path", ["/api/schema/", "/api/docs/"])
def test_the_schema_and_its_reference_page_are_public(client, db, settings, path):
    settings.OVSITE_ROOT_API_KEY = "a-root-key-0123456789"  # out of dev mode: other routes need a key
    assert client.get(path).status_code == 200
    assert client.post("/api/v1/search/find", {"query": "x"}, content_type="application/json").status_code == 401
