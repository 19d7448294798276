"""Where a node's embedding is stored, in its heap row or in the TOAST table, and what that costs /find's search
statement, query by query on the same rows.

    .venv/bin/python -m bench.row_storage [--size 10000] [--rounds 200] [--reuse]

Loads the corpus of bench/find_latency.py into its own database `ovsite_bench_row_storage` (with `--reuse`, keeps
what is there), stored as the migrations define the table: the embedding inline (retrieval.0009). Copies the table,
with its indexes, into the schema `toasted` with the storage it had before that migration (pgvector's EXTERNAL,
the default toast target), so every row over 2 KB keeps its embedding in the TOAST table. Then sends /find's
search statement (hybrid by default, as the server builds it: request_path's) for each query to both copies on two
connections of the same settings, the order flipping every round, and reports client-side time, PostgreSQL's
execution time (EXPLAIN ANALYZE) and the shared buffers each touched. Rewrites its section of bench/RESULTS.md.
"""

import json
import sys
import time

from bench import find_latency as corpus
from bench import harness, request_path

DATABASE = "ovsite_bench_row_storage"
SECTION_BEGIN, SECTION_END = "<!-- row_storage:begin -->", "<!-- row_storage:end -->"
SCHEMA = "toasted"
COPY_COLUMNS_SQL = """SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) FROM pg_attribute
WHERE attrelid = 'public.retrieval_context'::regclass AND attnum > 0 AND NOT attisdropped AND attgenerated = ''"""


def make_toasted_copy(conn) -> None:
    """`toasted.retrieval_context`: the same rows and indexes, the embedding stored as before retrieval.0009."""
    columns = conn.execute(COPY_COLUMNS_SQL).fetchone()[0]
    conn.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
    conn.execute(f"CREATE SCHEMA {SCHEMA}")
    conn.execute(f"CREATE TABLE {SCHEMA}.retrieval_context (LIKE public.retrieval_context INCLUDING ALL)")
    conn.execute(
        f"ALTER TABLE {SCHEMA}.retrieval_context ALTER COLUMN embedding SET STORAGE EXTERNAL, "
        "RESET (toast_tuple_target)"
    )
    conn.execute("SET maintenance_work_mem = '1GB'")
    conn.execute(
        f"INSERT INTO {SCHEMA}.retrieval_context ({columns}) SELECT {columns} FROM public.retrieval_context ORDER BY id"
    )
    conn.execute(f"VACUUM ANALYZE {SCHEMA}.retrieval_context")
    conn.execute("VACUUM ANALYZE public.retrieval_context")


def sizes(conn, schema: str) -> dict:
    heap, toast = conn.execute(
        "SELECT pg_relation_size(c.oid), pg_relation_size(c.reltoastrelid) "
        "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE c.relname = 'retrieval_context' AND n.nspname = %s",
        [schema],
    ).fetchone()
    toasted = conn.execute(
        f"SELECT count(*) FROM {schema}.retrieval_context WHERE pg_column_toast_chunk_id(embedding) IS NOT NULL"
    ).fetchone()[0]
    return {"heap_mb": heap / 1e6, "toast_mb": toast / 1e6, "toasted_embeddings": toasted}


def _buffers(plan: dict) -> int:
    return plan.get("Shared Hit Blocks", 0) + plan.get("Shared Read Blocks", 0)


def measure(queries: list[str]) -> dict:
    """Both copies per query, on two connections of the server's settings (Django's), the order flipping."""
    from django.db import connections

    from retrieval.search.statements import statement_sql

    mode, depth, statements = request_path._find_statements(queries)
    cursors = {"inline": connections["default"].cursor()}
    other = connections.create_connection("default")
    other.connect()
    cursors["toasted"] = other.cursor()
    cursors["toasted"].execute(f"SET search_path = {SCHEMA}, public")
    out = {name: {"client": [], "execution": [], "buffers": []} for name in cursors}
    for warm in (True, False):
        for i, statement in enumerate(statements):
            sql, params = statement_sql(statement, depth)
            for name in ("inline", "toasted") if i % 2 else ("toasted", "inline"):
                cursor = cursors[name]
                t = time.perf_counter()
                cursor.execute(sql, params)
                cursor.fetchall()
                client = (time.perf_counter() - t) * 1000
                cursor.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql, params)
                plan = cursor.fetchone()[0]
                plan = (plan if isinstance(plan, list) else json.loads(plan))[0]
                if not warm:
                    out[name]["client"].append(client)
                    out[name]["execution"].append(plan["Execution Time"])
                    out[name]["buffers"].append(_buffers(plan["Plan"]))
    other.close()
    return {"mode": mode, "depth": depth, "samples": out}


def render(run: dict, command: str) -> str:
    s = run["samples"]
    lines = [
        SECTION_BEGIN,
        "## row_storage — the embedding in the heap row or in the TOAST table, /find's search statement",
        "",
        *harness.heading(command),
        f"Database `{harness.database()}`: the corpus of bench/find_latency.py, {run['size']:,} nodes, stored as "
        "migration retrieval.0009 defines (inline), and a copy with its indexes in schema `toasted` stored as "
        f"before it; /find's search statement ({run['mode']}, {run['depth']} rows a side, as the server builds "
        f"it) for {run['rounds']} queries (52 EN/ZH, cycling) on each copy, the order flipping every query, after "
        "one unmeasured round; in process, two connections with the server's settings. Client = the statement's "
        "round trip; execution = EXPLAIN ANALYZE; buffers = shared buffers the plan touched.",
        "",
        "| storage | heap MB | TOAST MB | embeddings in TOAST | client p50 ms | client p95 ms | execution p50 ms "
        "| buffers p50 |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name in ("toasted", "inline"):
        z, x = run["sizes"][name], s[name]
        lines.append(
            f"| {name} | {z['heap_mb']:.1f} | {z['toast_mb']:.1f} | {z['toasted_embeddings']:,} | "
            f"{harness.median(x['client']):.2f} | {harness.pct(x['client'], 95):.2f} | "
            f"{harness.median(x['execution']):.2f} | {harness.median(x['buffers']):.0f} |"
        )
    lines += [
        "",
        "Inline − toasted, median of the paired differences: client "
        f"{harness.paired_median(s['inline']['client'], s['toasted']['client']):+.2f} ms, execution "
        f"{harness.paired_median(s['inline']['execution'], s['toasted']['execution']):+.2f} ms, buffers "
        f"{harness.paired_median(s['inline']['buffers'], s['toasted']['buffers']):+.0f}.",
        SECTION_END,
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = harness.parser(__doc__, DATABASE)
    parser.add_argument("--size", type=int, default=10000)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--reuse", action="store_true", help="keep the corpus already loaded in the database")
    args = parser.parse_args()
    harness.configure(args.database)
    corpus.load_corpus(args.size, reuse=args.reuse)
    conn = harness.raw_connection()
    make_toasted_copy(conn)
    run = {
        "size": harness.loaded_nodes(),
        "rounds": args.rounds,
        "sizes": {"inline": sizes(conn, "public"), "toasted": sizes(conn, SCHEMA)},
        **measure([corpus.QUERIES[i % len(corpus.QUERIES)] for i in range(args.rounds)]),
    }
    conn.execute(f"DROP SCHEMA {SCHEMA} CASCADE")
    section = render(run, harness.command_line("bench.row_storage"))
    harness.publish(section, SECTION_BEGIN, SECTION_END, write=not args.no_write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
