"""The JSON request parser: DRF's, with the limits a body must meet before any view sees it."""

import json

from django.conf import settings
from rest_framework import parsers
from rest_framework.exceptions import ParseError
from rest_framework.utils.json import strict_constant

from core.errors import MalformedBody, PayloadTooLarge

# No ovsite request is nested this deep; a limit here keeps deeper bodies from exhausting the interpreter's
# recursion limit later (validation, NUL checks, rendering) instead of being refused up front.
MAX_JSON_DEPTH = 64


def _too_deep(value) -> bool:
    """Whether `value` nests lists and objects more than MAX_JSON_DEPTH levels (iterative: no recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth > MAX_JSON_DEPTH:
                return True
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return False


class JSONParser(parsers.JSONParser):
    """DRF reads the body as a stream, which skips Django's DATA_UPLOAD_MAX_MEMORY_SIZE check; it is enforced here
    (413), as are UTF-8 (400) and the nesting depth (422)."""

    def parse(self, stream, media_type=None, parser_context=None):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        request = (parser_context or {}).get("request")
        declared = request.META.get("CONTENT_LENGTH") if request is not None else None
        if declared and declared.isdigit() and int(declared) > limit:
            raise self._too_large(limit)
        raw = stream.read(limit + 1)
        if len(raw) > limit:
            raise self._too_large(limit)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MalformedBody(
                f"request body is not valid UTF-8 ({exc.reason} at byte {exc.start})", {"byte": exc.start}
            ) from None
        too_deep = ParseError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
        try:
            data = json.loads(text, parse_constant=strict_constant if self.strict else None)
        except RecursionError:
            raise too_deep from None
        except ValueError as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
        if _too_deep(data):
            raise too_deep
        return data

    @staticmethod
    def _too_large(limit: int) -> PayloadTooLarge:
        return PayloadTooLarge(f"request body exceeds {limit} bytes", {"limit_bytes": limit})
