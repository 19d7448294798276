"""Latency on alternating requests and throughput under concurrent clients, for any set of servers."""
import asyncio
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
}


def summary(result: dict) -> dict:
    """What the answer holds, so equal work can be checked: hits (list routes) or entries and tokens (context)."""
    if "entries" in result:
        return {"entries": len(result["entries"]), "used": (result.get("stats") or {}).get("used_tokens")}
    return {"hits": sum(len(result.get(k) or []) for k in ("memories", "resources", "skills"))}


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


async def _client(url: str, path: str, extra: dict, queries: list[str], deadline: float, offset: int,
                  latencies: list, errors: list) -> None:
    import httpx

    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        i = offset
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            try:
                response = await client.post(path, json={"query": queries[i % len(queries)], **extra})
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
    latencies: list[float] = []
    errors: list[str] = []

    async def run_all():
        deadline = time.perf_counter() + seconds
        await asyncio.gather(*(_client(url, path, extra, queries, deadline, k * 7, latencies, errors)
                               for k in range(clients)))

    cpu = common._cpu_snapshot()
    started = time.perf_counter()
    asyncio.run(run_all())
    elapsed = time.perf_counter() - started
    return {"requests": len(latencies), "errors": len(errors), "error_kinds": sorted(set(errors)),
            "seconds": elapsed, "rps": len(latencies) / elapsed, "p50": common.median(latencies),
            "p95": common.pct(latencies, 95), "cpu_busy": common.cpu_busy_since(cpu)}
