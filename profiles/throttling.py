"""Rate limiting per API key (DRF throttling): the operator sets the rate in the admin's retrieval settings. The
REST views and the MCP tools count against the same counter of a key, so switching transport doubles no budget."""

from types import SimpleNamespace

from rest_framework.throttling import SimpleRateThrottle

from core.models import hash_key
from profiles.selectors import current_settings


class ApiKeyRateThrottle(SimpleRateThrottle):
    """`api_rate_limit_per_minute` requests per minute per presented key, counted in the default cache (shared by
    every worker and web node: see `CACHES`). 0 turns it off; callers without a key (dev mode) are not counted."""

    scope = "api_key"

    def __init__(self):
        pass  # the rate is read per request in `allow_request`, so an operator's change applies at once

    def allow_request(self, request, view):
        if not request.auth:  # before the settings read: keyless dev-mode requests pay nothing
            return True
        settings_row = current_settings()
        # The views take the row from the request: one settings read per request, not one here and one there.
        request.retrieval_settings = settings_row
        per_minute = settings_row.api_rate_limit_per_minute
        if not per_minute:
            return True
        self.rate = f"{per_minute}/min"
        self.num_requests, self.duration = self.parse_rate(self.rate)
        return super().allow_request(request, view)

    def get_cache_key(self, request, view):
        # The key's digest, never the key itself: cache rows are not secrets.
        return self.cache_format % {"scope": self.scope, "ident": hash_key(request.auth)}


def admit_key(key: str | None) -> float | None:
    """For calls outside DRF (the MCP tools): None when a call with this key may go ahead (and is counted), else the
    seconds until it may. The REST throttle itself, on the same cache row of the key."""
    throttle = ApiKeyRateThrottle()
    if throttle.allow_request(SimpleNamespace(auth=key), None):
        return None
    return throttle.wait()
