"""Fail fast on a stuck database: statement_timeout per kind of process, TCP keepalives, and a statement cancelled
by the timeout answered 503 UNAVAILABLE in the envelope, never a 500. The stuck statement is a real route's query
waiting on a lock that another connection holds."""

import subprocess
import sys
import time
from contextlib import contextmanager

import httpx
import psycopg
import pytest
from django.conf import settings
from django.db import connection

from core.db_session import use_statement_timeout
from retrieval.models import Context, ProcessingTask
from sessions_app.models import Session
from tests.live import ROOT, child_env, database_env, start_celery_worker, start_ovsite, start_redis, wait_until

pytestmark = pytest.mark.timeout(300)
TIMEOUT_MS = 500
NOTE = "viking://resources/notes/stuck.md"


def show(name: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute(f"SHOW {name}")
        return cursor.fetchone()[0]


@contextmanager
def table_locked(table: str):
    """ACCESS EXCLUSIVE on `table`, held by a connection of its own until the block ends: every query on it waits."""
    db = connection.settings_dict
    with psycopg.connect(
        host=db["HOST"],
        port=db.get("PORT") or None,
        dbname=db["NAME"],
        user=db["USER"],
        password=db.get("PASSWORD") or None,
    ) as holder:
        holder.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
        try:
            yield
        finally:
            holder.rollback()


@pytest.fixture
def lowered_timeout(seeded):
    """This process's connections with a statement timeout of TIMEOUT_MS, as settings would give a web node."""
    kept = settings.DATABASES["default"]["OPTIONS"]["options"]
    use_statement_timeout(TIMEOUT_MS)
    yield
    settings.DATABASES["default"]["OPTIONS"]["options"] = kept
    connection.close()


def test_web_connections_have_the_default_statement_timeout_and_keepalives(db):
    assert settings.DB_STATEMENT_TIMEOUT_MS == 30000 and show("statement_timeout") == "30s"
    parameters = connection.connection.info.get_parameters()
    assert {
        k: parameters.get(k) for k in ("keepalives", "keepalives_idle", "keepalives_interval", "keepalives_count")
    } == {"keepalives": "1", "keepalives_idle": "30", "keepalives_interval": "10", "keepalives_count": "3"}
    assert "hnsw.ef_search" in parameters["options"]  # the vector session settings are kept beside it


def test_a_celery_worker_applies_the_worker_statement_timeout(seeded, tmp_path):
    """The web's timeout is left at its 30 s default: only the worker's own can cancel the task's stuck query."""
    redis, broker_url = start_redis(tmp_path)
    env = child_env(**database_env(), CELERY_BROKER_URL=broker_url, OVSITE_DB_WORKER_STATEMENT_TIMEOUT_MS=TIMEOUT_MS)
    started = [redis]
    try:
        web, url = start_ovsite(tmp_path, env, threads=2)
        started.append(web)
        response = httpx.post(url + "/api/v1/content/write", json={"uri": NOTE, "content": "Stuck."}, timeout=60)
        assert response.status_code == 200, response.text
        task = ProcessingTask.objects.get(id=response.json()["result"]["task_id"])
        with table_locked(Context._meta.db_table):  # before any worker runs: the task's first node query waits
            worker = start_celery_worker(tmp_path, env, "stuck")
            started.append(worker)
            wait_until(lambda: ProcessingTask.objects.get(id=task.id).status == "failed", 60, "the task", worker)
    finally:
        for process in reversed(started):
            process.stop()
    assert "canceling statement due to statement timeout" in ProcessingTask.objects.get(id=task.id).error


def test_a_management_command_applies_the_command_statement_timeout():
    code = (
        "from django.db import connection; c = connection.cursor(); c.execute('SHOW statement_timeout'); "
        "print('timeout=' + c.fetchone()[0])"
    )
    for command_ms, shown in (("0", "0"), ("2000", "2s")):
        result = subprocess.run(
            [sys.executable, "manage.py", "shell", "-c", code],
            cwd=ROOT,
            timeout=120,
            capture_output=True,
            text=True,
            env=child_env(
                **database_env(),
                OVSITE_DB_STATEMENT_TIMEOUT_MS=TIMEOUT_MS,
                OVSITE_DB_COMMAND_STATEMENT_TIMEOUT_MS=command_ms,
            ),
        )
        assert f"timeout={shown}\n" in result.stdout, result.stdout + result.stderr


def assert_statement_cancelled(status: int, body: dict):
    assert status == 503, body
    assert body["status"] == "error" and body["error"]["code"] == "UNAVAILABLE", body
    assert body["error"]["details"] == {"service": "database", "reason": "statement_cancelled"}, body
    assert "statement timeout" in body["error"]["message"], body


def test_a_route_stuck_on_a_lock_answers_503_after_the_statement_timeout(seeded, tmp_path):
    env = child_env(**database_env(), OVSITE_DB_STATEMENT_TIMEOUT_MS=TIMEOUT_MS)
    web, url = start_ovsite(tmp_path, env, threads=2)
    try:
        with httpx.Client(base_url=url, timeout=30) as client:
            sessions = lambda: client.get("/api/v1/sessions")  # noqa: E731
            assert sessions().status_code == 200
            with table_locked(Session._meta.db_table):
                started = time.monotonic()
                stuck = sessions()
                waited = time.monotonic() - started
                ready = client.get("/ready")  # the server itself still answers
            assert_statement_cancelled(stuck.status_code, stuck.json())
            assert TIMEOUT_MS / 1000 <= waited < TIMEOUT_MS / 1000 + 5, waited
            assert ready.status_code == 200
            assert sessions().status_code == 200  # the lock gone, the same worker serves again
    finally:
        web.stop()


def test_a_view_outside_drf_stuck_on_a_lock_answers_the_503_envelope(lowered_timeout, operator):
    assert operator.get("/admin/").status_code == 200
    with table_locked("django_session"):
        response = operator.get("/admin/")
    assert response["Content-Type"] == "application/json"
    assert_statement_cancelled(response.status_code, response.json())
