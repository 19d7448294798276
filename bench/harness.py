"""What the benchmarks share. Each runs from the repository root as a module: `.venv/bin/python -m bench.<name>`.

- `configure` sets the environment a bench's Django reads, before Django loads; `migrated_database` and
  `raw_connection` give it its own database on the embedded PostgreSQL (never the dev or the test one).
- `Gunicorn` and `Uvicorn` start the server under measurement from this checkout (`ServerProcess` any other one),
  `warm_up` loads every worker's embedder before the clock starts.
- `timed_post`, `server_timing`, `median`, `pct`, `paired_median`, `cpu_snapshot`/`cpu_busy_since` and
  `wait_quiet` time requests and the machine.
- `parser`, `command_line`, `heading` and `publish` make a bench's section of bench/RESULTS.md, which it alone
  rewrites; the command a section shows is repository-relative, as a reader runs it from the checkout.

The standard library only at import: bench/tokens.py runs in bench/.venv-tokens and `--engine-decay` of
bench/vs_openviking/score_probe.py in bench/.venv-openviking, neither of which has Django.
"""

import argparse
import datetime as dt
import os
import platform
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "RESULTS.md"
PYTHON = ".venv/bin/python"  # the checkout's interpreter, as the commands in bench/RESULTS.md name it
USER = "default"  # dev mode's user (no OVSITE_ROOT_API_KEY): account and user `default`, an admin
COLD_FIND_MS = 250.0  # a /find slower than this server-side was loading the embedder

_database: str | None = None


# ------------------------------------------------------------------------------------------------------------
# Environment and database


def configure(database: str | None = None) -> bool:
    """Sets what a bench's Django and servers read, before Django loads: the settings module, dev mode (no root
    key), no query-vector cache (a timing must include the query's embedding; a bench that wants the cache passes
    it to its server) and, with `database`, that database on the embedded PostgreSQL. Returns whether
    OVSITE_ROOT_API_KEY was set (it is unset now)."""
    global _database
    if database:
        if os.environ.get("DATABASE_URL"):
            sys.exit(
                "bench: DATABASE_URL is set; the benchmarks run only on the embedded PostgreSQL, each on its own "
                "database. Unset DATABASE_URL."
            )
        os.environ["OVSITE_PG_DATABASE"] = _database = database
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ovsite.settings")
    os.environ["OVSITE_QUERY_VECTOR_CACHE"] = "0"
    return bool(os.environ.pop("OVSITE_ROOT_API_KEY", ""))


def database() -> str:
    """The bench's own database, as `configure` set it."""
    if _database is None:
        raise RuntimeError("harness.configure(database) comes first: a bench never runs on the default database")
    return _database


def start_database() -> None:
    """Django set up on the bench's database, and the embedded PostgreSQL serving it."""
    import django

    django.setup()
    from core import embedded_pg

    embedded_pg.start_configured(database())


def migrated_database():
    """`start_database`, migrated, with dev mode's account and user; returns the account."""
    start_database()
    from django.core.management import call_command

    from core.models import Account, AccountUser

    call_command("migrate", interactive=False, verbosity=0)
    account, _ = Account.objects.get_or_create(name="default")
    AccountUser.objects.get_or_create(account=account, user_id=USER, defaults={"role": "admin"})
    return account


def raw_connection():
    """An autocommit psycopg connection to the bench's database, with the management commands' statement timeout:
    corpus loads and index builds are maintenance, not web requests."""
    import psycopg
    from django.conf import settings

    from core.db_session import session_options

    db = settings.DATABASES["default"]
    assert db["NAME"] == database(), db["NAME"]
    return psycopg.connect(
        host=db["HOST"],
        user=db["USER"],
        dbname=db["NAME"],
        autocommit=True,
        options=session_options(statement_timeout_ms=settings.DB_COMMAND_STATEMENT_TIMEOUT_MS),
    )


