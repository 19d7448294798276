"""Scale: N nodes (default 1,000,000) by bulk load, then /find and /search context latency and HNSW recall@10.

    .venv/bin/python -m bench.scale [--size 1000000] [--base N] [--m 16 --ef-construction 64]
                                    [--ef-search 300 400] [--reuse] [--halfvec]

1. Empties `retrieval_context` in its own database (`ovsite_bench_scale`), drops every secondary index but the
   primary key and the (account, uri) unique constraint, and streams N nodes of bench/find_latency.py's generator
   into the table with one binary COPY.
2. Vectors: by default every node carries the packaged model's embedding of its abstract, embedded by two
   threads of one BLAS thread each ahead of the COPY (retrieval.bulk.embedded, as find_latency's loader; ≈ 1,350 nodes/s
   on this machine when quiet, 13–20 min for a million) and cached in bench/.data (2 GB at a million; a later
   run reads it, or a shorter cache's prefix, and embeds only the rest; `--no-cache` embeds every node, so the
   load is an ingest from scratch end to end). The nodes stream through in batches:
   neither they nor the vectors are held whole. What-if runs: `--base` below `--size` embeds only the first
   `--base` nodes and gives every later one a derived vector (`derived_vectors`); neither derivation is a
   faithful stand-in for real embeddings (bench/RESULTS.md, hnsw_sweep), so read such a run's recall as a
   property of the derivation.
3. Recreates the dropped indexes (the HNSW ones as the model defines them, or with `--m` / `--ef-construction`)
   with `--maintenance-work-mem`, timing each, and samples the building backend's resident memory; VACUUM ANALYZE.
   The build's figures are kept in bench/.data/scale-DATABASE.json, so a later `--reuse` run reports them too.
4. Starts gunicorn on that database and sends each of `--queries` queries as every request of REQUESTS in turn
   over one keep-alive connection: /find, /find filtered by type and time, /search context (1600 tokens) as a
   client sends them (hybrid), and /find in vector mode, plain and filtered, whose recall@10 against the exact
   top 10 (of every node, or of those the filters keep) is computed in numpy while the vectors stream by. Once
   with the deployment's ef_search settings, then once per `--ef-search` value for the searches in score order
   (`OVSITE_HNSW_WIDE_EF_SEARCH`; what-if runs on the same data).
5. With `--halfvec`, builds a halfvec twin of each walked HNSW index and compares /find's vector-mode statement
   both ways in process (`halfvec_whatif`), then drops the twins.
Rewrites its section of bench/RESULTS.md (one section per size). The same nodes shared by many accounts, the
hosted shape, are bench/scale_hosted.py's (`python -m bench.scale_hosted`), which reads this script's cache.
"""

import datetime as dt
import hashlib
import itertools
import json
import os
import re
import resource
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from bench import find_latency as common
from bench import harness

SECTION = "<!-- scale:{size}:{edge} -->"  # one section per size: the largest run does not erase the smaller ones
GOAL_RECALL, GOAL_FIND_P50_MS = 0.95, 15.0
BLOCK = 10000
NOISE = 0.15  # expected norm of the Gaussian noise added to a derived vector (the vectors have norm 1)
POOL = 2048  # base vectors one block of derived vectors picks its partners from
TIE_BAND = 0.01  # cosine distance; as bench/hnsw_sweep.py's tolerant recall
ENV_SETTINGS = (
    "OVSITE_HNSW_WIDE_EF_SEARCH",
    "OVSITE_HNSW_HYBRID_EF_SEARCH",
    "OVSITE_HNSW_EF_SEARCH",
    "OVSITE_HNSW_MAX_SCAN_TUPLES",
    "OVSITE_PARTITIONED_SEARCH_FROM",
    "OVSITE_PG_SHARED_BUFFERS",
)
KEPT_INDEXES = ("retrieval_context_pkey", "context_account_uri_unique")
CACHE = harness.ROOT / "bench" / ".data"
DATABASE = "ovsite_bench_scale"
# The filtered requests: memories updated in the generated corpus's last three months (its clock stops at
# 2026-11-01; `node_blocks`), by `context_type` and `since` as a plugin sends them.
FILTER_SINCE = dt.datetime(2026, 8, 1, tzinfo=dt.UTC)
FIND = "/api/v1/search/find"
FILTERS = {"context_type": "memory", "since": FILTER_SINCE.isoformat()}
# (path, body beyond the query, the exact set its recall@10 is measured against: None for a hybrid search, whose
# top 10 mixes in full-text matches by design). /find and context as a client sends them (hybrid, the default),
# then /find in vector mode, the ANN search alone.
REQUESTS = {
    "find": (FIND, {"limit": 10}, None),
    "find, filtered": (FIND, {"limit": 10, **FILTERS}, None),
    "search context": ("/api/v1/search/search", {"mode": "context", "max_tokens": 1600}, None),
    "find vector": (FIND, {"limit": 10, "search_mode": "vector"}, "all"),
    "find vector, filtered": (FIND, {"limit": 10, "search_mode": "vector", **FILTERS}, "filtered"),
}


def passes_filters(context_type: str, updated_at: dt.datetime) -> bool:
    return context_type == "memory" and updated_at >= FILTER_SINCE


