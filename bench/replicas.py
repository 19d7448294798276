"""Read throughput with one streaming read replica beside none, on the same machine (issue 25 item 4).

    .venv/bin/python -m bench.replicas [--size 10000] [--clients 1 8] [--seconds 20] [--rounds 2] [--workers 2]
        [--threads 4]

It runs on a PostgreSQL of its own, never the dev, test or other benchmarks' server: a throwaway embedded primary in
a temporary folder, loaded with bench/find_latency.py's synthetic corpus (`--size` nodes), and its hot standby made
by `pg_basebackup -R` (core.embedded_pg.make_standby), each with the embedded server's shared_buffers. Two gunicorn
servers run on the primary, one without replicas and one with DATABASE_REPLICA_URLS naming the standby. For /find
and for /search context (purpose coding), each server in turn takes each `--clients` count of client processes
(one: the cost of a request; eight: the throughput), each with one
keep-alive connection sending the next query as soon as the answer arrives, for `--seconds`, `--rounds` times
in turn with the other server; every answer's X-Ovsite-Served-By is counted, and the CPU seconds each PostgreSQL
(its postmaster and every backend) spent. The section of bench/RESULTS.md it rewrites gives req/s, latency medians
and where the CPU went. The servers and both PostgreSQLs are stopped and their folder removed at the end.
"""

import itertools
import multiprocessing
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from bench import find_latency as corpus
from bench import harness

DATABASE = "ovsite_bench_replicas"
SECTION_BEGIN, SECTION_END = "<!-- replicas:begin -->", "<!-- replicas:end -->"
ROUTES = {
    "find": ("/api/v1/search/find", {"limit": 10}),
    "search context": ("/api/v1/search/search", {"mode": "context", "purpose": "coding"}),
}


def _client(url: str, path: str, extra: dict, seconds: float, offset: int, ready, start) -> tuple[list, Counter]:
    """One client process: a keep-alive connection, the next request as soon as the answer arrives. Returns the
    latencies (ms) of the answers and a count of who served them (an error counts as its status or exception)."""
    import httpx

    latencies: list[float] = []
    served: Counter = Counter()
    with httpx.Client(base_url=url, timeout=30) as client:
        client.get("/health")  # the connection is open before the clock starts
        ready.wait()
        start.wait()
        deadline = time.perf_counter() + seconds
        i = offset
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            try:
                response = client.post(path, json={"query": corpus.QUERIES[i % len(corpus.QUERIES)], **extra})
                if response.status_code == 200:
                    latencies.append((time.perf_counter() - started) * 1000)
                    served[response.headers.get("X-Ovsite-Served-By", "?")] += 1
                else:
                    served[f"error {response.status_code}"] += 1
            except httpx.HTTPError as error:
                served[f"error {type(error).__name__}"] += 1
            i += 1
    return latencies, served


def postgres_cpu_s(pgdata: Path) -> float:
    """CPU seconds (user + system) of the server of `pgdata`: its postmaster and every process under it."""
    import psutil

    postmaster = psutil.Process(int((pgdata / "postmaster.pid").read_text().split("\n", 1)[0]))
    total = 0.0
    for process in [postmaster, *postmaster.children(recursive=True)]:
        try:
            times = process.cpu_times()
            total += times.user + times.system
        except psutil.NoSuchProcess:
            pass
    return total


def phase(url: str, route: str, clients: int, seconds: float, servers: dict[str, Path]) -> dict:
    path, extra = ROUTES[route]
    with multiprocessing.Manager() as manager, ProcessPoolExecutor(clients) as pool:
        ready, start = manager.Barrier(clients + 1), manager.Barrier(clients + 1)
        futures = [pool.submit(_client, url, path, extra, seconds, k * 7, ready, start) for k in range(clients)]
        ready.wait()
        cpu = harness.cpu_snapshot()
        pg_cpu = {name: postgres_cpu_s(pgdata) for name, pgdata in servers.items()}
        started = time.perf_counter()
        start.wait()
        results = [future.result() for future in futures]
        elapsed = time.perf_counter() - started
        cpu_busy = harness.cpu_busy_since(cpu)
        pg_cpu = {name: postgres_cpu_s(pgdata) - pg_cpu[name] for name, pgdata in servers.items()}
    latencies = [x for result, _ in results for x in result]
    served = sum((counts for _, counts in results), Counter())
    return {
        "route": route,
        "seconds": elapsed,
        "answers": len(latencies),
        "rps": len(latencies) / elapsed,
        "p50": harness.median(latencies),
        "p95": harness.pct(latencies, 95),
        "served": dict(served),
        "cpu_busy": cpu_busy,
        "pg_cpu_s": pg_cpu,
    }