def loaded_nodes() -> int:
    """Nodes in the bench database's `retrieval_context` (migrated)."""
    with raw_connection() as conn:
        return conn.execute("SELECT count(*) FROM retrieval_context").fetchone()[0]


# ------------------------------------------------------------------------------------------------------------
# Servers


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def server_env(extra: dict | None = None) -> dict:
    """A server's environment: this process's, on the bench's database in dev mode, with `extra` on top."""
    env = dict(os.environ, OVSITE_PG_DATABASE=database(), DJANGO_SETTINGS_MODULE="ovsite.settings")
    env.pop("OVSITE_ROOT_API_KEY", None)
    env.update(extra or {})
    return env


class ServerProcess:
    """A server process started in a session of its own, ready once `GET /health` answers 200, stopped by its own
    pid (and its session's, if it does not stop)."""

    name = "server"
    url = ""
    log_path: Path
    proc: "subprocess.Popen | None" = None

    def spawn(self, cmd: list[str], env: dict, cwd: Path) -> None:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=cwd, start_new_session=True
            )

    def check_running(self) -> None:
        if self.proc.poll() is not None:
            raise RuntimeError(
                f"{self.name} exited with {self.proc.returncode}; see {self.log_path}:\n"
                + self.log_path.read_text()[-3000:]
            )

    def _launch(self, cmd: list[str], env: dict, cwd: Path, timeout_s: float, poll_s: float = 0.2) -> None:
        import httpx

        self.spawn(cmd, env, cwd)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.check_running()
            try:
                if httpx.get(self.url + "/health", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(poll_s)
        raise RuntimeError(f"{self.name} did not answer /health within {timeout_s}s; see {self.log_path}")

    def stop(self, timeout_s: float = 30) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)  # the process we started, by its own pid; it stops its children
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)  # its own session only (start_new_session)
            self.proc.wait(timeout=10)


class CheckoutServer(ServerProcess):
    """A server of this checkout on the bench's database; `command` is its command line as a reader runs it from
    the checkout: no machine's paths or port."""

    def __init__(self, workers: int, log_dir: Path | None, env: dict | None):
        self.workers = workers
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = (log_dir or Path(tempfile.mkdtemp(prefix="ovsite-bench-"))) / f"{self.name}.log"
        self.env = env or {}
        self.command = ""

    def _start(self, cmd: list[str], timeout_s: float) -> None:
        self.command = (
            " ".join(cmd[1:])
            .replace(str(ROOT), ".")
            .replace(f"127.0.0.1:{self.port}", "127.0.0.1:PORT")
            .replace(f"--port {self.port}", "--port PORT")
        )
        self._launch(cmd, server_env(self.env), ROOT, timeout_s)


class Gunicorn(CheckoutServer):
    """`ovsite.wsgi` under gunicorn: `workers` processes of `threads` threads."""

    name = "gunicorn"

    def __init__(self, workers: int, *, log_dir: Path | None = None, env: dict | None = None, threads: int = 1):
        super().__init__(workers, log_dir, env)
        self.threads = threads

    def start(self, timeout_s: float = 60.0) -> None:
        self._start(
            [
                str(ROOT / ".venv" / "bin" / "gunicorn"),
                "ovsite.wsgi",
                "-b",
                f"127.0.0.1:{self.port}",
                "-w",
                str(self.workers),
                "-k",
                "gthread",
                "--threads",
                str(self.threads),
                "--keep-alive",
                "120",
                "--timeout",
                "120",
                "--chdir",
                str(ROOT),
                "--log-level",
                "warning",
            ],
            timeout_s,
        )


class Uvicorn(CheckoutServer):
    """The ASGI app `make run` serves (Django and /mcp), with `workers` processes."""

    name = "uvicorn"

    def __init__(self, workers: int, *, log_dir: Path | None = None, env: dict | None = None):
        super().__init__(workers, log_dir, env)

    def start(self, timeout_s: float = 60.0) -> None:
        self._start(
            [
                str(ROOT / ".venv" / "bin" / "uvicorn"),
                "ovsite.asgi:application",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--workers",
                str(self.workers),
                "--log-level",
                "warning",
            ],
            timeout_s,
        )


