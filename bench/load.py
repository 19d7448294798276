"""Load on /recall: N concurrent keep-alive clients for a fixed time against gunicorn, on the 10k corpus.

    .venv/bin/python -m bench.load [--clients 8 32] [--seconds 60] [--workers 2] [--threads 2] [--reuse]

Uses the corpus and database of bench/assembly_latency.py (`ovsite_bench_assembly`); with `--reuse` it keeps what is
loaded there, else it loads it anew. Loopback only. Each client is a process with its own keep-alive
connection sending /recall (its defaults: purpose coding, 1600 tokens) with the next query of the cycle as soon as
the previous answer arrives. Reports req/s, latency percentiles, errors, and the resident memory of each gunicorn
worker at the end of each phase. Rewrites its section of bench/RESULTS.md.
"""

import multiprocessing
import sys
import time
from concurrent.futures import ProcessPoolExecutor

from bench import assembly_latency, harness
from bench import find_latency as corpus

SECTION_BEGIN, SECTION_END = "<!-- load:begin -->", "<!-- load:end -->"
TARGET_RPS_8 = 150


def _client(url: str, seconds: float, offset: int, ready, start) -> tuple[list[float], list[str]]:
    """One client process: a sync keep-alive connection, the next request as soon as the answer arrives. Processes,
    not asyncio tasks, so that the clients do not share one interpreter lock and queue behind each other."""
    import httpx

    latencies: list[float] = []
    errors: list[str] = []
    with httpx.Client(base_url=url, timeout=30) as client:
        client.get("/health")  # the connection is open before the clock starts
        ready.wait()
        start.wait()
        deadline = time.perf_counter() + seconds
        i = offset
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            try:
                response = client.post("/api/v1/search/recall", json={"query": corpus.QUERIES[i % len(corpus.QUERIES)]})
                if response.status_code != 200:
                    errors.append(str(response.status_code))
                else:
                    latencies.append((time.perf_counter() - started) * 1000)
            except httpx.HTTPError as error:
                errors.append(type(error).__name__)
            i += 1
    return latencies, errors


def _phase(url: str, clients: int, seconds: float) -> dict:
    with multiprocessing.Manager() as manager, ProcessPoolExecutor(clients) as pool:
        ready, start = manager.Barrier(clients + 1), manager.Barrier(clients + 1)
        futures = [pool.submit(_client, url, seconds, k * 7, ready, start) for k in range(clients)]
        ready.wait()
        cpu = harness.cpu_snapshot()
        started = time.perf_counter()
        start.wait()
        results = [future.result() for future in futures]
        elapsed = time.perf_counter() - started
        cpu_busy = harness.cpu_busy_since(cpu)
    latencies = [x for result, _ in results for x in result]
    errors = [x for _, result in results for x in result]
    return {
        "clients": clients,
        "seconds": elapsed,
        "requests": len(latencies),
        "errors": len(errors),
        "error_kinds": sorted(set(errors)),
        "rps": len(latencies) / elapsed,
        "p50": harness.median(latencies),
        "p95": harness.pct(latencies, 95),
        "p99": harness.pct(latencies, 99),
        "cpu_busy": cpu_busy,
    }


def _worker_rss_mb(server) -> list[float]:
    import psutil

    return [round(child.memory_info().rss / 2**20, 1) for child in psutil.Process(server.proc.pid).children()]


def run(args) -> dict:
    corpus.load_corpus(args.size, args.reuse)
    # The cache is off in this process's environment (harness.configure), which the server inherits unless told.
    server_env = {} if args.no_query_cache else {"OVSITE_QUERY_VECTOR_CACHE": "1024"}
    server = harness.Gunicorn(args.workers, env=server_env, threads=args.threads)
    server.start()
    phases = []
    try:
        harness.warm_up(server, corpus.QUERIES)
        _phase(server.url, max(args.clients), 5)  # untimed: every worker and connection warm
        for clients in args.clients:
            phase = _phase(server.url, clients, args.seconds)
            phase["worker_rss_mb"] = _worker_rss_mb(server)
            phases.append(phase)
    finally:
        server.stop()
    return {
        "phases": phases,
        "server_command": server.command,
        "size": harness.loaded_nodes(),
        "query_cache": "off" if args.no_query_cache else "on",
    }


def render(result: dict, command: str) -> str:
    lines = [
        SECTION_BEGIN,
        "## load — concurrent /recall",
        "",
        *harness.heading(command, " (client, server and PostgreSQL share the cores)"),
        f"Server: `gunicorn {result['server_command']}`, database `{harness.database()}`, "
        f"{result['size']:,} nodes. Clients: one process each (httpx, one keep-alive connection), /recall with "
        "its defaults (purpose coding, 1600 tokens), the next query as soon as the answer arrives, cycling through "
        f"{len(corpus.QUERIES)} queries; query-vector cache {result['query_cache']} (on: each worker embeds "
        "each query of the cycle once; off: every request embeds its query).",
        "",
        "| clients | seconds | requests | req/s | p50 ms | p95 ms | p99 ms | errors | CPU busy | worker RSS MB |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for p in result["phases"]:
        errors = f"{p['errors']} ({', '.join(p['error_kinds'])})" if p["errors"] else "0"
        lines.append(
            f"| {p['clients']} | {p['seconds']:.0f} | {p['requests']} | {p['rps']:.1f} | {p['p50']:.1f} | "
            f"{p['p95']:.1f} | {p['p99']:.1f} | {errors} | {p['cpu_busy']:.0%} | "
            f"{', '.join(map(str, p['worker_rss_mb']))} |"
        )
    eight = next((p for p in result["phases"] if p["clients"] == 8), None)
    if eight:
        verdict = "met" if eight["rps"] >= TARGET_RPS_8 and not eight["errors"] else "NOT met"
        lines += [
            "",
            f"Goal: 0 errors and ≥ {TARGET_RPS_8} req/s with 8 clients: {verdict} "
            f"({eight['rps']:.1f} req/s, {eight['errors']} errors).",
        ]
    lines.append(SECTION_END)
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = harness.parser(__doc__, assembly_latency.DATABASE)
    parser.add_argument("--clients", type=int, nargs="+", default=[8, 32])
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--size", type=int, default=10000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--no-query-cache", action="store_true", help="every request embeds its query")
    parser.add_argument("--reuse", action="store_true", help="keep the corpus already loaded")
    args = parser.parse_args()
    harness.configure(args.database)
    # Each cache mode keeps its own section of RESULTS.md: the two runs are read side by side.
    marker = "load-no-query-cache" if args.no_query_cache else "load"
    begin, end = f"<!-- {marker}:begin -->", f"<!-- {marker}:end -->"
    section = render(run(args), harness.command_line("bench.load"))
    section = section.replace(SECTION_BEGIN, begin).replace(SECTION_END, end)
    harness.publish(section, begin, end, write=not args.no_write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
