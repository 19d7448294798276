"""Real processes for the fault tests: ovsite under gunicorn, a Celery worker, redis-server, a throwaway PostgreSQL.

Each starts in its own process group (so a SIGKILL takes its children too) and is stopped by the caller; output
goes to a log file in the test's temporary folder, which a failing assertion can quote.
"""

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import httpx
from django.conf import settings

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def database_env(database_url: str | None = None) -> dict:
    """The environment that points a child process at the test database (or at `database_url`)."""
    if database_url:
        return {"DATABASE_URL": database_url}
    db = settings.DATABASES["default"]
    if settings.EMBEDDED_PG_ENABLED:
        return {"OVSITE_PG_DATA": str(settings.EMBEDDED_PG_DATA), "OVSITE_PG_DATABASE": db["NAME"]}
    credentials = quote(db["USER"]) + (f":{quote(db['PASSWORD'])}" if db.get("PASSWORD") else "")
    host = db.get("HOST") or db["OPTIONS"].get("host", "")
    if host.startswith("/"):  # a unix socket folder
        return {"DATABASE_URL": f"postgres://{credentials}@/{db['NAME']}?host={host}"}
    return {"DATABASE_URL": f"postgres://{credentials}@{host}:{db.get('PORT') or 5432}/{db['NAME']}"}


def child_env(**overrides) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "OVSITE_PG_DATABASE")}
    # A server that outlives a test sees each transactional test empty the tables and seed them again (the same
    # account under a new id), which its per-process cache would hold for up to a second: such servers read every
    # request's rows (a test of the cache itself passes the setting).
    env["OVSITE_CONFIG_CACHE_SECONDS"] = "0"
    env.update({k: str(v) for k, v in overrides.items()})
    return env


class Process:
    def __init__(self, name: str, args: list[str], env: dict, log_dir: Path):
        self.name = name
        self.log = log_dir / f"{name}.log"
        self._out = open(self.log, "wb")
        self.popen = subprocess.Popen(
            args, env=env, cwd=ROOT, stdout=self._out, stderr=subprocess.STDOUT, start_new_session=True
        )

    def tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:]

    def kill(self) -> None:
        """SIGKILL to the whole group: a Celery worker's pool children die with it, as on an OOM kill."""
        if self.popen.poll() is None:
            os.killpg(self.popen.pid, signal.SIGKILL)
        self.popen.wait(10)
        self._out.close()

    def stop(self) -> None:
        if self.popen.poll() is None:
            os.killpg(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(10)
            except subprocess.TimeoutExpired:
                pass
        self.kill()


# A server loads the embedder and the tokenizer before it answers: seconds when quiet, far more on a loaded two-core
# CI machine. The deadline only bounds a server that never comes up.
READY_S = 120.0


def wait_until(predicate, timeout_s: float, what: str, process: Process | None = None, every_s: float = 0.05):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        if process is not None and process.popen.poll() is not None:
            raise AssertionError(f"{process.name} exited while waiting for {what}:\n{process.tail()}")
        time.sleep(every_s)
    raise AssertionError(
        f"timed out after {timeout_s} s waiting for {what}" + (f":\n{process.tail()}" if process else "")
    )


def start_ovsite(
    log_dir: Path, env: dict, threads: int = 8, workers: int = 1, ready_s: float = READY_S
) -> tuple[Process, str]:
    """ovsite under gunicorn (gthread workers), as deployed; returns it and its base URL once /health answers
    (within `ready_s`)."""
    port = free_port()
    return _started(
        Process(
            "gunicorn",
            [
                sys.executable,
                "-m",
                "gunicorn",
                "ovsite.wsgi",
                "--bind",
                f"127.0.0.1:{port}",
                "--workers",
                str(workers),
                "--worker-class",
                "gthread",
                "--threads",
                str(threads),
                "--timeout",
                "60",
            ],
            env,
            log_dir,
        ),
        port,
        ready_s,
    )


def start_asgi(log_dir: Path, env: dict, ready_s: float = READY_S) -> tuple[Process, str]:
    """ovsite's ASGI app (Django and /mcp) under uvicorn, as `make run` serves it (its access log naming the socket's
    peer), once /health answers (within `ready_s`)."""
    port = free_port()
    return _started(
        Process(
            "uvicorn",
            [
                sys.executable,
                "-m",
                "uvicorn",
                "ovsite.asgi:application",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--no-proxy-headers",
                "--log-level",
                "warning",
            ],
            env,
            log_dir,
        ),
        port,
        ready_s,
    )


def _started(process: Process, port: int, ready_s: float) -> tuple[Process, str]:
    url = f"http://127.0.0.1:{port}"

    def healthy():
        try:
            return httpx.get(url + "/health", timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    wait_until(healthy, ready_s, "ovsite /health", process, every_s=0.1)
    return process, url


def start_celery_worker(log_dir: Path, env: dict, name: str) -> Process:
    """A real `celery worker` (prefork, one child), without the chatter that slows a start."""
    return Process(
        name,
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "ovsite",
            "worker",
            "--pool",
            "prefork",
            "--concurrency",
            "1",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            "--hostname",
            f"{name}@%h",
            "--loglevel",
            "INFO",
        ],
        env,
        log_dir,
    )


def start_redis(log_dir: Path) -> tuple[Process, str]:
    """redis-server on a unix socket in `log_dir`, nothing persisted. Debian's package, installed by `make test`."""
    binary = shutil.which("redis-server")
    assert binary, "redis-server is missing: `make test` installs Debian's redis-server package"
    sock = log_dir / "redis.sock"
    process = Process(
        "redis",
        [
            binary,
            "--port",
            "0",
            "--unixsocket",
            str(sock),
            "--unixsocketperm",
            "700",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(log_dir),
        ],
        os.environ.copy(),
        log_dir,
    )
    wait_until(sock.exists, 10, "redis socket", process)
    return process, f"redis+socket://{sock}"
