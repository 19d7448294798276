"""Operations (issue 7 §8): /metrics in Prometheus' format, JSON logs with a request id, `check --deploy` clean.

The gunicorn test runs the deployed shape (two workers, PROMETHEUS_MULTIPROC_DIR) and reads the server's own log.
"""

import json
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from django.db import connection
from prometheus_client.parser import text_string_to_metric_families

from retrieval import llm
from retrieval.models import Context
from tests.live import ROOT, child_env, database_env, start_asgi, start_ovsite

REQUEST_ID = "0f8e6a5c2b7d4e1f9a3b6c8d0e2f4a61"


def samples(text: str) -> dict:
    """{(sample name, sorted labels): value} of one scrape."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(scrape: dict, name: str, **labels) -> float:
    return scrape.get((name, tuple(sorted(labels.items()))), 0.0)


def scrape_client(client) -> dict:
    response = client.get("/metrics")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/plain"), response
    return samples(response.content.decode())


def test_metrics_count_requests_by_route_pattern(api, client):
    before = scrape_client(client)
    api.write("viking://resources/notes/a.md", "Alpha.")
    status, _ = api.get("/api/v1/content/read", uri="viking://resources/notes/a.md")
    assert status == 200
    after = scrape_client(client)
    read = dict(name="ovsite_http_requests_total", route="/api/v1/content/read", method="GET", status="200")
    assert value(after, **read) == value(before, **read) + 1
    # The pattern, not the path: ids in paths make no new series.
    api.get("/api/v1/sessions/s-1")
    api.get("/api/v1/sessions/s-2")
    routes = {dict(labels)["route"] for name, labels in scrape_client(client) if name == "ovsite_http_requests_total"}
    assert "/api/v1/sessions/<str:session_id>" in routes and not any("s-1" in r for r in routes), routes
    latency = dict(name="ovsite_http_request_duration_seconds_count", route="/api/v1/content/read", method="GET")
    assert value(after, **latency) == value(before, **latency) + 1


def test_metrics_count_llm_calls_and_tokens_where_usage_is_recorded(seeded, client, fake_llm):
    before = scrape_client(client)
    completion = llm.complete(kind="expansion", messages=[{"role": "user", "content": "hi"}], timeout_s=5)
    assert completion.outcome == "ok"
    fake_llm.script.mode = "error"
    assert llm.complete(kind="rewrite", messages=[{"role": "user", "content": "hi"}], timeout_s=5).outcome == "error"
    after = scrape_client(client)
    prompt, completion_tokens = fake_llm.script.usage
    for name, labels, delta in [
        ("ovsite_llm_calls_total", dict(kind="expansion", model="fake-main", outcome="ok"), 1),
        ("ovsite_llm_calls_total", dict(kind="rewrite", model="fake-main", outcome="error"), 1),
        ("ovsite_llm_tokens_total", dict(kind="expansion", model="fake-main", direction="prompt"), prompt),
        (
            "ovsite_llm_tokens_total",
            dict(kind="expansion", model="fake-main", direction="completion"),
            completion_tokens,
        ),
    ]:
        assert value(after, name, **labels) == value(before, name, **labels) + delta, (name, labels)


def test_metrics_queue_depth_is_read_from_the_database(api, client):
    api.write("viking://resources/notes/b.md", "Beta.")
    Context.objects.filter(uri="viking://resources/notes/b.md").update(state="pending")
    scrape = scrape_client(client)
    for state in ("pending", "ready", "failed"):
        assert value(scrape, "ovsite_nodes", state=state) == Context.objects.filter(state=state).count()
    assert value(scrape, "ovsite_nodes", state="pending") >= 1
    assert ("ovsite_processing_tasks", (("status", "running"),)) in scrape
    assert not any(name == "ovsite_celery_queue_length" for name, _ in scrape)  # eager: no broker queue


def test_gunicorn_workers_sum_their_metrics_and_log_json_lines_with_the_request_id(seeded, tmp_path):
    metrics_dir = tmp_path / "prometheus"
    metrics_dir.mkdir()
    env = child_env(**database_env(), PROMETHEUS_MULTIPROC_DIR=metrics_dir, OVSITE_LOG_LEVEL="INFO")
    web, url = start_ovsite(tmp_path, env, threads=2, workers=2)
    try:
        # A new connection each: gunicorn's workers share the accepts, once each has loaded the embedder and the
        # tokenizer (ovsite/readiness.py); until the slower one has, the other takes them all.
        hits, pids, deadline = 0, set(), time.monotonic() + 60
        while (hits < 20 or len(pids) < 2) and time.monotonic() < deadline:
            assert httpx.get(url + "/health", timeout=10).status_code == 200
            hits += 1
            pids = {p.name.split("_")[-1] for p in metrics_dir.glob("counter_*.db")}
        scrape = samples(httpx.get(url + "/metrics", timeout=10).text)
        # The start-up probes of start_ovsite hit /health too: count them from the access log.
        probes = sum(1 for line in _json_lines(web.log.read_text()) if line.get("path") == "/health") - hits
        health = dict(route="/health", method="GET", status="200")
        assert value(scrape, "ovsite_http_requests_total", **health) == hits + probes, scrape

        answered = httpx.get(url + "/no/such/route", headers={"X-Request-ID": REQUEST_ID}, timeout=10)
        made = httpx.get(url + "/api/v1/sessions", timeout=10)
    finally:
        web.stop()
    assert len(pids) == 2, pids  # both workers answered, and the scrape summed them

    assert answered.status_code == 404 and answered.headers["X-Request-ID"] == REQUEST_ID
    assert made.status_code == 200 and re.fullmatch(r"[0-9a-f]{32}", made.headers["X-Request-ID"])
    lines = _json_lines(web.log.read_text())
    mine = [line for line in lines if line.get("request_id") == REQUEST_ID]
    # Every line the 404 wrote carries its id: Django's "Not Found" warning and the access line.
    assert {line["logger"] for line in mine} == {"django.request", "ovsite.access"}, mine
    access = next(line for line in mine if line["logger"] == "ovsite.access")
    assert (access["status"], access["route"], access["level"]) == (404, "<unmatched>", "INFO")
    assert any(
        line.get("request_id") == made.headers["X-Request-ID"] and line.get("route") == "/api/v1/sessions"
        for line in lines
    )


def _sessions_opened() -> int:
    """Connections ever opened to the test database (PostgreSQL 14+ counts them per database)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute("SELECT sessions FROM pg_stat_database WHERE datname = current_database()")
        return cursor.fetchone()[0]


