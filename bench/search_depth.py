"""How wide a search in score order walks its HNSW graphs: what hybrid and vector searches find and cost by
`ef_search`, on one store size.

    .venv/bin/python -m bench.search_depth [--size 10000] [--ef 20 40 60 100 200] [--rounds 3] [--reuse]

Loads the deterministic corpus of bench/find_latency.py (its generator, embedder and binary COPY) into its own
database `ovsite_bench_search_depth`, then, in process (no HTTP: the search alone, `retrieval.search.find.ranked_hits`,
as /find runs it with the query's vector already made), for each of the corpus's EN/ZH queries and each `--ef` value
(the ef_search of searches in score order):

- vector mode: recall@10 against the exact top 10 (a sequential scan, every index off; a hit at the 10th exact
  distance counts);
- hybrid mode: the share of the top 10 that the same search with a graph walk as wide as pgvector allows
  (ef_search 1000) also returns: where a narrower walk changes what a hybrid /find answers;
- the median wall time of the search (statement, fusion), `--rounds` passes over the queries, the ef values
  alternating per query so that the machine's load falls on all alike.

At OVSITE_PARTITIONED_SEARCH_FROM nodes or more the searches walk one graph per search partition, below it the whole
table's (docs/retrieval.md). This bench says what each width costs; what the answers are worth is the quality gate's
to say (`make bench-quality`): the corpus is templated text, and its agreement column overstated what a narrow walk
keeps on LoCoMo's real turns (bench/RESULTS.md, the note under this bench's section).
Rewrites its section of bench/RESULTS.md (one section per size).
"""

import sys
import time

from bench import find_latency as corpus
from bench import harness

DATABASE = "ovsite_bench_search_depth"
SECTION = "<!-- search_depth:{size}:{edge} -->"
REFERENCE_EF = 1000  # pgvector's largest hnsw.ef_search
TIE = 1e-5


def exact_top10(conn, account_id: int, vector_text: str) -> list[tuple[str, float]]:
    with conn.transaction():
        conn.execute("SET LOCAL enable_indexscan = off")
        conn.execute("SET LOCAL enable_bitmapscan = off")
        return conn.execute(
            "SELECT uri, embedding <=> %s::vector AS d FROM retrieval_context WHERE account_id = %s AND "
            "owner IN ('', %s) AND state = 'ready' AND embedding IS NOT NULL ORDER BY d LIMIT 10",
            [vector_text, account_id, harness.USER],
        ).fetchall()


def run(args) -> dict:
    loaded, conn = corpus.load_corpus(args.size, args.reuse)
    from django.test import override_settings

    from core.auth import _caller_for_names
    from retrieval.embedders import embed_query
    from retrieval.search.find import ranked_hits
    from retrieval.search.query import FindQuery
    from retrieval.search.statements import SearchQuery, vector_text

    caller = _caller_for_names("default", harness.USER, "admin")
    nodes = harness.loaded_nodes()
    queries = corpus.QUERIES
    vectors = {q: embed_query(q) for q in queries}

    def search(query: str, mode: str, ef: int) -> list[dict]:
        with override_settings(HNSW_WIDE_EF_SEARCH=ef, HNSW_HYBRID_EF_SEARCH=ef):
            return ranked_hits(
                caller, FindQuery(query=query, limit=10, search_mode=mode), [SearchQuery(query, vectors[query])]
            )

    reference = {q: {row["uri"] for row in search(q, "hybrid", REFERENCE_EF)} for q in queries}
    exact = {q: exact_top10(conn, caller.account_id, vector_text(vectors[q])) for q in queries}
    figures = {(mode, ef): {"ms": [], "found": []} for mode in ("hybrid", "vector") for ef in args.ef}
    for mode, ef in figures:  # one untimed pass each: the statement prepared, the pages read
        for q in queries[:6]:
            search(q, mode, ef)
    for round_ in range(args.rounds):
        for q in queries:
            for (mode, ef), figure in figures.items():
                started = time.perf_counter()
                rows = search(q, mode, ef)
                figure["ms"].append((time.perf_counter() - started) * 1000)
                if round_:
                    continue
                if mode == "hybrid":
                    figure["found"].append(len({row["uri"] for row in rows} & reference[q]) / max(1, len(reference[q])))
                else:
                    tenth = exact[q][-1][1] if exact[q] else 0.0
                    wanted = {uri for uri, _ in exact[q]}
                    # in vector mode the fused value is the cosine
                    good = sum(1 for row in rows if row["uri"] in wanted or 1 - row["fused"] <= tenth + TIE)
                    figure["found"].append(good / max(1, len(exact[q])))
    from django.conf import settings

    return {
        "loaded": loaded,
        "nodes": nodes,
        "queries": len(queries),
        "rounds": args.rounds,
        "partitioned": nodes >= settings.PARTITIONED_SEARCH_FROM,
        "figures": figures,
    }


def render(run: dict, command: str) -> str:
    size = run["nodes"]
    walk = "one graph per search partition" if run["partitioned"] else "the whole table's graph"
    lines = [
        SECTION.format(size=size, edge="begin"),
        f"## search_depth — hybrid and vector searches by ef_search, {size:,} nodes",
        "",
        *harness.heading(command, " (shared machine)"),
        f"Database `{harness.database()}`: the corpus of bench/find_latency.py, {size:,} nodes; searches walk {walk}. "
        f"In process, {run['queries']} EN/ZH queries, their vectors made beforehand; time = the median of "
        f"{run['rounds']} passes over the queries, ef values and modes alternating per query. Vector: recall@10 "
        f"against the exact top 10. Hybrid: the share of its top 10 that the same search at ef_search {REFERENCE_EF} "
        "also returns. All figures from this one run.",
        "",
        "| ef_search | hybrid ms p50 | hybrid top 10 as at 1000 | vector ms p50 | vector recall@10 |",
        "|---:|---:|---:|---:|---:|",
    ]
    efs = sorted({ef for _, ef in run["figures"]})
    for ef in efs:
        h, v = run["figures"][("hybrid", ef)], run["figures"][("vector", ef)]
        lines.append(
            f"| {ef} | {harness.median(h['ms']):.2f} | {sum(h['found']) / len(h['found']):.3f} | "
            f"{harness.median(v['ms']):.2f} | {sum(v['found']) / len(v['found']):.3f} |"
        )
    lines += [SECTION.format(size=size, edge="end"), ""]
    return "\n".join(lines)


def main() -> int:
    parser = harness.parser(__doc__, DATABASE)
    parser.add_argument("--size", type=int, default=10000)
    parser.add_argument("--ef", type=int, nargs="+", default=[20, 40, 60, 100, 200])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--reuse", action="store_true", help="keep a corpus of at least --size nodes already loaded")
    args = parser.parse_args()
    harness.configure(args.database)
    result = run(args)
    size = result["nodes"]
    harness.publish(
        render(result, harness.command_line("bench.search_depth")),
        SECTION.format(size=size, edge="begin"),
        SECTION.format(size=size, edge="end"),
        write=not args.no_write,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
