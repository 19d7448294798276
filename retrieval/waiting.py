"""Waiting for background processing: `wait=true` on writes and `POST /api/v1/system/wait`."""

import time

from core.auth import Caller
from retrieval.selectors import visible_nodes, visible_tasks

POLL_INTERVAL_S = 0.05
DEFAULT_TIMEOUT_S = 120.0


def queue_status(*, caller: Caller) -> dict:
    nodes = visible_nodes(caller)
    return {
        "pending_tasks": visible_tasks(caller).filter(status__in=("pending", "running")).count(),
        "pending_nodes": nodes.filter(state="pending").count(),
        "failed_nodes": nodes.filter(state="failed").count(),
    }


def wait_for_tasks(*, caller: Caller, task_ids: list[str] | None, timeout_s: float | None) -> dict:
    """Polls until the given tasks (or all of the account's work) are finished, or the timeout passes."""
    deadline = time.monotonic() + (DEFAULT_TIMEOUT_S if timeout_s is None else timeout_s)
    tasks = visible_tasks(caller).filter(status__in=("pending", "running"))
    if task_ids is not None:
        tasks = tasks.filter(id__in=task_ids)
    while True:
        status = queue_status(caller=caller) if task_ids is None else {"pending_tasks": tasks.count()}
        idle = status["pending_tasks"] == 0 and status.get("pending_nodes", 0) == 0
        if idle or time.monotonic() >= deadline:
            status["done"] = idle
            return status
        time.sleep(POLL_INTERVAL_S)
