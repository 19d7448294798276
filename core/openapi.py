"""The OpenAPI description served at /api/schema/ (drf-spectacular) and read at /api/docs/ (Swagger UI): what each
route takes and answers.

Views declare their request serializer and result shape with `operation(...)`; this module adds what every route
shares: the success envelope, the one `ErrorEnvelope` component that every error status refers to, the API-key
schemes, strict request bodies (a `StrictSerializer` refuses unknown fields, so its schema says
`additionalProperties: false`), and what a reader navigates by: a tag per surface (derived from the route), and
an operationId and one-line summary per operation (`OPERATIONS`), with the search surfaces' examples
(core/openapi_examples.py).
"""

import copy
from http import HTTPStatus

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.settings import spectacular_settings
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema

from core.api import StrictSerializer
from core.openapi_examples import EXAMPLES

# The codes of core.errors' exceptions, onto which core.envelope also maps DRF's and Django's errors.
ERROR_CODES = (
    "INVALID_ARGUMENT",
    "INVALID_URI",
    "UNAUTHENTICATED",
    "PERMISSION_DENIED",
    "NOT_FOUND",
    "METHOD_NOT_ALLOWED",
    "CONFLICT",
    "UNSUPPORTED_MEDIA_TYPE",
    "RESOURCE_EXHAUSTED",
    "UNAVAILABLE",
    "INTERNAL",
)
# Every route may answer these (core.envelope): auth, validation, limits, throttling and the database.
COMMON_ERRORS = (401, 403, 405, 413, 415, 422, 429, 503)

OBJECT = {"type": "object"}
STRING = {"type": "string"}
STRINGS = {"type": "array", "items": STRING}
INTEGER = {"type": "integer"}
BOOLEAN = {"type": "boolean"}
TIMESTAMP = {"type": "string", "format": "date-time"}

ERROR_ENVELOPE = {
    "type": "object",
    "description": "Every error answer: `error.code` is one of a fixed list, `error.details` says more where there "
    "is more to say (a 422's `validation_errors`: `[{loc, message, type}]`).",
    "required": ["status", "error"],
    "additionalProperties": False,
    "properties": {
        "status": {"type": "string", "enum": ["error"]},
        "error": {
            "type": "object",
            "required": ["code", "message", "details", "request_id"],
            "additionalProperties": False,
            "properties": {
                "code": {"type": "string", "enum": list(ERROR_CODES)},
                "message": STRING,
                "details": OBJECT,
                "request_id": {**STRING, "description": "the request's id, as in the X-Request-ID response header"},
            },
        },
    },
    "example": {
        "status": "error",
        "error": {
            "code": "INVALID_ARGUMENT",
            "message": "limit: Ensure this value is less than or equal to 1000.",
            "details": {
                "validation_errors": [
                    {
                        "loc": ["limit"],
                        "message": "Ensure this value is less than or equal to 1000.",
                        "type": "max_value",
                    }
                ]
            },
            "request_id": "3f8e1c2a9b7d4e6f8a0b1c2d3e4f5a6b",
        },
    },
}
ERROR_ENVELOPE_NAME = "ErrorEnvelope"
# What each error status means on these routes (the reader's first question in the reference); any other status
# a view declares is described by its HTTP reason phrase.
ERROR_MEANINGS = {
    400: "malformed request: a body that is not UTF-8, or an invalid viking:// URI",
    401: "no API key where one is required, or an unknown or revoked one",
    403: "the key may not do this (the admin API takes the root key), or its account does not exist",
    404: "no such node, session, task, account or user",
    405: "method not allowed: the Allow header lists the route's methods",
    409: "conflicts with what exists (it exists already, or a file where a directory is meant)",
    413: "the request body is larger than the server takes",
    415: "a body in a media type the route does not read",
    422: "invalid arguments: details.validation_errors lists each one",
    429: "rate limited: retry after the Retry-After header's seconds",
    503: "a service it needs is unavailable (the database; for /ready, the failed checks): retry later",
}


def obj(required: dict, optional: dict | None = None, *, closed: bool = True) -> dict:
    """An object schema whose `required` properties are always present."""
    schema = {"type": "object", "required": list(required), "properties": {**required, **(optional or {})}}
    if closed:
        schema["additionalProperties"] = False
    return schema


def array(items: dict) -> dict:
    return {"type": "array", "items": items}


def envelope(result: dict, **extra: dict) -> dict:
    return obj({"status": {"type": "string", "enum": ["ok"]}, "result": result, **extra})


