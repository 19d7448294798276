"""Scale, hosted: N nodes (default 1,000,000) shared by A accounts (default 1,000) whose sizes follow a Zipf law,
then /find per account size class, hybrid and vector, and vector mode's recall@10 within each account.

    .venv/bin/python -m bench.scale_hosted [--size 1000000] [--accounts 1000] [--zipf 1.0] [--reuse]
                                           [--sample-medium 40] [--sample-small 60] [--no-whole-graph]

bench.scale's single-account store, as a host serves it: account r (r = 1 … A) holds N·r^-s / H nodes (s = --zipf,
H the sum of r^-s), so at 1M and s = 1 the largest holds 134k, the tenth 13k, the median ~270; each node goes to an
account by a seeded shuffle, so every account's rows are spread over the heap, as years of interleaved writes
leave them.

1. Empties `retrieval_context` in its own database (`ovsite_bench_hosted`), drops its secondary indexes and streams
   the nodes of bench.scale's generator with their real embeddings (the same bench/.data cache, read or filled as
   bench.scale does) into the table with one binary COPY, each row in its account.
2. Builds the model's indexes (every HNSW graph, the whole table's too unless `--no-whole-graph`), then the tenant
   indexes (retrieval.tenant_graphs: an account of OVSITE_TENANT_GRAPHS_FROM nodes or more under half the table gets
   HNSW graphs of its own, from OVSITE_PARTITIONED_SEARCH_FROM one per search partition, and a GIN of its lexemes),
   each timed, then VACUUM ANALYZE. The build's figures are kept in bench/.data/scale_hosted-DATABASE.json for a
   later `--reuse`, which first builds the tenant indexes the layout wants and drops those it does not.
3. Samples accounts per size class (CLASSES): every account of 10k nodes or more, `--sample-medium` of 1k–10k and
   `--sample-small` of those under 1k, at random. Each gets an API key of its own; gunicorn serves with a root key
   set (no dev mode), and each of the 52 EN/ZH bench queries is sent to each sampled account as /find (limit 10)
   twice, hybrid (the body a client sends) and `search_mode: vector`, in a shuffled order over one keep-alive
   connection. Vector mode's top 10 is compared with the exact top 10 within the account (numpy over the same
   float32 vectors, read back from the cache); an account is short when a search of it returned fewer than 10 hits
   while it holds 10 nodes or more.
Writes bench/results/scale_hosted.json and its section of bench/RESULTS.md.
"""

import datetime as dt
import hashlib
import json
import os
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bench import find_latency as common
from bench import harness, scale

DATABASE = "ovsite_bench_hosted"
SECTION_BEGIN, SECTION_END = "<!-- scale_hosted:begin -->", "<!-- scale_hosted:end -->"
JSON_OUT = harness.ROOT / "bench" / "results" / "scale_hosted.json"
# Size classes, largest first: (smallest size in the class, name).
CLASSES = ((50_000, "≥ 50k"), (10_000, "10k–50k"), (1_000, "1k–10k"), (0, "< 1k"))
GOAL_P50_MS, GOAL_RECALL = 20.0, 0.95
FIND = "/api/v1/search/find"
MODES = {"hybrid": {"limit": 10}, "vector": {"limit": 10, "search_mode": "vector"}}
ENV_SETTINGS = (*scale.ENV_SETTINGS, "OVSITE_TENANT_GRAPHS_FROM")
ROOT_KEY = "bench-hosted-root"  # the server leaves dev mode; every request carries its tenant's own key


def zipf_sizes(size: int, accounts: int, s: float) -> np.ndarray:
    """Nodes per account, largest first: `size` split in proportion to r^-s, rounded by largest remainder, at least
    one each."""
    weights = np.arange(1, accounts + 1, dtype=np.float64) ** -s
    raw = size * weights / weights.sum()
    sizes = np.maximum(np.floor(raw).astype(np.int64), 1)
    short = size - int(sizes.sum())
    order = np.argsort(-(raw - np.floor(raw)), kind="stable")
    sizes[order[: max(short, 0)]] += 1
    return sizes


def assignment(sizes: np.ndarray, seed: int) -> np.ndarray:
    """Each node's account rank (0: the largest), in node order: the accounts' rows interleaved."""
    ranks = np.repeat(np.arange(len(sizes)), sizes)
    return np.random.default_rng([seed, len(sizes)]).permutation(ranks)


