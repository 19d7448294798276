#!/usr/bin/env python
"""/search mode="context" and /recall latency, and the assembler's overhead over /find, on one corpus.

    .venv/bin/python bench/assembly_latency.py [--size 10000] [--queries 200]

Loads the deterministic corpus of bench/find_latency.py (same generator, embedder, COPY and index build) into its
own database `ovsite_bench_assembly`, starts gunicorn, and sends, for every query in turn, /find, /search context
(1600 tokens, no purpose), /search context (purpose coding) and /recall (its defaults) on one keep-alive
connection, so the four are measured alternately in one run. The assembly overhead is the median over queries of
(context − find) on the same query. Rewrites its section of bench/RESULTS.md.
"""

import argparse
import datetime as dt
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import find_latency as corpus  # noqa: E402 — it configures the environment before Django loads

DB = "ovsite_bench_assembly"
corpus.BENCH_DB = DB
os.environ["OVSITE_PG_DATABASE"] = DB
SECTION_BEGIN, SECTION_END = "<!-- assembly_latency:begin -->", "<!-- assembly_latency:end -->"
TARGET_CONTEXT_P50_MS, TARGET_OVERHEAD_MS = 15.0, 3.0
ENDPOINTS = {
    "find": ("/api/v1/search/find", {"limit": 10}),
    "context": ("/api/v1/search/search", {"mode": "context", "max_tokens": 1600}),
    "context+coding": ("/api/v1/search/search", {"mode": "context", "max_tokens": 1600, "purpose": "coding"}),
    "recall": ("/api/v1/search/recall", {}),
}


def reuse_or_load(args, loaded_nodes: int) -> None:
    """With `--reuse` and the corpus already loaded, only migrate (on a stale schema the server answers 500);
    otherwise load it anew."""
    if args.reuse and loaded_nodes >= args.size:
        from django.core.management import call_command

        call_command("migrate", interactive=False, verbosity=0)
    else:
        run(argparse.Namespace(size=args.size, queries=1, workers=1, no_write=True))


def load_bench_corpus(size: int):
    """Sets Django up on the bench database `corpus.BENCH_DB` (migrated) and loads the corpus of
    bench/find_latency.py into it (every HNSW index built after the load). Returns the loader's figures and the
    raw connection."""
    import django

    django.setup()
    from django.core.management import call_command

    from core import embedded_pg
    from core.models import Account, AccountUser

    embedded_pg.start_configured(corpus.BENCH_DB)
    call_command("migrate", interactive=False, verbosity=0)
    account, _ = Account.objects.get_or_create(name="default")
    AccountUser.objects.get_or_create(account=account, user_id=corpus.USER, defaults={"role": "admin"})
    conn = corpus.raw_connection()
    return corpus.load(size, account.id, conn, dt.datetime.now(dt.UTC)), conn


def run(args) -> dict:
    import httpx

    loaded, _ = load_bench_corpus(args.size)
    # Every request embeds its own query: the per-process query-vector cache would hide the embedder from the
    # requests that follow /find with the same words, and this bench compares the kernels.
    server = corpus.Server(
        args.workers, Path(tempfile.mkdtemp(prefix="ovsite-asm-")), extra_env={"OVSITE_QUERY_VECTOR_CACHE": "0"}
    )
    server.start()
    try:
        corpus.warm_up(server)
        samples = {name: {"client": [], "server": [], "entries": [], "used": []} for name in ENDPOINTS}
        with httpx.Client(base_url=server.url, timeout=60) as client:
            for name, (path, extra) in ENDPOINTS.items():  # one untimed pass each: first-use costs out
                client.post(path, json={"query": corpus.QUERIES[0], **extra}).raise_for_status()
            for i in range(args.queries):
                query = corpus.QUERIES[i % len(corpus.QUERIES)]
                for name, (path, extra) in ENDPOINTS.items():
                    started = time.perf_counter()
                    response = client.post(path, json={"query": query, **extra})
                    elapsed = (time.perf_counter() - started) * 1000
                    response.raise_for_status()
                    result = response.json()["result"]
                    sample = samples[name]
                    sample["client"].append(elapsed)
                    sample["server"].append(sum(corpus.server_timing(response.headers["Server-Timing"]).values()))
                    if "stats" in result:
                        sample["entries"].append(result["stats"]["returned"])
                        sample["used"].append(result["stats"]["used_tokens"])
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
    return corpus.median([a - b for a, b in zip(samples[name][key], samples["find"][key])])


def render(run: dict, command: str) -> str:
    s = run["samples"]
    lines = [
        SECTION_BEGIN,
        "## assembly_latency — /search context and /recall vs /find",
        "",
        f"Command: `{command}`  ",
        f"Date: {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC  ",
        f"Machine: {os.cpu_count()} CPU, Python {platform.python_version()}; load average "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} at the end  ",
        f"Server: `gunicorn {run['server_command']}`, database `{DB}`; corpus of bench/find_latency.py, "
        f"{run['size']:,} nodes (the search partitions' HNSW indexes built in "
        f"{run['loaded']['indexes_s']:.1f} s after the load, two sessions); {run['queries']} queries, the four requests alternating per query on one "
        "keep-alive connection; query-vector cache off (every request embeds its query). All figures from this one run.",
        "",
        "| request | client p50 | client p95 | server p50 | server p95 | entries p50 | used tokens p50 |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name in ENDPOINTS:
        x = s[name]
        entries = f"{corpus.median(x['entries']):.0f}" if x["entries"] else "—"
        used = f"{corpus.median(x['used']):.0f}" if x["used"] else "—"
        lines.append(
            f"| {name} | {corpus.median(x['client']):.2f} | {corpus.pct(x['client'], 95):.2f} | "
            f"{corpus.median(x['server']):.2f} | {corpus.pct(x['server'], 95):.2f} | {entries} | {used} |"
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
    context_p50 = corpus.median(s["context"]["client"])
    lines += [
        "",
        f"/search context p50 end to end: {context_p50:.2f} ms — target ≤ {TARGET_CONTEXT_P50_MS:.0f} ms "
        f"{'met' if context_p50 <= TARGET_CONTEXT_P50_MS else 'NOT met'}.",
        SECTION_END,
        "",
    ]
    return "\n".join(lines)


def write_section(section: str, begin: str = SECTION_BEGIN, end: str = SECTION_END) -> None:
    """Replaces the section between `begin` and `end` in bench/RESULTS.md, or appends it."""
    text = corpus.RESULTS.read_text() if corpus.RESULTS.exists() else "# Benchmarks\n\n"
    if begin in text:
        head, _, rest = text.partition(begin)
        text = head + section.rstrip("\n") + rest.partition(end)[2]
    else:
        text = text.rstrip("\n") + "\n\n" + section
    corpus.RESULTS.write_text(text)


def publish(section: str, begin: str = SECTION_BEGIN, end: str = SECTION_END, write: bool = True) -> None:
    """A bench's last step: its section on stdout and, unless the run was a dry one, in bench/RESULTS.md."""
    print(section)
    if write:
        write_section(section, begin, end)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=10000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    command = ".venv/bin/python bench/assembly_latency.py " + " ".join(sys.argv[1:])
    section = render(run(args), command.strip())
    publish(section, write=not args.no_write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
