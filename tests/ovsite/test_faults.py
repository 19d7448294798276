"""Faults under concurrency, against real processes (issue 7 §4).

- The LLM hangs, answers 500 or garbage: every /search context and /recall request is still 200 with `rendered`.
- A Celery worker is SIGKILLed mid-task: Redis redelivers the unacknowledged task (acks_late) to the next worker
  and the write completes exactly once.
- PostgreSQL restarts under load: ovsite (gunicorn) answers 503 `UNAVAILABLE` fast while it is down, then serves
  again without being restarted. This runs on a throwaway embedded PostgreSQL in a temporary folder, never on the
  suite's shared server.
"""

import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
import redis

from core import embedded_pg
from profiles.models import LLMUsage, RetrievalSettings
from retrieval.embedders import PROBE_TEXT
from retrieval.models import Context, ProcessingTask
from tests.fake_openai import FakeOpenAI
from tests.live import ROOT, child_env, database_env, start_celery_worker, start_ovsite, start_redis, wait_until

THREADS = 8
# A regression that hangs fails here instead of stalling the suite (pytest-timeout; setup and teardown included).
pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def fake():
    """One fake OpenAI server (embeddings and chat) for the module; each test sets its script."""
    server = FakeOpenAI().start()
    yield server
    server.stop()


@pytest.fixture
def script(fake):
    fake.script = type(fake.script)()
    yield fake.script
    fake.script = type(fake.script)()


def envelope_error(response: httpx.Response) -> dict:
    body = response.json()
    assert body["status"] == "error" and set(body["error"]) == {"code", "message", "details", "request_id"}, body
    return body["error"]


# LLM faults --------------------------------------------------------------------------------------------------

KESTREL = "viking://user/default/memories/entities/kestrel.md"
LLM_FAULTS = {
    "hang": {"delay_s": 30.0},  # far above the 0.5 s timeouts set below
    "http_500": {"mode": "error", "status": 500},
    "http_429": {"mode": "error", "status": 429},
    "garbage": {"mode": "garbage"},
}


@pytest.fixture
def llm_world(api, live_server, fake, script, settings):
    """Memories written without an LLM, one session per client thread, then the LLM pointed at the fake."""
    api.write(
        "viking://~/memories/entities/kestrel.md",
        "Kestrel is the codename of the billing database migration; the cutover is planned for March 3.",
    )
    api.write("viking://~/memories/preferences/reports.md", "Prefers reports that lead with the conclusion.")
    for n in range(THREADS):
        status, body = api.post(
            f"/api/v1/sessions/fault-{n}/messages",
            {"role": "user", "content": "Let's talk about the Kestrel migration."},
        )
        assert status == 200, body
    RetrievalSettings.objects.filter(pk=1).update(recall_intent_timeout_s=0.5, recall_rewrite_timeout_s=0.5)
    settings.LLM_URL, settings.LLM_MODEL, settings.LLM_API_KEY = fake.url, "fake-main", "test"
    settings.QUERY_PLANNER_MODEL = "fake-planner"
    return live_server.url


def _llm_client_run(url: str, n: int) -> list[tuple[str, int, dict]]:
    """One client thread: /search context (expansion + rewrite) and /recall (rewrite), twice each."""
    body = {
        "query": "billing migration cutover",
        "session_id": f"fault-{n}",
        "rewrite": True,
        "max_tokens": 800,
        "score_threshold": 0.0,
        "dedup_turns": 0,
    }
    calls = [("/api/v1/search/search", {**body, "mode": "context"}), ("/api/v1/search/recall", body)] * 2
    answers = []
    with httpx.Client(base_url=url, timeout=30) as client:
        for path, payload in calls:
            response = client.post(path, json=payload)
            answers.append((path, response.status_code, response.json()))
    return answers


