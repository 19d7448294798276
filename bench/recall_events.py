"""The request-path cost of recording a RecallEvent: /search context and /recall with recording on vs off.

    .venv/bin/python -m bench.recall_events [--size 2000] [--queries 200] [--inserts 500]

Loads the deterministic corpus of bench/find_latency.py into its own database `ovsite_bench_events`, starts one
gunicorn worker and, for every query, sends each request twice on one keep-alive connection: once with
`RetrievalSettings.record_recall_events` on and once off (the row is flipped between requests, outside the timed
span, and the order alternates per query so drift falls on both sides). Reports client and server p50 of both and
the median paired difference (the event is written after the response is sent: back to back, the next request
waits for it); then times the recording call alone in-process, the shipped statement against the ORM path it
replaced. Rewrites its section of bench/RESULTS.md.
"""

import sys
import time

from bench import find_latency as corpus
from bench import harness

DATABASE = "ovsite_bench_events"
SECTION_BEGIN, SECTION_END = "<!-- recall_events:begin -->", "<!-- recall_events:end -->"
ENDPOINTS = {
    "search context (coding)": ("/api/v1/search/search", {"mode": "context", "max_tokens": 1600, "purpose": "coding"}),
    "recall": ("/api/v1/search/recall", {}),
}


def run(args) -> dict:
    import httpx

    _, conn = corpus.load_corpus(args.size)
    from profiles.models import RecallEvent, RetrievalSettings  # once Django is set up

    conn.execute(f"TRUNCATE {RecallEvent._meta.db_table}")
    settings_table = RetrievalSettings._meta.db_table

    def recording(on: bool) -> None:
        conn.execute(f"UPDATE {settings_table} SET record_recall_events = %s WHERE id = 1", [on])

    server = harness.Gunicorn(1)
    server.start()
    samples = {name: {side: {"client": [], "server": []} for side in ("on", "off")} for name in ENDPOINTS}
    try:
        harness.warm_up(server, corpus.QUERIES)
        with httpx.Client(base_url=server.url, timeout=60) as client:
            for path, extra in ENDPOINTS.values():  # first-use costs out, on both sides
                for on in (True, False):
                    recording(on)
                    client.post(path, json={"query": corpus.QUERIES[0], **extra}).raise_for_status()
            for i in range(args.queries):
                query = corpus.QUERIES[i % len(corpus.QUERIES)]
                for name, (path, extra) in ENDPOINTS.items():
                    for on in (True, False) if i % 2 == 0 else (False, True):
                        recording(on)
                        answer = harness.timed_post(client, path, {"query": query, **extra})
                        side = samples[name]["on" if on else "off"]
                        side["client"].append(answer.client_ms)
                        side["server"].append(answer.server_ms)
        recorded = RecallEvent.objects.count()
    finally:
        server.stop()
        recording(True)
    return {
        "samples": samples,
        "recorded": recorded,
        "server_command": server.command,
        "size": args.size,
        "queries": args.queries,
        "insert_paths": insert_paths(args.inserts),
    }


def insert_paths(count: int) -> dict[str, list[float]]:
    """The recording call alone, in this process on the bench database, `count` times each, alternating: the
    shipped `record_recall_event` (one statement) against the ORM path it replaced (BEGIN, SET LOCAL
    synchronous_commit, Model.objects.create, COMMIT), with the same stats; the rows are deleted after."""
    from django.db import connection, transaction

    from profiles.models import RecallEvent
    from profiles.services import record_recall_event

    stats = {
        "purpose": "coding",
        "max_tokens": 1600,
        "used_tokens": 1210,
        "candidates": 40,
        "returned": 9,
        "dropped": 2,
        "dedup": {"cooled": 1},
        "tier_counts": {"full": 2, "overview": 1, "abstract": 5, "uri": 1},
        "query_expansion": "off",
        "rewrite": "off",
    }

    def shipped():
        record_recall_event(endpoint="search", account_id=None, stats=stats, latency_ms=30.0)

    def orm():
        tiers = stats["tier_counts"]
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL synchronous_commit TO OFF")
            RecallEvent.objects.create(
                endpoint="search",
                purpose=stats["purpose"],
                account_id=None,
                max_tokens=stats["max_tokens"],
                used_tokens=stats["used_tokens"],
                candidates=stats["candidates"],
                returned=stats["returned"],
                dropped=stats["dropped"],
                cooled=stats["dedup"]["cooled"],
                tier_full=tiers["full"],
                tier_overview=tiers["overview"],
                tier_abstract=tiers["abstract"],
                tier_uri=tiers["uri"],
                query_expansion=stats["query_expansion"],
                rewrite=stats["rewrite"],
                latency_ms=30.0,
            )

    times = {"one statement (shipped)": [], "ORM transaction (before)": []}
    paths = list(zip(times, (shipped, orm), strict=True))
    for i in range(count):
        for name, path in paths if i % 2 == 0 else paths[::-1]:
            started = time.perf_counter()
            path()
            times[name].append((time.perf_counter() - started) * 1000)
    RecallEvent.objects.filter(endpoint="search", latency_ms=30.0).delete()
    return times


def render(run: dict, command: str) -> str:
    median, pct = harness.median, harness.pct
    lines = [
        SECTION_BEGIN,
        "## recall_events — request-path cost of recording a RecallEvent",
        "",
        *harness.heading(command, " (shared machine)"),
        f"Server: `gunicorn {run['server_command']}`, database `{harness.database()}`, corpus of "
        f"bench/find_latency.py with {run['size']:,} nodes; {run['queries']} queries, each request sent with "
        "recording on and off in turn (order alternating per query) on one keep-alive connection; query-vector "
        "cache off. "
        f"{run['recorded']:,} events recorded. All figures from this one run.",
        "",
        "| request | client p50 on | client p50 off | paired Δ client p50 | server p50 on | server p50 off |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, sides in run["samples"].items():
        on, off = sides["on"], sides["off"]
        delta = harness.paired_median(on["client"], off["client"])
        lines.append(
            f"| {name} | {median(on['client']):.2f} | {median(off['client']):.2f} | {delta:+.2f} | "
            f"{median(on['server']):.2f} | {median(off['server']):.2f} |"
        )
    paths = run["insert_paths"]
    count = len(next(iter(paths.values())))
    lines += [
        "",
        "Times in ms. The REST views write the event once the response is sent (the server's close() of "
        "it), so neither the client nor the Server-Timing stages wait for the INSERT; the paired Δ is the "
        "median over queries of (on − off) for the same query.",
        "",
        f"The recording call alone, in the bench process, {count} times each path, alternating (same run):",
        "",
        "| path | p50 | p95 |",
        "|---|---:|---:|",
    ]
    lines += [f"| {name} | {median(times):.3f} | {pct(times, 95):.3f} |" for name, times in paths.items()]
    shipped, before = (median(times) for times in paths.values())
    lines += ["", f"The shipped statement costs {shipped / before:.2f}× the ORM path it replaced.", SECTION_END, ""]
    return "\n".join(lines)


def main() -> int:
    parser = harness.parser(__doc__, DATABASE)
    parser.add_argument("--size", type=int, default=2000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--inserts", type=int, default=500)
    args = parser.parse_args()
    harness.configure(args.database)
    section = render(run(args), harness.command_line("bench.recall_events"))
    harness.publish(section, SECTION_BEGIN, SECTION_END, write=not args.no_write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
