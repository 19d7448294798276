"""What exact token counting costs (docs/tokens.md): /search context and bootstrap in each tokenizer family beside
the estimator-only request, and the write path's counting per node.

    .venv/bin/python -m bench.token_cost [--size 10000] [--queries 200]

Loads the corpus of bench/find_latency.py (its loader counts every node's three levels as the write path does:
exactly, in the deployment's family, o200k) into `ovsite_bench_assembly`, starts gunicorn as
bench/assembly_latency.py does and sends, for every query in turn, /search context (1600 tokens) once per family —
`estimate` (the estimator alone: no exact count, no margin, no replan) first — then bootstrap (1600 tokens) once
per family, on one keep-alive connection, so every family is measured alternately in one run: requests that name
another family than the stored counts'. Then, for each other family, it makes that family the deployment's
(settings row, every node recounted), starts the server again and measures that family against `estimate` the
same way: the cost a deployment of that family pays. The cost of a family is the median over queries of its server
time minus the estimator-only request's on the same query (Server-Timing sums). Last, in this process, the
corpus's three levels are counted with each family's counter and with the estimator. Rewrites its section of
bench/RESULTS.md.
"""

import sys
import time

from bench import assembly_latency, harness
from bench import find_latency as corpus

SECTION_BEGIN, SECTION_END = "<!-- token_cost:begin -->", "<!-- token_cost:end -->"
FAMILIES = ("estimate", "o200k", "cl100k", "qwen", "deepseek")
TARGET_CONTEXT_MS, TARGET_BOOTSTRAP_MS = 0.5, 1.0
MAX_TOKENS = 1600


def requests_for(query: str, families) -> dict[tuple[str, str], tuple[str, dict]]:
    search = "/api/v1/search/search"
    out = {
        ("context", f): (search, {"query": query, "mode": "context", "max_tokens": MAX_TOKENS, "tokenizer": f})
        for f in families
    }
    out.update(
        {("bootstrap", f): (search, {"mode": "bootstrap", "max_tokens": MAX_TOKENS, "tokenizer": f}) for f in families}
    )
    return out


def measure(args, families) -> tuple[dict, str]:
    """Every request of `requests_for` per query against a fresh server: samples by (request, family)."""
    import httpx

    server = harness.Gunicorn(args.workers)
    server.start()
    samples: dict = {}
    try:
        harness.warm_up(server, corpus.QUERIES)
        with httpx.Client(base_url=server.url, timeout=60) as client:
            for path, body in requests_for(corpus.QUERIES[0], families).values():  # vocabularies out of the timing
                for _ in range(args.workers * 2):
                    client.post(path, json=body).raise_for_status()
            for i in range(args.queries):
                for key, (path, body) in requests_for(corpus.QUERIES[i % len(corpus.QUERIES)], families).items():
                    answer = harness.timed_post(client, path, body)
                    stats = answer.result["stats"]
                    sample = samples.setdefault(key, {"server": [], "used": [], "replans": [], "over": 0})
                    sample["server"].append(answer.server_ms)
                    sample["used"].append(stats["used_tokens"])
                    sample["replans"].append(stats.get("replans", 0))
                    sample["over"] += stats["used_tokens"] > MAX_TOKENS
    finally:
        server.stop()
    return samples, server.command


def store_counts_in(family: str) -> float:
    """Makes `family` the deployment's and recounts every node in it, as saving the settings does; seconds."""
    from profiles.models import RetrievalSettings
    from retrieval.recount import recount_for_deployment

    started = time.perf_counter()
    RetrievalSettings.objects.filter(pk=1).update(tokenizer_family=family)
    recount_for_deployment()
    return time.perf_counter() - started


def serve(args) -> dict:
    loaded, _ = corpus.load_corpus(args.size)
    store_counts_in("o200k")
    mixed, command = measure(args, FAMILIES)
    own, recounts = {}, {}
    try:
        for family in FAMILIES[2:]:
            recounts[family] = store_counts_in(family)
            own[family] = measure(args, ("estimate", family))[0]
    finally:
        store_counts_in("o200k")
    return {"loaded": loaded, "samples": mixed, "own": own, "recounts": recounts, "server_command": command}


def counting_rates() -> dict[str, float]:
    """Nodes per second counting the corpus's abstract, overview and content, per family, in this process."""
    from retrieval.models import Context
    from retrieval.tokenizers import counter_for
    from retrieval.tokens import estimate_tokens

    texts = list(Context.objects.values_list("abstract", "overview", "content"))
    rates = {}
    for family in FAMILIES:
        count = counter_for(family).count
        started = time.perf_counter()
        for levels in texts:
            for text in levels:
                count(text)
        rates[family] = len(texts) / (time.perf_counter() - started)
    started = time.perf_counter()
    for levels in texts:
        for text in levels:
            estimate_tokens(text)
    rates["estimator (o200k weights)"] = len(texts) / (time.perf_counter() - started)
    return rates


def element_costs() -> dict[str, tuple[float, float]]:
    """ms to give 50 candidates their exact element costs (assembly/costs.py), per family: with every URI new to
    the process (a first turn), and again (the URIs of an earlier turn), over 5,000 nodes of the corpus."""
    from assembly import costs
    from assembly.planner import Candidate
    from retrieval.models import Context
    from retrieval.tokenizers import counter_for

    candidates = [
        Candidate(
            uri=r["uri"],
            category=r["category"],
            context_type=r["context_type"],
            kind=r["kind"],
            score=0.5,
            abstract=r["abstract"],
            abstract_tokens=r["abstract_tokens"],
        )
        for r in Context.objects.values("uri", "category", "context_type", "kind", "abstract", "abstract_tokens")[:5000]
    ]
    out = {}
    for family in FAMILIES[1:]:
        counter = counter_for(family)
        costs._uri_tokens.cache_clear()
        timings = []
        for _ in range(2):
            started = time.perf_counter()
            for i in range(0, len(candidates), 50):
                costs.with_exact_costs(candidates[i : i + 50], counter, "o200k")
            timings.append((time.perf_counter() - started) * 1000 / (len(candidates) / 50))
        out[family] = (timings[0], timings[1])
    return out


