"""What `score` OpenViking 0.5.2 returns, measured: the function of the query and stored vectors, the text it embeds
for each node, and whether hierarchy, target directories or event time decay change it.

    .venv/bin/python -m bench.vs_openviking.score_probe [--size 300]

Starts the model server (model_server.py, logging every text it embeds) and OpenViking (openviking_server.py) as
run.py does, loads `corpus.build(size)` plus a few probe files (nested directories, an event, short resources), then
for every query of bench/find_latency.py and a few probe queries reads each hit of /find, /search list, /find with a
target directory and /search context, and compares its score with the cosine c of the query vector and the stored
vector of the record it returned (`GET /api/v1/debug/vector/scroll`): |score − (1 + c)/2| and |score − int8 score|
(measure.int8_score: the engine's quantised arithmetic). Each stored vector is matched to the logged text whose
vector it is, so the report says what OpenViking embedded per node kind. Event time decay is not reachable through
the content API (only memories extracted from a session carry the `memory_type=events` tag it applies to), so
`--engine-decay` runs the engine itself (OpenViking's local vector collection, in bench/.venv-openviking) on records
of known age. Prints a report; writes nothing else.
"""

import argparse
import datetime as dt
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

from bench import harness

OV_PYTHON = harness.ROOT / "bench" / ".venv-openviking" / "bin" / "python"
# `--engine-decay` runs this module again in bench/.venv-openviking, which has OpenViking but no numpy or Django:
# what the probe needs beyond the standard library is imported in `probe`.
ENGINE_DECAY = [str(OV_PYTHON), "-m", "bench.vs_openviking.score_probe", "--engine-decay"]

PROBE_FILES = [  # (uri, content, context_type, category)
    (
        "viking://resources/probe/alpha/beta/gamma/deep-note.md",
        "The quick brown fox jumps over the lazy dog near the river bank.\n",
        "resource",
        "resources",
    ),
    (
        "viking://resources/probe/alpha/pool.md",
        "Connection pool size is 20 for the primary database.",
        "resource",
        "resources",
    ),
    (
        "viking://resources/probe/alpha/beta/keys.md",
        "# Rotating API keys\n\nRotate the API keys every 90 days; the old key stays valid for one day.\n",
        "resource",
        "resources",
    ),
    (
        "viking://user/default/memories/preferences/coffee.md",
        "The user likes flat white coffee with oat milk.\n",
        "memory",
        "preferences",
    ),
    (
        "viking://user/default/memories/events/2026/10/31/halloween.md",
        "On October 31, 2026 the user went to a costume party in Berlin.\n",
        "memory",
        "events",
    ),
]
PROBE_QUERIES = [
    "quick brown fox",
    "how big is the connection pool",
    "what did the user do on Halloween",
    "how often are API keys rotated",
    "flat white",
]
TARGETS = ["viking://user/default/memories", "viking://resources/probe", "viking://resources/probe/alpha/beta"]


def spread(values: list[float]) -> str:
    if not values:
        return "0 pairs"
    return f"{len(values)} pairs, max {max(values):.2e}, median {statistics.median(values):.2e}"


