"""Rate limiting per API key (DRF throttling): the operator sets the rate in the admin's retrieval settings. The
REST views and the MCP tools count against the same counter of a key, so switching transport doubles no budget."""

from datetime import timedelta
from types import SimpleNamespace

from django.core.cache import DEFAULT_CACHE_ALIAS, caches
from django.core.cache.backends.db import DatabaseCache
from django.db import connections, router
from django.utils import timezone
from rest_framework.throttling import SimpleRateThrottle

from core.models import hash_key
from profiles.selectors import current_settings

# The key's recent request times (epoch seconds, oldest first) as one row of the cache table, read, pruned, appended
# to and written back in one statement: the row lock of the upsert serializes concurrent requests of one key, and
# the commit does not wait for the WAL flush (a count lost in a crash admits a few more requests). Through the
# cache API the same count took six round trips, a COUNT(*) of the table and a synchronous commit per request
# (bench/RESULTS.md, request_path). A request over the rate is not recorded, as in DRF's SimpleRateThrottle.
_COUNT_SQL = """WITH relaxed AS (SELECT set_config('synchronous_commit', 'off', true))
INSERT INTO {table} AS kept (cache_key, value, expires)
SELECT %(key)s, ARRAY[%(now)s::float8]::text, %(expires)s FROM relaxed
ON CONFLICT (cache_key) DO UPDATE SET value = (
    SELECT CASE WHEN count(*) < %(limit)s THEN array_append(array_agg(t ORDER BY t), %(now)s::float8)
    ELSE array_agg(t ORDER BY t) END::text
    FROM unnest(kept.value::float8[]) AS t WHERE t > %(since)s
), expires = %(expires)s
RETURNING value"""


class ApiKeyRateThrottle(SimpleRateThrottle):
    """`api_rate_limit_per_minute` requests per minute per presented key, counted in the default cache (shared by
    every worker and web node: see `CACHES`): in its table by one statement when it is the database cache, through
    the cache API otherwise (Redis). 0 turns it off; callers without a key (dev mode) are not counted."""

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
        backend = caches[DEFAULT_CACHE_ALIAS]  # what DRF's `cache` (the default cache's proxy) stands for
        if isinstance(backend, DatabaseCache):
            return self._count_in_table(backend, hash_key(request.auth))
        return super().allow_request(request, view)

    def get_cache_key(self, request, view):
        # The key's digest, never the key itself: cache rows are not secrets.
        return self.cache_format % {"scope": self.scope, "ident": hash_key(request.auth)}

    def _count_in_table(self, backend: DatabaseCache, digest: str) -> bool:
        """DRF's sliding window on the database cache's table, in one statement (`_COUNT_SQL`). Its row is not a
        Django cache entry (its own key and format): only this reads it; the cache API's keys all begin with their
        version (":1:"), so never meet it."""
        self.now = self.timer()
        params = {
            "key": f"ovsite_rate:{digest}",
            "now": self.now,
            "since": self.now - self.duration,
            "limit": self.num_requests,
            "expires": timezone.now() + timedelta(seconds=self.duration),
        }
        connection = connections[router.db_for_write(backend.cache_model_class)]
        with connection.cursor() as cursor:
            cursor.execute(_COUNT_SQL.format(table=connection.ops.quote_name(backend._table)), params)
            times = [float(t) for t in cursor.fetchone()[0].strip("{}").split(",") if t]
        self.history = times[::-1]  # newest first, as DRF's `wait` reads it
        return bool(times) and times[-1] == self.now


def admit_key(key: str | None) -> float | None:
    """For calls outside DRF (the MCP tools): None when a call with this key may go ahead (and is counted), else the
    seconds until it may. The REST throttle itself, on the same cache row of the key."""
    throttle = ApiKeyRateThrottle()
    if throttle.allow_request(SimpleNamespace(auth=key), None):
        return None
    return throttle.wait()
