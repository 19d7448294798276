"""The few domain exceptions every layer raises; `core.envelope` turns them into the HTTP error envelope."""


class OvsiteError(Exception):
    code = "INTERNAL"
    status = 500

    def __init__(self, message: str, details: dict | None = None):
        super().__init__(message)
        self.message = message
        self.details = details or {}


class InvalidArgument(OvsiteError):
    code, status = "INVALID_ARGUMENT", 422

    def __init__(self, message: str, *, loc: list | None = None, type_: str = "value_error", details=None):
        details = dict(details or {})
        details.setdefault("validation_errors", [{"loc": loc or [], "message": message, "type": type_}])
        super().__init__(message, details)


class MalformedBody(OvsiteError):
    """A body that is not text in its declared encoding: not a validation failure (422) but a broken request."""

    code, status = "INVALID_ARGUMENT", 400


class InvalidUri(OvsiteError):
    """`details`: the URI as sent and why; `loc` where the request held it (a list's field and index), `suggestion`
    the URI the client most likely meant, when there is one."""

    code, status = "INVALID_URI", 400

    def __init__(self, uri: str, reason: str, *, loc: list | None = None, suggestion: str | None = None):
        details = {"uri": uri, "reason": reason}
        if loc is not None:
            details["loc"] = loc
        if suggestion is not None:
            details["suggestion"] = suggestion
        super().__init__(f"invalid URI {uri!r}: {reason}", details)

    def at(self, *loc) -> "InvalidUri":
        """The same refusal, naming where in the request the URI stood."""
        return InvalidUri(
            self.details["uri"], self.details["reason"], loc=list(loc), suggestion=self.details.get("suggestion")
        )


class Unauthenticated(OvsiteError):
    code, status = "UNAUTHENTICATED", 401


class PermissionDenied(OvsiteError):
    code, status = "PERMISSION_DENIED", 403


class NotFound(OvsiteError):
    code, status = "NOT_FOUND", 404

    def __init__(self, resource: str, type_: str = "resource"):
        super().__init__(f"{type_} not found: {resource}", {"resource": resource, "type": type_})


class MethodNotAllowed(OvsiteError):
    """The route exists but not for this method; the answer's `Allow` header lists the methods it takes."""

    code, status = "METHOD_NOT_ALLOWED", 405


class Conflict(OvsiteError):
    code, status = "CONFLICT", 409


class PayloadTooLarge(OvsiteError):
    code, status = "RESOURCE_EXHAUSTED", 413


class UnsupportedMediaType(OvsiteError):
    """A body in a media type the route does not parse (JSON everywhere, multipart on the upload route)."""

    code, status = "UNSUPPORTED_MEDIA_TYPE", 415


class ResourceExhausted(OvsiteError):
    code, status = "RESOURCE_EXHAUSTED", 429


class Unavailable(OvsiteError):
    code, status = "UNAVAILABLE", 503

    def __init__(self, service: str, reason: str):
        super().__init__(f"{service} unavailable: {reason}", {"service": service, "reason": reason})
