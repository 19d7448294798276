"""The production layout, started for real (issue 30): the Procfile's processes — uvicorn workers serving Django and
/mcp, a Celery worker, Celery beat — on a Redis broker and on PostgreSQL given by URL (the test database, reached
through the embedded server's socket), as `make serve` and compose.yaml run them.

A worker killed in the middle of an ingest loses nothing: a pool process SIGKILLed alone gives its task back to the
queue (`task_reject_on_worker_lost`), and a whole worker SIGKILLed leaves its tasks unacknowledged in Redis
(`task_acks_late`), which hands them to the restarted worker once the visibility timeout has passed; writes made
while no worker runs wait in the queue. Embeddings come from the fake OpenAI server, which can hold a call open so
that the kill lands mid-task.
"""

import os
import re
import shlex
import signal
import sys
import time
from pathlib import Path
from urllib.parse import quote, urlsplit

import httpx
import psutil
import pytest
import redis
from django.db import connection
from openviking_sdk import SyncHTTPClient

from retrieval.embedders import PROBE_TEXT
from retrieval.models import ProcessingTask
from tests.fake_openai import FakeOpenAI
from tests.live import Process, child_env, free_port, start_redis, wait_until
from tests.mcp_server.test_mcp import mcp_session, text_of
from tests.ovsite.test_compose import procfile

pytestmark = pytest.mark.timeout(240)

VISIBILITY_TIMEOUT_S = 1
# How long the fake holds an embedding call open while the kills happen; the worker's client waits longer.
HELD_S = 300.0
# One distinct fact per file, so that /find on a file's own sentence must return that file.
FACTS = [
    "Kafka consumer lag above ten thousand messages pages the on-call engineer.",
    "The Postgres vacuum job runs nightly at two in the morning on the primary.",
    "TLS certificates for the public API renew thirty days before they expire.",
    "Redis evicts the least recently used keys once it reaches its memory limit.",
    "Nginx limits each client to twenty requests per second on the login route.",
    "The backup restore drill happens on the first Monday of every quarter.",
    "Grafana dashboards for the billing service live in the finance folder.",
    "Terraform state for the staging cluster is locked in a DynamoDB table.",
]
RUNBOOK = """# Disk full on a database host

## Symptoms
Writes fail with "could not extend file" and the WAL volume shows one hundred percent usage.

## Remedy
Drop the oldest replication slot that nobody reads, then checkpoint so the WAL segments can be recycled.
"""


@pytest.fixture(scope="module")
def fake():
    server = FakeOpenAI().start()
    yield server
    server.stop()


def database_url() -> str:
    """The test database as a deployment names it, a DATABASE_URL (the embedded server's host is its socket)."""
    db = connection.settings_dict
    credentials = quote(db["USER"]) + (f":{quote(db['PASSWORD'])}" if db.get("PASSWORD") else "")
    host = db.get("HOST") or db["OPTIONS"].get("host", "")
    if host.startswith("/"):
        return f"postgres://{credentials}@/{db['NAME']}?host={host}"
    return f"postgres://{credentials}@{host}:{db.get('PORT') or 5432}/{db['NAME']}"


def layout_env(broker_url: str, fake: FakeOpenAI, folder: Path, **overrides) -> dict:
    """A deployment's environment: database and broker by URL, dev mode (no root key: loopback callers), the
    Procfile's `python` found on PATH, as in the image, and beat's schedule file in the test's folder."""
    env = child_env(
        DATABASE_URL=database_url(),
        CELERY_BROKER_URL=broker_url,
        OVSITE_BEAT_SCHEDULE_FILE=folder / "celerybeat-schedule",
        OVSITE_CELERY_VISIBILITY_TIMEOUT_S=VISIBILITY_TIMEOUT_S,
        EMBEDDING_URL=fake.url,
        EMBEDDING_MODEL="fake-embedding",
        EMBEDDING_TIMEOUT_S=2 * HELD_S,
        OVSITE_LOG_LEVEL="INFO",
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        **overrides,
    )
    env.pop("OVSITE_ROOT_API_KEY", None)
    return env


