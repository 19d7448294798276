#!/usr/bin/env python
"""Scale: N nodes (default 1,000,000) by bulk load, then /find and /search context latency and HNSW recall@10.

    .venv/bin/python bench/scale.py [--size 1000000] [--base 10000] [--queries 200] [--recall-queries 52]

1. Empties `retrieval_context` in its own database (`ovsite_bench_scale`), drops every secondary index but the
   primary key and the (account, uri) unique constraint, and streams N nodes of bench/find_latency.py's generator
   into the table with one binary COPY.
2. Vectors: the packaged embedder is ≈ 200 nodes/s here, days for a million, so only the first `--base` nodes
   (real EN/ZH sentences) are embedded; every later node gets a derived vector, deterministic for the seed: a
   normalised mixture w·e[p] + (1−w)·e[q] + noise of two base embeddings (w uniform in [0.55, 0.9], Gaussian noise
   of norm ≈ 0.35). The corpus keeps the clustered shape of real embeddings without being made of duplicates; a
   derived node's text is its own generated sentence, not the source of its vector (latency and ANN recall do not
   depend on that; retrieval quality here means nothing).
3. Recreates the dropped indexes exactly as they were (the HNSW ones as the model defines them, m and
   ef_construction from the migration) with `--maintenance-work-mem`, timing each, and samples the building
   backend's resident memory; VACUUM ANALYZE.
4. Starts gunicorn on that database and sends `--queries` requests alternating /find and /search context
   (1600 tokens) over one keep-alive connection; recall@10 of /find's top 10 against exact search (index scans
   off) with the same filters on `--recall-queries` queries. Once with the deployment's `hnsw.ef_search`, then
   once per `--ef-search` value (what-if runs on the same data, through `OVSITE_HNSW_EF_SEARCH`).
Rewrites its section of bench/RESULTS.md (one section per size).
"""
import argparse
import datetime as dt
import hashlib
import os
import resource
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import find_latency as common  # noqa: E402 — configures the environment before Django loads
import assembly_latency  # noqa: E402

SECTION = "<!-- scale:{size}:{edge} -->"  # one section per size: the largest run does not erase the smaller ones
GOAL_RECALL, GOAL_FIND_P50_MS = 0.95, 25.0
BLOCK = 10000
NOISE = 0.35
KEPT_INDEXES = ("retrieval_context_pkey", "context_account_uri_unique")


def base_vectors(nodes: list[dict]) -> "np.ndarray":
    import numpy as np

    from retrieval.embedders import get_embedder

    embedder = get_embedder()
    abstracts = [n["abstract"] for n in nodes]
    out = np.empty((len(nodes), embedder.dim), dtype=np.float32)
    for start in range(0, len(nodes), common.EMBED_BATCH):
        out[start:start + common.EMBED_BATCH] = embedder.embed(abstracts[start:start + common.EMBED_BATCH])
    return out