@pytest.mark.parametrize("pool", [None, "false", "true"])
def test_the_asgi_app_keeps_its_database_connections(seeded, tmp_path, pool):
    """`make run` serves the ASGI app, whose threads are reused (ovsite/asgi.py): a request takes the connection its
    thread holds, or one from the pool, and does not open its own (~6.7 ms). Four clients at a time."""
    env = child_env(**database_env(), OVSITE_ASGI_THREADS="8", **({"OVSITE_DB_POOL": pool} if pool else {}))
    web, url = start_asgi(tmp_path, env)
    try:
        before, requests = _sessions_opened(), 40
        with ThreadPoolExecutor(max_workers=4) as clients:
            answers = list(clients.map(lambda _: httpx.get(url + "/ready", timeout=10).status_code, range(requests)))
        opened = _sessions_opened() - before
    finally:
        web.stop()
    assert answers == [200] * requests
    assert opened <= 8, opened  # at most one per server thread (or pooled one), not one per request


def _json_lines(text: str) -> list[dict]:
    """The log's JSON lines (gunicorn's own start-up lines are its plain text format)."""
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


PRODUCTION = {
    "OVSITE_SECRET_KEY": "k" * 10 + "-production-secret-0123456789-abcdefghijklmnopqrstuvwxyz",
    "OVSITE_ALLOWED_HOSTS": "ovsite.example.com",
    "OVSITE_HTTPS": "true",
    "OVSITE_DEBUG": "false",
    "OVSITE_ROOT_API_KEY": "production-root-key-0123456789",
}


def check_deploy(**env) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        env=child_env(**database_env(), **env),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_check_deploy_is_clean_with_the_production_settings():
    result = check_deploy(**PRODUCTION)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout, result.stdout


def test_check_deploy_flags_the_dev_settings():
    result = check_deploy()
    assert result.returncode != 0
    for check in ("ovsite.E001", "ovsite.E002", "security.W008", "security.W012", "security.W016", "security.W004"):
        assert check in result.stderr, (check, result.stderr)
