"""HNSW settings at 100k–200k vectors: recall@10 against exact search per m, ef_construction, ef_search and
iterative-scan mode, with build time and index size — what bench/scale.py's one 1M run is chosen from.

    .venv/bin/python -m bench.hnsw_sweep --size 100000 --builds 16:64 24:128
    .venv/bin/python -m bench.hnsw_sweep --size 100000 --base 10000 --derive pair --builds 16:64

The vectors are bench/scale.py's: bench/find_latency.py's generator's nodes, embedded by the packaged model
(cached in bench/.data, shared with bench/scale.py: a 1M cache serves every smaller size). By default every
vector is a real embedding, the reference a derivation is judged against; `--base` below `--size` embeds only the
first `--base` nodes and derives the rest (`--derive`, `--noise`; see scale.derived_vectors).
They go into a table of their own (`hnsw_sweep`: id, a 30-day "recent" flag of ~4 % of the nodes, embedding) in
its own database; each build is `CREATE INDEX … USING hnsw (embedding vector_cosine_ops) WITH (m, ef_construction)`
with `--maintenance-work-mem`. Exact top 10 per query is computed in numpy on the same float32 vectors (ties at
the 10th distance count as hits). Queries: the 52 EN/ZH questions of find_latency. Latency is the SQL statement
alone (client side, one connection), the part of /find that these settings change; plain = the /find shape
(ORDER BY distance LIMIT 10, iterative scan as the server sets it), filtered = `recent` only, per iterative mode.
Rewrites its section of bench/RESULTS.md, one per corpus (size, base, derivation).
"""

import datetime as dt
import statistics
import sys
import time

from bench import find_latency, harness, scale

DATABASE = "ovsite_bench_h8sweep"
RECENT = dt.timedelta(days=30)
MODES = ("off", "relaxed_order", "strict_order")
TIE_BAND = 0.01  # cosine distance: a hit this close to the exact 10th counts in the tolerant recall


def load(args, conn) -> dict:
    """Fills `hnsw_sweep`; returns the vectors, the recent mask and the load timings."""
    import numpy as np
    from pgvector.psycopg import register_vector
    from tqdm import tqdm

    conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    conn.execute("DROP TABLE IF EXISTS hnsw_sweep")
    conn.execute(
        "CREATE TABLE hnsw_sweep (id integer PRIMARY KEY, recent boolean NOT NULL, embedding vector(512) NOT NULL)"
    )
    register_vector(conn)
    started = time.perf_counter()
    now = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
    vectors, recent = [], []
    blocks = scale.node_blocks(args.size, args.base, args.seed, args.noise, args.derive)
    with (
        conn.cursor() as cur,
        cur.copy("COPY hnsw_sweep (id, recent, embedding) FROM STDIN (FORMAT BINARY)") as copy,
        tqdm(total=args.size, desc=f"load {args.size}", unit="vector", file=sys.stderr, mininterval=5.0) as bar,
    ):
        copy.set_types(["int4", "bool", "vector"])
        i = 0
        for nodes, block in blocks:
            for node, vector in zip(nodes, block, strict=True):
                fresh = now - node["updated_at"] <= RECENT
                copy.write_row((i, fresh, vector))
                recent.append(fresh)
                i += 1
            vectors.append(np.asarray(block, dtype=np.float32))
            bar.update(len(block))
    conn.execute("VACUUM ANALYZE hnsw_sweep")
    return {"vectors": np.concatenate(vectors), "recent": np.array(recent), "load_s": time.perf_counter() - started}


def exact(vectors, mask, queries) -> list[dict]:
    """Per query: the exact top-10 ids, the 10th distance, the similarity at ranks 1, 10 and 100, the gap between
    the 10th and 11th distance and how many vectors beyond the 10th lie within TIE_BAND of its distance: how fine
    a distinction the exact top 10 is (a corpus of near-copies packs many vectors just behind the 10th)."""
    import numpy as np

    sims = queries @ vectors.T
    if mask is not None:
        sims[:, ~mask] = -2.0
    out = []
    for row in sims:
        top = np.argpartition(-row, 100)[:100]
        top = top[np.argsort(-row[top])]
        tenth = 1.0 - float(row[top[9]])
        out.append(
            {
                "ids": set(top[:10].tolist()),
                "tenth": tenth,
                "sim": (float(row[top[0]]), float(row[top[9]]), float(row[top[99]])),
                "gap": float(row[top[9]] - row[top[10]]),
                "band": int(np.count_nonzero(1.0 - row <= tenth + TIE_BAND)) - 10,
            }
        )
    return out