def derived_vectors(base: "np.ndarray", start: int, count: int, seed: int) -> "np.ndarray":
    """Deterministic for (seed, start): normalised mixtures of two base embeddings plus Gaussian noise."""
    import numpy as np

    rng = np.random.default_rng([seed, start])
    dim = base.shape[1]
    p, q = rng.integers(0, len(base), count), rng.integers(0, len(base), count)
    w = rng.uniform(0.55, 0.9, (count, 1)).astype(np.float32)
    v = w * base[p] + (1 - w) * base[q]
    v += (NOISE / np.sqrt(dim)) * rng.standard_normal((count, dim), dtype=np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _secondary_indexes(conn) -> dict[str, str]:
    rows = conn.execute("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'retrieval_context'").fetchall()
    return {name: sql for name, sql in rows if name not in KEPT_INDEXES}


class MemorySampler:
    """Peak resident memory of one PostgreSQL backend and its parallel workers while an index builds."""

    def __init__(self, pid: int):
        self.pid, self.peak_mb, self._stop = pid, 0.0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        import psutil

        while not self._stop.is_set():
            try:
                backend = psutil.Process(self.pid)
                parent = psutil.Process(backend.ppid())
                workers = [p for p in parent.children() if "parallel worker" in " ".join(p.cmdline())]
                rss = sum(p.memory_info().rss for p in [backend, *workers]) / 2**20
                self.peak_mb = max(self.peak_mb, rss)
            except psutil.Error:
                pass
            self._stop.wait(0.5)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def load(args, account_id: int, conn) -> dict:
    import numpy as np
    from pgvector.psycopg import register_vector
    from tqdm import tqdm

    from retrieval.embedders import get_embedder
    from retrieval.tokens import estimate_tokens

    register_vector(conn)
    out: dict = {"size": args.size, "base": min(args.base, args.size)}
    conn.execute("TRUNCATE retrieval_context RESTART IDENTITY CASCADE")
    indexes = _secondary_indexes(conn)
    hnsw = {common.HNSW_INDEX: common.hnsw_create_sql(), **assembly_latency._bucket_index_sql()}
    for name in indexes:
        conn.execute(f"DROP INDEX IF EXISTS {name}")
    oids = dict(conn.execute("SELECT attname, atttypid FROM pg_attribute WHERE attrelid = "
                             "'retrieval_context'::regclass AND attnum > 0 AND NOT attisdropped").fetchall())
    model = get_embedder().model
    now = dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc)
    nodes = common.generate(args.size, now)
    t_all = time.perf_counter()
    timings = {"generate_s": 0.0, "embed_s": 0.0, "derive_s": 0.0, "copy_s": 0.0}
    base = None
    columns = ", ".join(common.COPY_COLUMNS)
    with conn.transaction(), conn.cursor() as cur, tqdm(total=args.size, desc=f"load {args.size}", unit="node",
                                                        file=sys.stderr, mininterval=5.0) as bar:
        with cur.copy(f"COPY retrieval_context ({columns}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types([oids[c] for c in common.COPY_COLUMNS])
            done = 0
            while done < args.size:
                t = time.perf_counter()
                block = [next(nodes) for _ in range(min(BLOCK, args.size - done))]
                timings["generate_s"] += time.perf_counter() - t
                t = time.perf_counter()
                if base is None:  # the first block(s): real embeddings of real sentences
                    base_nodes = block if out["base"] <= len(block) else \
                        block + [next(nodes) for _ in range(out["base"] - len(block))]
                    base = base_vectors(base_nodes[:out["base"]])
                    block = base_nodes
                    vectors = np.concatenate([base, derived_vectors(base, done + out["base"],
                                                                    len(block) - out["base"], args.seed)])
                    timings["embed_s"] += time.perf_counter() - t
                else:
                    vectors = derived_vectors(base, done, len(block), args.seed)
                    timings["derive_s"] += time.perf_counter() - t
                t = time.perf_counter()
                for node, vector in zip(block, vectors):
                    copy.write_row((account_id, node["uri"], node["uri"].rsplit("/", 1)[0], node["kind"],
                                    node["context_type"], node["category"], node["owner"], "", node["abstract"],
                                    node["overview"], node["content"], estimate_tokens(node["abstract"]),
                                    estimate_tokens(node["overview"]), estimate_tokens(node["content"]),
                                    node["tags"], node["created_at"], node["updated_at"], node["event_time"],
                                    vector, model, hashlib.sha256(node["content"].encode()).hexdigest(), "ready",
                                    "", 0))
                timings["copy_s"] += time.perf_counter() - t
                done += len(block)
                bar.update(len(block))
    out.update(timings)
    out["load_s"] = time.perf_counter() - t_all
    out["loader_peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    common.log(f"loaded {args.size:,} rows in {out['load_s']:.0f} s; building indexes")

    out["indexes"] = {}
    pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    for name, sql in [*((n, s) for n, s in indexes.items() if n not in hnsw), *hnsw.items()]:
        t = time.perf_counter()
        with MemorySampler(pid) as sampler, conn.transaction():
            conn.execute(f"SET LOCAL maintenance_work_mem = '{args.maintenance_work_mem}'")
            conn.execute(sql)
        out["indexes"][name] = {"s": time.perf_counter() - t, "peak_rss_mb": sampler.peak_mb,
                                "mb": conn.execute("SELECT pg_relation_size(%s) / 1e6", [name]).fetchone()[0]}
        common.log(f"index {name}: {out['indexes'][name]['s']:.1f} s")
    t = time.perf_counter()
    conn.execute("VACUUM (ANALYZE) retrieval_context")
    out["vacuum_s"] = time.perf_counter() - t
    out["build_s"] = time.perf_counter() - t_all
    out["table_mb"] = conn.execute("SELECT pg_total_relation_size('retrieval_context') / 1e6").fetchone()[0]
    out["heap_mb"] = conn.execute("SELECT pg_relation_size('retrieval_context') / 1e6").fetchone()[0]
    return out


def latency(args, account_id: int, conn, tmp: Path, ef_search: int) -> dict:
    import httpx

    # Both: whole-index searches (/find, context without quotas) use the wide one, quota buckets the other.
    server = common.Server(args.workers, tmp, {"OVSITE_HNSW_EF_SEARCH": str(ef_search),
                                               "OVSITE_HNSW_WIDE_EF_SEARCH": str(ef_search)})
    server.start()
    endpoints = {"find": ("/api/v1/search/find", {"limit": 10}),
                 "search context": ("/api/v1/search/search", {"mode": "context", "max_tokens": 1600})}
    samples = {name: {"client": [], "server": []} for name in endpoints}
    hits = []
    try:
        common.warm_up(server)
        with httpx.Client(base_url=server.url, timeout=120) as client:
            for i in range(20):  # this connection's worker: caches and plans warm
                for path, extra in endpoints.values():
                    client.post(path, json={"query": common.QUERIES[i % len(common.QUERIES)], **extra})
            for i in range(args.queries):
                query = common.QUERIES[i % len(common.QUERIES)]
                for name, (path, extra) in endpoints.items():
                    started = time.perf_counter()
                    response = client.post(path, json={"query": query, **extra})
                    elapsed = (time.perf_counter() - started) * 1000
                    response.raise_for_status()
                    samples[name]["client"].append(elapsed)
                    samples[name]["server"].append(sum(common.server_timing(
                        response.headers.get("Server-Timing", "")).values()))
                    if name == "find" and i < args.recall_queries:
                        result = response.json()["result"]
                        hits.append([(h["uri"], h["score"]) for key in ("memories", "resources", "skills")
                                     for h in result[key]])
    finally:
        server.stop()
        out_command = server.command.replace(f"127.0.0.1:{server.port}", "127.0.0.1:PORT").replace(
            f"--chdir {common.ROOT}", "--chdir .")
    n = min(args.recall_queries, args.queries, len(common.QUERIES))
    started = time.perf_counter()
    recall = common.recall_at_10(conn, account_id, common.QUERIES[:n], hits[:n])
    common.log(f"ef_search {ef_search}: find p50 {common.median(samples['find']['client']):.2f} ms, "
               f"recall@10 {recall:.3f}")
    return {"samples": samples, "recall": recall, "recall_queries": n, "exact_s": time.perf_counter() - started,
            "server_command": out_command, "ef_search": ef_search}


def settings_used(conn) -> dict:
    from django.conf import settings

    options = settings.DATABASES["default"]["OPTIONS"]["options"]
    session = {part.split("=")[0]: part.split("=")[1] for part in options.replace("-c ", "").split()}
    return {"session": session, "shared_buffers": conn.execute("SHOW shared_buffers").fetchone()[0],
            "parallel_maint": conn.execute("SHOW max_parallel_maintenance_workers").fetchone()[0]}


def render(size: int, args, loaded: dict | None, lats: list[dict], used: dict, command: str) -> str:
    lat = lats[0]  # the deployment default first; the others are what-if runs on the same data
    lines = [SECTION.format(size=size, edge="begin"),
             f"## scale — {size:,} nodes: bulk load, /find and /search context, HNSW recall@10", "",
             f"Command: `{command}`  ",
             f"Date: {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC  ",
             f"Machine: {os.cpu_count()} CPU, {round(os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30)}"
             f" GB RAM (shared with other work); load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at "
             "the end.  ",
             f"Server: `gunicorn {lat['server_command']}`, database `{common.BENCH_DB}`; `hnsw.ef_search` set per "
             "run with `OVSITE_HNSW_EF_SEARCH`.  ",
             f"Settings: HNSW m=16, ef_construction=64 (the migration's), `maintenance_work_mem` "
             f"{args.maintenance_work_mem} for the builds, max_parallel_maintenance_workers {used['parallel_maint']}, "
             f"shared_buffers {used['shared_buffers']}; per session "
             + ", ".join(f"`{k}={v}`" for k, v in used["session"].items()) + ".", ""]
    if loaded:
        idx = loaded["indexes"]
        hnsw_s = sum(v["s"] for k, v in idx.items() if "hnsw" in k)
        lines += [f"Build: {loaded['size']:,} nodes, {loaded['base']:,} embedded by the packaged model, the rest "
                  f"derived (mixtures of two base vectors plus noise; see the script's docstring). Generation "
                  f"{loaded['generate_s']:.0f} s, embedding {loaded['embed_s']:.0f} s, derivation "
                  f"{loaded['derive_s']:.0f} s, binary COPY {loaded['copy_s']:.0f} s (with token counting); indexes "
                  f"after the load {sum(v['s'] for v in idx.values()):.0f} s, of which HNSW {hnsw_s:.0f} s; "
                  f"VACUUM ANALYZE {loaded['vacuum_s']:.0f} s; total {loaded['build_s']:.0f} s "
                  f"({loaded['build_s'] / 60:.1f} min). Table with indexes {loaded['table_mb']:,.0f} MB (heap "
                  f"{loaded['heap_mb']:,.0f} MB). Loader peak RSS {loaded['loader_peak_rss_mb']:,.0f} MB.", "",
                  "| index | build s | size MB | backend + workers peak RSS MB |", "|---|---:|---:|---:|"]
        for name, v in idx.items():
            lines.append(f"| {name} | {v['s']:.1f} | {v['mb']:,.0f} | {v['peak_rss_mb']:,.0f} |")
        lines.append("")
    lines += [f"Latency: {args.queries} queries ({len(common.QUERIES)} EN/ZH, cycling), /find and /search context "
              "(1600 tokens, no purpose) alternating on one keep-alive connection; ms. Recall@10 of /find's top 10 "
              f"against exact search (index scans off, same filters) on the first {lat['recall_queries']} queries "
              "(ties at the 10th distance count).", "",
              "| hnsw.ef_search | request | client p50 | client p95 | server p50 | server p95 | recall@10 |",
              "|---:|---|---:|---:|---:|---:|---:|"]
    for run in lats:
        for name, x in run["samples"].items():
            recall = f"{run['recall']:.3f}" if name == "find" else ""
            lines.append(f"| {run['ef_search']} | {name} | {common.median(x['client']):.2f} | "
                         f"{common.pct(x['client'], 95):.2f} | {common.median(x['server']):.2f} | "
                         f"{common.pct(x['server'], 95):.2f} | {recall} |")
    find_p50 = common.median(lat["samples"]["find"]["client"])
    lines += ["", f"Goals at 1M, with the default `hnsw.ef_search` {lat['ef_search']}: recall@10 ≥ {GOAL_RECALL} — {'met' if lat['recall'] >= GOAL_RECALL else 'NOT met'} "
              f"({lat['recall']:.3f}); /find p50 ≤ {GOAL_FIND_P50_MS:.0f} ms — "
              f"{'met' if find_p50 <= GOAL_FIND_P50_MS else 'NOT met'} ({find_p50:.2f} ms); at "
              f"{size:,} nodes.", SECTION.format(size=size, edge="end")]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--base", type=int, default=10000, help="nodes embedded by the real model")
    parser.add_argument("--seed", type=int, default=common.SEED)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--recall-queries", type=int, default=52)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--maintenance-work-mem", default="4GB")
    parser.add_argument("--ef-search", type=int, nargs="*", default=[200],
                        help="what-if hnsw.ef_search values measured after the deployment default")
    parser.add_argument("--database", default="ovsite_bench_scale")
    parser.add_argument("--reuse", action="store_true", help="keep what is loaded; only measure")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    common.BENCH_DB = args.database
    os.environ["OVSITE_PG_DATABASE"] = args.database
    command = (".venv/bin/python bench/scale.py " + " ".join(sys.argv[1:])).strip()

    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    from ovsite import embedded_pg
    from ovsite.models import Account, AccountUser

    embedded_pg.start(Path(str(settings.EMBEDDED_PG_DATA)), args.database)
    call_command("migrate", interactive=False, verbosity=0)
    account, _ = Account.objects.get_or_create(name="default")
    AccountUser.objects.get_or_create(account=account, user_id=common.USER, defaults={"role": "admin"})
    conn = common.raw_connection()
    loaded = None if args.reuse else load(args, account.id, conn)
    tmp = Path(tempfile.mkdtemp(prefix="ovsite-scale-"))
    lats = [latency(args, account.id, conn, tmp, ef) for ef in
            dict.fromkeys([settings.HNSW_WIDE_EF_SEARCH, *args.ef_search])]
    size = conn.execute("SELECT count(*) FROM retrieval_context").fetchone()[0]
    section = render(size, args, loaded, lats, settings_used(conn), command)
    print(section)
    if not args.no_write:
        assembly_latency.write_section(section, SECTION.format(size=size, edge="begin"),
                                       SECTION.format(size=size, edge="end"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
