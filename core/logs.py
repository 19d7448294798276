"""Log record fields for Celery tasks, beside django-guid's `request_id` (settings.LOGGING)."""

import logging

from celery import current_task

# The message header that carries the id of the request that queued a task (ovsite/celery.py sets it).
REQUEST_ID_HEADER = "ovsite_request_id"


class CeleryTaskFields(logging.Filter):
    """Adds `task_id` and `task_name` to a record logged while a Celery task runs (in a worker, or eagerly inside a
    web request), and, when the record has no request id of its own (in a worker), the id of the request that
    queued the task: a write's log lines in the worker join the request's."""

    def filter(self, record: logging.LogRecord) -> bool:
        if current_task:
            request = current_task.request
            record.task_id, record.task_name = request.id, current_task.name
            if getattr(record, "request_id", None) is None:
                record.request_id = request.get(REQUEST_ID_HEADER)
        return True
