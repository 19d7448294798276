"""/metrics' exposition: the kernel's counters (core/metrics.py) plus gauges read at scrape time from the apps' tables
and the broker, summed over every worker's files in multiprocess mode."""

import logging
import os

from django.conf import settings
from django.db import DatabaseError
from django.db.models import Count
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import REGISTRY

log = logging.getLogger(__name__)


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
            task_counts = dict(
                ProcessingTask.objects.filter(status__in=UNFINISHED)
                .values("status")
                .annotate(n=Count("pk"))
                .values_list("status", "n")
            )
        except DatabaseError:
            log.warning("metrics: database unavailable, queue gauges left out")
        else:
            nodes = GaugeMetricFamily(
                "ovsite_nodes",
                "Context nodes by processing state (pending: not yet embedded; failed: waiting for a retry).",
                labels=["state"],
            )
            for state, _ in Context.STATE_CHOICES:
                nodes.add_metric([state], node_counts.get(state, 0))
            yield nodes
            tasks = GaugeMetricFamily(
                "ovsite_processing_tasks", "Processing tasks not finished, by status.", labels=["status"]
            )
            for status in UNFINISHED:
                tasks.add_metric([status], task_counts.get(status, 0))
            yield tasks
        try:
            depth = broker_queue_length()
        except Exception:  # any broker (kombu wraps its transports' errors differently)
            log.warning("metrics: broker unavailable, queue length left out", exc_info=True)
            depth = None
        if depth is not None:
            yield GaugeMetricFamily(
                "ovsite_celery_queue_length",
                "Tasks in the Celery broker's default queue, not yet taken by a worker.",
                value=depth,
            )


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