def operation(
    *,
    request=None,
    params=None,
    result: dict = OBJECT,
    response: dict | None = None,
    errors: tuple[int, ...] = (),
    common: tuple[int, ...] = COMMON_ERRORS,
    path_params: tuple[OpenApiParameter, ...] = (),
    **kwargs,
):
    """`extend_schema` for one ovsite route: its JSON request serializer (or a `{media type: schema}` map) or query
    serializer, its `result` inside the envelope (or a whole `response` body), and the error statuses it answers
    beyond the `common` ones (none for the unauthenticated probes)."""
    responses = {200: OpenApiResponse(response or envelope(result), description="OK")}
    # A JSON body that is not UTF-8 is 400 (core.parsers) on every route that reads one.
    body_errors = (400,) if request is not None else ()
    for status in sorted({*common, *errors, *body_errors}):
        description = ERROR_MEANINGS.get(status) or HTTPStatus(status).phrase
        ref = {"$ref": f"#/components/schemas/{ERROR_ENVELOPE_NAME}"}
        responses[status] = OpenApiResponse(ref, description=description)
    parameters = [*path_params, *([params] if params is not None else [])]
    if request is not None and not isinstance(request, dict):
        request = {"application/json": request}
    return extend_schema(request=request, parameters=parameters or None, responses=responses, **kwargs)


def path_parameter(name: str, pattern: str, max_length: int, description: str) -> OpenApiParameter:
    schema = {"type": "string", "pattern": pattern, "minLength": 1, "maxLength": max_length}
    return OpenApiParameter(name, schema, OpenApiParameter.PATH, description=description)


API_PREFIX = "/api/v1/"
# The surfaces, in the reference's order: an operation's tag is its route's first segment below /api/v1/ (or below
# / for the probes), through TAG_OF where a segment belongs to another surface.
TAGS = {
    "search": "Retrieval: ranked hits (`find`), an assembled, token-budgeted context block (`search` in mode "
    "`context`, and its preset `recall`), or the block a session starts with (`search` in mode `bootstrap`).",
    "sessions": "Conversation sessions: messages in, a budgeted context window out; a commit archives the messages "
    "and extracts memories from them.",
    "content": "One node's text by viking:// URI: read its content, abstract or overview; write files.",
    "fs": "The viking:// tree: list, walk, stat, make directories, remove.",
    "resources": "Files added as resources: upload the file, then add it.",
    "skills": "Skills: list them, add one from JSON or an uploaded file.",
    "system": "Liveness, readiness, the caller's processing queue and its tasks.",
    "admin": "Accounts, their users and the users' API keys; takes the root key.",
}
TAG_OF = {"tasks": "system", "health": "system", "ready": "system"}

# (method, path) → (operationId, summary): the names a client generator and a reader see. Every operation has an
# entry (tests/core/test_schema_quality.py names one without); an id is the surface and the action, stable once
# published.
OPERATIONS = {
    ("POST", "/api/v1/search/find"): ("search_find", "Ranked hits for a query: memories, resources and skills"),
    ("POST", "/api/v1/search/search"): (
        "search_search",
        "Ranked hits (mode list), an assembled context block (context) or a session's start block (bootstrap)",
    ),
    ("POST", "/api/v1/search/recall"): (
        "search_recall",
        "A context block for a query, with the operator's recall defaults (a preset of search in mode context)",
    ),
    ("GET", "/api/v1/sessions"): ("sessions_list", "List the caller's sessions"),
    ("POST", "/api/v1/sessions"): ("sessions_create", "Create a session"),
    ("GET", "/api/v1/sessions/{session_id}"): ("sessions_get", "Open a session (auto_create=true creates it)"),
    ("DELETE", "/api/v1/sessions/{session_id}"): ("sessions_delete", "Delete a session and its messages"),
    ("POST", "/api/v1/sessions/{session_id}/messages"): ("sessions_add_message", "Append a message to a session"),
    ("POST", "/api/v1/sessions/{session_id}/messages/batch"): (
        "sessions_add_messages",
        "Append several messages to a session in one request",
    ),
    ("GET", "/api/v1/sessions/{session_id}/context"): (
        "sessions_context",
        "A session's archive overview and latest messages within a token budget",
    ),
    ("POST", "/api/v1/sessions/{session_id}/commit"): (
        "sessions_commit",
        "Archive a session's messages and extract memories from them",
    ),
    ("GET", "/api/v1/content/read"): ("content_read", "Read a file's content, whole or a range of lines"),
    ("GET", "/api/v1/content/abstract"): ("content_abstract", "Read a node's abstract"),
    ("GET", "/api/v1/content/overview"): ("content_overview", "Read a directory's overview (a file's abstract)"),
    ("POST", "/api/v1/content/write"): ("content_write", "Write a file; it is embedded in the background"),
    ("POST", "/api/v1/content/batch-write"): ("content_batch_write", "Write several files as one task"),
    ("GET", "/api/v1/fs/ls"): ("fs_ls", "List a directory"),
    ("GET", "/api/v1/fs/tree"): ("fs_tree", "List a directory's subtree, to a depth"),
    ("GET", "/api/v1/fs/stat"): ("fs_stat", "A node's metadata and processing state"),
    ("POST", "/api/v1/fs/mkdir"): ("fs_mkdir", "Make a directory"),
    ("DELETE", "/api/v1/fs"): ("fs_remove", "Remove a node (a directory and what it holds with recursive=true)"),
    ("POST", "/api/v1/resources/temp_upload"): (
        "resources_temp_upload",
        "Upload a file, for resources_add or skills_add to take",
    ),
    ("POST", "/api/v1/resources"): ("resources_add", "Add an uploaded file as a resource"),
    ("GET", "/api/v1/skills"): ("skills_list", "List skills"),
    ("POST", "/api/v1/skills"): ("skills_add", "Add a skill, from JSON or an uploaded file"),
    ("GET", "/api/v1/system/status"): ("system_status", "The caller's processing queue, and the embedder in use"),
    ("POST", "/api/v1/system/wait"): ("system_wait", "Wait until the caller's queued processing is done, or a timeout"),
    ("GET", "/api/v1/tasks/{task_id}"): ("tasks_get", "A background task's state"),
    ("GET", "/health"): ("health", "Liveness: the process answers"),
    ("GET", "/ready"): ("ready", "Readiness: database, migrations, embedder, stored vectors, broker and workers"),
    ("GET", "/api/v1/admin/accounts"): ("admin_accounts_list", "List the accounts"),
    ("POST", "/api/v1/admin/accounts"): (
        "admin_accounts_create",
        "Create an account and its first admin user; answers the admin's key",
    ),
    ("POST", "/api/v1/admin/accounts/{account}/users"): (
        "admin_users_create",
        "Add a user to an account; answers the user's key",
    ),
    ("POST", "/api/v1/admin/accounts/{account}/users/{user}/key"): (
        "admin_user_key_rotate",
        "Issue a user a new key, revoking the ones it had",
    ),
}


