import os
from logging.config import dictConfig

from celery import Celery, signals

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ovsite.settings")

app = Celery("ovsite")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@signals.setup_logging.connect
def use_django_logging(**_):
    """A worker logs as the web does, through Django's LOGGING (one JSON object per line, with the task's id and
    name): Celery leaves logging alone when this signal has a receiver. Its `--loglevel` is then unused; the level
    is OVSITE_LOG_LEVEL's."""
    from django.conf import settings

    dictConfig(settings.LOGGING)


@signals.worker_init.connect
def use_worker_statement_timeout(**_):
    """Before the pool starts (its processes inherit it): tasks may run longer statements than a web request."""
    from django.conf import settings

    from core.db_session import use_statement_timeout

    use_statement_timeout(settings.DB_WORKER_STATEMENT_TIMEOUT_MS)


@signals.worker_init.connect
def prepare_before_the_pool(**_):
    """The embedder and the tokenizer loaded, and the embedder's dimension checked against the stored vectors',
    before the pool forks (ovsite.readiness.prepare_worker). Celery logs and swallows an exception from a signal's
    receiver, so the refusal is a SystemExit: the worker exits 1."""
    from django.core.exceptions import ImproperlyConfigured

    from ovsite.readiness import prepare_worker

    try:
        prepare_worker()
    except ImproperlyConfigured as exc:
        raise SystemExit(str(exc)) from exc


@signals.before_task_publish.connect
def pass_request_id(headers: dict, **_):
    """The id of the request that queues a task rides in the message, for the worker's log lines (core/logs.py)."""
    from django_guid import get_guid

    from core.logs import REQUEST_ID_HEADER

    if request_id := get_guid():
        headers[REQUEST_ID_HEADER] = request_id