@pytest.mark.parametrize("fault", LLM_FAULTS)
def test_llm_fault_under_concurrency_every_request_is_200_with_rendered(llm_world, script, fault):
    for name, value in LLM_FAULTS[fault].items():
        setattr(script, name, value)
    with ThreadPoolExecutor(THREADS) as pool:
        answers = [a for run in pool.map(lambda n: _llm_client_run(llm_world, n), range(THREADS)) for a in run]
    assert len(answers) == THREADS * 4
    for path, status, body in answers:
        assert status == 200, (path, body)
        result = body["result"]
        assert KESTREL in result["rendered"] and result["digest"] == "", (path, result)
        stats = result["stats"]
        assert stats["query_expansion"] == "failed" and stats["rewrite"] in ("timeout", "failed"), (path, stats)
    # Every request really met the fault: one failed expansion and one failed rewrite each (both run on /recall
    # too: it has a session).
    outcomes = list(LLMUsage.objects.values_list("kind", "outcome"))
    assert sorted(kind for kind, _ in outcomes) == sorted(["expansion", "rewrite"] * len(answers))
    assert "ok" not in {outcome for _, outcome in outcomes}


# a Celery worker killed mid-task -----------------------------------------------------------------------------

NOTE = "viking://resources/notes/kafka.md"


@pytest.fixture
def broker(tmp_path):
    process, url = start_redis(tmp_path)
    yield url, redis.Redis(unix_socket_path=str(tmp_path / "redis.sock"))
    process.stop()


@pytest.fixture
def stack(seeded, tmp_path, broker, fake):
    """The deployed shape: gunicorn publishing to Redis, workers consuming, embeddings from the fake server."""
    env = child_env(
        **database_env(),
        CELERY_BROKER_URL=broker[0],
        OVSITE_CELERY_VISIBILITY_TIMEOUT_S=1,
        EMBEDDING_URL=fake.url,
        EMBEDDING_MODEL="fake-embedding",
        EMBEDDING_TIMEOUT_S=60,
        OVSITE_LOG_LEVEL="INFO",
    )
    started = []

    def worker(name):
        process = start_celery_worker(tmp_path, env, name)
        started.append(process)
        wait_until(lambda: "ready." in process.tail(100_000), 60, f"{name} ready", process, every_s=0.1)
        return process

    web, url = start_ovsite(tmp_path, env)
    started.append(web)
    yield url, worker
    for process in started:
        process.stop()


def embedding_calls(script) -> int:
    """The embedding calls of tasks: not a process's probe as it starts (ovsite/readiness.py)."""
    return sum(
        r["path"].endswith("/embeddings") and r["body"]["input"] not in (PROBE_TEXT, [PROBE_TEXT])
        for r in script.requests
    )


def test_worker_killed_mid_task_is_redelivered_and_the_write_completes_once(stack, broker, script):
    url, worker = stack
    first = worker("w1")
    script.delay_s = 30.0  # the first worker hangs inside its embedding call
    response = httpx.post(url + "/api/v1/content/write", json={"uri": NOTE, "content": "Kafka lag alerts."})
    assert response.status_code == 200, response.text
    task_id = response.json()["result"]["task_id"]
    wait_until(lambda: embedding_calls(script) == 1, 30, "the first worker's embedding call", first)
    assert ProcessingTask.objects.get(id=task_id).status == "running"
    assert broker[1].hlen("unacked") == 1  # delivered, not acknowledged (acks_late)

    first.kill()
    killed_at = time.monotonic()
    script.delay_s = 0.0
    assert Context.objects.get(uri=NOTE).state == "pending"  # the killed task's transaction left nothing behind
    time.sleep(max(0.0, 1.2 - (time.monotonic() - killed_at)))  # past the 1 s visibility timeout
    second = worker("w2")

    wait_until(lambda: ProcessingTask.objects.get(id=task_id).status == "done", 30, "the redelivered task", second)
    wait_until(lambda: broker[1].hlen("unacked") == 0, 10, "the acknowledgement", second)
    node = Context.objects.get(uri=NOTE)
    assert (node.state, node.error, node.attempts, node.embedding_model) == ("ready", "", 0, "fake-embedding")
    assert node.content == "Kafka lag alerts." and node.embedding is not None
    assert ProcessingTask.objects.filter(uris__contains=[NOTE]).count() == 1
    calls = embedding_calls(script)
    time.sleep(1.5)  # another visibility timeout: an unacknowledged copy would come back now
    assert broker[1].llen("celery") == 0 and broker[1].hlen("unacked") == 0
    assert embedding_calls(script) == calls
    # The same message, redelivered: the id the first worker received is the one the second ran, once.
    message_id = re.search(r"process_task\[([0-9a-f-]+)\] received", first.tail(100_000)).group(1)
    second_log = second.tail(100_000)
    assert second_log.count(f"process_task[{message_id}] received") == 1
    assert re.findall(r"process_task\[([0-9a-f-]+)\] succeeded", second_log) == [message_id]
    hits = httpx.post(url + "/api/v1/search/find", json={"query": "kafka lag alerts", "level": 2}).json()
    assert [hit["uri"] for hit in hits["result"]["resources"]] == [NOTE]


