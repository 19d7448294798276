"""Celery tasks of retrieval, each one call into its service: `process_task` runs writes, removals and retries
(retrieval/processing.py), `retry_failed_nodes` re-queues failed nodes (beat), `recount_tokens_task` follows a
change of the tokenizer family (retrieval/recount.py), `refresh_tenant_graphs` builds tenants' own HNSW graphs and
GINs (beat)."""

from celery import shared_task

from retrieval.processing import run_processing
from retrieval.recount import recount_when_stale
from retrieval.services import retry_failed
from retrieval.tenant_graphs import refresh as refresh_graphs


@shared_task(acks_late=True)
def process_task(task_id: str) -> str:
    return run_processing(task_id=task_id)


@shared_task
def retry_failed_nodes() -> int:
    return retry_failed()


# Named where it was first defined: a message queued before an upgrade still finds it.
@shared_task(acks_late=True, name="retrieval.recount.recount_tokens_task")
def recount_tokens_task() -> int | None:
    return recount_when_stale()


@shared_task
def refresh_tenant_graphs() -> int:
    """Builds the indexes of tenants that grew past OVSITE_TENANT_GRAPHS_FROM (beat, hourly); returns how many."""
    return len(refresh_graphs().create)
