"""/search mode="context" and /recall latency, and the assembler's overhead over /find, on one corpus.

    .venv/bin/python -m bench.assembly_latency [--size 10000] [--queries 200]

Loads the deterministic corpus of bench/find_latency.py (same generator, embedder, COPY and index build) into its
own database `ovsite_bench_assembly`, starts gunicorn, and sends, for every query in turn, /find, /search context
(1600 tokens, no purpose), /search context (purpose coding) and /recall (its defaults) on one keep-alive
connection, so the four are measured alternately in one run. The assembly overhead is the median over queries of
(context − find) on the same query. Rewrites its section of bench/RESULTS.md.
"""

import sys

from bench import find_latency as corpus
from bench import harness

DATABASE = "ovsite_bench_assembly"
SECTION_BEGIN, SECTION_END = "<!-- assembly_latency:begin -->", "<!-- assembly_latency:end -->"
TARGET_CONTEXT_P50_MS, TARGET_OVERHEAD_MS = 15.0, 3.0
ENDPOINTS = {
    "find": ("/api/v1/search/find", {"limit": 10}),
    "context": ("/api/v1/search/search", {"mode": "context", "max_tokens": 1600}),
    "context+coding": ("/api/v1/search/search", {"mode": "context", "max_tokens": 1600, "purpose": "coding"}),
    "recall": ("/api/v1/search/recall", {}),
}


def run(args) -> dict:
    import httpx

    loaded, _ = corpus.load_corpus(args.size)
    # The query-vector cache is off (harness.configure): it would hide the embedder from the requests that follow
    # /find with the same words, and this bench compares the kernels.
    server = harness.Gunicorn(args.workers)
    server.start()
    try:
        harness.warm_up(server, corpus.QUERIES)
        samples = {name: {"client": [], "server": [], "entries": [], "used": []} for name in ENDPOINTS}
        with httpx.Client(base_url=server.url, timeout=60) as client:
            for path, extra in ENDPOINTS.values():  # one untimed pass each: first-use costs out
                client.post(path, json={"query": corpus.QUERIES[0], **extra}).raise_for_status()
            for i in range(args.queries):
                query = corpus.QUERIES[i % len(corpus.QUERIES)]
                for name, (path, extra) in ENDPOINTS.items():
                    answer = harness.timed_post(client, path, {"query": query, **extra})
                    sample = samples[name]
                    sample["client"].append(answer.client_ms)
                    sample["server"].append(answer.server_ms)
                    if "stats" in answer.result:
                        sample["entries"].append(answer.result["stats"]["returned"])
                        sample["used"].append(answer.result["stats"]["used_tokens"])
    finally:
        server.stop()
    return {
        "loaded": loaded,
        "samples": samples,
        "server_command": server.command,
        "size": args.size,
        "queries": args.queries,
    }


def paired_overhead(samples: dict, name: str, key: str) -> float:
    return harness.paired_median(samples[name][key], samples["find"][key])


def render(run: dict, command: str) -> str:
    s = run["samples"]
    lines = [
        SECTION_BEGIN,
        "## assembly_latency — /search context and /recall vs /find",
        "",
        *harness.heading(command),
        f"Server: `gunicorn {run['server_command']}`, database `{harness.database()}`; corpus of "
        f"bench/find_latency.py, {run['size']:,} nodes (the search partitions' HNSW indexes built in "
        f"{run['loaded']['indexes_s']:.1f} s after the load, two sessions); {run['queries']} queries, the four "
        "requests alternating per query on one keep-alive connection; query-vector cache off (every request embeds "
        "its query). All figures from this one run.",
        "",
        "| request | client p50 | client p95 | server p50 | server p95 | entries p50 | used tokens p50 |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name in ENDPOINTS:
        x = s[name]
        entries = f"{harness.median(x['entries']):.0f}" if x["entries"] else "—"
        used = f"{harness.median(x['used']):.0f}" if x["used"] else "—"
        lines.append(
            f"| {name} | {harness.median(x['client']):.2f} | {harness.pct(x['client'], 95):.2f} | "
            f"{harness.median(x['server']):.2f} | {harness.pct(x['server'], 95):.2f} | {entries} | {used} |"
        )
    lines += [
        "",
        "Assembly overhead over /find (median over queries of the paired difference, ms):",
        "",
        "| request | client | server | target ≤ 3 ms (client) |",
        "|---|---:|---:|---|",
    ]
    for name in ("context", "context+coding", "recall"):
        overhead = paired_overhead(s, name, "client")
        lines.append(
            f"| {name} | {overhead:.2f} | {paired_overhead(s, name, 'server'):.2f} | "
            f"{'met' if overhead <= TARGET_OVERHEAD_MS else 'NOT met'} |"
        )
    context_p50 = harness.median(s["context"]["client"])
    lines += [
        "",
        f"/search context p50 end to end: {context_p50:.2f} ms — target ≤ {TARGET_CONTEXT_P50_MS:.0f} ms "
        f"{'met' if context_p50 <= TARGET_CONTEXT_P50_MS else 'NOT met'}.",
        SECTION_END,
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = harness.parser(__doc__, DATABASE)
    parser.add_argument("--size", type=int, default=10000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    harness.configure(args.database)
    section = render(run(args), harness.command_line("bench.assembly_latency"))
    harness.publish(section, SECTION_BEGIN, SECTION_END, write=not args.no_write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