def cache_file(model: str, count: int) -> Path | None:
    """A cached array of at least `count` base vectors of this model and seed."""
    for path in sorted(CACHE.glob(f"{model}-{common.SEED}-*.npy"), key=lambda p: int(p.stem.rsplit("-", 1)[1])):
        if int(path.stem.rsplit("-", 1)[1]) >= count:
            return path
    return None


def prefix_file(model: str, count: int) -> Path | None:
    """The longest cached array of fewer than `count` vectors: the first rows of a longer one."""
    shorter = [p for p in CACHE.glob(f"{model}-{common.SEED}-*.npy") if int(p.stem.rsplit("-", 1)[1]) < count]
    return max(shorter, key=lambda p: int(p.stem.rsplit("-", 1)[1]), default=None)


def cached_rows(path: Path, start: int, stop: int, step: int):
    """Rows [start, stop) of a cached .npy, `step` at a time, by plain reads: a memory map would keep every page it
    touched in the loader's resident set (2 GB at a million), and the loader's peak RSS is a reported figure."""
    with open(path, "rb") as f:
        major, _ = np.lib.format.read_magic(f)
        read_header = np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0
        shape, _, dtype = read_header(f)
        row = shape[1] * dtype.itemsize
        f.seek(start * row, os.SEEK_CUR)
        for first in range(start, stop, step):
            n = min(step, stop - first)
            yield np.frombuffer(f.read(n * row), dtype=dtype).reshape(n, shape[1])


def real_blocks(nodes, count: int, stats: dict, read_cache: bool = True):
    """(nodes, vectors) batches of the next `count` nodes with the packaged model's embeddings of their abstracts.

    Cached in bench/.data (git-ignored), one .npy per count: the generator is deterministic for its seed, so the
    first k nodes of any run are the same nodes and their vectors too. A cache of at least `count` rows is read;
    otherwise the longest shorter one gives its rows and the rest are embedded (retrieval.bulk.embedded) and
    appended to a new cache file as they come, which replaces nothing until it is complete. Without `read_cache`
    every node is embedded, as an ingest from scratch would (the cache is written all the same)."""
    from retrieval.bulk import embedded
    from retrieval.embedders import get_embedder

    embedder, batch = get_embedder(), common.EMBED_BATCH
    full = cache_file(embedder.model, count) if read_cache else None
    if full:
        stats.update(from_cache=count, embedded=0)
        for vectors in cached_rows(full, 0, count, batch):
            yield list(itertools.islice(nodes, len(vectors))), vectors
        return
    prefix = prefix_file(embedder.model, count) if read_cache else None
    known = int(prefix.stem.rsplit("-", 1)[1]) if prefix else 0
    stats.update(from_cache=known, embedded=count - known)

    def batches():
        for first in range(known, count, batch):
            yield list(itertools.islice(nodes, min(batch, count - first)))

    def embed(nodes_batch: list[dict]) -> tuple[list[dict], np.ndarray]:
        return nodes_batch, embedder.embed([n["abstract"] for n in nodes_batch])

    CACHE.mkdir(exist_ok=True)
    final = CACHE / f"{embedder.model}-{common.SEED}-{count}.npy"
    partial = final.with_suffix(".partial")
    with open(partial, "wb") as out:
        np.lib.format.write_array_header_1_0(
            out,
            {
                "descr": np.lib.format.dtype_to_descr(np.dtype(np.float32)),
                "fortran_order": False,
                "shape": (count, embedder.dim),
            },
        )
        for vectors in cached_rows(prefix, 0, known, batch) if prefix else ():
            out.write(vectors.tobytes())
            yield list(itertools.islice(nodes, len(vectors))), vectors
        for nodes_batch, vectors in embedded(embed, batches()):
            out.write(np.ascontiguousarray(vectors, dtype=np.float32).tobytes())
            yield nodes_batch, vectors
    os.replace(partial, final)


