"""Prometheus metrics (prometheus-client): requests per route, LLM calls and tokens; served at /metrics with the queue
gauges the composition root reads at scrape time (ovsite/exposition.py).

Under gunicorn with several workers each process counts on its own: set PROMETHEUS_MULTIPROC_DIR to an empty folder
(wiped before the server starts) and the counters go to files there that any worker's /metrics sums up
(prometheus-client's multiprocess mode: counters and histograms only, so a dead worker's files need no clean-up
hook).
"""

import logging
import time

from prometheus_client import Counter, Histogram

REQUESTS = Counter(
    "ovsite_http_requests",
    "HTTP requests answered, by route pattern, method and status.",
    ["route", "method", "status"],
)
LATENCY = Histogram(
    "ovsite_http_request_duration_seconds",
    "Time to answer an HTTP request, by route pattern.",
    ["route", "method"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
LLM_CALLS = Counter(
    "ovsite_llm_calls",
    "LLM calls, by kind (expansion, rewrite, summary, extraction), model and outcome (ok, timeout, error, invalid).",
    ["kind", "model", "outcome"],
)
LLM_TOKENS = Counter(
    "ovsite_llm_tokens",
    "LLM tokens the provider reported, by kind, model and direction (prompt, completion).",
    ["kind", "model", "direction"],
)

access_log = logging.getLogger("ovsite.access")

UNMATCHED_ROUTE = "<unmatched>"  # a 404 for no route: one label for all, so that random paths add no series
METHODS = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}  # any other method counts as "other"


def route_of(request) -> str:
    """The URL pattern that served the request (`api/v1/sessions/<str:session_id>`), never the raw path."""
    match = getattr(request, "resolver_match", None)
    return "/" + match.route if match is not None else UNMATCHED_ROUTE


class RequestMetricsMiddleware:
    """Counts and times each request by route, and writes its access line (logger `ovsite.access`, INFO)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        started = time.perf_counter()
        response = self.get_response(request)
        record_request(
            route=route_of(request),
            method=request.method,
            path=request.path,
            status=response.status_code,
            elapsed_s=time.perf_counter() - started,
        )
        return response


def record_request(*, route: str, method: str, path: str, status: int, elapsed_s: float) -> None:
    """Counts and times one answer, and writes its access line: an HTTP request, or an MCP tool call (route
    `mcp:<tool>`, status that of the REST answer it equals: 200, or the error envelope's)."""
    method_label = method if method in METHODS else "other"
    REQUESTS.labels(route, method_label, str(status)).inc()
    LATENCY.labels(route, method_label).observe(elapsed_s)
    access_log.info(
        "%s %s %s",
        method,
        path,
        status,
        extra={
            "method": method,
            "path": path,
            "route": route,
            "status": status,
            "duration_ms": round(elapsed_s * 1000, 2),
        },
    )


def record_llm_call(*, kind: str, model: str, outcome: str, prompt_tokens: int, completion_tokens: int) -> None:
    LLM_CALLS.labels(kind, model, outcome).inc()
    LLM_TOKENS.labels(kind, model, "prompt").inc(prompt_tokens)
    LLM_TOKENS.labels(kind, model, "completion").inc(completion_tokens)