# PostgreSQL restarted under load -----------------------------------------------------------------------------

CONNECT_TIMEOUT_S = 2
REQUEST_TIMEOUT_S = 10


@pytest.fixture
def own_postgres():
    """A throwaway embedded PostgreSQL with ovsite's schema; the shared server of the suite is never touched.

    Its folder is not under pytest's tmp_path: every pytest session on the machine resets /tmp/pytest-of-<user> to
    mode 0700, and the server runs as its own system user, which would then lose its data folder (pg_ctl fails)."""
    folder = Path(tempfile.mkdtemp(prefix="ovsite-faults-pg-"))
    pgdata = folder / "pg"
    try:
        socket_dir = embedded_pg.start(pgdata, "ovsite")
        database_url = f"postgres://{embedded_pg.POSTGRES_USER}@/ovsite?host={socket_dir}"  # a unix socket
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
            env=child_env(DATABASE_URL=database_url),
            check=True,
            cwd=ROOT,
            timeout=120,
        )
        yield pgdata, database_url
    finally:
        _pg_ctl("stop", pgdata)
        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(embedded_pg.socket_dir_for(pgdata), ignore_errors=True)


def _pg_ctl(action: str, pgdata: Path) -> None:
    """Stops or starts the throwaway server from a fresh interpreter, not from this process: pg_ctl runs as the
    server's system user, which makes Python fork() (not vfork), and a fork while the fake server's thread is inside
    an OpenBLAS call deadlocks in OpenBLAS' at-fork handler (blas_thread_shutdown_) - the test then hangs for good."""
    assert pgdata.parent.name.startswith("ovsite-faults-pg-"), pgdata  # never the suite's shared server
    call = "embedded_pg.start(pgdata, 'ovsite')" if action == "start" else "embedded_pg.stop(pgdata)"
    subprocess.run(
        [
            sys.executable,
            "-c",
            f"import sys; from pathlib import Path; from core import embedded_pg; pgdata = Path(sys.argv[1]); {call}",
            str(pgdata),
        ],
        cwd=ROOT,
        check=True,
        timeout=90,
    )


LOAD = [
    ("get", "/ready", None),
    ("get", "/api/v1/fs/ls?uri=viking://resources", None),
    ("get", "/api/v1/content/read?uri=" + quote(NOTE), None),
    ("post", "/api/v1/search/find", {"query": "kafka lag alerts"}),
    ("get", "/api/v1/sessions", None),
]


def _load(url: str, stop: threading.Event, log: list) -> None:
    """One client: the LOAD routes in turn until `stop`. A request that gets no answer in REQUEST_TIMEOUT_S is
    logged with status None (and fails the test) instead of ending the client."""
    with httpx.Client(base_url=url, timeout=REQUEST_TIMEOUT_S) as client:
        n = 0
        while not stop.is_set():
            method, path, body = LOAD[n % len(LOAD)]
            n += 1
            started = time.monotonic()
            try:
                response = client.post(path, json=body) if method == "post" else client.get(path)
            except httpx.TimeoutException as exc:
                log.append((started, time.monotonic(), path, None, {"timeout": repr(exc)}))
                continue
            log.append((started, time.monotonic(), path, response.status_code, response.json()))


