"""Celery tasks of sessions (found by the worker's autodiscovery): the session commit."""

from celery import shared_task

from sessions_app.commit import run_commit


@shared_task(acks_late=True)
def commit_task(commit_id: str) -> str:
    return run_commit(commit_id=commit_id)
