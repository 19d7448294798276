"""The first /find a freshly started server answers, against the warm ones (issue 30 §3: ready means ready).

    .venv/bin/python -m bench.first_request [--size 10000] [--rounds 5] [--queries 50] [--reuse]

Loads the corpus of bench/find_latency.py into its own database `ovsite_bench_first` (with `--reuse`, keeps what is
loaded there). Then, per round: starts the server as `make run` does (`python -m uvicorn ovsite.asgi:application`,
a fresh process), polls its port until it accepts a TCP connection, sends one `POST /api/v1/search/find` on a new
connection and times it (the first request), checks that `GET /ready` answers 200, sends `--queries` other distinct
queries one at a time on one keep-alive connection (the warm requests) and stops the server. No request is sent
before the first one, not even /health: the port opening is all a client knows. Target: the median first request
within 2x the median of the rounds' warm p50. Rewrites its section of bench/RESULTS.md.
"""

import socket
import sys
import tempfile
import time
from pathlib import Path

from bench import find_latency as corpus
from bench import harness

DATABASE = "ovsite_bench_first"  # its own: this branch's migrations must not touch the other benches' databases
SECTION_BEGIN, SECTION_END = "<!-- first_request:begin -->", "<!-- first_request:end -->"
TARGET_RATIO = 2.0
SERVER_ARGS = ["-m", "uvicorn", "ovsite.asgi:application", "--host", "127.0.0.1"]  # as the Makefile's `run`


class FreshServer(harness.ServerProcess):
    """`make run`'s server in a fresh process. A client knows only that its port opens: no request, not even
    /health, goes before the first one timed."""

    name = "uvicorn"

    def __init__(self, log_dir: Path):
        self.port = harness.free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_dir / f"uvicorn-{self.port}.log"

    def start(self, timeout_s: float = 120.0) -> float:
        """Seconds until the port accepts a TCP connection."""
        started = time.perf_counter()
        self.spawn([sys.executable, *SERVER_ARGS, "--port", str(self.port)], harness.server_env(), harness.ROOT)
        while not _port_open(self.port):
            self.check_running()
            if time.perf_counter() - started > timeout_s:
                raise RuntimeError(f"uvicorn did not open its port in {timeout_s:.0f} s; see {self.log_path}")
            time.sleep(0.005)
        return time.perf_counter() - started


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def one_round(first_query: str, warm_queries: list[str], log_dir: Path) -> dict:
    """A fresh server: seconds until its port opens, the first /find, /ready's status, the warm /finds (ms)."""
    import httpx

    server = FreshServer(log_dir)
    try:
        opened_s = server.start()
        with httpx.Client(base_url=server.url, timeout=60) as client:
            first_ms = harness.timed_post(client, "/api/v1/search/find", {"query": first_query}).client_ms
        ready = httpx.get(server.url + "/ready", timeout=60).status_code
        with httpx.Client(base_url=server.url, timeout=60) as client:
            warm = [harness.timed_post(client, "/api/v1/search/find", {"query": q}).client_ms for q in warm_queries]
    finally:
        server.stop()
    return {"opened_s": opened_s, "first_ms": first_ms, "ready": ready, "warm": warm}


def run(args) -> dict:
    corpus.load_corpus(args.size, args.reuse)
    log_dir = Path(tempfile.mkdtemp(prefix="ovsite-first-"))
    queries = corpus.QUERIES
    rounds = []
    for i in range(args.rounds):
        k = i % len(queries)
        first, warm = queries[k], (queries[k + 1 :] + queries[:k])[: args.queries]
        harness.wait_quiet(20)  # other agents share these cores: start each round on a quiet machine if it can be
        rounds.append(one_round(first, warm, log_dir))
        r = rounds[-1]
        harness.log(
            f"round {i + 1}: port open after {r['opened_s']:.2f} s, first {r['first_ms']:.1f} ms, "
            f"warm p50 {harness.median(r['warm']):.1f} ms, /ready {r['ready']}"
        )
    return {"rounds": rounds, "size": harness.loaded_nodes(), "queries": len(rounds[0]["warm"]), "note": args.note}


def render(result: dict, command: str) -> str:
    rounds = result["rounds"]
    first = harness.median([r["first_ms"] for r in rounds])
    warm = harness.median([harness.median(r["warm"]) for r in rounds])
    ratio = first / warm
    lines = [
        SECTION_BEGIN,
        "## first_request — the first /find after a fresh start, against the warm ones",
        "",
        *harness.heading(command, f". {result['note']}" if result["note"] else ""),
        f"Server: `python {' '.join(SERVER_ARGS)} --port PORT` (as `make run`), database `{harness.database()}`, "
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
        p50 = harness.median(r["warm"])
        lines.append(
            f"| {i} | {r['opened_s']:.2f} | {r['first_ms']:.1f} | {r['ready']} | {p50:.1f} | "
            f"{harness.pct(r['warm'], 95):.1f} | {r['first_ms'] / p50:.2f} |"
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
    parser = harness.parser(__doc__, DATABASE)
    parser.add_argument("--size", type=int, default=10000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--queries", type=int, default=50, help="warm queries per round, all distinct")
    parser.add_argument("--reuse", action="store_true", help="keep the corpus already loaded in its database")
    parser.add_argument("--note", default="", help="what the section should say about the machine's state")
    args = parser.parse_args()
    if args.queries >= len(corpus.QUERIES):
        parser.error(
            f"--queries must be below {len(corpus.QUERIES)}: the warm queries are distinct from each "
            "other and from the first"
        )
    harness.configure(args.database)
    section = render(run(args), harness.command_line("bench.first_request"))
    harness.publish(section, SECTION_BEGIN, SECTION_END, write=not args.no_write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