def warm_up(server: CheckoutServer, queries: list[str], deadline_s: float = 120.0) -> dict:
    """Until every worker has loaded its embedder: a cold /find takes seconds, a warm one milliseconds.

    Concurrent requests on fresh connections spread over the workers; each worker is cold exactly once.
    """
    import httpx

    cold, requests = 0, 0
    lock = threading.Lock()
    deadline = time.monotonic() + deadline_s

    def one(i: int) -> bool:
        nonlocal cold, requests
        with httpx.Client(base_url=server.url, timeout=60) as client:
            response = client.post(
                "/api/v1/search/find",
                json={"query": queries[i % len(queries)], "limit": 10},
                headers={"Connection": "close"},
            )
        response.raise_for_status()
        # A model load takes hundreds of milliseconds even on a fast machine; a warm /find a few.
        was_cold = server_timing(response.headers.get("Server-Timing", "")).get("find", 0) > COLD_FIND_MS
        with lock:
            requests += 1
            cold += was_cold
        return was_cold

    with ThreadPoolExecutor(max_workers=server.workers * 2) as pool:
        i, last_round_warm = 0, False
        # Every worker has been seen cold, or a whole round after the first 20 requests was warm: a worker that
        # never looked cold (its load hidden by a fast machine) is warm by then all the same.
        while time.monotonic() < deadline and cold < server.workers and not (requests >= 20 and last_round_warm):
            last_round_warm = not any(pool.map(one, range(i, i + server.workers * 2)))
            i += server.workers * 2
    return {"cold_workers_seen": cold, "warm_up_requests": requests}


# ------------------------------------------------------------------------------------------------------------
# Timing


@dataclass
class Answer:
    result: dict
    client_ms: float
    stages: dict[str, float]  # the server's Server-Timing stages, ms

    @property
    def server_ms(self) -> float:
        return sum(self.stages.values())


def timed_post(client, path: str, body: dict) -> Answer:
    """One request on `client` (an httpx.Client), timed as its caller sees it; an error status raises."""
    started = time.perf_counter()
    response = client.post(path, json=body)
    client_ms = (time.perf_counter() - started) * 1000
    response.raise_for_status()
    return Answer(response.json()["result"], client_ms, server_timing(response.headers.get("Server-Timing", "")))


def server_timing(header: str) -> dict[str, float]:
    stages = {}
    for part in header.split(","):
        name, _, rest = part.strip().partition(";")
        for attr in rest.split(";"):
            key, _, value = attr.strip().partition("=")
            if key == "dur":
                stages[name] = float(value)
    return stages


def pct(values, q: float) -> float:
    import numpy as np

    return float(np.percentile(values, q)) if values else float("nan")


def cosine_distance(score: float) -> float:
    """The cosine distance behind a hit's `score`: scores are on OpenViking's scale, (1 + cosine) / 2
    (retrieval.search.fusion.score_of), so a distance is twice the score's shortfall from 1."""
    return 2.0 * (1.0 - score)


def median(values) -> float:
    return float(statistics.median(values)) if values else float("nan")


def paired_median(values: list[float], baseline: list[float]) -> float:
    """The median of the differences between the samples of two requests measured in turn, pair by pair."""
    return median([a - b for a, b in zip(values, baseline, strict=True)])


def cpu_snapshot() -> tuple[int, int]:
    values = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:9]]
    return values[3] + values[4], sum(values)  # idle + iowait, total


def cpu_busy_since(snapshot: tuple[int, int]) -> float:
    idle, total = cpu_snapshot()
    return 1 - (idle - snapshot[0]) / max(1, total - snapshot[1])


