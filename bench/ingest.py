"""Ingest through the HTTP write path: bench/vs_openviking's corpus loaded into ovsite alone, as that bench loads it.

    .venv/bin/python -m bench.ingest [--size 2000] [--workers 2] [--threads 2]

The server and the requests are `make bench-vs-openviking`'s (bench/vs_openviking/run.py) without OpenViking: gunicorn
of this checkout (its default 2 workers × 2 threads, eager Celery as shipped: each write's processing runs in its
request), an emptied database of its own, the corpus of bench/vs_openviking/corpus.py written with `POST
/api/v1/content/batch-write` (batches of 50 below each root, after a `fs/mkdir` of the root) and
`POST /api/v1/system/wait`. Reports the seconds to the end of the wait, nodes stored and nodes/s, then, for
reference, the bulk loader's embedding rate (retrieval.bulk.embedded: 2 threads, batches of 256) on the very texts the
write path embedded, read back from the database. Rewrites its section of bench/RESULTS.md and writes
bench/results/ingest.json.
"""

import json
import os
import sys
import time

from bench import harness
from bench.vs_openviking import corpus

DATABASE = "ovsite_bench_ingest"
SECTION_BEGIN, SECTION_END = "<!-- ingest:begin -->", "<!-- ingest:end -->"
JSON_PATH = harness.ROOT / "bench" / "results" / "ingest.json"


def reset() -> None:
    harness.migrated_database()
    with harness.raw_connection() as conn:
        conn.execute("TRUNCATE retrieval_context, retrieval_processingtask RESTART IDENTITY CASCADE")


def stored() -> dict:
    """Nodes by state and kind, and the texts the write path embedded (abstracts of the nodes that have a vector)."""
    with harness.raw_connection() as conn:
        states = dict(conn.execute("SELECT state, count(*) FROM retrieval_context GROUP BY state").fetchall())
        kinds = dict(conn.execute("SELECT kind, count(*) FROM retrieval_context GROUP BY kind").fetchall())
        texts = [
            text
            for (text,) in conn.execute(
                "SELECT abstract FROM retrieval_context WHERE embedding IS NOT NULL ORDER BY id"
            ).fetchall()
        ]
    return {"states": states, "kinds": kinds, "texts": texts}


def bulk_rate(texts: list[str], batch: int = 256) -> float:
    """Texts/s of the bulk loader's embedding (retrieval.bulk.embedded, its defaults) on `texts`, model loaded first."""
    from retrieval.bulk import embedded
    from retrieval.embedders import get_embedder

    embedder = get_embedder()
    embedder.embed(texts[:8])
    started = time.perf_counter()
    for _ in embedded(embedder.embed, [texts[i : i + batch] for i in range(0, len(texts), batch)]):
        pass
    return len(texts) / (time.perf_counter() - started)


def run(args) -> dict:
    import httpx

    files = corpus.build(args.size)
    reset()
    server = harness.Gunicorn(args.workers, threads=args.threads)
    out = {"files": len(files), "chars": sum(len(f.content) for f in files), "load_before": os.getloadavg()}
    try:
        server.start()
        out["server"] = f"gunicorn {server.command}"
        harness.warm_up(server, ["warm up"])  # every worker's embedder loaded before the clock starts
        with httpx.Client(base_url=server.url, timeout=600) as client:
            harness.log(f"loading {len(files)} files")
            out["load"] = corpus.load(client, files)
    finally:
        server.stop()
    out["load_after"] = os.getloadavg()
    nodes = stored()
    texts = nodes.pop("texts")
    out.update(nodes, nodes=sum(nodes["states"].values()), embedded=len(texts))
    out["nodes_per_s"] = out["nodes"] / out["load"]["processed_s"]
    harness.log(f"{out['nodes']} nodes in {out['load']['processed_s']:.1f} s; bulk loader on the same texts")
    out["bulk_texts_per_s"] = bulk_rate(texts)
    out["load_end"] = os.getloadavg()
    return out


def render(r: dict, command: str) -> str:
    load = r["load"]
    lines = [
        SECTION_BEGIN,
        "## ingest — the HTTP write path on bench/vs_openviking's corpus, ovsite alone",
        "",
        *harness.heading(command, f"; {harness.load_average(r['load_before'])} before the load"),
        f"Server: `{r['server']}`, database `{harness.database()}`, eager Celery (the shipped default: processing "
        "runs in each write's request).  ",
        f"Corpus (bench/vs_openviking/corpus.py): {r['files']:,} files, {r['chars'] / 1e6:.1f} M characters, "
        f"written with `POST /api/v1/content/batch-write` ({corpus.BATCH} a batch) + `POST /api/v1/system/wait`.",
        "",
        "| files | nodes stored (file / dir) | embedded | writes s | to the end of the wait s | nodes/s | "
        "bulk loader's embedding, same texts, texts/s |",
        "|---:|---:|---:|---:|---:|---:|---:|",
        f"| {r['files']:,} | {r['nodes']:,} ({r['kinds'].get('file', 0):,} / {r['kinds'].get('dir', 0):,}) | "
        f"{r['embedded']:,} | {load['write_s']:.1f} | {load['processed_s']:.1f} | {r['nodes_per_s']:.0f} | "
        f"{r['bulk_texts_per_s']:.0f} |",
        "",
        f"States after the wait: {', '.join(f'{k} {v:,}' for k, v in sorted(r['states'].items()))}.",
        SECTION_END,
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = harness.parser(__doc__, DATABASE)
    parser.add_argument("--size", type=int, default=2000, help="files in the corpus")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers")
    parser.add_argument("--threads", type=int, default=2, help="gunicorn threads per worker")
    args = parser.parse_args()
    harness.configure(args.database)
    result = run(args)
    command = harness.command_line("bench.ingest")
    if not args.no_write:
        JSON_PATH.parent.mkdir(exist_ok=True)
        figures = {k: v for k, v in result.items() if k not in ("load_before", "load_after", "load_end")}
        JSON_PATH.write_text(json.dumps({"command": command, **figures}, indent=2, sort_keys=True) + "\n")
    harness.publish(render(result, command), SECTION_BEGIN, SECTION_END, write=not args.no_write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