def run(args, folder: Path) -> dict:
    from core import embedded_pg

    primary, standby = folder / "primary", folder / "standby"
    _, conn = corpus.load_corpus(args.size)
    conn.close()
    embedded_pg.make_standby(primary, standby)
    standby_socket = embedded_pg.start(standby, DATABASE, embedded_pg.configured_shared_buffers())
    replica_url = f"postgres://{embedded_pg.POSTGRES_USER}@/{DATABASE}?host={standby_socket}"
    # The query-vector cache on (the harness turns it off): each worker embeds each query of the cycle once, and the
    # phases measure the search, not the embedder.
    envs = {
        "none": {"OVSITE_QUERY_VECTOR_CACHE": "1024"},
        "one replica": {"OVSITE_QUERY_VECTOR_CACHE": "1024", "DATABASE_REPLICA_URLS": replica_url},
    }
    servers = {}
    for name, env in envs.items():
        log_dir = folder / name.replace(" ", "-")
        log_dir.mkdir()
        servers[name] = harness.Gunicorn(args.workers, threads=args.threads, env=env, log_dir=log_dir)
    phases = []
    pgdata = {"primary": primary, "standby": standby}
    try:
        for server in servers.values():
            server.start()
            harness.warm_up(server, corpus.QUERIES)
        for route in ROUTES:
            for server in servers.values():
                phase(server.url, route, max(args.clients), 3, {})  # untimed: every thread and connection warm
            # The two servers in turn, the order swapped every round: drift on a shared machine falls on both.
            for clients in args.clients:
                for round_ in range(args.rounds):
                    for name in list(servers)[:: 1 if round_ % 2 == 0 else -1]:
                        harness.wait_quiet(10)  # other work on the machine, bounded
                        harness.log(f"{route}, {name}, {clients} clients, round {round_ + 1}")
                        result = phase(servers[name].url, route, clients, args.seconds, pgdata)
                        phases.append({"replicas": name, "clients": clients, **result})
    finally:
        for server in servers.values():
            server.stop()
    return {
        "phases": phases,
        "size": harness.loaded_nodes(),
        "server_command": servers["none"].command,
        "shared_buffers": embedded_pg.configured_shared_buffers(),
    }


def render(result: dict, args, command: str) -> str:
    lines = [
        SECTION_BEGIN,
        "## replicas — read throughput with one streaming replica beside none",
        "",
        *harness.heading(command, f", {harness.ram_gb()} GB RAM (clients, servers and both PostgreSQLs share them)"),
        f"Server: `gunicorn {result['server_command']}` on a throwaway embedded primary, database `{DATABASE}`, "
        f"{result['size']:,} nodes (bench/find_latency.py's corpus), shared_buffers {result['shared_buffers']} on "
        "the primary and on its hot standby (`pg_basebackup -R`); the second server has "
        "`DATABASE_REPLICA_URLS` naming the standby. Clients: "
        f"{' and '.join(map(str, args.clients))} processes, one keep-alive connection each, the next query as soon "
        "as the answer arrives, "
        f"{args.seconds:.0f} s a phase, {args.rounds} rounds of the two servers in turn (the order swapped each "
        "round) after 3 s untimed each; query-vector cache on. *Served by* counts the answers' "
        "`X-Ovsite-Served-By`; *PostgreSQL CPU* is the CPU seconds each server's processes spent in the phase, "
        "per 1,000 answers.",
        "",
        "| route | clients | replicas | req/s by round | req/s (median) | p50 ms (median) | p95 ms (median) | "
        "served by | CPU busy | PostgreSQL CPU s / 1k answers: primary, standby |",
        "|---|---:|---|---|---:|---:|---:|---|---:|---|",
    ]
    for route, clients, name in itertools.product(ROUTES, args.clients, ("none", "one replica")):
        runs = [p for p in result["phases"] if (p["route"], p["clients"], p["replicas"]) == (route, clients, name)]
        served = Counter()
        for p in runs:
            served.update(p["served"])
        answers = sum(p["answers"] for p in runs)
        per_k = {db: 1000 * sum(p["pg_cpu_s"][db] for p in runs) / max(1, answers) for db in ("primary", "standby")}
        by_round = ", ".join(f"{p['rps']:.1f}" for p in runs)
        lines.append(
            f"| {route} | {clients} | {name} | {by_round} | "
            f"{harness.median([p['rps'] for p in runs]):.1f} | {harness.median([p['p50'] for p in runs]):.1f} | "
            f"{harness.median([p['p95'] for p in runs]):.1f} | "
            f"{', '.join(f'{db} {count}' for db, count in sorted(served.items()))} | "
            f"{sum(p['cpu_busy'] for p in runs) / len(runs):.0%} | {per_k['primary']:.2f}, {per_k['standby']:.2f} |"
        )
    lines += [
        "",
        "What bounds it: the machine's cores, not the database. The clients, the gunicorn workers, the embedder and "
        "both PostgreSQLs share them (CPU busy above), so a replica on the same machine adds no CPU: it moves the "
        "search SQL from the primary's processes to the standby's, and req/s stays what the cores allow, less what "
        "the replica path adds to each request: the caller's read-after-write mark looked up in the cache (a query "
        "on the primary with the default database cache), the health check of a second connection, and once a "
        "second per worker the lag check (one short query on each server). The figure that carries over to "
        "separate hosts is the last column: the primary's PostgreSQL CPU per 1,000 reads with the replica against "
        "without it is what a replica on its own host takes off the primary.",
        SECTION_END,
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = harness.parser(__doc__)
    parser.add_argument("--size", type=int, default=10000)
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="ovsite-bench-replicas-"))
    # The primary is a server of the bench's own: Django and the servers find it through OVSITE_PG_DATA.
    os.environ["OVSITE_PG_DATA"] = str(folder / "primary")
    harness.configure(DATABASE)
    from core import embedded_pg

    try:
        result = run(args, folder)
    finally:
        for pgdata in (folder / "standby", folder / "primary"):
            if pgdata.exists():
                embedded_pg.stop(pgdata)
            shutil.rmtree(embedded_pg.socket_dir_for(pgdata), ignore_errors=True)
        shutil.rmtree(folder, ignore_errors=True)
    harness.publish(
        render(result, args, harness.command_line("bench.replicas")),
        SECTION_BEGIN,
        SECTION_END,
        write=not args.no_write,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