def healthy(url: str):
    def check():
        try:
            return httpx.get(url + "/health", timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    return check


def embedded_texts(fake: FakeOpenAI) -> list[str]:
    """Every text the fake was asked to embed by a task, in the order the calls came: not a process's probe as it
    starts (ovsite/readiness.py)."""
    texts = []
    for request in fake.script.requests:
        if request["path"].endswith("/embeddings"):
            given = request["body"]["input"]
            texts += [given] if isinstance(given, str) else given
    return [text for text in texts if text != PROBE_TEXT]


def inside_embedding_call(fake: FakeOpenAI, worker: Process) -> list[psutil.Process]:
    """The worker's pool processes (the `celery worker` process's children) connected to the fake right now."""
    port = urlsplit(fake.url).port
    return [
        child
        for child in psutil.Process(worker.popen.pid).children()
        if any(c.raddr and c.raddr.port == port for c in child.net_connections("tcp"))
    ]


@pytest.fixture
def layout(seeded, tmp_path, fake):
    """Redis, then the Procfile's web (two uvicorn workers), worker and beat, each in its own process group and
    started as compose starts it: the command's words, no shell."""
    redis_process, broker_url = start_redis(tmp_path)
    port = free_port()
    env = layout_env(broker_url, fake, tmp_path, UVICORN_HOST="127.0.0.1", UVICORN_PORT=port, WEB_CONCURRENCY=2)
    commands = procfile()
    started = [redis_process]

    def start(process_type: str, name: str, **overrides) -> Process:
        process = Process(name, shlex.split(commands[process_type]), {**env, **overrides}, tmp_path)
        started.append(process)
        return process

    def start_worker(name: str) -> Process:
        worker = start("worker", name)
        wait_until(lambda: "ready." in worker.tail(100_000), 60, f"{name} ready", worker, every_s=0.1)
        return worker

    # Beat at DEBUG: it then logs the schedule it loaded.
    beat = start("beat", "beat", OVSITE_LOG_LEVEL="DEBUG")
    web = start("web", "web")
    url = f"http://127.0.0.1:{port}"
    wait_until(healthy(url), 60, "/health of the web process", web, every_s=0.1)
    # Each uvicorn worker has loaded the embedder (one call to the fake) before its startup completes.
    wait_until(lambda: web.tail(100_000).count("Application startup complete") == 2, 60, "both uvicorn workers", web)
    fake.script = type(fake.script)()  # from here on, the workers' calls only
    yield url, web, beat, start_worker, redis.Redis(unix_socket_path=str(tmp_path / "redis.sock"))
    for process in started:  # all asked to stop at once, then each waited for
        if process.popen.poll() is None:
            os.killpg(process.popen.pid, signal.SIGTERM)
    for process in reversed(started):
        process.stop()


def test_worker_killed_mid_ingest_loses_nothing(layout, fake, tmp_path):
    url, web, beat, start_worker, broker = layout
    worker = start_worker("worker-1")
    files = {f"viking://resources/layout/fact-{n}.md": fact for n, fact in enumerate(FACTS)}
    uris = iter(files)

    # Two writes, each held by the fake inside the embedding of its file (longer than the test lasts), in a pool
    # process of its own: the worker has one per CPU, at least two on the test machines.
    fake.script.delay_s = HELD_S
    first = [next(uris), next(uris)]
    for uri in first:
        response = httpx.post(url + "/api/v1/content/write", json={"uri": uri, "content": files[uri]})
        assert response.status_code == 200, response.text
    # A pool process loads the tokenizers on its first task: seconds on a busy machine.
    wait_until(
        lambda: sorted(embedded_texts(fake)) == sorted(files[uri] for uri in first),
        90,
        "both tasks inside their embedding call",
        worker,
    )

    # One pool process dies alone (the OOM killer's pick): its task goes back to the queue and a new pool process
    # runs it again, embedding that file a second time.
    busy = inside_embedding_call(fake, worker)
    assert len(busy) == len(first)
    busy[0].kill()
    wait_until(lambda: len(embedded_texts(fake)) == len(first) + 1, 60, "the lost task run again", worker)
    assert len(set(embedded_texts(fake))) == len(first)
    assert broker.hlen("unacked") == len(first)

    # The whole worker dies (its container, its machine): every task it held stays unacknowledged in Redis.
    worker.kill()
    killed_at = time.monotonic()
    fake.script.delay_s = 0.0
    assert broker.hlen("unacked") == len(first)

    # Writes go on meanwhile (the web answers without a worker) and wait in the queue: files and a document.
    for uri in uris:
        response = httpx.post(url + "/api/v1/content/write", json={"uri": uri, "content": files[uri]})
        assert response.status_code == 200, response.text
    runbook = tmp_path / "disk-full.md"
    runbook.write_text(RUNBOOK)
    client = SyncHTTPClient(url=url)
    client.initialize()
    document = client.add_resource(str(runbook))["root_uri"]
    assert broker.llen("celery") >= len(FACTS) - len(first) + 1

    time.sleep(max(0.0, VISIBILITY_TIMEOUT_S + 0.2 - (time.monotonic() - killed_at)))
    restarted = start_worker("worker-2")
    wait_until(lambda: not ProcessingTask.objects.exclude(status="done").exists(), 90, "every task done", restarted)
    wait_until(lambda: broker.hlen("unacked") == 0 and broker.llen("celery") == 0, 10, "an empty queue", restarted)

    # Everything written is indexed and found, through the REST API and through /mcp.
    for uri in [*files, document]:
        stat = httpx.get(url + "/api/v1/fs/stat", params={"uri": uri}).json()["result"]
        assert stat["state"] == "ready", stat
    for uri, fact in files.items():
        hits = httpx.post(url + "/api/v1/search/find", json={"query": fact}, timeout=30).json()["result"]
        assert uri in [hit["uri"] for hit in hits["resources"]], (fact, hits["resources"])

    async def find_remedy(mcp):
        return text_of(await mcp.call_tool("find", {"query": "drop the replication slot when the WAL disk is full"}))

    assert document in mcp_session(url, find_remedy)

    assert web.popen.poll() is None and beat.popen.poll() is None
    # Beat runs with both jobs (the first is due a minute after a fresh start: not waited for here).
    schedule = re.search(r"Current schedule:[^}]*", beat.tail(100_000)).group(0)
    assert "retry-failed-nodes" in schedule and "roll-up-recall-events" in schedule, schedule


def test_make_serve_runs_the_layout_and_stops_it_whole(seeded, tmp_path, fake):
    """`make serve`: the Procfile's release step, then web, worker and beat under honcho; one Ctrl-C stops them all."""
    redis_process, broker_url = start_redis(tmp_path)
    fake.script = type(fake.script)()  # answers at once, whatever another test left
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = layout_env(broker_url, fake, tmp_path, PORT=port, WEB_CONCURRENCY=1, METRICS_DIR=tmp_path / "metrics")
    make = Process("make-serve", ["make", "--no-print-directory", "serve"], env, tmp_path)
    processes: list[psutil.Process] = []
    try:
        wait_until(healthy(url), 120, "/health of make serve", make, every_s=0.2)
        written = httpx.post(
            url + "/api/v1/content/write",
            timeout=60,
            json={"uri": "viking://resources/serve/coffee.md", "content": "Black coffee, no sugar.", "wait": True},
        )
        assert written.json()["result"]["processing"]["done"] is True, written.text  # through the worker
        processes = psutil.Process(make.popen.pid).children(recursive=True)
        command_lines = [" ".join(p.cmdline()) for p in processes]
        for process_type in ("web", "worker", "beat"):
            assert any(procfile()[process_type] in line for line in command_lines), (process_type, command_lines)
    finally:
        os.killpg(make.popen.pid, signal.SIGINT)  # what Ctrl-C in its terminal sends
        try:
            make.popen.wait(30)
        finally:
            left = [p for p in processes if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
            for process in left:
                process.kill()
            make.kill()
            redis_process.stop()
    assert left == [], [p.cmdline() for p in left]
    assert "release.1 stopped (rc=0)" in make.tail(100_000)