def probe(size: int) -> int:
    import httpx
    import numpy as np

    from bench import find_latency
    from bench.vs_openviking import corpus, measure, openviking_server, run

    workdir = Path(tempfile.mkdtemp(prefix="ovsite-score-probe-"))
    log_path = workdir / "embedded-texts.jsonl"
    os.environ["MODEL_SERVER_EMBED_LOG"] = str(log_path)
    openviking_server.ensure_venv()
    files = corpus.build(size) + [corpus.File(u, c, t, k, False) for u, c, t, k in PROBE_FILES]
    model_proc, model_url = run.start_model_server(workdir)
    ov = openviking_server.OpenVikingServer(
        workdir=workdir / "openviking", model_url=model_url, port=harness.free_port()
    )
    try:
        ov.start()
        client = httpx.Client(base_url=ov.url, timeout=600)
        harness.log(f"loading {len(files)} files into OpenViking ({workdir})")
        harness.log(str(corpus.load(client, files)))
        stored = measure.openviking_vectors(client)
        queries = find_latency.QUERIES + PROBE_QUERIES
        query_vectors = measure.embed(model_url, queries)
        rows = []  # one per hit: route, query, key, score, cosine, int8

        def take(route: str, qi: int, hits: list[dict]) -> None:
            q = query_vectors[qi] / np.linalg.norm(query_vectors[qi])
            for hit in hits:
                key = measure.record_key(hit)
                if route == "search context" and key not in stored:
                    continue  # an entry names a directory by its URI, not by the record (L0 or L1) that scored
                vector = stored.get(key)
                if vector is None:
                    rows.append({"route": route, "query": qi, "key": key, "missing": True})
                    continue
                rows.append(
                    {
                        "route": route,
                        "query": qi,
                        "key": key,
                        "score": float(hit["score"]),
                        "cosine": float(q @ vector / np.linalg.norm(vector)),
                        "int8": measure.int8_score(q, vector),
                    }
                )

        for qi, query in enumerate(queries):
            for route, (path, extra) in measure.SCORE_ROUTES.items():
                take(route, qi, measure.ranked_hits(client, path, {"query": query, **extra}))
            for target in TARGETS:
                take(
                    f"find target_uri={target}",
                    qi,
                    measure.ranked_hits(
                        client, "/api/v1/search/find", {"query": query, "limit": 10, "target_uri": target}
                    ),
                )
            take(
                "find events_time_decay_protection=0",
                qi,
                measure.ranked_hits(
                    client, "/api/v1/search/find", {"query": query, "limit": 10, "events_time_decay_protection": "0"}
                ),
            )
            response = client.post(
                "/api/v1/search/search", json={"query": query, "mode": "context", "max_tokens": 1600}
            )
            response.raise_for_status()
            take("search context", qi, response.json()["result"]["entries"])
        # The texts OpenViking sent to the model server, and their vectors (the same server, deterministic).
        texts = list(dict.fromkeys(t for line in log_path.open(encoding="utf-8") for t in json.loads(line)["inputs"]))
        text_matrix = measure.embed(model_url, texts)
    finally:
        ov.stop()
        model_proc.terminate()
        model_proc.wait(timeout=20)

    scored = [r for r in rows if not r.get("missing")]
    print(
        f"\nOpenViking 0.5.2, {len(files)} files, {len(stored)} vector records, {len(queries)} queries; "
        f"hits without a stored record: {sum(1 for r in rows if r.get('missing'))}"
    )
    print("score against c = cos(query vector, stored vector of the hit's record):")
    for route in dict.fromkeys(r["route"] for r in scored):
        rs = [r for r in scored if r["route"] == route]
        print(
            f"  {route:50s} |score − (1+c)/2| {spread([abs(r['score'] - (1 + r['cosine']) / 2) for r in rs])}; "
            f"|score − int8| {spread([abs(r['score'] - r['int8']) for r in rs])}"
        )
    print(
        f"  {'all':50s} |score − (1+c)/2| {spread([abs(r['score'] - (1 + r['cosine']) / 2) for r in scored])}; "
        f"|score − int8| {spread([abs(r['score'] - r['int8']) for r in scored])}"
    )
    levels = Counter(r["key"][1] for r in scored)
    print(
        f"  hits by level: L0 {levels[0]}, L1 {levels[1]}, L2 {levels[2]}; cosine range "
        f"{min(r['cosine'] for r in scored):.3f} … {max(r['cosine'] for r in scored):.3f}"
    )

    # The same record for the same query: does a target directory (or asking for time decay) change its score?
    plain = {(r["query"], r["key"]): r["score"] for r in scored if r["route"] == "find"}
    for route in [r for r in dict.fromkeys(x["route"] for x in scored) if r.startswith("find ")]:
        same = [
            abs(r["score"] - plain[(r["query"], r["key"])])
            for r in scored
            if r["route"] == route and (r["query"], r["key"]) in plain
        ]
        print(f"  {route} against /find for the same (query, record): {spread(same)}")

    report_texts(files, stored, texts, text_matrix)
    return 0


def report_texts(files, stored: dict, texts: list[str], matrix) -> None:
    """Matches every stored vector to the logged text it is the embedding of and prints, per node kind, how that
    text relates to the file's content."""
    import numpy as np

    from bench.vs_openviking import measure

    matrix = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
    by_uri = {f.uri: f for f in files}
    kinds, examples = Counter(), {}
    for (uri, level), vector in stored.items():
        sims = matrix @ (vector / np.linalg.norm(vector))
        j = int(np.argmax(sims))
        text = texts[j] if sims[j] >= measure.SAME_VECTOR else None
        f = by_uri.get(uri) if level == 2 else None
        kind = measure.node_kind((uri, level)) if f is not None or level != 2 else "other file"
        if text is None:
            relation = "no logged text"
        elif f is not None:
            relation = (
                "the content"
                if text == f.content
                else "the content, stripped"
                if text == f.content.strip()
                else "a prefix of the content"
                if f.content.startswith(text)
                else "other"
            )
        elif text.startswith("---\ndirectory: "):
            relation = "'---\\ndirectory: {uri}/\\n---\\n\\n' + body"
        else:
            relation = "no front matter (preset directory)"
        kinds[(kind, relation)] += 1
        examples.setdefault((kind, relation), text or "")
    print("\nwhat OpenViking embedded, by node kind (records):")
    for (kind, relation), n in sorted(kinds.items()):
        print(f"  {kind:28s} {relation:40s} {n:4d}   e.g. {examples[(kind, relation)][:90]!r}")