def wait_quiet(max_s: float, busy_below: float = 0.2) -> float:
    """Waits (bounded) until the machine is nearly idle: other work shares these cores. Returns the busy share."""
    deadline = time.monotonic() + max_s
    while True:
        snapshot = cpu_snapshot()
        time.sleep(2.0)
        busy = cpu_busy_since(snapshot)
        if busy < busy_below or time.monotonic() >= deadline:
            return busy


def corpus_records(name: str) -> list[dict]:
    """The records of bench/corpora/`name`, a JSONL file. Its lines are read as the file's lines, which end at "\n"
    only: str.splitlines() would also split at U+2028 and the like, which json.dumps(ensure_ascii=False) writes
    unescaped."""
    import json

    with (ROOT / "bench" / "corpora" / name).open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines]


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


# ------------------------------------------------------------------------------------------------------------
# bench/RESULTS.md


def parser(doc: str, database: str | None = None) -> argparse.ArgumentParser:
    """A bench's argument parser: its docstring's first paragraph, `--no-write` and, given the bench's own
    database, `--database` defaulting to it."""
    main = sys.modules["__main__"].__spec__  # None for a file run as a script, which cannot import `bench`
    out = argparse.ArgumentParser(prog=main and f"python -m {main.name}", description=doc.split("\n\n")[0])
    out.add_argument("--no-write", action="store_true", help="print the section only; bench/RESULTS.md unchanged")
    if database:
        out.add_argument(
            "--database",
            default=database,
            help=f"the bench's own database on the embedded PostgreSQL (default {database}), never one whose data "
            "you keep: a bench may empty it",
        )
    return out


def command_line(module: str, env_names: tuple[str, ...] = (), secret: str | None = None) -> str:
    """How this run is repeated from the repository root: `.venv/bin/python -m <module>` and its arguments, a path
    inside the checkout made relative to it and `secret` shown as KEY, after those of the environment settings
    `env_names` that are set (a section's figures depend on them)."""
    args = []
    for arg in sys.argv[1:]:
        if secret and arg == secret:
            arg = "KEY"
        elif os.path.isabs(arg) and Path(arg).is_relative_to(ROOT):
            arg = os.path.relpath(arg, ROOT)
        args.append(arg)
    env = [f"{name}={os.environ[name]}" for name in env_names if name in os.environ]
    return shlex.join([*env, PYTHON, "-m", module, *args])


def ram_gb() -> int:
    return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30)


def load_average(values: tuple[float, ...] | None = None) -> str:
    return " ".join(f"{x:.2f}" for x in values or os.getloadavg())


def heading(command: str, machine: str = "") -> list[str]:
    """A section's first lines: the command, the date and the machine (CPUs, Python, load average now, then
    `machine`)."""
    return [
        f"Command: `{command}`  ",
        f"Date: {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC  ",
        f"Machine: {os.cpu_count()} CPU, Python {platform.python_version()}; load average {load_average()} at the "
        f"end{machine}  ",
    ]


def write_section(section: str, begin: str, end: str) -> None:
    """Replaces the section between `begin` and `end` in bench/RESULTS.md, or appends it."""
    text = (
        RESULTS.read_text()
        if RESULTS.exists()
        else "# Benchmarks\n\nEach benchmark in `bench/` owns one section of this file and rewrites only that.\n\n"
    )
    if begin in text and end in text:
        head, _, rest = text.partition(begin)
        text = head + section.rstrip("\n") + rest.partition(end)[2]
    else:
        text = text.rstrip("\n") + "\n\n" + section
    tmp = RESULTS.with_suffix(".md.tmp")
    tmp.write_text(text)
    tmp.replace(RESULTS)


def publish(section: str, begin: str, end: str, write: bool = True) -> None:
    """A bench's last step: its section on stdout and, unless the run was a dry one, in bench/RESULTS.md."""
    print(section)
    if write:
        write_section(section, begin, end)