def derived_vectors(
    base: np.ndarray, start: int, count: int, seed: int, noise: float = NOISE, how: str = "neighbour"
) -> np.ndarray:
    """`count` vectors for nodes beyond the embedded base, deterministic for (seed, start), unit length.

    "neighbour" (the default): a point on the segment between a base vector p and its nearest partner q among
    POOL base vectors drawn for the block (w·e[p] + (1−w)·e[q], w uniform in [0, 1]), plus Gaussian noise of
    expected norm `noise`: a new text between two similar real ones, on the shape of the real embeddings.
    "pair" (the first version): w in [0.55, 0.9] towards p and q drawn at random, noise 0.35. Each base vector
    anchors size/base of them, and at 1M from 10k real ones that made ~100 near-copies around every real
    embedding, all about equally far from a query (the noise dominates their differences): exact top-10 becomes
    a draw among near-ties, and recall@10 measured the noise, not the index (bench/RESULTS.md, hnsw_sweep)."""
    rng = np.random.default_rng([seed, start])
    dim = base.shape[1]
    p = rng.integers(0, len(base), count)
    if how == "pair":
        q = rng.integers(0, len(base), count)
        w = rng.uniform(0.55, 0.9, (count, 1)).astype(np.float32)
    else:
        pool = rng.choice(len(base), min(POOL, len(base)), replace=False)
        sims = base[p] @ base[pool].T
        sims[pool[None, :] == p[:, None]] = -2.0  # a partner other than p itself
        q = pool[np.argmax(sims, axis=1)]
        w = rng.uniform(0.0, 1.0, (count, 1)).astype(np.float32)
    v = w * base[p] + (1 - w) * base[q]
    v += (noise / np.sqrt(dim)) * rng.standard_normal((count, dim), dtype=np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def node_blocks(
    size: int,
    base: int,
    seed: int,
    noise: float = NOISE,
    how: str = "neighbour",
    stats: dict | None = None,
    read_cache: bool = True,
):
    """(nodes, vectors) batches: the first `base` nodes with their real embeddings (real_blocks, which fills
    `stats`), then derived ones in blocks of BLOCK (`derived_vectors` seeds each block by its start)."""
    from retrieval.embedders import get_embedder

    now = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
    nodes = common.generate(size, now)
    base = min(base, size)
    yield from real_blocks(nodes, base, {} if stats is None else stats, read_cache)
    if base == size:
        return
    real = np.load(cache_file(get_embedder().model, base), mmap_mode="r")[:base].copy()
    for done in range(base, size, BLOCK):
        block = list(itertools.islice(nodes, min(BLOCK, size - done)))
        yield block, derived_vectors(real, done, len(block), seed, noise, how)


def _present_indexes(conn) -> list[str]:
    rows = conn.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'retrieval_context'").fetchall()
    return [name for (name,) in rows if name not in KEPT_INDEXES]


def model_indexes() -> dict[str, str]:
    """`CREATE INDEX` of every index the model defines (its fields' and its Meta's), by name: what a load rebuilds,
    taken from the code and not from the table, which a run killed mid-build leaves without some of them."""
    from django.db import connection

    from retrieval.models import Context

    with connection.schema_editor(collect_sql=True) as editor:
        statements = [str(statement) for statement in editor._model_indexes_sql(Context)]
    return {re.match(r'CREATE INDEX "([^"]+)"', sql).group(1): sql for sql in statements}


class MemorySampler:
    """Peak memory of one PostgreSQL backend and its parallel workers while an index builds: the sum of their
    PSS (proportional set size), so the graph in shared memory that every worker maps is counted once, not once
    per process as a sum of RSS would."""

    def __init__(self, pid: int):
        self.pid, self.peak_mb, self._stop = pid, 0.0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        import psutil

        while not self._stop.is_set():
            try:
                backend = psutil.Process(self.pid)
                parent = psutil.Process(backend.ppid())
                mine = f"parallel worker for PID {self.pid}"
                workers = [p for p in parent.children() if mine in " ".join(p.cmdline())]
                pss = sum(p.memory_full_info().pss for p in [backend, *workers]) / 2**20
                self.peak_mb = max(self.peak_mb, pss)
            except psutil.Error:
                pass
            self._stop.wait(0.5)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


class ExactTop10:
    """The exact top 10 (and 11th) of each query over every vector the loader streams: numpy on the same float32
    vectors the table gets (every node passes /find's visibility filters for user `default`), no sequential
    scans."""

    def __init__(self, queries: np.ndarray):
        self.queries = queries
        self.best_d = np.full((len(queries), 11), np.inf, dtype=np.float32)
        self.best_uri = np.full((len(queries), 11), "", dtype=object)

    def add(self, uris: list[str], vectors: np.ndarray) -> None:
        d = np.concatenate([self.best_d, 1.0 - self.queries @ vectors.T], axis=1)
        u = np.concatenate([self.best_uri, np.array(uris, dtype=object)[None, :].repeat(len(d), 0)], axis=1)
        keep = np.argsort(d, axis=1, kind="stable")[:, :11]
        self.best_d, self.best_uri = np.take_along_axis(d, keep, 1), np.take_along_axis(u, keep, 1)

    def gap(self) -> float:
        """Median distance between the 10th and the 11th exact neighbour."""
        return float(np.median(self.best_d[:, 10] - self.best_d[:, 9]))

    def recall(self, hits: list[list[tuple[str, float]]], band: float = 1e-5) -> float:
        """Mean share of each query's top 10 found, `hits` as (URI, cosine distance); a hit within `band` of the 10th
        exact distance counts (the default: a tie; TIE_BAND: a near-tie)."""
        recalls = []
        for uris, dists, found in zip(self.best_uri, self.best_d, hits, strict=True):
            exact = set(uris[:10])
            recalls.append(sum(1 for uri, d in found if uri in exact or d <= dists[9] + band) / 10)
        return sum(recalls) / len(recalls)


def query_vectors() -> np.ndarray:
    from retrieval.embedders import embed_query

    return np.array([embed_query(q) for q in common.QUERIES], dtype=np.float32)


def exact_sets() -> dict[str, ExactTop10]:
    """The exact top 10 of every node ("all") and of the nodes the filtered requests keep ("filtered")."""
    queries = query_vectors()
    return {"all": ExactTop10(queries), "filtered": ExactTop10(queries)}


def add_exact(exact: dict[str, ExactTop10], uris: list[str], kept: list[bool], vectors: np.ndarray) -> None:
    exact["all"].add(uris, vectors)
    exact["filtered"].add([uri for uri, keep in zip(uris, kept, strict=True) if keep], vectors[np.asarray(kept)])


def exact_top10(args, conn) -> dict[str, ExactTop10]:
    """For --reuse: the loaded vectors again (deterministic; the base from the cache, no text generated), each
    with the URI, type and time of the row it went into (ids are the load order: the load restarts the identity)."""
    from retrieval.embedders import get_embedder

    rows = conn.execute("SELECT uri, context_type, updated_at FROM retrieval_context ORDER BY id").fetchall()
    uris = [uri for uri, _, _ in rows]
    kept = [passes_filters(context_type, updated_at) for _, context_type, updated_at in rows]
    base = min(args.base, len(uris))
    cached = cache_file(get_embedder().model, base)
    exact = exact_sets()
    for start, vectors in zip(range(0, base, BLOCK), cached_rows(cached, 0, base, BLOCK), strict=True):
        stop = start + len(vectors)
        add_exact(exact, uris[start:stop], kept[start:stop], vectors)
    if base == len(uris):
        return exact
    real = np.load(cached, mmap_mode="r")[:base].copy()  # the derived blocks after the base, as node_blocks made them
    for start in range(base, len(uris), BLOCK):
        stop = min(start + BLOCK, len(uris))
        vectors = derived_vectors(real, start, stop - start, args.seed, args.noise, args.derive)
        add_exact(exact, uris[start:stop], kept[start:stop], vectors)
    return exact


def timed_build(conn, pid: int, name: str, sql: str, maintenance_work_mem: str) -> dict:
    """Runs one CREATE INDEX on backend `pid`'s connection: its seconds, peak PSS (MemorySampler) and size."""
    t = time.perf_counter()
    with MemorySampler(pid) as sampler, conn.transaction():
        conn.execute(f"SET LOCAL maintenance_work_mem = '{maintenance_work_mem}'")
        conn.execute(sql)
    return {
        "s": time.perf_counter() - t,
        "peak_pss_mb": sampler.peak_mb,
        "mb": float(conn.execute("SELECT pg_relation_size(%s) / 1e6", [name]).fetchone()[0]),
    }


def hnsw_sql(sql: str, m: int | None, efc: int | None) -> str:
    """The model's CREATE INDEX with m / ef_construction replaced when the run asks for other values."""
    if m is not None:
        sql = re.sub(r"m = \d+", f"m = {m}", sql)
    if efc is not None:
        sql = re.sub(r"ef_construction = \d+", f"ef_construction = {efc}", sql)
    return sql


def load(args, account_id: int, conn) -> tuple[dict, dict[str, ExactTop10]]:
    from pgvector.psycopg import register_vector
    from tqdm import tqdm

    from retrieval.bulk import vector_index_sql
    from retrieval.embedders import get_embedder
    from retrieval.tokens import estimate_tokens

    register_vector(conn)
    out: dict = {"size": args.size, "base": min(args.base, args.size)}
    conn.execute("TRUNCATE retrieval_context RESTART IDENTITY CASCADE")
    hnsw = {name: hnsw_sql(sql, args.m, args.ef_construction) for name, sql in vector_index_sql().items()}
    indexes = {name: sql for name, sql in model_indexes().items() if name not in hnsw}
    out["hnsw_sql"] = hnsw[common.HNSW_INDEX]  # the whole table's; the partitions' differ by their WHERE alone
    for name in _present_indexes(conn):
        conn.execute(f'DROP INDEX IF EXISTS "{name}"')
    oids = column_types(conn)
    model = get_embedder().model
    exact = exact_sets()
    t_all = time.perf_counter()
    timings, vectors_from = {"vectors_s": 0.0, "copy_s": 0.0}, {}
    columns = ", ".join(common.COPY_COLUMNS)
    blocks = node_blocks(args.size, args.base, args.seed, args.noise, args.derive, vectors_from, not args.no_cache)
    with (
        conn.transaction(),
        conn.cursor() as cur,
        tqdm(total=args.size, desc=f"load {args.size}", unit="node", file=sys.stderr, mininterval=5.0) as bar,
    ):
        with cur.copy(f"COPY retrieval_context ({columns}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types([oids[c] for c in common.COPY_COLUMNS])
            while True:
                t = time.perf_counter()
                block = next(blocks, None)
                if block is None:
                    break
                nodes, vectors = block
                kept = [passes_filters(n["context_type"], n["updated_at"]) for n in nodes]
                add_exact(exact, [n["uri"] for n in nodes], kept, np.asarray(vectors))
                timings["vectors_s"] += time.perf_counter() - t
                t = time.perf_counter()
                for node, vector in zip(nodes, vectors, strict=True):
                    tokens = tuple(estimate_tokens(node[level]) for level in ("abstract", "overview", "content"))
                    content_hash = hashlib.sha256(node["content"].encode()).hexdigest()
                    copy.write_row(common.copy_row(account_id, node, vector, model, tokens, content_hash))
                timings["copy_s"] += time.perf_counter() - t
                bar.update(len(nodes))
    out.update(timings, **vectors_from)
    out["load_s"] = time.perf_counter() - t_all
    out["loader_peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    harness.log(f"loaded {args.size:,} rows in {out['load_s']:.0f} s; building indexes")

    out["indexes"] = {}
    pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    for name, sql in [*indexes.items(), *hnsw.items()]:
        out["indexes"][name] = timed_build(conn, pid, name, sql, args.maintenance_work_mem)
        harness.log(f"index {name}: {out['indexes'][name]['s']:.1f} s")
    finish_build(conn, out, t_all)
    return out, exact


def column_types(conn) -> dict[str, int]:
    """retrieval_context's column names and type oids, which a binary COPY declares."""
    return dict(
        conn.execute(
            "SELECT attname, atttypid FROM pg_attribute WHERE attrelid = "
            "'retrieval_context'::regclass AND attnum > 0 AND NOT attisdropped"
        ).fetchall()
    )


def finish_build(conn, out: dict, started: float) -> None:
    """A build's last step, VACUUM ANALYZE, and its figures into `out`: times, load, the table's size on disk."""
    t = time.perf_counter()
    conn.execute("VACUUM (ANALYZE) retrieval_context")
    out["vacuum_s"] = time.perf_counter() - t
    out["build_s"] = time.perf_counter() - started
    out["build_load_avg"] = os.getloadavg()
    out["built_at"] = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    out["table_mb"] = conn.execute("SELECT pg_total_relation_size('retrieval_context') / 1e6").fetchone()[0]
    out["heap_mb"] = conn.execute("SELECT pg_relation_size('retrieval_context') / 1e6").fetchone()[0]


def latency(args, tmp: Path, exact: dict[str, ExactTop10], ef_search: int) -> dict:
    """One server run at `ef_search` (OVSITE_HNSW_WIDE_EF_SEARCH, the searches in score order): every request of
    REQUESTS per query, in turn, the recall@10 of those measured against an exact set, and the workers' RSS."""
    import httpx
    import psutil

    server = harness.Gunicorn(args.workers, log_dir=tmp, env={"OVSITE_HNSW_WIDE_EF_SEARCH": str(ef_search)})
    server.start()
    samples = {name: {"client": [], "server": []} for name in REQUESTS}
    hits = {name: {} for name, (_, _, against) in REQUESTS.items() if against}
    try:
        harness.warm_up(server, common.QUERIES)
        with httpx.Client(base_url=server.url, timeout=120) as client:
            for i in range(20):  # this connection's worker: caches and plans warm
                for path, extra, _ in REQUESTS.values():
                    client.post(path, json={"query": common.QUERIES[i % len(common.QUERIES)], **extra})
            if args.quiet_wait:
                harness.wait_quiet(args.quiet_wait)
            load_avg = os.getloadavg()
            for i in range(args.queries):
                query = common.QUERIES[i % len(common.QUERIES)]
                for name, (path, extra, _) in REQUESTS.items():
                    answer = harness.timed_post(client, path, {"query": query, **extra})
                    samples[name]["client"].append(answer.client_ms)
                    samples[name]["server"].append(answer.server_ms)
                    if name in hits and i < len(common.QUERIES):
                        result = answer.result
                        hits[name][i] = [
                            (h["uri"], harness.cosine_distance(h["score"]))
                            for key in ("memories", "resources", "skills")
                            for h in result[key]
                        ]
        workers_rss_mb = [child.memory_info().rss / 2**20 for child in psutil.Process(server.proc.pid).children()]
    finally:
        server.stop()
    recalls = {}
    for name, found in hits.items():
        against = exact[REQUESTS[name][2]]
        found = [found[i] for i in range(len(common.QUERIES))]
        recalls[name] = (against.recall(found), against.recall(found, TIE_BAND))
    harness.log(
        f"ef_search {ef_search}: find p50 {harness.median(samples['find']['client']):.2f} ms, recall@10 "
        + ", ".join(f"{name} {r:.3f} (tolerant {t:.3f})" for name, (r, t) in recalls.items())
    )
    return {
        "samples": samples,
        "recalls": recalls,
        "gap": exact["all"].gap(),
        "server_command": server.command,
        "ef_search": ef_search,
        "load_avg": load_avg,
        "workers_rss_mb": workers_rss_mb,
    }


def halfvec_twin(name: str, sql: str, dim: int) -> tuple[str, str]:
    """(name, CREATE INDEX) of a vector HNSW index's halfvec twin: the same graph, same WHERE, over the embedding
    cast to half precision (pgvector's halfvec: 2 bytes a dimension instead of 4)."""
    twin = f"{name}_half"
    column = '("embedding" vector_cosine_ops)'
    if column not in sql:
        raise ValueError(f"unexpected index definition: {sql}")
    sql = sql.replace(column, f'(("embedding"::halfvec({dim})) halfvec_cosine_ops)')
    return twin, sql.replace(f'"{name}"', f'"{twin}"', 1)


def search_sql(caller, spec, vector, ef_search: int, half_dim: int | None) -> tuple[str, list]:
    """/find's vector-mode statement for `spec`, as the server builds it; with `half_dim`, ordered by the halfvec
    cast instead, which only the halfvec twins can serve."""
    from retrieval.search.query import scope_predicate, score_order_scans
    from retrieval.search.statements import EVERYTHING, HIT_COLUMNS, SearchQuery, search_statement, statement_sql

    scans = score_order_scans(caller, spec) or (EVERYTHING,)
    statement = search_statement(
        scope_predicate(caller, spec),
        [SearchQuery(spec.query, vector)],
        HIT_COLUMNS,
        [(scan, spec.limit) for scan in scans],
        [],
        ef_search=ef_search,
    )
    sql, params = statement_sql(statement, spec.limit)
    if half_dim:
        read = '"retrieval_context"."embedding" <=> (SELECT vector FROM query_0)'
        if read not in sql:
            raise ValueError("the search statement no longer reads the vector as this what-if expects")
        half = f"::halfvec({half_dim})"
        sql = sql.replace(read, f'"retrieval_context"."embedding"{half} <=> (SELECT vector FROM query_0){half}')
    return sql, params


def halfvec_whatif(args, conn, exact: dict[str, ExactTop10], ef_values: list[int]) -> dict:
    """Builds a halfvec twin of every HNSW index the searches in score order walk, times /find's vector-mode
    statement both ways in process (the same connection settings as the server, alternating per query), measures
    recall@10 of each, then drops the twins: the table is left as the migrations define it."""
    from django.conf import settings
    from django.db import connection

    from core.auth import _caller_for_names
    from retrieval.bulk import vector_index_sql
    from retrieval.search.query import FindQuery, score_order_scans

    dim = settings.EMBEDDING_DIM
    caller = _caller_for_names("default", harness.USER, "admin")
    partitioned = bool(score_order_scans(caller, FindQuery(query="")))
    walked = {n: sql for n, sql in vector_index_sql().items() if (n != common.HNSW_INDEX) == partitioned}
    out: dict = {"indexes": {}, "vector_mb": 0.0, "runs": []}
    pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    for name, sql in walked.items():
        twin, twin_sql = halfvec_twin(name, sql, dim)
        conn.execute(f'DROP INDEX IF EXISTS "{twin}"')
        out["indexes"][twin] = timed_build(conn, pid, twin, twin_sql, args.maintenance_work_mem)
        out["vector_mb"] += float(conn.execute("SELECT pg_relation_size(%s) / 1e6", [name]).fetchone()[0])
        harness.log(f"halfvec index {twin}: {out['indexes'][twin]['s']:.1f} s")
    conn.execute("ANALYZE retrieval_context")
    vectors = exact["all"].queries  # embedded once, for the exact sets
    specs = {
        "all": lambda q: FindQuery(query=q),
        "filtered": lambda q: FindQuery(query=q, context_types=["memory"], since=FILTER_SINCE),
    }
    try:
        if args.quiet_wait:
            harness.wait_quiet(args.quiet_wait)
        with connection.cursor() as cursor:
            for ef in ef_values:
                for which, spec_of in specs.items():
                    times = {"vector": [], "halfvec": []}
                    found = {"vector": [], "halfvec": []}
                    for round_ in range(2):  # the first warms the pages and is not counted
                        for i, (query, vector) in enumerate(zip(common.QUERIES, vectors, strict=True)):
                            order = ("vector", "halfvec") if i % 2 else ("halfvec", "vector")
                            for storage in order:
                                sql, params = search_sql(
                                    caller, spec_of(query), vector, ef, dim if storage == "halfvec" else None
                                )
                                t = time.perf_counter()
                                cursor.execute(sql, params)
                                rows = cursor.fetchall()
                                elapsed = (time.perf_counter() - t) * 1000
                                if round_:
                                    columns = [c.name for c in cursor.description]
                                    uri, distance = columns.index("uri"), columns.index("distance")
                                    times[storage].append(elapsed)
                                    found[storage].append([(r[uri], r[distance]) for r in rows])
                    for storage in ("vector", "halfvec"):
                        out["runs"].append(
                            {
                                "ef_search": ef,
                                "storage": storage,
                                "requests": which,
                                "p50": harness.median(times[storage]),
                                "p95": harness.pct(times[storage], 95),
                                "recall": exact[which].recall(found[storage]),
                                "tolerant": exact[which].recall(found[storage], TIE_BAND),
                            }
                        )
                        harness.log("halfvec what-if: " + repr(out["runs"][-1]))
    finally:
        for twin in out["indexes"]:
            conn.execute(f'DROP INDEX IF EXISTS "{twin}"')
    out["load_avg"] = os.getloadavg()
    return out


def render_halfvec(halfvec: dict) -> list[str]:
    idx = halfvec["indexes"]
    lines = [
        "halfvec beside vector (what-if, `--halfvec`): a halfvec twin of each HNSW index walked above (the same "
        "m, ef_construction and WHERE over `embedding::halfvec`), built on the loaded table: "
        f"{sum(v['s'] for v in idx.values()):.0f} s in all, {sum(v['mb'] for v in idx.values()):,.0f} MB "
        f"against {halfvec['vector_mb']:,.0f} MB for the vector indexes, peak PSS of a build "
        f"{max(v['peak_pss_mb'] for v in idx.values()):,.0f} MB. Then /find's vector-mode search statement as the "
        "server builds it, and the same ordered by the halfvec cast, run in process on one connection (the "
        "server's session settings) for each of the "
        f"{len(common.QUERIES)} queries, the two alternating, after one unmeasured round; ms per statement "
        "(round trip included, no HTTP, no embedding). The twins were dropped afterwards. Load average "
        + " / ".join(f"{x:.2f}" for x in halfvec["load_avg"])
        + " at the end.",
        "",
        f"| ef_search | storage | requests | SQL p50 | SQL p95 | recall@10 | recall@10 within {TIE_BAND} |",
        "|---:|---|---|---:|---:|---:|---:|",
    ]
    for run in halfvec["runs"]:
        lines.append(
            f"| {run['ef_search']} | {run['storage']} | {run['requests']} | {run['p50']:.2f} | {run['p95']:.2f} | "
            f"{run['recall']:.3f} | {run['tolerant']:.3f} |"
        )
    return lines


def settings_used(conn) -> dict:
    from django.conf import settings

    options = settings.DATABASES["default"]["OPTIONS"]["options"]
    session = {part.split("=")[0]: part.split("=")[1] for part in options.replace("-c ", "").split()}
    kept = conn.execute(
        "SELECT avg((context_type = 'memory' AND updated_at >= %s)::int) FROM retrieval_context", [FILTER_SINCE]
    ).fetchone()[0]
    return {
        "filtered_share": float(kept or 0),
        "session": session,
        "shared_buffers": conn.execute("SHOW shared_buffers").fetchone()[0],
        "parallel_maint": conn.execute("SHOW max_parallel_maintenance_workers").fetchone()[0],
    }


def render(
    size: int, args, loaded: dict | None, lats: list[dict], halfvec: dict | None, used: dict, command: str
) -> str:
    lat = lats[0]  # the deployment default first; the others are what-if runs on the same data
    derivation = f"`{args.derive}` derivation, noise {args.noise}"
    lines = [
        SECTION.format(size=size, edge="begin"),
        f"## scale — {size:,} nodes: bulk load, /find and /search context, HNSW recall@10",
        "",
        *harness.heading(
            command,
            f", {harness.ram_gb()} GB RAM, shared machine"
            + (f"; {harness.load_average(loaded['build_load_avg'])} when the indexes were built" if loaded else "")
            + " (per latency run: the table's last column).",
        ),
        f"Server: `gunicorn {lat['server_command']}`, database `{harness.database()}`; searches in score order walk "
        "one HNSW index per search partition and merge from `OVSITE_PARTITIONED_SEARCH_FROM` nodes on, the "
        "whole table's below it; `hnsw.ef_search` per run through `OVSITE_HNSW_WIDE_EF_SEARCH` "
        "(/find and /search context without a purpose, both measured here).  ",
        "Settings: per session "
        + ", ".join(f"`{k}={v}`" for k, v in used["session"].items())
        + f"; shared_buffers {used['shared_buffers']}, max_parallel_maintenance_workers "
        f"{used['parallel_maint']}.",
        "",
    ]
    if loaded:
        idx = loaded["indexes"]
        hnsw_s = sum(v["s"] for k, v in idx.items() if "hnsw" in k)
        base = (
            f"{loaded['embedded']:,} embedded in this run by 2 threads × 1 BLAS thread ahead of the COPY, "
            f"{loaded['from_cache']:,} read from the bench/.data cache"
        )
        rest = (
            f", the rest derived vectors ({derivation}; see `derived_vectors` in the script)"
            if loaded["base"] < loaded["size"]
            else ""
        )
        which = f"the first {loaded['base']:,}" if rest else "all"
        lines += [
            f"Build (finished {loaded['built_at']}): {loaded['size']:,} nodes; {which} "
            f"carry the packaged model's embeddings of their abstracts ({base}){rest}. Load (generation, "
            f"vectors, exact top 10 and binary COPY with token counting, overlapped) {loaded['load_s']:.0f} s "
            f"= {loaded['size'] / loaded['load_s']:,.0f} nodes/s: waiting for vectors "
            f"{loaded['vectors_s']:.0f} s, writing rows {loaded['copy_s']:.0f} s; "
            f"indexes after the load {sum(v['s'] for v in idx.values()):.0f} s, of which HNSW {hnsw_s:.0f} s "
            f"(`maintenance_work_mem` {loaded['maintenance_work_mem']}; `{loaded['hnsw_sql']}`, the search "
            f"partitions' indexes the same with their WHERE); VACUUM ANALYZE {loaded['vacuum_s']:.0f} s; total "
            f"{loaded['build_s']:.0f} s ({loaded['build_s'] / 60:.1f} min). Table with indexes "
            f"{loaded['table_mb']:,.0f} MB (heap {loaded['heap_mb']:,.0f} MB). Loader peak RSS "
            f"{loaded['loader_peak_rss_mb']:,.0f} MB.",
            "",
            "| index | build s | size MB | backend + workers peak PSS MB |",
            "|---|---:|---:|---:|",
        ]
        for name, v in idx.items():
            lines.append(f"| {name} | {v['s']:.1f} | {v['mb']:,.0f} | {v['peak_pss_mb']:,.0f} |")
        lines.append("")
    lines += [
        f"Latency: {args.queries} queries ({len(common.QUERIES)} EN/ZH, cycling), each sent as every request "
        "below in turn on one keep-alive connection; ms. `find` and `search context` (1600 tokens, no purpose) "
        "are the bodies a client sends, hybrid by default; `filtered` adds `context_type: memory` and `since: "
        f"{FILTER_SINCE:%Y-%m-%d}` ({used['filtered_share']:.1%} of the store keep them); "
        "`vector` sets `search_mode: vector`, the HNSW search "
        "alone, whose recall@10 is measured: its top 10 against the exact top 10 (numpy over the same float32 "
        "vectors, of every node or of those the filters keep) on the "
        f"{len(common.QUERIES)} distinct queries; a hit at the 10th exact distance counts; the next column also "
        f"counts a hit within {TIE_BAND} (cosine distance) of it. Median gap between the 10th and 11th exact "
        f"distance: {lats[0]['gap']:.4f}. Load average: 1 / 5 / 15 min as the run's timed requests began"
        + (f" (after waiting up to {args.quiet_wait:.0f} s for a CPU under 20 % busy)" if args.quiet_wait else "")
        + ".",
        "",
        f"| wide ef_search | request | client p50 | client p95 | server p50 | server p95 | recall@10 | "
        f"recall@10 within {TIE_BAND} | load average |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for run in lats:
        for i, (name, x) in enumerate(run["samples"].items()):
            recall = "{:.3f} | {:.3f}".format(*run["recalls"][name]) if name in run["recalls"] else " | "
            load_avg = " / ".join(f"{x:.2f}" for x in run["load_avg"]) if i == 0 else ""
            lines.append(
                f"| {run['ef_search']} | {name} | {harness.median(x['client']):.2f} | "
                f"{harness.pct(x['client'], 95):.2f} | {harness.median(x['server']):.2f} | "
                f"{harness.pct(x['server'], 95):.2f} | {recall} | {load_avg} |"
            )
    lines += [
        "",
        "Resident memory of each gunicorn worker after its run's requests (MB): "
        + "; ".join(
            f"ef_search {run['ef_search']}: " + ", ".join(f"{mb:,.0f}" for mb in run["workers_rss_mb"]) for run in lats
        )
        + " (the graphs and rows live in PostgreSQL's shared buffers, counted in the build's figures, not here).",
    ]
    if halfvec:
        lines += ["", *render_halfvec(halfvec)]
    p50 = {name: harness.median(x["client"]) for name, x in lat["samples"].items()}
    goals = [
        f"{name} recall@10 ≥ {GOAL_RECALL}: {'met' if lat['recalls'][name][0] >= GOAL_RECALL else 'NOT met'} "
        f"({lat['recalls'][name][0]:.3f})"
        for name in lat["recalls"]
    ] + [
        f"{name} p50 ≤ {GOAL_FIND_P50_MS:.0f} ms: {'met' if p50[name] <= GOAL_FIND_P50_MS else 'NOT met'} "
        f"({p50[name]:.2f} ms)"
        for name in REQUESTS
        if name.startswith("find")
    ]
    lines += [
        "",
        f"Goals at 1M nodes, with the deployment's ef_search ({lat['ef_search']}); this run has {size:,}: "
        + "; ".join(goals)
        + ".",
        SECTION.format(size=size, edge="end"),
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = harness.parser(__doc__, DATABASE)
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument(
        "--base",
        type=int,
        help="nodes embedded by the real model (default: every node); the rest get derived vectors (--derive, --noise)",
    )
    parser.add_argument("--derive", choices=("neighbour", "pair"), default="neighbour")
    parser.add_argument("--noise", type=float, default=NOISE)
    parser.add_argument("--seed", type=int, default=common.SEED)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--m", type=int, help="HNSW m for the builds (default: the migration's)")
    parser.add_argument("--ef-construction", type=int, help="HNSW ef_construction (default: the migration's)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--maintenance-work-mem", default="4GB")
    parser.add_argument(
        "--ef-search", type=int, nargs="*", default=[], help="what-if ef_search values measured after the deployment's"
    )
    parser.add_argument("--reuse", action="store_true", help="keep what is loaded; only measure")
    parser.add_argument(
        "--no-cache",
        action="store_true",
        help="embed every real node, as an ingest from scratch would, instead of reading bench/.data's vectors",
    )
    parser.add_argument(
        "--halfvec", action="store_true", help="also build halfvec twins of the walked indexes and compare (what-if)"
    )
    parser.add_argument(
        "--quiet-wait", type=float, default=0.0, help="seconds to wait at most for a quiet CPU before each latency run"
    )
    args = parser.parse_args()
    if any(ef > 1000 for ef in args.ef_search):  # pgvector's limit: the server would answer every /find with a 500
        parser.error("--ef-search: hnsw.ef_search is at most 1000")
    if args.queries < len(common.QUERIES):  # recall@10 is measured on each question's first answer
        parser.error(f"--queries: at least {len(common.QUERIES)}, every question once")
    harness.configure(args.database)
    account = harness.migrated_database()
    from django.conf import settings

    conn = harness.raw_connection()
    if args.base is None:  # every node real; with --reuse, every node loaded
        args.base = conn.execute("SELECT count(*) FROM retrieval_context").fetchone()[0] if args.reuse else args.size
    record = CACHE / f"scale-{args.database}.json"  # the build that made the table, for later --reuse runs
    if args.reuse:
        exact = exact_top10(args, conn)
        loaded = json.loads(record.read_text()) if record.exists() else None
        if loaded and loaded["size"] != args.base:
            loaded = None  # the record of another table
    else:
        loaded, exact = load(args, account.id, conn)
        loaded["maintenance_work_mem"] = args.maintenance_work_mem
        CACHE.mkdir(exist_ok=True)
        record.write_text(json.dumps(loaded, default=float))
    tmp = Path(tempfile.mkdtemp(prefix="ovsite-scale-"))
    ef_values = list(dict.fromkeys([settings.HNSW_WIDE_EF_SEARCH, *args.ef_search]))
    lats = [latency(args, tmp, exact, ef) for ef in ef_values]
    halfvec = halfvec_whatif(args, conn, exact, ef_values) if args.halfvec else None
    size = conn.execute("SELECT count(*) FROM retrieval_context").fetchone()[0]
    # The settings a run was given from the environment belong to its command: the section's figures depend on them.
    command = harness.command_line("bench.scale", env_names=ENV_SETTINGS)
    section = render(size, args, loaded, lats, halfvec, settings_used(conn), command)
    harness.publish(
        section, SECTION.format(size=size, edge="begin"), SECTION.format(size=size, edge="end"), write=not args.no_write
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