def run_queries(conn, vectors_text: list[str], truth: list[dict], sql: str) -> dict:
    recalls, tolerant, ms, returned = [], [], [], []
    for text, gold in zip(vectors_text, truth, strict=True):
        started = time.perf_counter()
        rows = conn.execute(sql, [text]).fetchall()
        ms.append((time.perf_counter() - started) * 1000)
        good = sum(1 for row_id, d in rows if row_id in gold["ids"] or d <= gold["tenth"] + 1e-5)
        near = sum(1 for row_id, d in rows if row_id in gold["ids"] or d <= gold["tenth"] + TIE_BAND)
        recalls.append(good / 10)
        tolerant.append(near / 10)
        returned.append(len(rows))
    return {
        "recall": statistics.mean(recalls),
        "tolerant": statistics.mean(tolerant),
        "p50": harness.median(ms),
        "p95": harness.pct(ms, 95),
        "returned": statistics.median(returned),
    }


def build(conn, m: int, efc: int, mwm: str) -> dict:
    notices = []

    def notice(diagnostic) -> None:
        notices.append(diagnostic.message_primary)

    conn.execute("DROP INDEX IF EXISTS hnsw_sweep_embedding")
    conn.add_notice_handler(notice)  # the build's notices only (e.g. a graph that outgrows maintenance_work_mem)
    started = time.perf_counter()
    with conn.transaction():
        conn.execute(f"SET LOCAL maintenance_work_mem = '{mwm}'")
        conn.execute(
            f"CREATE INDEX hnsw_sweep_embedding ON hnsw_sweep USING hnsw (embedding vector_cosine_ops) "
            f"WITH (m = {m}, ef_construction = {efc})"
        )
    seconds = time.perf_counter() - started
    conn.remove_notice_handler(notice)
    mb = conn.execute("SELECT pg_relation_size('hnsw_sweep_embedding') / 1e6").fetchone()[0]
    return {"m": m, "efc": efc, "s": seconds, "mb": float(mb), "notices": sorted(set(notices))}


def sweep(args, conn, loaded: dict) -> list[dict]:
    import numpy as np

    from retrieval.embedders import embed_query
    from retrieval.search.statements import vector_text

    queries = np.array([embed_query(q) for q in find_latency.QUERIES], dtype=np.float32)
    texts = [vector_text(q) for q in queries]
    truth = exact(loaded["vectors"], None, queries)
    truth_recent = exact(loaded["vectors"], loaded["recent"], queries)
    loaded["profile"] = [statistics.median(t["sim"][k] for t in truth) for k in range(3)]
    loaded["gap"] = statistics.median(t["gap"] for t in truth)
    loaded["band"] = statistics.median(t["band"] for t in truth)
    plain = "SELECT id, embedding <=> %s::vector AS d FROM hnsw_sweep ORDER BY d LIMIT 10"
    filtered = "SELECT id, embedding <=> %s::vector AS d FROM hnsw_sweep WHERE recent ORDER BY d LIMIT 10"
    runs = []
    for spec in args.builds:
        m, efc = (int(x) for x in spec.split(":"))
        built = build(conn, m, efc, args.maintenance_work_mem)
        harness.log(f"m={m} ef_construction={efc}: {built['s']:.1f} s, {built['mb']:.0f} MB {built['notices']}")
        built["plain"], built["filtered"] = {}, {}
        for ef in args.ef_search:
            conn.execute(f"SET hnsw.ef_search = {ef}")
            for _ in range(2):  # the index into the page cache, plans warm
                conn.execute(plain, [texts[0]]).fetchall()
            built["plain"][ef] = run_queries(conn, texts, truth, plain)
            harness.log(
                f"  ef_search {ef}: recall@10 {built['plain'][ef]['recall']:.3f} "
                f"(tolerant {built['plain'][ef]['tolerant']:.3f}), "
                f"p50 {built['plain'][ef]['p50']:.2f} ms"
            )
            if args.filtered:
                for mode in MODES:
                    conn.execute(f"SET hnsw.iterative_scan = {mode}")
                    built["filtered"][(ef, mode)] = run_queries(conn, texts, truth_recent, filtered)
                conn.execute("RESET hnsw.iterative_scan")
        runs.append(built)
    return runs


def profile_only(args) -> dict:
    """The corpus's vectors and their query profile alone: how crowded the exact top 10 is, without an index."""
    import numpy as np

    from retrieval.embedders import embed_query

    started = time.perf_counter()
    vectors = np.concatenate(
        [
            np.asarray(block, dtype=np.float32)
            for _, block in scale.node_blocks(args.size, args.base, args.seed, args.noise, args.derive)
        ]
    )
    queries = np.array([embed_query(q) for q in find_latency.QUERIES], dtype=np.float32)
    truth = exact(vectors, None, queries)
    return {
        "load_s": time.perf_counter() - started,
        "profile": [statistics.median(t["sim"][k] for t in truth) for k in range(3)],
        "gap": statistics.median(t["gap"] for t in truth),
        "band": statistics.median(t["band"] for t in truth),
    }