def render(run: dict, rates: dict, command: str, args) -> str:
    s = run["samples"]

    def cost(kind: str, family: str) -> float:
        return harness.paired_median(s[(kind, family)]["server"], s[(kind, "estimate")]["server"])

    loaded = run["loaded"]
    lines = [
        SECTION_BEGIN,
        "## token_cost — exact token counts beside the estimator",
        "",
        *harness.heading(command),
        f"Server: `gunicorn {run['server_command']}`, database `{harness.database()}`; corpus of "
        f"bench/find_latency.py, {args.size:,} nodes, loaded end to end at {loaded['e2e_rate']:.0f} nodes/s "
        f"with exact o200k counts (generation and counting {loaded['generate_s']:.1f} s of "
        f"{loaded['e2e_s']:.1f} s); {args.queries} queries, every request below alternating per query on one "
        "keep-alive connection; query-vector cache off. All figures from this one run.",
        "",
        "Stored counts in o200k (the corpus as loaded), requests naming each family:",
        "",
        "| request | family | server p50 ms | cost over estimate-only, ms (median of paired differences) | "
        "used tokens p50 | over max_tokens | replanned | target |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for kind, target in (("context", TARGET_CONTEXT_MS), ("bootstrap", TARGET_BOOTSTRAP_MS)):
        for family in FAMILIES:
            x = s[(kind, family)]
            extra = cost(kind, family) if family != "estimate" else 0.0
            verdict = "—" if family == "estimate" else f"≤ {target} ms {'met' if extra <= target else 'NOT met'}"
            replanned = sum(1 for r in x["replans"] if r)
            lines.append(
                f"| {kind} {MAX_TOKENS} | {family} | {harness.median(x['server']):.2f} | "
                f"{extra:+.2f} | {harness.median(x['used']):.0f} | {x['over']} of {len(x['used'])} | "
                f"{replanned} | {verdict} |"
            )
    lines += [
        "",
        "Each family as the deployment's (its stored counts, every node recounted in it first; the server "
        "started again; the family against `estimate`, alternating per query, as above):",
        "",
        "| request | family | recount of every node, s | server p50 ms | cost over estimate-only, ms | "
        "used tokens p50 | over max_tokens | replanned | target |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for kind, target in (("context", TARGET_CONTEXT_MS), ("bootstrap", TARGET_BOOTSTRAP_MS)):
        x = s[(kind, "o200k")]
        lines.append(
            f"| {kind} {MAX_TOKENS} | o200k | (loaded in it) | {harness.median(x['server']):.2f} | "
            f"{cost(kind, 'o200k'):+.2f} | {harness.median(x['used']):.0f} | {x['over']} of {len(x['used'])} | "
            f"{sum(1 for r in x['replans'] if r)} | "
            f"≤ {target} ms {'met' if cost(kind, 'o200k') <= target else 'NOT met'} |"
        )
        for family, own in run["own"].items():
            x = own[(kind, family)]
            extra = harness.paired_median(x["server"], own[(kind, "estimate")]["server"])
            lines.append(
                f"| {kind} {MAX_TOKENS} | {family} | {run['recounts'][family]:.1f} | "
                f"{harness.median(x['server']):.2f} | {extra:+.2f} | {harness.median(x['used']):.0f} | "
                f"{x['over']} of {len(x['used'])} | {sum(1 for r in x['replans'] if r)} | "
                f"≤ {target} ms {'met' if extra <= target else 'NOT met'} |"
            )
    lines += [
        "",
        "The write path's counting, in this process over the loaded corpus (abstract, overview and content "
        "of every node; nodes per second):",
        "",
        "| counter | nodes/s |",
        "|---|---:|",
    ]
    lines += [f"| {name} | {rate:,.0f} |" for name, rate in rates.items()]
    lines += [
        "",
        "The planner's exact element costs (assembly/costs.py), ms per 50 candidates (a 1600-token pool), in "
        "this process over 5,000 nodes: every URI new to the process, then the same URIs again. The latency "
        "rows above cycle 52 queries, so their URIs recur, as a conversation's do:",
        "",
        "| family | URIs new | URIs seen |",
        "|---|---:|---:|",
    ]
    lines += [f"| {family} | {cold:.2f} | {warm:.2f} |" for family, (cold, warm) in run["elements"].items()]
    lines += [
        "",
        "`estimate` requests are planned to the whole budget by the estimator alone and never counted "
        "exactly; an exact family plans 3 % under it with exact element costs (and stored abstract counts in "
        "its own family), counts the block with its tokenizer and plans again (at most twice) when the count "
        "strays (assembly/pipeline.py, docs/tokens.md).",
        SECTION_END,
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = harness.parser(__doc__, assembly_latency.DATABASE)
    parser.add_argument("--size", type=int, default=10000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    harness.configure(args.database)
    run = serve(args)
    run["elements"] = element_costs()
    section = render(run, counting_rates(), harness.command_line("bench.token_cost"), args)
    harness.publish(section, SECTION_BEGIN, SECTION_END, write=not args.no_write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
