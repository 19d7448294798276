"""One deterministic corpus, loaded into any server that speaks the OpenViking content API.

Reusable by other benchmarks (`from bench.vs_openviking import corpus`): `build(size)` returns the files,
`load(client, files)` writes them with `POST /api/v1/content/batch-write` and waits with `POST /api/v1/system/wait`,
the routes ovsite and OpenViking 0.5.2 share.

The files are those of `bench/find_latency.py`'s generator — short memories of the four categories
(events, entities, preferences, experiences), 40 % Chinese, and resource documents — with every resource body grown
to several KB (sections of the generator's own sentences), since a context server's resources are documents, not
one-liners. Directories are implied by the files' URIs; each server builds its own.
"""

import datetime as dt
import random
import time
from dataclasses import dataclass

from bench import find_latency as generator

# A fixed clock: the same seed gives byte-equal files on every run (event dates are part of the text).
EPOCH = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
RESOURCE_MIN_CHARS = 2500
BATCH = 50


@dataclass(frozen=True)
class File:
    uri: str
    content: str
    context_type: str
    category: str
    zh: bool


def _grow(content: str, zh: bool, rng: random.Random) -> str:
    """Appends sections of the generator's sentences until the document is a few KB."""
    g = generator
    parts = [content.rstrip("\n")]
    section = 0
    while sum(len(p) for p in parts) < RESOURCE_MIN_CHARS + rng.randint(0, 3000):
        section += 1
        if zh:
            heading = f"## 第{section}节：{rng.choice(g.COMPONENTS_ZH)}"
            body = "".join(
                rng.choice(g.DETAILS_ZH) + f"适用于{rng.choice(g.DEPLOYMENTS_ZH)}环境，"
                f"由{rng.choice(g.PEOPLE_ZH)}负责。"
                for _ in range(rng.randint(4, 8))
            )
        else:
            heading = f"## {section}. {rng.choice(g.COMPONENTS).capitalize()}"
            body = " ".join(
                f"{rng.choice(g.DETAILS)} It applies to the {rng.choice(g.DEPLOYMENTS)} deployment "
                f"and is owned by {rng.choice(g.PEOPLE)}."
                for _ in range(rng.randint(4, 8))
            )
        parts += ["", heading, body]
    return "\n".join(parts) + "\n"


def build(size: int, seed: int = generator.SEED) -> list[File]:
    """`size` files, deterministic for a seed."""
    rng = random.Random(seed + 1)
    files = []
    for node in generator.generate(size * 2, EPOCH, seed):
        if node["kind"] != "file":
            continue
        content = node["content"]
        if node["context_type"] == "resource":
            content = _grow(content, node["zh"], rng)
        files.append(File(node["uri"], content, node["context_type"], node["category"], node["zh"]))
        if len(files) == size:
            break
    return files


def _root(uri: str) -> str:
    """The batch root OpenViking accepts (an existing memory-type or resource directory), which ovsite accepts too:
    `viking://user/{user}/memories/{category}` or `viking://resources/{project}`."""
    parts = uri.split("/")
    return "/".join(parts[:6] if uri.startswith("viking://user/") else parts[:4])


def load(client, files: list[File], wait_timeout_s: float = 3600.0) -> dict:
    """Writes every file through the shared HTTP API, then waits until the server has processed them all.

    `client` is an `httpx.Client` with the server's base URL and auth headers. Returns the timings."""
    started = time.perf_counter()
    batches: dict[str, list[File]] = {}
    for f in files:
        batches.setdefault(_root(f.uri), []).append(f)
    for root, group in batches.items():
        response = client.post("/api/v1/fs/mkdir", json={"uri": root})
        if response.status_code not in (200, 409):  # 409: it exists already
            raise RuntimeError(
                f"mkdir {root} on {client.base_url} failed: {response.status_code} {response.text[:500]}"
            )
        for start in range(0, len(group), BATCH):
            ops = [{"uri": f.uri, "content": f.content, "mode": "create"} for f in group[start : start + BATCH]]
            response = client.post(
                "/api/v1/content/batch-write", json={"root_uri": root, "operations": ops, "wait": False}, timeout=600
            )
            if response.status_code != 200:
                raise RuntimeError(
                    f"batch-write to {client.base_url} failed: {response.status_code} {response.text[:500]}"
                )
    written = time.perf_counter()
    response = client.post("/api/v1/system/wait", json={}, timeout=wait_timeout_s)
    response.raise_for_status()
    return {
        "files": len(files),
        "write_s": written - started,
        "processed_s": time.perf_counter() - started,
        "chars": sum(len(f.content) for f in files),
    }