def engine_decay() -> int:
    """Run with bench/.venv-openviking's python: OpenViking's own local collection with the index OpenViking creates
    (flat, cosine → inner product on normalised vectors, int8), records of known age, searched with the time-decay
    parameters `events_time_decay_protection` compiles to (openviking/utils/time_decay.py: scale 7d, decay 0.5)."""
    import random

    from openviking.storage.vectordb.collection.local_collection import get_or_create_local_collection

    dim, rng = 512, random.Random(7)

    def unit(v):
        n = math.sqrt(sum(x * x for x in v))
        return [x / n for x in v]

    meta = {
        "CollectionName": "decay",
        "Fields": [
            {"FieldName": "id", "FieldType": "string", "IsPrimaryKey": True},
            {"FieldName": "vector", "FieldType": "vector", "Dim": dim},
            {"FieldName": "updated_at", "FieldType": "date_time"},
        ],
    }
    collection = get_or_create_local_collection(meta_data=meta)
    now = dt.datetime(2026, 12, 5, tzinfo=dt.UTC)
    query = unit([rng.gauss(0, 1) for _ in range(dim)])
    ages, rows = {}, []
    for i, days in enumerate([0, 0.5, 1, 3, 7, 10, 14, 30, 60]):
        vector = unit([x + rng.gauss(0, 1) * 0.06 * (i + 1) for x in query])
        rows.append(
            {
                "id": f"r{i}",
                "vector": vector,
                "updated_at": (now - dt.timedelta(days=days)).strftime("%Y-%m-%dT%H:%M:%S.000Z"),
            }
        )
        ages[f"r{i}"] = (days, sum(a * b for a, b in zip(query, vector, strict=True)))
    collection.upsert_data(rows)
    collection.create_index(
        "default",
        {
            "IndexName": "default",
            "ScalarIndex": ["updated_at"],
            "VectorIndex": {"IndexType": "flat", "Distance": "cosine", "Quant": "int8"},
        },
    )
    plain = {d.id: d.score for d in collection.search_by_vector("default", dense_vector=query, limit=20).data}
    worst_affine = max(abs(plain[k] - (1 + c) / 2) for k, (_, c) in ages.items())
    print(f"engine, no decay: |score − (1+c)/2| max {worst_affine:.2e} over {len(plain)} records")
    for protection_days in (0, 2):
        decay = {
            "field": "updated_at",
            "origin_ms": now.timestamp() * 1000,
            "offset_ms": protection_days * 86400000,
            "scale_ms": 7 * 86400000,
            "decay": 0.5,
        }
        result = collection.search_by_vector(
            "default", dense_vector=query, limit=20, advance={"time_decay": decay}, return_detail_info=True
        )
        errors = []
        print(f"engine, time decay with protection {protection_days}d:")
        for d in sorted(result.data, key=lambda d: ages[d.id][0]):
            days, cosine = ages[d.id]
            predicted = plain[d.id] * 0.5 ** (max(0.0, days - protection_days) / 7)
            errors.append(abs(d.score - predicted))
            print(
                f"  age {days:5.1f} d  cos {cosine:.4f}  score {plain[d.id]:.6f}  decayed {d.score:.6f}  "
                f"score × 0.5^(max(0, age − protection) / 7 d) = {predicted:.6f}"
            )
        print(f"  max |decayed − predicted| {max(errors):.2e}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=300, help="corpus files (plus the probe files)")
    parser.add_argument(
        "--engine-decay",
        action="store_true",
        help="only the engine's time-decay check (runs itself in bench/.venv-openviking)",
    )
    args = parser.parse_args()
    if args.engine_decay:
        try:
            import openviking  # noqa: F401
        except ImportError:
            return subprocess.run(ENGINE_DECAY, cwd=harness.ROOT, check=False).returncode
        return engine_decay()
    code = probe(args.size)
    print()
    sys.stdout.flush()
    return code or subprocess.run(ENGINE_DECAY, cwd=harness.ROOT, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
