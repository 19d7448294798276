"""The HTTP envelope: `{"status": "ok", "result": …}` or `{"status": "error", "error": {code, message, details,
request_id}}`."""

import logging

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import InterfaceError, OperationalError
from django.http import Http404, JsonResponse
from django_guid import get_guid
from psycopg.errors import QueryCanceled
from rest_framework import exceptions as drf
from rest_framework.response import Response

from core.errors import MethodNotAllowed, OvsiteError, UnsupportedMediaType

log = logging.getLogger("ovsite")


class _ThenResponse(Response):
    """A response that runs its `after` jobs once it has been sent: the WSGI or ASGI server calls close() when the
    client has every byte. Each job handles its own errors."""

    def __init__(self, data, *, after: list, **kwargs):
        super().__init__(data, **kwargs)
        self._after = after

    def close(self):
        for job in self._after:
            job()
        super().close()  # then Django's request_finished, which may close the connection the jobs used


def ok(result, status: int = 200, headers: dict | None = None, after: list | None = None) -> Response:
    """The success envelope; `after` are jobs for once the response is sent (off the caller's latency)."""
    body = {"status": "ok", "result": result}
    if after:
        return _ThenResponse(body, after=after, status=status, headers=headers)
    return Response(body, status=status, headers=headers)


def error_body(code: str, message: str, details: dict | None = None, *, with_request_id: bool = True) -> dict:
    """The error envelope; an HTTP answer's carries its request's id (the `X-Request-ID` header, django-guid), which
    a client quotes and an operator finds the request's log lines by."""
    error = {"code": code, "message": message, "details": details or {}}
    if with_request_id:
        error["request_id"] = get_guid()
    return {"status": "error", "error": error}


def validation_errors(detail, loc=()) -> list[dict]:
    """Flattens DRF's nested error detail into `[{loc, message, type}]`."""
    if isinstance(detail, dict):
        return [e for key, sub in detail.items() for e in validation_errors(sub, (*loc, key))]
    if isinstance(detail, list):
        # A list of messages belongs to its field; a list of objects (list items) adds the index to the path.
        return [
            e
            for i, sub in enumerate(detail)
            for e in validation_errors(sub, loc if isinstance(sub, str) else (*loc, i))
        ]
    return [{"loc": list(loc), "message": str(detail), "type": getattr(detail, "code", "invalid")}]


def _classify(exc) -> tuple[int, str, str, dict]:
    if isinstance(exc, OvsiteError):
        return exc.status, exc.code, exc.message, exc.details
    if isinstance(exc, drf.ValidationError):
        errors = validation_errors(exc.detail)
        first = errors[0] if errors else {"loc": [], "message": "invalid request"}
        where = ".".join(str(p) for p in first["loc"])
        message = f"{where}: {first['message']}" if where else first["message"]
        return 422, "INVALID_ARGUMENT", message, {"validation_errors": errors}
    if isinstance(exc, drf.ParseError):
        message = f"malformed request body: {exc.detail}"
        return (
            422,
            "INVALID_ARGUMENT",
            message,
            {"validation_errors": [{"loc": ["body"], "message": str(exc.detail), "type": "parse_error"}]},
        )
    if isinstance(exc, (drf.NotAuthenticated, drf.AuthenticationFailed)):
        return 401, "UNAUTHENTICATED", str(exc.detail), {}
    if isinstance(exc, drf.PermissionDenied):
        return 403, "PERMISSION_DENIED", str(exc.detail), {}
    if isinstance(exc, (drf.NotFound, Http404)):
        return 404, "NOT_FOUND", "not found", {}
    if isinstance(exc, drf.MethodNotAllowed):
        return MethodNotAllowed.status, MethodNotAllowed.code, str(exc.detail), {}
    if isinstance(exc, drf.UnsupportedMediaType):
        return UnsupportedMediaType.status, UnsupportedMediaType.code, str(exc.detail), {}
    if isinstance(exc, drf.Throttled):
        return 429, "RESOURCE_EXHAUSTED", str(exc.detail), {}
    if isinstance(exc, RequestDataTooBig):  # Django's own check, on the fields of a multipart body
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        return 413, "RESOURCE_EXHAUSTED", f"request body exceeds {limit} bytes", {"limit_bytes": limit}
    if isinstance(exc, OperationalError) and isinstance(exc.__cause__, QueryCanceled):
        # statement_timeout (settings.py) on a stuck database or a lock wait: the database is there but not
        # answering in time, which the client may retry as any 503
        log.warning("database statement cancelled: %s", exc)
        return (
            503,
            "UNAVAILABLE",
            f"database statement cancelled: {exc.__cause__.diag.message_primary}",
            {"service": "database", "reason": "statement_cancelled"},
        )
    if isinstance(exc, (OperationalError, InterfaceError)):
        log.warning("database unavailable: %s", exc)
        return 503, "UNAVAILABLE", "database unavailable", {"service": "database"}
    if isinstance(exc, drf.APIException):
        return exc.status_code, "INTERNAL" if exc.status_code >= 500 else "INVALID_ARGUMENT", str(exc.detail), {}
    log.exception("unhandled error", exc_info=exc)
    return 500, "INTERNAL", "internal error", {}


def error_envelope(exc, *, with_request_id: bool = True) -> tuple[int, dict]:
    """The HTTP status and the error body of an exception: the one place where errors become the envelope (used
    by DRF's handler below and by the MCP endpoint)."""
    status, code, message, details = _classify(exc)
    return status, error_body(code, message, details, with_request_id=with_request_id)


def exception_handler(exc, context):
    """DRF's exception handler."""
    status, body = error_envelope(exc)
    headers = {}
    if isinstance(exc, drf.Throttled) and exc.wait:
        headers["Retry-After"] = str(int(exc.wait))
    if status == 401:  # RFC 9110 §11.6.1: a 401 names the scheme to authenticate with, as /mcp's does
        headers["WWW-Authenticate"] = "Bearer"
    # A 405's Allow header (RFC 9110 §15.5.6) is DRF's: it adds the view's methods to every answer.
    return Response(body, status=status, headers=headers)


class DatabaseErrorMiddleware:
    """A view outside DRF (the admin, the dashboards) that meets a database error answers as the API does, with the
    503 UNAVAILABLE envelope, not Django's 500."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        if isinstance(exception, (OperationalError, InterfaceError)):
            status, body = error_envelope(exception)
            return JsonResponse(body, status=status)
        return None


def django_not_found(request, exception=None):
    return JsonResponse(error_body("NOT_FOUND", f"no route for {request.path}"), status=404)


def django_server_error(request):
    return JsonResponse(error_body("INTERNAL", "internal error"), status=500)


def django_bad_request(request, exception=None):
    return JsonResponse(error_body("INVALID_ARGUMENT", "bad request"), status=400)