def size_class(n: int) -> str:
    return next(name for low, name in CLASSES if n >= low)


def make_accounts(count: int) -> tuple[list[int], list[str]]:
    """Accounts `tenant-0001` … by rank, each with user `default` (admin) and a fresh API key: (ids, keys)."""
    from core.models import Account, AccountUser, ApiKey, hash_key, new_key

    names = [f"tenant-{rank + 1:04d}" for rank in range(count)]
    Account.objects.bulk_create([Account(name=name) for name in names], ignore_conflicts=True)
    ids = dict(Account.objects.filter(name__in=names).values_list("name", "id"))
    AccountUser.objects.bulk_create(
        [AccountUser(account_id=ids[name], user_id=harness.USER, role="admin") for name in names],
        ignore_conflicts=True,
    )
    users = {u.account_id: u for u in AccountUser.objects.filter(account_id__in=ids.values(), user_id=harness.USER)}
    ApiKey.objects.filter(user__in=users.values()).delete()  # a run's keys are its own
    keys = [new_key() for _ in names]
    ApiKey.objects.bulk_create(
        [ApiKey(user=users[ids[name]], key_hash=hash_key(key)) for name, key in zip(names, keys, strict=True)]
    )
    return [ids[name] for name in names], keys


def load(args, conn, account_ids: list[int], ranks: np.ndarray) -> dict:
    """The COPY of every node into its account, the model's indexes and the tenant indexes: the build's figures."""
    from pgvector.psycopg import register_vector
    from tqdm import tqdm

    from retrieval.bulk import vector_index_sql
    from retrieval.embedders import get_embedder
    from retrieval.tokens import estimate_tokens

    register_vector(conn)
    out: dict = {"size": args.size, "accounts": args.accounts, "zipf": args.zipf}
    conn.execute("TRUNCATE retrieval_context RESTART IDENTITY CASCADE")
    for name in scale._present_indexes(conn):
        conn.execute(f'DROP INDEX IF EXISTS "{name}"')
    hnsw = vector_index_sql()
    if args.no_whole_graph:
        hnsw.pop(common.HNSW_INDEX)
    indexes = {name: sql for name, sql in scale.model_indexes().items() if name not in vector_index_sql()}
    oids = scale.column_types(conn)
    model = get_embedder().model
    vectors_from: dict = {}
    blocks = scale.node_blocks(args.size, args.size, args.seed, stats=vectors_from)
    t_all = time.perf_counter()
    done = 0
    with (
        conn.transaction(),
        conn.cursor() as cur,
        tqdm(total=args.size, desc=f"load {args.size}", unit="node", file=sys.stderr, mininterval=5.0) as bar,
    ):
        with cur.copy(f"COPY retrieval_context ({', '.join(common.COPY_COLUMNS)}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types([oids[c] for c in common.COPY_COLUMNS])
            for nodes, vectors in blocks:
                for node, vector, rank in zip(nodes, vectors, ranks[done : done + len(nodes)], strict=True):
                    tokens = tuple(estimate_tokens(node[level]) for level in ("abstract", "overview", "content"))
                    content_hash = hashlib.sha256(node["content"].encode()).hexdigest()
                    copy.write_row(common.copy_row(account_ids[rank], node, vector, model, tokens, content_hash))
                done += len(nodes)
                bar.update(len(nodes))
    out.update(vectors_from)
    out["load_s"] = time.perf_counter() - t_all
    out["loader_peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    harness.log(f"loaded {args.size:,} rows in {out['load_s']:.0f} s; building indexes")
    pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    out["indexes"], out["tenant_graphs"] = {}, {}
    for name, sql in [*indexes.items(), *hnsw.items()]:
        out["indexes"][name] = scale.timed_build(conn, pid, name, sql, args.maintenance_work_mem)
        harness.log(f"index {name}: {out['indexes'][name]['s']:.1f} s")
    out["tenant_graphs_s"] = 0.0
    tenant_indexes(conn, out, args)
    scale.finish_build(conn, out, t_all)
    out["maintenance_work_mem"] = args.maintenance_work_mem
    return out


def tenant_indexes(conn, out: dict, args) -> None:
    """Builds the tenant indexes the layout wants and the table lacks and drops those it no longer wants
    (retrieval.tenant_graphs.plan), each build timed into `out` ("tenant_graphs", by name, and "tenant_graphs_s"):
    a build, or with `--reuse` a table an earlier layout built, brought to this one."""
    from retrieval import tenant_graphs

    pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    t = time.perf_counter()
    with conn.cursor() as cur:
        todo = tenant_graphs.plan(tenant_graphs.account_sizes(cur), tenant_graphs.present_indexes(cur))
    for name in todo.create:
        sql = tenant_graphs.index_sql(name, concurrently=False)
        out["tenant_graphs"][name] = scale.timed_build(conn, pid, name, sql, args.maintenance_work_mem)
        harness.log(f"tenant index {name}: {out['tenant_graphs'][name]['s']:.1f} s")
    for name in todo.drop:
        conn.execute(f'DROP INDEX IF EXISTS "{name}"')
        out["tenant_graphs"].pop(name, None)
    out["tenant_graphs_s"] += time.perf_counter() - t


def sample_accounts(sizes: np.ndarray, args) -> list[int]:
    """Account ranks measured: every one of 10k nodes or more, a seeded random sample of the smaller classes."""
    rng = random.Random(args.seed)
    big = [r for r, n in enumerate(sizes) if n >= 10_000]
    medium = [r for r, n in enumerate(sizes) if 1_000 <= n < 10_000]
    small = [r for r, n in enumerate(sizes) if n < 1_000]
    return (
        big
        + sorted(rng.sample(medium, min(args.sample_medium, len(medium))))
        + sorted(rng.sample(small, min(args.sample_small, len(small))))
    )


def exact_tops(conn, ranks: np.ndarray, sampled: list[int], count: int) -> dict[int, scale.ExactTop10]:
    """Each sampled account's exact top 10 (and 11th) per bench query, over the vectors its rows were loaded with
    (the cache's rows in load order; ids are the load order) and the URIs they went into."""
    from retrieval.embedders import get_embedder

    uris = np.array([uri for (uri,) in conn.execute("SELECT uri FROM retrieval_context ORDER BY id")], dtype=object)
    if len(uris) != count:
        raise SystemExit(f"the table holds {len(uris):,} rows, not {count:,}: load it again (no --reuse)")
    cached = np.load(scale.cache_file(get_embedder().model, count), mmap_mode="r")
    queries = scale.query_vectors()
    tops = {}
    for rank in sampled:
        rows = np.flatnonzero(ranks == rank)
        top = scale.ExactTop10(queries)
        for first in range(0, len(rows), scale.BLOCK):
            part = rows[first : first + scale.BLOCK]
            top.add(list(uris[part]), np.asarray(cached[part], dtype=np.float32))
        tops[rank] = top
    return tops


def latency(args, tmp: Path, sizes, sampled: list[int], keys: list[str], tops) -> dict:
    """Every sampled account × query × mode once, shuffled, on one keep-alive connection: client and server ms,
    the hits' count and, in vector mode, recall@10 within the account."""
    import httpx

    server = harness.Gunicorn(args.workers, log_dir=tmp, env={"OVSITE_ROOT_API_KEY": ROOT_KEY})
    server.start()
    jobs = [(rank, q, mode) for rank in sampled for q in range(len(common.QUERIES)) for mode in MODES]
    random.Random(args.seed).shuffle(jobs)
    per = {rank: {mode: {"client": [], "server": [], "hits": {}} for mode in MODES} for rank in sampled}
    try:
        with httpx.Client(base_url=server.url, timeout=120) as client:
            for rank in sampled:  # untimed: each worker's embedder, plans and the account's size counted
                for extra in MODES.values():
                    body = {"query": common.QUERIES[0], **extra}
                    client.post(FIND, json=body, headers={"X-API-Key": keys[rank]}).raise_for_status()
            load_avg = os.getloadavg()
            t = time.perf_counter()
            for rank, q, mode in jobs:
                client.headers["X-API-Key"] = keys[rank]
                answer = harness.timed_post(client, FIND, {"query": common.QUERIES[q], **MODES[mode]})
                cell = per[rank][mode]
                cell["client"].append(answer.client_ms)
                cell["server"].append(answer.server_ms)
                cell["hits"][q] = [
                    (h["uri"], harness.cosine_distance(h["score"]))
                    for key in ("memories", "resources", "skills")
                    for h in answer.result[key]
                ]
            elapsed = time.perf_counter() - t
    finally:
        server.stop()
    classes = {}
    for _, name in CLASSES:
        ranks = [r for r in sampled if size_class(int(sizes[r])) == name]
        in_class = [int(n) for n in sizes if size_class(int(n)) == name]
        if not in_class:
            continue
        row = {
            "accounts": len(in_class),
            "nodes": sum(in_class),
            "sizes": [min(in_class), max(in_class)],
            "sampled_accounts": len(ranks),
            "sampled_nodes": int(sum(sizes[r] for r in ranks)),
            "queries_per_mode": len(ranks) * len(common.QUERIES),
        }
        for mode in MODES:
            client_ms = [x for r in ranks for x in per[r][mode]["client"]]
            server_ms = [x for r in ranks for x in per[r][mode]["server"]]
            row[mode] = {
                "p50_ms": harness.median(client_ms),
                "p95_ms": harness.pct(client_ms, 95),
                "server_p50_ms": harness.median(server_ms),
                "server_p95_ms": harness.pct(server_ms, 95),
                "short_accounts": sum(
                    1 for r in ranks if sizes[r] >= 10 and any(len(h) < 10 for h in per[r][mode]["hits"].values())
                ),
            }
        recalls = [tops[r].recall([per[r]["vector"]["hits"][q] for q in range(len(common.QUERIES))]) for r in ranks]
        row["vector"]["recall_at_10"] = float(np.mean(recalls))
        row["vector"]["recall_at_10_min_account"] = float(np.min(recalls))
        classes[name] = row
        harness.log(f"{name}: {json.dumps(row)}")
    return {
        "classes": classes,
        "requests": len(jobs),
        "elapsed_s": elapsed,
        "load_avg": load_avg,
        "load_avg_end": os.getloadavg(),
        "server_command": server.command,
    }


def render(built: dict | None, lat: dict, command: str, args) -> str:
    from django.conf import settings  # the server's own thresholds, as the environment set them

    lines = [
        SECTION_BEGIN,
        f"## scale, hosted — {args.size:,} nodes in {args.accounts:,} accounts (Zipf s = {args.zipf})",
        "",
        *harness.heading(command, f", {harness.ram_gb()} GB RAM, shared machine"),
        f"Server: `gunicorn {lat['server_command']}` with a root key set (not dev mode), database "
        f"`{harness.database()}`; each request carries its tenant's own API key. Layout (docs/retrieval.md, "
        '"Tenants"): an account under half the table with fewer than `OVSITE_TENANT_GRAPHS_FROM` nodes '
        f"({settings.TENANT_GRAPHS_FROM:,}) is searched exactly through its account's B-tree; from there on it walks "
        "HNSW graphs of its own (one, or one per search partition from `OVSITE_PARTITIONED_SEARCH_FROM` nodes, "
        f"{settings.PARTITIONED_SEARCH_FROM:,}) and reads its matches from a GIN of its own, built by "
        "`manage.py tenant_graphs`.",
        "",
    ]
    if built:
        idx, tg = built["indexes"], built["tenant_graphs"]
        hnsw_s = sum(v["s"] for k, v in idx.items() if "hnsw" in k)
        lines += [
            f"Build (finished {built['built_at']}; load average {harness.load_average(built['build_load_avg'])} "
            f"then): COPY of {built['size']:,} nodes with real embeddings ({built.get('embedded', 0):,} embedded in "
            f"this run, {built.get('from_cache', 0):,} from the bench/.data cache) {built['load_s']:.0f} s; the "
            f"model's indexes {sum(v['s'] for v in idx.values()):.0f} s, of which HNSW {hnsw_s:.0f} s "
            f"({', '.join(k for k in idx if 'hnsw' in k)}); the {len(tg)} tenant indexes "
            f"{built['tenant_graphs_s']:.0f} s, {sum(v['mb'] for v in tg.values()):,.0f} MB (the model's HNSW "
            f"graphs: {sum(v['mb'] for k, v in idx.items() if 'hnsw' in k):,.0f} MB); VACUUM ANALYZE "
            f"{built['vacuum_s']:.0f} s; total {built['build_s'] / 60:.1f} min. Table with indexes "
            f"{built['table_mb']:,.0f} MB (heap {built['heap_mb']:,.0f} MB); `maintenance_work_mem` "
            f"{built['maintenance_work_mem']}.",
            "",
            "| tenant index | build s | size MB | peak PSS MB |",
            "|---|---:|---:|---:|",
            *(f"| {k} | {v['s']:.1f} | {v['mb']:,.0f} | {v['peak_pss_mb']:,.0f} |" for k, v in tg.items()),
            "",
        ]
    lines += [
        f"/find, limit 10: {lat['requests']:,} requests (each sampled account × the {len(common.QUERIES)} EN/ZH "
        "bench queries × hybrid, the default body, and `search_mode: vector`), shuffled, on one keep-alive "
        f"connection in {lat['elapsed_s']:.0f} s; client ms. recall@10: vector mode's top 10 against the exact "
        "top 10 within the account (numpy over the same float32 vectors; a hit at the 10th exact distance counts), "
        "mean over the class's sampled accounts (its worst account beside it). Short: sampled accounts of 10 nodes "
        "or more for which a search returned fewer than 10 hits. Load average "
        f"{harness.load_average(lat['load_avg'])} as the timed requests began, "
        f"{harness.load_average(lat['load_avg_end'])} at their end.",
        "",
        "| class | accounts | nodes | sampled | hybrid p50 | hybrid p95 | vector p50 | vector p95 | "
        "recall@10 (worst) | short hybrid / vector |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    goals = []
    for name, row in lat["classes"].items():
        h, v = row["hybrid"], row["vector"]
        lines.append(
            f"| {name} | {row['accounts']} | {row['nodes']:,} | {row['sampled_accounts']} | {h['p50_ms']:.1f} | "
            f"{h['p95_ms']:.1f} | {v['p50_ms']:.1f} | {v['p95_ms']:.1f} | {v['recall_at_10']:.3f} "
            f"({v['recall_at_10_min_account']:.3f}) | {h['short_accounts']} / {v['short_accounts']} |"
        )
        met = (
            max(h["p50_ms"], v["p50_ms"]) <= GOAL_P50_MS
            and v["recall_at_10"] >= GOAL_RECALL
            and h["short_accounts"] + v["short_accounts"] == 0
        )
        goals.append(f"{name} {'met' if met else 'NOT met'}")
    lines += [
        "",
        f"Targets (every class: /find p50 ≤ {GOAL_P50_MS:.0f} ms, recall@10 ≥ {GOAL_RECALL}, no account short): "
        + "; ".join(goals)
        + ". Figures as JSON: bench/results/scale_hosted.json.",
        SECTION_END,
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = harness.parser(__doc__, DATABASE)
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--accounts", type=int, default=1_000)
    parser.add_argument("--zipf", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=common.SEED)
    parser.add_argument("--sample-medium", type=int, default=40, help="accounts of 1k–10k nodes measured")
    parser.add_argument("--sample-small", type=int, default=60, help="accounts under 1k nodes measured")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--maintenance-work-mem", default="4GB")
    parser.add_argument("--no-whole-graph", action="store_true", help="skip the whole table's HNSW graph")
    parser.add_argument("--reuse", action="store_true", help="keep what is loaded; only measure")
    args = parser.parse_args()
    harness.configure(args.database)
    harness.migrated_database()
    conn = harness.raw_connection()
    sizes = zipf_sizes(args.size, args.accounts, args.zipf)
    ranks = assignment(sizes, args.seed)
    account_ids, keys = make_accounts(args.accounts)
    record = scale.CACHE / f"scale_hosted-{args.database}.json"
    if args.reuse:
        built = json.loads(record.read_text()) if record.exists() else None
        if built:
            tenant_indexes(conn, built, args)
            record.write_text(json.dumps(built, default=float))
    else:
        built = load(args, conn, account_ids, ranks)
        scale.CACHE.mkdir(exist_ok=True)
        record.write_text(json.dumps(built, default=float))
    sampled = sample_accounts(sizes, args)
    tops = exact_tops(conn, ranks, sampled, args.size)
    lat = latency(args, Path(tempfile.mkdtemp(prefix="ovsite-hosted-")), sizes, sampled, keys, tops)
    command = harness.command_line("bench.scale_hosted", env_names=ENV_SETTINGS)
    JSON_OUT.parent.mkdir(exist_ok=True)
    if not args.no_write:
        figures = {"command": command, "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"), **vars(args)}
        figures.update(build=built, **lat)
        JSON_OUT.write_text(json.dumps(figures, indent=1, ensure_ascii=False, default=float) + "\n")
    harness.publish(render(built, lat, command, args), SECTION_BEGIN, SECTION_END, write=not args.no_write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
