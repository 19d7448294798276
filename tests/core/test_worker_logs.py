"""A Celery worker logs as the web does: Django's LOGGING, one JSON object per line, each line logged inside a task
with its task_id and task_name, and the request_id of the request that queued the task. A real worker on a real
Redis, fed by ovsite under gunicorn."""

import json
import re

import httpx
import pytest

from retrieval.models import ProcessingTask
from tests.fake_openai import FakeOpenAI
from tests.live import child_env, database_env, start_celery_worker, start_ovsite, start_redis, wait_until

pytestmark = pytest.mark.timeout(300)
REQUEST_ID = "5d2c7e9a41b04f6e8a3c1b7d9e0f2a64"
NOTE = "viking://resources/notes/logs.md"
TASK_NAME = "retrieval.tasks.process_task"


@pytest.fixture
def failing_embedder():
    server = FakeOpenAI().start()
    server.script.mode, server.script.status = "error", 500  # the task then logs its own warning
    yield server
    server.stop()


def test_worker_log_lines_are_json_with_the_task_and_the_queueing_request(seeded, tmp_path, failing_embedder):
    redis, broker_url = start_redis(tmp_path)
    env = child_env(
        **database_env(),
        CELERY_BROKER_URL=broker_url,
        EMBEDDING_URL=failing_embedder.url,
        EMBEDDING_MODEL="fake-embedding",
        EMBEDDING_TIMEOUT_S=10,
        OVSITE_LOG_LEVEL="INFO",
    )
    started = [redis]
    try:
        web, url = start_ovsite(tmp_path, env, threads=2)
        started.append(web)
        worker = start_celery_worker(tmp_path, env, "logs")
        started.append(worker)
        response = httpx.post(
            url + "/api/v1/content/write",
            json={"uri": NOTE, "content": "Log lines as JSON."},
            headers={"X-Request-ID": REQUEST_ID},
            timeout=60,
        )
        assert response.status_code == 200, response.text
        task_id = response.json()["result"]["task_id"]
        wait_until(lambda: ProcessingTask.objects.get(id=task_id).status == "failed", 60, "the task", worker)
        wait_until(lambda: "succeeded" in worker.tail(100_000), 10, "the task's last line", worker)
    finally:
        for process in reversed(started):
            process.stop()

    text = worker.log.read_text()
    # Celery's own format ("[2026-12-03 10:00:00,000: INFO/MainProcess] ...") is gone: its loggers are Django's.
    assert not re.search(r"^\[\d{4}-\d\d-\d\d [^]]*: (DEBUG|INFO|WARNING|ERROR)/", text, re.M), text[-3000:]
    lines = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    assert any(line["logger"].startswith("celery") and line["message"].endswith("ready.") for line in lines), lines
    in_task = [line for line in lines if line.get("task_id")]
    warning = next(line for line in in_task if line["logger"] == "retrieval.tasks")
    assert warning["level"] == "WARNING" and "embedding failed" in warning["message"], warning
    succeeded = next(line for line in in_task if line["logger"] == "celery.app.trace")
    assert "succeeded" in succeeded["message"], succeeded
    message_id = re.search(rf"{re.escape(TASK_NAME)}\[([0-9a-f-]+)\] received", text).group(1)
    for line in (warning, succeeded):
        assert (line["task_id"], line["task_name"], line["request_id"]) == (message_id, TASK_NAME, REQUEST_ID), line