def render(args, loaded: dict, runs: list[dict], command: str, label: str) -> str:
    what = (
        "all real embeddings"
        if args.base >= args.size
        else f"{args.base:,} real embeddings + {args.size - args.base:,} derived (`{args.derive}`, noise {args.noise})"
    )
    profile = loaded["profile"]
    lines = [
        f"<!-- hnsw_sweep:{label}:begin -->",
        f"### hnsw_sweep — {args.size:,} vectors, {what}",
        "",
        *harness.heading(command, " (shared machine)"),
        f"`maintenance_work_mem` {args.maintenance_work_mem}, max_parallel_maintenance_workers 2.  ",
        f"Load {loaded['load_s']:.0f} s. Query–corpus cosine similarity (median over the 52 queries) of the "
        f"1st / 10th / 100th exact neighbour: {profile[0]:.3f} / {profile[1]:.3f} / {profile[2]:.3f}; "
        f"10th − 11th similarity gap {loaded['gap']:.4f}; vectors beyond the 10th within {TIE_BAND} of its "
        f"distance {loaded['band']:.0f} (medians).",
    ]
    if not runs:  # the profile alone
        return "\n".join([*lines, f"<!-- hnsw_sweep:{label}:end -->"]) + "\n"
    lines += [
        "",
        "| m | ef_construction | build s | index MB | " + " | ".join(f"ef {ef}" for ef in args.ef_search) + " |",
        "|---:|---:|---:|---:|" + "---:|" * len(args.ef_search),
    ]
    for run in runs:
        cells = " | ".join(
            f"{run['plain'][ef]['recall']:.3f} / {run['plain'][ef]['tolerant']:.3f} ({run['plain'][ef]['p50']:.1f} ms)"
            for ef in args.ef_search
        )
        note = f" {'; '.join(run['notices'])}" if run["notices"] else ""
        lines.append(f"| {run['m']} | {run['efc']} | {run['s']:.0f}{note} | {run['mb']:.0f} | {cells} |")
    lines += [
        "",
        f"Cells: recall@10 / recall@10 counting a hit within {TIE_BAND} of the exact 10th distance (SQL p50).",
    ]
    if args.filtered:
        lines += [
            "",
            "Filtered (`recent`, ~4 % of the rows): recall@10 / rows returned (median) / SQL p50 ms per "
            "iterative scan mode (`hnsw.max_scan_tuples` as the server sets it).",
            "",
            "| m | ef_construction | ef_search | " + " | ".join(MODES) + " |",
            "|---:|---:|---:|" + "---|" * len(MODES),
        ]
        for run in runs:
            for ef in args.ef_search:
                cells = " | ".join(
                    f"{x['recall']:.3f} / {x['returned']:.0f} / {x['p50']:.1f}"
                    for x in (run["filtered"][(ef, mode)] for mode in MODES)
                )
                lines.append(f"| {run['m']} | {run['efc']} | {ef} | {cells} |")
    lines.append(f"<!-- hnsw_sweep:{label}:end -->")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = harness.parser(__doc__, DATABASE)
    parser.add_argument("--size", type=int, default=100000)
    parser.add_argument("--base", type=int, help="nodes embedded by the real model (default: every node)")
    parser.add_argument("--derive", choices=("neighbour", "pair"), default="neighbour")
    parser.add_argument("--noise", type=float, default=None, help="default: scale.NOISE (pair: 0.35)")
    parser.add_argument("--seed", type=int, default=find_latency.SEED)
    parser.add_argument(
        "--builds",
        nargs="*",
        default=["16:64"],
        help="m:ef_construction; none: only the corpus profile (numpy, no database)",
    )
    parser.add_argument("--ef-search", type=int, nargs="+", default=[40, 100, 200, 400])
    parser.add_argument("--filtered", action="store_true", help="also the filtered query per iterative mode")
    parser.add_argument("--maintenance-work-mem", default="2GB")
    args = parser.parse_args()
    harness.configure(args.database)
    args.base = args.size if args.base is None else min(args.base, args.size)
    if args.noise is None:
        args.noise = 0.35 if args.derive == "pair" else scale.NOISE
    if args.builds:
        harness.start_database()
        conn = harness.raw_connection()
        loaded = load(args, conn)
        harness.log(f"loaded {args.size:,} vectors in {loaded['load_s']:.0f} s")
        runs = sweep(args, conn, loaded)
        conn.execute("DROP TABLE hnsw_sweep")
    else:  # numpy over the vectors: Django for the embedder, no database
        import django

        django.setup()
        loaded, runs = profile_only(args), []
    label = f"{args.size}:{args.base}:{args.derive if args.base < args.size else 'real'}:{args.noise}"
    section = render(args, loaded, runs, harness.command_line("bench.hnsw_sweep"), label)
    harness.publish(
        section, f"<!-- hnsw_sweep:{label}:begin -->", f"<!-- hnsw_sweep:{label}:end -->", write=not args.no_write
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
