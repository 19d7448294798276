"""The OpenAPI description served at /api/schema/ (drf-spectacular): what each route takes and answers.

Views declare their request serializer and result shape with `operation(...)`; this module adds what every route
shares: the success envelope, the error envelope for each error status, the API-key schemes, and strict request
bodies (a `StrictSerializer` refuses unknown fields, so its schema says `additionalProperties: false`).
"""

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiParameter, extend_schema

from core.api import StrictSerializer

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
    responses = {200: response or envelope(result)}
    # A JSON body that is not UTF-8 is 400 (core.parsers) on every route that reads one.
    body_errors = (400,) if request is not None else ()
    for status in sorted({*common, *errors, *body_errors}):
        responses[status] = ERROR_ENVELOPE
    parameters = [*path_params, *([params] if params is not None else [])]
    if request is not None and not isinstance(request, dict):
        request = {"application/json": request}
    return extend_schema(request=request, parameters=parameters or None, responses=responses, **kwargs)


def path_parameter(name: str, pattern: str, max_length: int, description: str) -> OpenApiParameter:
    schema = {"type": "string", "pattern": pattern, "minLength": 1, "maxLength": max_length}
    return OpenApiParameter(name, schema, OpenApiParameter.PATH, description=description)


class OvsiteAutoSchema(AutoSchema):
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
