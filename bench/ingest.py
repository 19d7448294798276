"""Ingest through the HTTP write path: bench/vs_openviking's corpus loaded into ovsite alone, as that bench loads it.

    .venv/bin/python -m bench.ingest [--size 2000] [--server uvicorn|gunicorn] [--workers 2] [--threads 2]

The server and the requests are `make bench-vs-openviking`'s (bench/vs_openviking/run.py) without OpenViking: this
checkout under uvicorn as the Procfile runs it (or gunicorn, 2 threads a worker), 2 workers, eager Celery as shipped
(each write's processing runs in its request), an emptied database of its own, the corpus of
bench/vs_openviking/corpus.py written with `POST /api/v1/content/batch-write` (batches of 50 below each root, after
a `fs/mkdir` of the root) and `POST /api/v1/system/wait`. Reports the seconds to the end of the wait, nodes stored
and nodes/s, then, for reference, the bulk loader's embedding rate (retrieval.bulk.embedded: 2 threads, batches of
256) on the very texts the write path embedded, read back from the database. Rewrites its section of
bench/RESULTS.md and writes bench/results/ingest.json.
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


def bulk_rate(texts: list[str], batch: int = 256) -> tuple[float, float]:
    """(texts per second, texts per CPU-second) of the bulk loader's embedding (retrieval.bulk.embedded, its
    defaults) on `texts`, model loaded first."""
    from retrieval.bulk import embedded
    from retrieval.embedders import get_embedder

    embedder = get_embedder()
    embedder.embed(texts[:8])
    started, cpu = time.perf_counter(), time.process_time()
    for _ in embedded(embedder.embed, [texts[i : i + batch] for i in range(0, len(texts), batch)]):
        pass
    return len(texts) / (time.perf_counter() - started), len(texts) / (time.process_time() - cpu)


def server_cpu_s(server) -> float:
    """CPU seconds of the server's processes (PostgreSQL's not counted)."""
    import psutil

    processes = [psutil.Process(server.proc.pid), *psutil.Process(server.proc.pid).children(recursive=True)]
    return sum(p.cpu_times().user + p.cpu_times().system for p in processes)


def _backend_cpu_s(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def index_costs(rows: int, rounds: int = 3) -> dict:
    """PostgreSQL CPU per row of what the write path does to a row, on the loaded store, each in a transaction rolled
    back: insert `rows` copies of stored files as pending (no vector), then update them with their abstract and
    vector, with every index, without the whole table's HNSW graph, without the partitions' graphs, and without
    any. Medians over `rounds`, ms of the backend's CPU per row (read from /proc: this machine's PostgreSQL)."""
    from retrieval.bulk import vector_index_sql

    graphs = sorted(vector_index_sql())
    variants = {
        "every index": [],
        "without the whole table's graph": ["context_embedding_hnsw"],
        "without the partitions' graphs": [g for g in graphs if g != "context_embedding_hnsw"],
        "without any HNSW graph": graphs,
    }
    samples: dict[str, list[float]] = {"insert, pending": [], **{name: [] for name in variants}}
    with harness.raw_connection() as conn:
        pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        columns = [
            name
            for (name,) in conn.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = 'retrieval_context' "
                "AND column_name NOT IN ('id', 'lexemes') ORDER BY ordinal_position"
            ).fetchall()
        ]
        copied = {"uri": "uri || '/copy'", "embedding": "NULL", "abstract": "''", "state": "'pending'"}
        select = ", ".join(copied.get(name, name) for name in columns)
        for _ in range(rounds):
            for name, dropped in variants.items():
                conn.execute("BEGIN")
                for graph in dropped:
                    conn.execute(f'DROP INDEX "{graph}"')
                conn.execute(
                    "CREATE TEMPORARY TABLE source ON COMMIT DROP AS SELECT * FROM retrieval_context "
                    "WHERE kind = 'file' AND embedding IS NOT NULL ORDER BY id DESC LIMIT %s",
                    [rows],
                )
                started = _backend_cpu_s(pid)
                conn.execute(f"INSERT INTO retrieval_context ({', '.join(columns)}) SELECT {select} FROM source")
                inserted = _backend_cpu_s(pid)
                conn.execute(
                    "UPDATE retrieval_context AS c SET embedding = s.embedding, abstract = s.abstract, state = 'ready' "
                    "FROM source AS s WHERE c.account_id = s.account_id AND c.uri = s.uri || '/copy'"
                )
                samples[name].append((_backend_cpu_s(pid) - inserted) * 1000 / rows)
                samples["insert, pending"].append((inserted - started) * 1000 / rows)
                conn.execute("ROLLBACK")
    return {name: harness.median(values) for name, values in samples.items()}


def run(args) -> dict:
    import httpx

    files = corpus.build(args.size)
    reset()
    server = (
        harness.Uvicorn(args.workers)
        if args.server == "uvicorn"
        else harness.Gunicorn(args.workers, threads=args.threads)
    )
    out = {
        "files": len(files),
        "chars": sum(len(f.content) for f in files),
        "index_rows": args.index_rows,
        "load_before": os.getloadavg(),
    }
    try:
        server.start()
        out["server"] = f"{server.name} {server.command}"
        harness.warm_up(server, ["warm up"])  # every worker's embedder loaded before the clock starts
        with httpx.Client(base_url=server.url, timeout=600) as client:
            harness.log(f"loading {len(files)} files")
            cpu = server_cpu_s(server)
            out["load"] = corpus.load(client, files)
            out["server_cpu_s"] = server_cpu_s(server) - cpu
    finally:
        server.stop()
    out["load_after"] = os.getloadavg()
    nodes = stored()
    texts = nodes.pop("texts")
    out.update(nodes, nodes=sum(nodes["states"].values()), embedded=len(texts))
    out["nodes_per_s"] = out["nodes"] / out["load"]["processed_s"]
    harness.log(f"{out['nodes']} nodes in {out['load']['processed_s']:.1f} s; bulk loader on the same texts")
    out["bulk_texts_per_s"], out["bulk_texts_per_cpu_s"] = bulk_rate(texts)
    harness.log(f"index costs, {args.index_rows} rows")
    out["index_ms_per_row"] = index_costs(args.index_rows)
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
        "server CPU s | bulk loader's embedding, same texts: texts/s (per CPU-s) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
        f"| {r['files']:,} | {r['nodes']:,} ({r['kinds'].get('file', 0):,} / {r['kinds'].get('dir', 0):,}) | "
        f"{r['embedded']:,} | {load['write_s']:.1f} | {load['processed_s']:.1f} | {r['nodes_per_s']:.0f} | "
        f"{r['server_cpu_s']:.0f} | {r['bulk_texts_per_s']:.0f} ({r['bulk_texts_per_cpu_s']:.0f}) |",
        "",
        f"States after the wait: {', '.join(f'{k} {v:,}' for k, v in sorted(r['states'].items()))}. Server CPU: "
        "the server's processes from the first write to the end of the wait, embedding included (PostgreSQL's "
        "backends, which run the HNSW inserts, not counted); on a shared machine it varies far less than the "
        "seconds.",
        "",
        f"What a row costs PostgreSQL on the loaded store (`index_costs`: {r['index_rows']} stored files copied as "
        "pending rows, then updated with their abstract and vector, in transactions rolled back; medians of 3, "
        "the backend's CPU):",
        "",
        "| step | ms of CPU per row |",
        "|---|---:|",
        *(
            f"| {'update, ' if name != 'insert, pending' else ''}{name} | {ms:.2f} |"
            for name, ms in r["index_ms_per_row"].items()
        ),
        SECTION_END,
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = harness.parser(__doc__, DATABASE)
    parser.add_argument("--size", type=int, default=2000, help="files in the corpus")
    parser.add_argument("--server", choices=("uvicorn", "gunicorn"), default="uvicorn", help="as bench.vs_openviking")
    parser.add_argument("--workers", type=int, default=2, help="server processes")
    parser.add_argument("--threads", type=int, default=2, help="gunicorn threads per worker (--server gunicorn)")
    parser.add_argument("--index-rows", type=int, default=300, help="rows copied to measure a row's index costs")
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
