"""Prometheus metrics (prometheus-client): requests per route, LLM calls and tokens, queue depth; served at /metrics.

Under gunicorn with several workers each process counts on its own: set PROMETHEUS_MULTIPROC_DIR to an empty folder
(wiped before the server starts) and the counters go to files there that any worker's /metrics sums up
(prometheus-client's multiprocess mode: counters and histograms only, so a dead worker's files need no clean-up
hook). Queue depth is read from the database and the broker at scrape time, the same whichever worker answers.
"""
import logging
import os
import time

from django.conf import settings
from django.db import DatabaseError
from django.db.models import Count
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import REGISTRY

REQUESTS = Counter("ovsite_http_requests", "HTTP requests answered, by route pattern, method and status.",
                   ["route", "method", "status"])
LATENCY = Histogram("ovsite_http_request_duration_seconds", "Time to answer an HTTP request, by route pattern.",
                    ["route", "method"], buckets=(.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30))
LLM_CALLS = Counter("ovsite_llm_calls", "LLM calls, by kind (expansion, rewrite, summary, extraction), model and "
                    "outcome (ok, timeout, error, invalid).", ["kind", "model", "outcome"])
LLM_TOKENS = Counter("ovsite_llm_tokens", "LLM tokens the provider reported, by kind, model and direction "
                     "(prompt, completion).", ["kind", "model", "direction"])

log = logging.getLogger(__name__)
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
        record_request(route=route_of(request), method=request.method, path=request.path,
                       status=response.status_code, elapsed_s=time.perf_counter() - started)
        return response


def record_request(*, route: str, method: str, path: str, status: int, elapsed_s: float) -> None:
    """Counts and times one answer, and writes its access line: an HTTP request, or an MCP tool call (route
    `mcp:<tool>`, status that of the REST answer it equals: 200, or the error envelope's)."""
    method_label = method if method in METHODS else "other"
    REQUESTS.labels(route, method_label, str(status)).inc()
    LATENCY.labels(route, method_label).observe(elapsed_s)
    access_log.info("%s %s %s", method, path, status,
                    extra={"method": method, "path": path, "route": route, "status": status,
                           "duration_ms": round(elapsed_s * 1000, 2)})


def record_llm_call(*, kind: str, model: str, outcome: str, prompt_tokens: int, completion_tokens: int) -> None:
    LLM_CALLS.labels(kind, model, outcome).inc()
    LLM_TOKENS.labels(kind, model, "prompt").inc(prompt_tokens)
    LLM_TOKENS.labels(kind, model, "completion").inc(completion_tokens)


class QueueDepthCollector:
    """Work waiting, read when scraped: nodes by state, processing tasks by status, and the broker's queue."""

    def describe(self):
        return []  # nothing to check for clashes at registration; collect() queries the database

    def collect(self):
        from retrieval.models import Context, ProcessingTask

        # A scrape while the database or the broker is down still serves the request counters: the gauges that
        # cannot be read are left out (a gap in the graph, not a false zero).
        try:
            node_counts = dict(Context.objects.values("state").annotate(n=Count("pk")).values_list("state", "n"))
            task_counts = dict(ProcessingTask.objects.filter(status__in=UNFINISHED).values("status")
                               .annotate(n=Count("pk")).values_list("status", "n"))
        except DatabaseError:
            log.warning("metrics: database unavailable, queue gauges left out")
        else:
            nodes = GaugeMetricFamily("ovsite_nodes", "Context nodes by processing state (pending: not yet "
                                      "embedded; failed: waiting for a retry).", labels=["state"])
            for state, _ in Context.STATE_CHOICES:
                nodes.add_metric([state], node_counts.get(state, 0))
            yield nodes
            tasks = GaugeMetricFamily("ovsite_processing_tasks", "Processing tasks not finished, by status.",
                                      labels=["status"])
            for status in UNFINISHED:
                tasks.add_metric([status], task_counts.get(status, 0))
            yield tasks
        try:
            depth = broker_queue_length()
        except Exception:  # any broker (kombu wraps its transports' errors differently)
            log.warning("metrics: broker unavailable, queue length left out", exc_info=True)
            depth = None
        if depth is not None:
            yield GaugeMetricFamily("ovsite_celery_queue_length", "Tasks in the Celery broker's default queue, not "
                                    "yet taken by a worker.", value=depth)


UNFINISHED = ("pending", "running")
QUEUE_DEPTH = QueueDepthCollector()
MULTIPROCESS = bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))
if not MULTIPROCESS:
    REGISTRY.register(QUEUE_DEPTH)


def broker_queue_length() -> int | None:
    """LLEN of Celery's queue on a Redis broker; None with another broker (eager mode has no queue)."""
    if settings.CELERY_TASK_ALWAYS_EAGER or not settings.CELERY_BROKER_URL.startswith("redis"):
        return None
    from ovsite.celery import app

    with app.connection_for_read() as connection:
        return connection.default_channel.client.llen(app.conf.task_default_queue)


def scrape() -> tuple[bytes, str]:
    """The exposition text and its content type: this process's registry, or every worker's files summed."""
    if MULTIPROCESS:
        registry = CollectorRegistry()
        MultiProcessCollector(registry)
        registry.register(QUEUE_DEPTH)
    else:
        registry = REGISTRY
    return generate_latest(registry), CONTENT_TYPE_LATEST