def surface_of(path: str) -> str:
    first = path.removeprefix(API_PREFIX).strip("/").split("/")[0]
    return TAG_OF.get(first, first)


def finish_schema(result, generator, request, public):
    """drf-spectacular's postprocessing hook (settings.SPECTACULAR_SETTINGS), after its enum hook: the
    ErrorEnvelope component the error responses refer to (added after that hook, which would move its `status`
    enum out into a component of its own), the surfaces' descriptions in their order, and OpenAPI 3.0's spelling
    of what views write in JSON Schema. What it returns shares no dict with a module's schema."""
    components = result.get("components", {})
    schemas = {**components.get("schemas", {}), ERROR_ENVELOPE_NAME: ERROR_ENVELOPE}
    result["components"] = {**components, "schemas": dict(sorted(schemas.items()))}
    used = {tag for operations in result["paths"].values() for op in operations.values() for tag in op.get("tags", ())}
    result["tags"] = [{"name": name, "description": text} for name, text in TAGS.items() if name in used]
    # OpenAPI 3.1's schemas are JSON Schema (an MCP tool's input schema is derived at 3.1): only 3.0 needs the rewrite.
    return _as_openapi_30(result) if spectacular_settings.OAS_VERSION.startswith("3.0") else copy.deepcopy(result)


def _as_openapi_30(node):
    """A copy of `node` in which a map whose keys are a fixed set (`propertyNames: {enum}`, JSON Schema that a 3.0
    schema object may not hold, as in the per-bucket `detail` of /search) is written as those properties and nothing
    else."""
    if isinstance(node, list):
        return [_as_openapi_30(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = {key: _as_openapi_30(value) for key, value in node.items()}
    names = node.get("propertyNames", {}).get("enum") if isinstance(node.get("propertyNames"), dict) else None
    if names is not None and isinstance(node.get("additionalProperties"), dict):
        del node["propertyNames"]
        value = node.pop("additionalProperties")
        node["properties"] = {name: copy.deepcopy(value) for name in names}
        node["additionalProperties"] = False
    return node


class OvsiteAutoSchema(AutoSchema):
    def get_tags(self):
        return [surface_of(self.path)]

    def get_operation_id(self):
        # An operation missing from OPERATIONS keeps drf-spectacular's generated id, which the schema test refuses.
        known = OPERATIONS.get((self.method, self.path))
        return known[0] if known else super().get_operation_id()

    def get_summary(self):
        known = OPERATIONS.get((self.method, self.path))
        return known[1] if known else None

    def get_examples(self):
        examples = EXAMPLES.get(self.get_operation_id(), ())
        return [
            *super().get_examples(),
            *(OpenApiExample(e.name, value=e.request, summary=e.summary, request_only=True) for e in examples),
            *(
                OpenApiExample(e.name, value=e.response, summary=e.summary, response_only=True, status_codes=[200])
                for e in examples
            ),
        ]

    def _map_basic_serializer(self, serializer, direction):
        schema = super()._map_basic_serializer(serializer, direction)
        if isinstance(serializer, StrictSerializer) or (
            isinstance(serializer, type) and issubclass(serializer, StrictSerializer)
        ):
            ignored = getattr(serializer, "accepted_ignored", ())
            schema.setdefault("properties", {}).update(
                {
                    name: {"description": "accepted for compatibility with OpenViking clients; has no effect"}
                    for name in ignored
                }
            )
            if direction == "request":
                schema["additionalProperties"] = False
        return schema


class ApiKeyScheme(OpenApiAuthenticationExtension):
    target_class = "core.auth.ApiKeyAuthentication"
    name = ["apiKey", "bearer"]

    def get_security_requirement(self, auto_schema):
        return [{"apiKey": []}, {"bearer": []}]

    def get_security_definition(self, auto_schema):
        return [{"type": "apiKey", "in": "header", "name": "X-API-Key"}, {"type": "http", "scheme": "bearer"}]
