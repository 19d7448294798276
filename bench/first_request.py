#!/usr/bin/env python
"""The first /find a freshly started server answers, against the warm ones (issue 30 §3: ready means ready).

    .venv/bin/python bench/first_request.py [--size 10000] [--rounds 5] [--queries 50] [--reuse]

Loads the corpus of bench/find_latency.py into its own database `ovsite_bench_first` (with `--reuse`, keeps what is
loaded there). Then, per round: starts the server as `make run` does (`python -m uvicorn ovsite.asgi:application`,
a fresh process), polls its port until it accepts a TCP connection, sends one `POST /api/v1/search/find` on a new
connection and times it (the first request), checks that `GET /ready` answers 200, sends `--queries` other distinct
queries one at a time on one keep-alive connection (the warm requests) and stops the server. No request is sent
before the first one, not even /health: the port opening is all a client knows. Target: the median first request
within 2x the median of the rounds' warm p50. Rewrites its section of bench/RESULTS.md.
"""

import argparse
import datetime as dt
import os
import platform
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import assembly_latency  # noqa: E402 — it configures the environment before Django loads
import find_latency as corpus  # noqa: E402

DB = "ovsite_bench_first"  # its own: this branch's migrations must not touch the other benches' databases
assembly_latency.DB = corpus.BENCH_DB = DB
os.environ["OVSITE_PG_DATABASE"] = DB
SECTION_BEGIN, SECTION_END = "<!-- first_request:begin -->", "<!-- first_request:end -->"
TARGET_RATIO = 2.0
SERVER_ARGS = ["-m", "uvicorn", "ovsite.asgi:application", "--host", "127.0.0.1"]  # as the Makefile's `run`


def _loaded_nodes() -> int:
    try:
        with corpus.raw_connection() as conn:
            return conn.execute("SELECT count(*) FROM retrieval_context").fetchone()[0]
    except Exception:  # no database or no table yet: nothing loaded
        return 0


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def one_round(first_query: str, warm_queries: list[str], log_dir: Path) -> dict:
    """A fresh server: seconds until its port opens, the first /find, /ready's status, the warm /finds (ms)."""
    import httpx

    port = corpus.free_port()
    url = f"http://127.0.0.1:{port}"
    env = dict(os.environ, OVSITE_PG_DATABASE=DB, DJANGO_SETTINGS_MODULE="ovsite.settings")
    env.pop("OVSITE_ROOT_API_KEY", None)  # dev mode: account and user "default"
    with open(log_dir / f"uvicorn-{port}.log", "wb") as log:
        started = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, *SERVER_ARGS, "--port", str(port)],
            cwd=corpus.ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        while not _port_open(port):
            if proc.poll() is not None:
                raise RuntimeError(f"uvicorn exited with {proc.returncode}; see {log_dir}")
            if time.perf_counter() - started > 120:
                raise RuntimeError(f"uvicorn did not open its port in 120 s; see {log_dir}")
            time.sleep(0.005)
        opened_s = time.perf_counter() - started
        with httpx.Client(base_url=url, timeout=60) as client:
            t = time.perf_counter()
            client.post("/api/v1/search/find", json={"query": first_query}).raise_for_status()
            first_ms = (time.perf_counter() - t) * 1000
        ready = httpx.get(url + "/ready", timeout=60).status_code
        warm = []
        with httpx.Client(base_url=url, timeout=60) as client:
            for query in warm_queries:
                t = time.perf_counter()
                client.post("/api/v1/search/find", json={"query": query}).raise_for_status()
                warm.append((time.perf_counter() - t) * 1000)
    finally:
        proc.send_signal(signal.SIGTERM)  # the process we started, by its own pid
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # its own session only (start_new_session)
            proc.wait(timeout=10)
    return {"opened_s": opened_s, "first_ms": first_ms, "ready": ready, "warm": warm}


def run(args) -> dict:
    import django

    if args.reuse and _loaded_nodes() >= args.size:
        django.setup()
        from django.core.management import call_command

        call_command("migrate", interactive=False, verbosity=0)
    else:
        assembly_latency.load_bench_corpus(args.size)
    log_dir = Path(tempfile.mkdtemp(prefix="ovsite-first-"))
    queries = corpus.QUERIES
    rounds = []
    for i in range(args.rounds):
        k = i % len(queries)
        first, warm = queries[k], (queries[k + 1 :] + queries[:k])[: args.queries]
        corpus.wait_quiet(20)  # other agents share these cores: start each round on a quiet machine if it can be
        rounds.append(one_round(first, warm, log_dir))
        r = rounds[-1]
        corpus.log(
            f"round {i + 1}: port open after {r['opened_s']:.2f} s, first {r['first_ms']:.1f} ms, "
            f"warm p50 {corpus.median(r['warm']):.1f} ms, /ready {r['ready']}"
        )
    return {"rounds": rounds, "size": _loaded_nodes(), "queries": len(rounds[0]["warm"]), "note": args.note}


def render(result: dict, command: str) -> str:
    rounds = result["rounds"]
    first = corpus.median([r["first_ms"] for r in rounds])
    warm = corpus.median([corpus.median(r["warm"]) for r in rounds])
    ratio = first / warm
    lines = [
        SECTION_BEGIN,
        "## first_request — the first /find after a fresh start, against the warm ones",
        "",
        f"Command: `{command}`  ",
        f"Date: {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC  ",
        f"Machine: {os.cpu_count()} CPU, Python {platform.python_version()}; load average "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} at the end. {result['note']}  ",
        f"Server: `python {' '.join(SERVER_ARGS)} --port PORT` (as `make run`), database `{DB}`, "
        f"{result['size']:,} nodes (the corpus of bench/find_latency.py). Each round starts a fresh process, "
        "waits until its port accepts a TCP connection (it opens once the embedder is loaded: "
        "ovsite/readiness.py), then times one /find on a new connection, checks /ready, and times "
        f"{result['queries']} other distinct queries one at a time on one keep-alive connection (client side, "
        "ms).",
        "",
        "| round | port open after s | first /find ms | /ready | warm p50 ms | warm p95 ms | first / warm p50 |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for i, r in enumerate(rounds, 1):
        p50 = corpus.median(r["warm"])
        lines.append(
            f"| {i} | {r['opened_s']:.2f} | {r['first_ms']:.1f} | {r['ready']} | {p50:.1f} | "
            f"{corpus.pct(r['warm'], 95):.1f} | {r['first_ms'] / p50:.2f} |"
        )
    lines += [
        "",
        f"Median first request {first:.1f} ms against a median warm p50 of {warm:.1f} ms: "
        f"{ratio:.2f}x — target ≤ {TARGET_RATIO:g}x {'met' if ratio <= TARGET_RATIO else 'NOT met'}.",
        SECTION_END,
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=10000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--queries", type=int, default=50, help="warm queries per round, all distinct")
    parser.add_argument("--reuse", action="store_true", help="keep the corpus already loaded in its database")
    parser.add_argument("--note", default="", help="what the section should say about the machine's state")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    if args.queries >= len(corpus.QUERIES):
        parser.error(
            f"--queries must be below {len(corpus.QUERIES)}: the warm queries are distinct from each "
            "other and from the first"
        )
    command = ".venv/bin/python bench/first_request.py " + shlex.join(sys.argv[1:])
    section = render(run(args), command.strip())
    assembly_latency.publish(section, SECTION_BEGIN, SECTION_END, write=not args.no_write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