def test_postgres_restart_under_load_is_503_then_recovers_without_restarting_ovsite(own_postgres, tmp_path, fake):
    pgdata, database_url = own_postgres
    # The query vector cache stays on: after the first /find its query skips the embedder (the fake server's numpy,
    # seconds per call on a busy machine), so every answer's time is ovsite's and the database's.
    env = child_env(
        **database_env(database_url),
        OVSITE_DB_CONNECT_TIMEOUT=CONNECT_TIMEOUT_S,
        EMBEDDING_URL=fake.url,
        EMBEDDING_MODEL="fake-embedding",
    )
    web, url = start_ovsite(tmp_path, env, threads=THREADS)
    try:
        write = httpx.post(
            url + "/api/v1/content/write", json={"uri": NOTE, "content": "Kafka lag alerts."}, timeout=60
        )  # the worker's first write imports and warms up on a busy machine
        assert write.status_code == 200, write.text
        log: list = []
        stop = threading.Event()
        clients = [threading.Thread(target=_load, args=(url, stop, log)) for _ in range(THREADS)]
        for client in clients:
            client.start()
        try:
            wait_until(lambda: len(log) >= 4 * THREADS, 30, "warm-up requests", web)
            _pg_ctl("stop", pgdata)
            down_at = time.monotonic()
            wait_until(lambda: sum(1 for e in log if e[0] > down_at) >= 4 * THREADS, 30, "requests during outage", web)
            restart_at = time.monotonic()
            _pg_ctl("start", pgdata)
            try:
                wait_until(lambda: _recovered(log, restart_at), 30, "every route answering 200 again", web)
            except AssertionError as exc:
                answers = [
                    (path, status, round(ended - started, 2))
                    for started, ended, path, status, _ in log
                    if started > restart_at
                ]
                raise AssertionError(f"answers after the restart: {answers[-40:]}") from exc
        finally:
            stop.set()
            for client in clients:
                client.join(REQUEST_TIMEOUT_S + 5)
        assert web.popen.poll() is None and web.log.read_text().count("Booting worker") == 1, web.tail()
    finally:
        web.stop()

    statuses = {status for _, _, _, status, _ in log}
    assert statuses <= {200, 503}, [e[2:] for e in log if e[3] not in (200, 503)][:5]
    for _, _, path, status, body in log:
        if status == 503:
            error = body["error"]
            assert body["status"] == "error" and error["code"] == "UNAVAILABLE", (path, body)
            assert error["details"]["service"] == "database", (path, body)
    during = [e for e in log if e[0] > down_at and e[1] < restart_at]
    assert during and {e[3] for e in during} == {503}, [e[2:4] for e in during][:10]
    # Fail fast: no request waits on the dead database longer than the connect timeout (plus a busy machine).
    slowest = max(e[1] - e[0] for e in during)
    assert slowest < CONNECT_TIMEOUT_S + 2, slowest


def _recovered(log: list, restart_at: float) -> bool:
    """Every route's last two answers that started after the restart began are 200."""
    after = [e for e in log if e[0] > restart_at]
    return all([e[3] for e in after if e[2] == path][-2:] == [200, 200] for _, path, _ in LOAD)


def test_the_first_requests_after_a_postgres_restart_succeed_on_a_reused_thread(own_postgres, tmp_path, fake):
    """One thread keeps its connection between requests: after a restart, the health check before each request's
    first statement (core/db_backend, no round trip) finds the old session gone and the request connects anew."""
    pgdata, database_url = own_postgres
    env = child_env(**database_env(database_url), EMBEDDING_URL=fake.url, EMBEDDING_MODEL="fake-embedding")
    web, url = start_ovsite(tmp_path, env, threads=1)
    try:
        with httpx.Client(base_url=url, timeout=60) as client:
            write = client.post("/api/v1/content/write", json={"uri": NOTE, "content": "Kafka lag alerts."})
            assert write.status_code == 200, write.text
            for method, path, body in LOAD:  # every route has used the thread's connection
                response = client.post(path, json=body) if method == "post" else client.get(path)
                assert response.status_code == 200, (path, response.text)
            for round_ in range(2):
                _pg_ctl("stop", pgdata)
                _pg_ctl("start", pgdata)
                for method, path, body in LOAD:
                    response = client.post(path, json=body) if method == "post" else client.get(path)
                    assert response.status_code == 200, (round_, path, response.text)
    finally:
        web.stop()
