"""Answer quality on resources whose answers sit deep in later sections (issue 10): is the gold document among the
entries, and does the answer string reach `rendered`, at 400 and 1600 tokens, for detail auto, abstract and full?

    .venv/bin/python -m bench.quality                                  # before/after on a local ovsite
    .venv/bin/python -m bench.quality --base-url URL [--api-key KEY] --label NAME [--no-write]
    .venv/bin/python -m bench.quality --suite recall                   # /recall's defaults against /search context
    .venv/bin/python -m bench.quality --suite recall --base-url URL [--api-key KEY] --label NAME [--user U]

The corpus (bench/quality_corpus.py) is eight runbooks and manuals, four English (one of them HTML) and four Chinese,
with questions whose answers sit in later sections. Everything goes over HTTP, so any server with
the OpenViking wire API can be measured: each document is uploaded with `POST /api/v1/resources/temp_upload` and
`POST /api/v1/resources {temp_file_id, to, wait}`, each question is `POST /api/v1/search/search {query,
mode: "context", max_tokens, detail}`, and the corpus is removed at the end with `DELETE /api/v1/fs?recursive`.
A hit is "gold in entries" when an entry's URI is the gold document's or lies below it (one of its sections).

Without --base-url it measures ovsite three times on its own database `ovsite_bench_quality`, on a gunicorn it
starts: BEFORE with `OVSITE_SECTION_TREES=false` (each document one file node whose abstract is its head), the section
tree with 4,000-character sections (`OVSITE_SECTION_MAX_CHARS=4000`, an answer past a section's head out of reach),
and the shipped section tree (sections no longer than their abstract), and rewrites the `quality` section of
bench/RESULTS.md. Each run also times the ingest of the corpus and of one generated 200 KB manual, and sums what
merging the sections of one document into one entry saved (`stats.merged.saved_tokens`).

`--suite recall` (issue 21) asks whether a caller who sends `POST /api/v1/search/recall {query, max_tokens}` — all
the auto-recall plugin sends — is served as well as by `POST /api/v1/search/search {query, mode: "context",
max_tokens}`, each with the server's defaults. Its corpus (bench/recall_corpus.py) is one developer's store: 120
memories (profile, preferences, entities, dated events, experiences), resources and skills, 43 % Chinese, written
with `POST /api/v1/content/batch-write` (skills with `POST /api/v1/skills`) and `POST /api/v1/system/wait`; its
questions are EN→EN, ZH→ZH, ZH→EN, EN→ZH and unanswerable ones (nothing in the store answers them). At 400 and 1600
tokens it reports the answer rate per group and endpoint, their ratio, the tokens used, and for the unanswerable
questions the share of the budget used (filler) and of empty blocks; threshold fields of `stats`, when a server
reports them, are summarised. The per-question misses go to the console only, each with the top entry and where
`/find` ranks the answering item. Without --base-url it runs on its own database `ovsite_bench_recall` with the
shipped settings; with --base-url the memories go to `--user`'s space (the key's user, `default` unless told), in a
`recall-bench` folder of each category, and the run refuses a user whose `profile.md` is not the corpus's own.

The quality gate (bench/gate.py, `make bench-quality`) runs both suites through `gate_docs` and `gate_recall`, on the
same code as this CLI: the shipped shape only, with /find limit 10 and /recall beside /search context; and its
`coding` suite through `gate_coding`: the recall suite's code on bench/coding_corpus.py's store, a coding agent's
memory whose answers sit in events' Details and deep in runbooks and design docs. Both gate suites ask their
cross-language questions (ZH→EN, EN→ZH) a second time, after every other request, with `search_mode: "vector"`.
"""

import statistics
import sys
import time

from bench import coding_corpus, harness, recall_corpus
from bench.quality_corpus import DOCUMENTS, QUESTIONS

DATABASE = "ovsite_bench_quality"
ROOT_URI = "viking://resources/quality"
BUDGETS = (400, 1600)
DETAILS = ("auto", "abstract", "full")
SECTION_BEGIN, SECTION_END = "<!-- quality:begin -->", "<!-- quality:end -->"
LARGE_URI = f"{ROOT_URI}-large/manual.md"
RECALL_DATABASE = "ovsite_bench_recall"
CODING_DATABASE = "ovsite_bench_coding"
RECALL_MARKERS = ("<!-- recall_quality:begin -->", "<!-- recall_quality:end -->")
ENDPOINTS = ("context", "recall")  # /search mode="context" and /recall, each sent nothing but query and max_tokens
RECALL_GROUPS = ("EN→EN", "ZH→ZH", "ZH→EN", "EN→ZH")  # question → item language; the unanswerable ones apart
RECALL_TARGETS = {400: 0.90, 1600: 0.95}  # issue 21: /recall's answer rate against context's, in every group
FILLER_TARGET = 0.15  # issue 21: the median share of the budget an unanswerable question may fill


def large_manual() -> str:
    """A 200 KB manual of 60 sections of three long paragraphs (tests/retrieval/test_section_ingest.py's shape)."""
    return "".join(
        f"## Part {n}\n\n" + (f"Paragraph {n:02d} of the operations manual goes on. " * 24 + "\n\n") * 3
        for n in range(60)
    )


def _client(base_url: str, api_key: str | None):
    import httpx

    headers = {"X-API-Key": api_key} if api_key else {}
    return httpx.Client(base_url=base_url.rstrip("/"), headers=headers, timeout=300)


def _result(response) -> object:
    body = response.json()
    if response.status_code != 200 or body.get("status") != "ok":
        raise RuntimeError(f"{response.request.method} {response.request.url}: {response.status_code} {body}")
    return body["result"]


def remove_corpus(client) -> None:
    response = client.delete("/api/v1/fs", params={"uri": ROOT_URI, "recursive": "true", "wait": "true"})
    if response.status_code != 404:
        _result(response)


def _add(client, name: str, text: str, uri: str) -> None:
    uploaded = _result(client.post("/api/v1/resources/temp_upload", files={"file": (name, text.encode())}))
    _result(client.post("/api/v1/resources", json={"temp_file_id": uploaded["temp_file_id"], "to": uri, "wait": True}))


def _count(client, uri: str) -> int:
    listed = client.get("/api/v1/fs/ls", params={"uri": uri, "recursive": "true", "node_limit": 10000})
    return len(_result(listed))


def load_corpus(client) -> int:
    """Uploads every document; returns how many nodes the corpus became (documents, sections, folders)."""
    remove_corpus(client)
    for name, text in DOCUMENTS.items():
        _add(client, name, text, f"{ROOT_URI}/{name}")
    _result(client.post("/api/v1/system/wait", json={}))
    return _count(client, ROOT_URI)


def large_ingest(client) -> tuple[int, float]:
    """(nodes, seconds) of adding the 200 KB manual, removed again afterwards."""
    folder = LARGE_URI.rsplit("/", 1)[0]
    started = time.perf_counter()
    _add(client, "manual.md", large_manual(), LARGE_URI)
    _result(client.post("/api/v1/system/wait", json={}))
    seconds = time.perf_counter() - started
    nodes = _count(client, folder)
    _result(client.delete("/api/v1/fs", params={"uri": folder, "recursive": "true", "wait": "true"}))
    return nodes, seconds


def ask(
    client, query: str, max_tokens: int, detail: str | None, endpoint: str = "context", search_mode: str | None = None
) -> dict:
    """`POST /api/v1/search/search {query, mode: "context", max_tokens[, detail]}`, or with endpoint "recall"
    `POST /api/v1/search/recall {query, max_tokens[, detail]}`; `detail` None sends none (the server's default), and
    so does `search_mode` None."""
    body = {
        "query": query,
        "max_tokens": max_tokens,
        **({"detail": detail} if detail else {}),
        **({"search_mode": search_mode} if search_mode else {}),
    }
    if endpoint == "recall":
        return _result(client.post("/api/v1/search/recall", json=body))
    return _result(client.post("/api/v1/search/search", json={**body, "mode": "context"}))


def _found(result: dict) -> list[str]:
    """The URIs of /find's hits, every bucket."""
    return [hit["uri"] for key in ("memories", "resources", "skills") for hit in result.get(key, [])]


def measure(
    base_url: str,
    api_key: str | None = None,
    *,
    details: tuple[str | None, ...] = DETAILS,
    endpoints: tuple[str, ...] = ("context",),
    find_limit: int | None = None,
    large: bool = True,
) -> dict:
    """Loads the corpus on the server at `base_url`, asks every question at every budget and detail of every
    endpoint (`cells[(endpoint, max_tokens, detail)]`: "context" is /search context, "recall" /recall), removes it.
    With `find_limit`, `find` also has each question's `POST /api/v1/search/find {query, limit}`: is the gold
    document or one of its sections among the hits. With `large`, times the ingest of the 200 KB manual after."""
    with _client(base_url, api_key) as client:
        started = time.perf_counter()
        nodes = load_corpus(client)
        ingest_s = time.perf_counter() - started
        cells, find = {}, []
        try:
            for question in QUESTIONS if find_limit else ():
                found = _result(client.post("/api/v1/search/find", json={"query": question.query, "limit": find_limit}))
                gold = f"{ROOT_URI}/{question.document}"
                find.append(
                    {
                        "language": question.language,
                        "deep": question.deep,
                        "gold": any(uri == gold or uri.startswith(gold + "/") for uri in _found(found)),
                    }
                )
            for endpoint in endpoints:
                for max_tokens in BUDGETS:
                    for detail in details:
                        rows = []
                        for question in QUESTIONS:
                            result = ask(client, question.query, max_tokens, detail, endpoint)
                            gold = f"{ROOT_URI}/{question.document}"
                            uris = [entry["uri"] for entry in result["entries"]]
                            stats = result.get("stats") or {}  # OpenViking's answer carries none
                            rows.append(
                                {
                                    "language": question.language,
                                    "deep": question.deep,
                                    "gold": any(uri == gold or uri.startswith(gold + "/") for uri in uris),
                                    "answer": question.answer in result["rendered"],
                                    "used": stats.get("used_tokens"),
                                    "entries": len(uris),
                                    "merged": stats.get("merged", {}).get("sections", 0),
                                    "saved": stats.get("merged", {}).get("saved_tokens", 0),
                                }
                            )
                        cells[(endpoint, max_tokens, detail)] = rows
        finally:
            remove_corpus(client)
        large_nodes, large_s = large_ingest(client) if large else (None, None)
    return {
        "nodes": nodes,
        "ingest_s": ingest_s,
        "large_nodes": large_nodes,
        "large_s": large_s,
        "cells": cells,
        "find": find,
    }


def _saved(rows: list[dict]) -> str:
    """Sections merged and tokens saved over the questions, and the saving's share of what unmerged would use."""
    saved, used = sum(r["saved"] for r in rows), sum(r["used"] or 0 for r in rows)
    return f"{sum(r['merged'] for r in rows)} / {saved} ({saved / (used + saved):.1%})" if used + saved else "0 / 0"


def _hits(rows: list[dict], key: str, language: str | None = None, deep: bool | None = None) -> tuple[int, int]:
    """(rows whose `key` holds, rows) among those of `language` and `deep` (None: any)."""
    chosen = [
        row
        for row in rows
        if (language is None or row["language"] == language) and (deep is None or row["deep"] == deep)
    ]
    return sum(row[key] for row in chosen), len(chosen)


def _rate(rows: list[dict], key: str, language: str | None = None, deep: bool | None = None) -> str:
    hits, n = _hits(rows, key, language, deep)
    return f"{hits}/{n} ({hits / n:.0%})"


def _median_used(rows: list[dict]) -> str:
    """Median used tokens; '—' for a server whose answer does not report them."""
    used = [row["used"] for row in rows if row["used"] is not None]
    return f"{statistics.median(used):.0f}" if used else "—"


def render(
    runs: dict[str, dict],
    command: str,
    server: str,
    markers=(SECTION_BEGIN, SECTION_END),
    title: str = "before and after the section tree",
) -> str:
    en = sum(q.language == "en" for q in QUESTIONS)
    deep = sum(q.deep for q in QUESTIONS)
    lines = [
        markers[0],
        f"## quality — answers deep in resources, {title}",
        "",
        *harness.heading(command, " (shared machine)"),
        f"Server: {server}. Corpus: bench/quality_corpus.py, {len(DOCUMENTS)} documents "
        f"({sum(len(t) for t in DOCUMENTS.values()):,} characters), {len(QUESTIONS)} questions ({en} English, "
        f"{len(QUESTIONS) - en} Chinese); {len(QUESTIONS) - deep} answers sit in the head of the fourth section "
        f"of their document or a later one, {deep} past the first ~450 characters of a long section "
        '("deep"). '
        '`/search mode="context"` without purpose or quotas (score order, 10 candidates), packaged embedder, '
        "no LLM (abstracts are the head of their text). Gold in entries: an entry is the gold document or one "
        "of its sections. Answer in rendered: the answer string appears verbatim in `rendered`.",
        "",
        "| shape | nodes | corpus ingest s | 200 KB manual: nodes | 200 KB manual: ingest s |",
        "|---|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {label} | {run['nodes']} | {run['ingest_s']:.1f} | {run['large_nodes']} | {run['large_s']:.1f} |"
        for label, run in runs.items()
    ]
    lines += [
        "",
        "| shape | max_tokens | detail | gold in entries | answer in rendered | answer EN | answer ZH | "
        "answer, section head | answer, deep | used tokens p50 | entries p50 | merged sections / tokens saved |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for label, run in runs.items():
        for (_, max_tokens, detail), rows in run["cells"].items():
            lines.append(
                f"| {label} | {max_tokens} | {detail} | {_rate(rows, 'gold')} | "
                f"{_rate(rows, 'answer')} | {_rate(rows, 'answer', 'en')} | {_rate(rows, 'answer', 'zh')} | "
                f"{_rate(rows, 'answer', deep=False)} | {_rate(rows, 'answer', deep=True)} | "
                f"{_median_used(rows)} | "
                f"{statistics.median(r['entries'] for r in rows):.0f} | {_saved(rows)} |"
            )
    lines += [
        "",
        "Resources stay capped at `abstract` (RFC §3.4, `resource_detail_cap`), so `full` renders what "
        "`abstract` does; a document node is a directory and may reach `overview` (its outline). "
        "Merged sections / tokens saved: over all questions of the row, the sections served inside a merged "
        "document entry, the tokens merging saved (`stats.merged.saved_tokens`) and their share of the tokens "
        "the same entries would have used unmerged; the saved tokens are left unspent (merging runs after the "
        "plan).",
        markers[1],
        "",
    ]
    return "\n".join(lines)


def measure_local(env: dict, **options) -> tuple[dict, str]:
    """`measure(**options)` on a gunicorn of this checkout (one worker) with `env` over the shipped settings, on the
    bench's own database (migrated); returns the run and the server's command line."""
    server = harness.Gunicorn(1, env=env)
    server.start()
    try:
        return measure(server.url, **options), server.command
    finally:
        server.stop()


def run_local() -> tuple[dict, str]:
    """BEFORE and AFTER on a gunicorn of this checkout, one after the other, on the bench's own database."""
    harness.migrated_database()
    runs, command = {}, ""
    shapes = (
        ("before (one node per file)", {"OVSITE_SECTION_TREES": "false"}),
        ("section tree, 4,000-char sections", {"OVSITE_SECTION_MAX_CHARS": "4000"}),
        ("section tree, 450-char sections (shipped)", {}),
    )
    for label, env in shapes:
        runs[label], command = measure_local(env)
    return runs, (
        f"gunicorn `{command}` of this checkout, database `{harness.database()}`, `OVSITE_SECTION_TREES=false`, then "
        "`OVSITE_SECTION_MAX_CHARS=4000`, then the defaults"
    )


def gate_request(endpoint: str, budget: int) -> str:
    """How bench/gate.py names a context or recall request at a budget: "context 400", "/recall 1600"."""
    return f"{'/recall' if endpoint == 'recall' else endpoint} {budget}"


def _share(rows: list[dict], key: str, **only) -> float | None:
    hits, n = _hits(rows, key, **only)
    return hits / n if n else None


def gate_docs() -> dict:
    """bench/gate.py's docs suite: the shipped shape only, every question with the defaults alone (no `detail`):
    /find limit 10 (gold in the hits), /search context and /recall at 400 and 1600 tokens (gold in entries, answer
    in rendered: all, English, Chinese, deep). On the bench's own database, set by harness.configure."""
    harness.migrated_database()
    run, command = measure_local({}, details=(None,), endpoints=ENDPOINTS, find_limit=10, large=False)
    requests = {
        gate_request(endpoint, budget): run["cells"][(endpoint, budget, None)]
        for endpoint in ENDPOINTS
        for budget in BUDGETS
    }
    figures = {
        "gold in entries": {"/find@10": _share(run["find"], "gold")}
        | {request: _share(rows, "gold") for request, rows in requests.items()}
    }
    for metric, only in (
        ("answer in rendered", {}),
        ("answer in rendered: English", {"language": "en"}),
        ("answer in rendered: Chinese", {"language": "zh"}),
        ("answer in rendered: deep in a section", {"deep": True}),
    ):
        figures[metric] = {request: _share(rows, "answer", **only) for request, rows in requests.items()}
    return {
        "figures": figures,
        "questions": len(QUESTIONS),
        "server": f"gunicorn `{command}` of this checkout, database `{harness.database()}`, shipped settings",
    }


# ------------------------------------------------------------------------------------------------------------
# --suite recall: /recall {query, max_tokens} against /search mode="context" with the server's defaults


def _recall_roots(user: str, corpus=recall_corpus) -> list[str]:
    """Where the corpus is written: each memory category's bench folder and the resources' bench folder. `corpus`
    is bench/recall_corpus.py or a module with its API (bench/coding_corpus.py)."""
    return [
        f"viking://user/{user}/memories/{kind}/{corpus.BENCH_FOLDER}"
        for kind in corpus.KINDS
        if kind not in ("profile", "resources", "skills")
    ] + [corpus.RESOURCES_ROOT]


def _remove(client, uri: str) -> None:
    response = client.delete("/api/v1/fs", params={"uri": uri, "recursive": "true", "wait": "true"})
    if response.status_code != 404:
        _result(response)


def remove_recall_corpus(client, user: str, corpus=recall_corpus) -> None:
    for uri in _recall_roots(user, corpus) + [
        item.uri(user) for item in corpus.ITEMS if item.kind in ("profile", "skills")
    ]:
        _remove(client, uri)


def _batch_root(item, user: str, corpus=recall_corpus) -> str:
    """The batch root OpenViking accepts (a memory category or a resource directory), which ovsite accepts too."""
    if item.kind == "resources":
        return corpus.RESOURCES_ROOT
    return f"viking://user/{user}/memories/{item.kind}"


def load_recall_corpus(client, user: str, corpus=recall_corpus) -> float:
    """Writes every item over HTTP and waits until the server has processed them; returns the seconds it took."""
    profile = next((item for item in corpus.ITEMS if item.kind == "profile"), None)
    existing = client.get("/api/v1/content/read", params={"uri": profile.uri(user)}) if profile else None
    # The run removes what it wrote: a profile.md of the user's own must not be overwritten and then removed.
    if existing is not None and existing.status_code == 200 and _result(existing) != profile.text:
        raise RuntimeError(f"{profile.uri(user)} exists and is not the bench's; run with --user naming a bench user")
    remove_recall_corpus(client, user, corpus)
    started = time.perf_counter()
    batches: dict[str, list] = {}
    for item in corpus.ITEMS:
        if item.kind == "skills":
            _result(client.post("/api/v1/skills", json={"data": item.text, "target_uri": corpus.SKILLS_ROOT}))
        elif item.kind == "profile":  # a file of the memories folder itself, which is no batch root
            _result(
                client.post(
                    "/api/v1/content/write", json={"uri": item.uri(user), "content": item.text, "mode": "create"}
                )
            )
        else:
            batches.setdefault(_batch_root(item, user, corpus), []).append(item)
    for root, items in batches.items():
        response = client.post("/api/v1/fs/mkdir", json={"uri": root})
        if response.status_code != 409:  # it exists already
            _result(response)
        _result(
            client.post(
                "/api/v1/content/batch-write",
                json={
                    "root_uri": root,
                    "wait": False,
                    "operations": [{"uri": item.uri(user), "content": item.text, "mode": "create"} for item in items],
                },
            )
        )
    _result(client.post("/api/v1/system/wait", json={}))
    return time.perf_counter() - started


def ask_endpoint(client, endpoint: str, query: str, max_tokens: int, search_mode: str | None = None) -> dict:
    """`{query, max_tokens}` to /recall, `{query, mode: "context", max_tokens}` to /search: nothing else, but
    `search_mode` when given."""
    return ask(client, query, max_tokens, None, endpoint, search_mode)


def _is_gold(uri: str, gold: str) -> bool:
    """The item itself or a node below it (a document's sections, a skill's SKILL.md)."""
    return uri == gold or uri.startswith(gold + "/")


def _threshold_fields(stats: dict, prefix: str = "") -> dict:
    """Every field of `stats` whose dotted path names a threshold (`threshold`, `threshold.source`,
    `below_threshold`, …), whatever shape a server gives them."""
    found = {}
    for key, value in stats.items():
        path = prefix + key
        if isinstance(value, dict):
            found.update(_threshold_fields(value, path + "."))
        elif "threshold" in path:
            found[path] = value
    return found


def _gold_on_find(client, query: str, gold: str) -> str:
    """Where /find, with no threshold, ranks the answering item among every hit: tells a threshold (ranked first,
    scored under it) from a retrieval miss (ranked low)."""
    found = _result(client.post("/api/v1/search/find", json={"query": query, "limit": 1000, "score_threshold": 0}))
    hits = sorted(
        (hit for key in ("memories", "resources", "skills") for hit in found.get(key, [])),
        key=lambda hit: -hit["score"],
    )
    rank = next((n for n, hit in enumerate(hits, 1) if _is_gold(hit["uri"], gold)), None)
    return f"#{rank} of {len(hits)}, {hits[rank - 1]['score']:.3f}" if rank else f"not in {len(hits)} hits"


def _find_has(client, query: str, gold: str, limit: int, search_mode: str | None = None) -> bool:
    """Whether `POST /api/v1/search/find {query, limit}` (and `search_mode`, when given) returns the answering item
    (or a node below it)."""
    body = {"query": query, "limit": limit, **({"search_mode": search_mode} if search_mode else {})}
    found = _result(client.post("/api/v1/search/find", json=body))
    return any(_is_gold(uri, gold) for uri in _found(found))


def measure_recall(
    base_url: str,
    api_key: str | None,
    user: str,
    find: bool = False,
    corpus=recall_corpus,
    vector_groups: tuple[str, ...] = (),
) -> dict:
    """Loads the corpus (bench/recall_corpus.py, or `corpus` with its API), asks every question of both endpoints
    at both budgets, diagnoses the misses, removes it. With `find`, `find[n]` says for answerable question n whether
    /find with limit 10 (`at10`) and with limit 3 (`at3`: among the three best hits) returns its answering item.
    The answerable questions of `vector_groups` are then asked again, after all the others, with `search_mode:
    "vector"` on the same requests: `vector_rows` (question, endpoint, budget, answered) and, with `find`,
    `find_vector[n]` (`at10`)."""
    rows, diagnoses, found, vector_rows, found_vector = [], {}, {}, [], {}
    with _client(base_url, api_key) as client:
        ingest_s = load_recall_corpus(client, user, corpus)
        try:
            for n, question in enumerate(corpus.QUESTIONS if find else ()):
                if question.item:
                    gold = corpus.BY_NAME[question.item].uri(user)
                    found[n] = {"at10": _find_has(client, question.query, gold, 10)}
                    found[n]["at3"] = _find_has(client, question.query, gold, 3)
            for max_tokens in BUDGETS:
                for n, question in enumerate(corpus.QUESTIONS):
                    gold = corpus.BY_NAME[question.item].uri(user) if question.item else None
                    for endpoint in ENDPOINTS:
                        result = ask_endpoint(client, endpoint, question.query, max_tokens)
                        entries, stats = result["entries"], result.get("stats") or {}
                        top = max(entries, key=lambda entry: entry["score"], default=None)
                        gold_entry = next(
                            (
                                entry
                                for entry in entries
                                if gold
                                and any(_is_gold(uri, gold) for uri in [entry["uri"], *entry.get("sections", [])])
                            ),
                            None,
                        )
                        rows.append(
                            {
                                "question": n,
                                "group": corpus.group(question),
                                "endpoint": endpoint,
                                "budget": max_tokens,
                                "answered": question.answer in result["rendered"] if question.answer else None,
                                "used": stats.get("used_tokens"),
                                "entries": len(entries),
                                "empty": not result["rendered"].strip(),
                                "top": (top["uri"], top["score"]) if top else None,
                                "gold_detail": gold_entry["detail"] if gold_entry else None,
                                "thresholds": _threshold_fields(stats),
                            }
                        )
                        if rows[-1]["answered"] is False and n not in diagnoses:
                            diagnoses[n] = _gold_on_find(client, question.query, gold)
            again = [(n, q) for n, q in enumerate(corpus.QUESTIONS) if q.item and corpus.group(q) in vector_groups]
            for n, question in again if find else ():
                gold = corpus.BY_NAME[question.item].uri(user)
                found_vector[n] = {"at10": _find_has(client, question.query, gold, 10, "vector")}
            for max_tokens in BUDGETS:
                for n, question in again:
                    for endpoint in ENDPOINTS:
                        result = ask_endpoint(client, endpoint, question.query, max_tokens, "vector")
                        vector_rows.append(
                            {
                                "question": n,
                                "endpoint": endpoint,
                                "budget": max_tokens,
                                "answered": question.answer in result["rendered"],
                            }
                        )
        finally:
            remove_recall_corpus(client, user, corpus)
    return {
        "ingest_s": ingest_s,
        "rows": rows,
        "diagnoses": diagnoses,
        "find": found,
        "vector_rows": vector_rows,
        "find_vector": found_vector,
    }


def _answer_rate(rows: list[dict]) -> float | None:
    return sum(row["answered"] for row in rows) / len(rows) if rows else None


def _cell(rows: list[dict], group: str | None, endpoint: str, budget: int) -> list[dict]:
    return [
        row
        for row in rows
        if row["endpoint"] == endpoint
        and row["budget"] == budget
        and (row["group"] == group if group else row["answered"] is not None)
    ]


def _p90(values: list[float]) -> float:
    """The 90th percentile by nearest rank."""
    ordered = sorted(values)
    return ordered[max(0, -(-len(ordered) * 9 // 10) - 1)]


def _mean_used(rows: list[dict]) -> str:
    return f"{statistics.mean(row['used'] for row in rows):.0f}"


def _distribution(values: list) -> str:
    numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if len(numbers) == len(values):
        return (
            f"min {min(numbers):.3g} / p50 {statistics.median(numbers):.3g} / max {max(numbers):.3g} (n={len(numbers)})"
        )
    counts: dict[str, int] = {}
    for value in values:
        counts[str(value)] = counts.get(str(value), 0) + 1
    return ", ".join(f"{value} ×{count}" for value, count in sorted(counts.items(), key=lambda kv: -kv[1]))


def render_recall(run: dict, command: str, server: str, markers: tuple[str, str], title: str, run_s: float) -> str:
    items, questions, rows = recall_corpus.ITEMS, recall_corpus.QUESTIONS, run["rows"]
    zh = sum(item.language == "zh" for item in items)
    kinds = ", ".join(f"{sum(item.kind == kind for item in items)} {kind}" for kind in recall_corpus.KINDS)
    groups = {
        g: sum(recall_corpus.group(q) == g for q in questions)
        for g in RECALL_GROUPS + ("unanswerable EN", "unanswerable ZH")
    }
    lines = [
        markers[0],
        f"## quality, recall suite — /recall {{query, max_tokens}} against /search context, {title}",
        "",
        *harness.heading(command, " (shared machine)"),
        f"Server: {server}. Run time {run_s:.0f} s (ingest {run['ingest_s']:.1f} s).  ",
        f"Corpus: bench/recall_corpus.py, {len(items)} items ({zh} Chinese, {zh / len(items):.1%}): {kinds}; "
        f"{len(questions)} questions: " + ", ".join(f"{n} {g}" for g, n in groups.items()) + ". "
        'Bodies: /recall `{query, max_tokens}`, /search `{query, mode: "context", max_tokens}`; everything '
        "else is the server's default. Answered: the answer string appears verbatim in `rendered`.",
        "",
        "| group | questions | "
        + " | ".join(f"{b}: context | {b}: recall | {b}: recall/context" for b in BUDGETS)
        + " |",
        "|---|---:|" + "---:|---:|---:|" * len(BUDGETS),
    ]
    missed = []
    for group in RECALL_GROUPS + (None,):  # None: every answerable question
        cells = []
        for budget in BUDGETS:
            context, recall = (_cell(rows, group, endpoint, budget) for endpoint in ENDPOINTS)
            ratio = _answer_rate(recall) / _answer_rate(context) if _answer_rate(context) else None
            if group and ratio is not None and ratio < RECALL_TARGETS[budget]:
                missed.append(f"{group} at {budget} ({ratio:.2f})")
            cells += [f"{sum(r['answered'] for r in c)}/{len(c)} ({_answer_rate(c):.0%})" for c in (context, recall)]
            cells.append(f"{ratio:.2f}" if ratio is not None else "—")
        lines.append(f"| {group or '**all answerable**'} | {len(context)} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "| endpoint | max_tokens | used tokens, mean | answerable: mean | unanswerable: mean | entries p50 | "
        "unanswerable: budget used p50 | p90 | unanswerable: empty blocks |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    fillers = []
    for endpoint in ENDPOINTS:
        for budget in BUDGETS:
            cell = [r for r in rows if r["endpoint"] == endpoint and r["budget"] == budget]
            none = [r for r in cell if r["answered"] is None]
            if any(r["used"] is None for r in cell):  # a server whose answer reports no tokens
                lines.append(
                    f"| {endpoint} | {budget} | — | — | — | — | — | — | {sum(r['empty'] for r in none)}/{len(none)} |"
                )
                continue
            shares = [r["used"] / budget for r in none]
            if endpoint == "recall" and statistics.median(shares) > FILLER_TARGET:
                fillers.append(f"{budget} ({statistics.median(shares):.0%})")
            empty = sum(r["empty"] for r in none)
            lines.append(
                f"| {endpoint} | {budget} | {_mean_used(cell)} | "
                f"{_mean_used([r for r in cell if r['answered'] is not None])} | {_mean_used(none)} | "
                f"{statistics.median(r['entries'] for r in cell):.0f} | {statistics.median(shares):.0%} | "
                f"{_p90(shares):.0%} | {empty}/{len(none)} ({empty / len(none):.0%}) |"
            )
    lines += [
        "",
        "Issue 21's targets for /recall's defaults: recall/context ≥ 0.90 at 400 tokens and ≥ 0.95 at 1600 "
        "in every language group — "
        + ("met" if not missed else "missed: " + ", ".join(missed))
        + f"; unanswerable questions' median block ≤ {FILLER_TARGET:.0%} of the budget — "
        + ("met" if not fillers else "missed at " + ", ".join(fillers))
        + ".",
    ]
    fields = sorted({path for r in rows for path in r["thresholds"]})
    if fields:
        lines += [
            "",
            "Threshold fields of `stats` (all questions):",
            "",
            "| endpoint | max_tokens | field | values |",
            "|---|---:|---|---|",
        ]
        for endpoint in ENDPOINTS:
            for budget in BUDGETS:
                cell = [r for r in rows if r["endpoint"] == endpoint and r["budget"] == budget]
                for path in fields:
                    values = [r["thresholds"][path] for r in cell if path in r["thresholds"]]
                    lines.append(f"| {endpoint} | {budget} | `{path}` | {_distribution(values) if values else '—'} |")
    else:
        lines += ["", "`stats` reported no threshold fields."]
    misses = sum(r["answered"] is False for r in rows)
    lines += [
        "",
        f"{misses} misses (question × endpoint × budget); the script lists them on the console.",
        markers[1],
        "",
    ]
    return "\n".join(lines)


def recall_misses(run: dict, corpus=recall_corpus) -> str:
    """One line per answerable question an endpoint missed at a budget, /recall's first."""
    questions = corpus.QUESTIONS
    misses = sorted(
        (r for r in run["rows"] if r["answered"] is False),
        key=lambda r: (-ENDPOINTS.index(r["endpoint"]), r["budget"], RECALL_GROUPS.index(r["group"])),
    )
    lines = [
        f"Misses ({len(misses)}): endpoint, budget, group, question → answer; the top entry (uri score); the "
        "tier the answering item was served at, if it was; its rank and score on /find without threshold; "
        "the threshold fields of `stats`"
    ]
    for r in misses:
        question = questions[r["question"]]
        top = f"{r['top'][0]} {r['top'][1]:.3f}" if r["top"] else "empty block"
        thresholds = " ".join(f"{path}={value}" for path, value in r["thresholds"].items())
        lines.append(
            f"  {r['endpoint']:<7} {r['budget']:>4} {r['group']}  {question.query} → {question.answer!r}; "
            f"top {top}; gold {'served at ' + r['gold_detail'] if r['gold_detail'] else 'not served'}; "
            f"/find {run['diagnoses'][r['question']]}" + (f"; {thresholds}" if thresholds else "")
        )
    return "\n".join(lines)


def run_recall_local(find: bool = False, corpus=recall_corpus, vector_groups: tuple[str, ...] = ()) -> tuple[dict, str]:
    """`measure_recall` on a gunicorn of this checkout with the shipped settings, on the bench's own database."""
    harness.migrated_database()
    server = harness.Gunicorn(1)
    server.start()
    try:
        run = measure_recall(server.url, None, harness.USER, find=find, corpus=corpus, vector_groups=vector_groups)
    finally:
        server.stop()
    return run, f"gunicorn `{server.command}` of this checkout, database `{harness.database()}`, shipped settings"


def _mean_share(rows: list[dict]) -> float | None:
    """The mean share of its budget a row's block used."""
    return statistics.mean(row["used"] / row["budget"] for row in rows) if rows else None


def _gate_figures(run: dict, corpus, groups: dict) -> dict:
    """The figures of a store suite's run (`measure_recall` with `find`): for each of `groups` (metric → which
    answerable questions it counts) the share answered by /search context and /recall at 400 and 1600 tokens
    (answer string in `rendered`) and the share whose answering item /find with limit 10 returns; for /recall, the
    mean share of the budget used on the unanswerable questions and on the questions whose answering item is among
    /find's three best hits, and the share of unanswerable questions given an empty block. A language group the run
    also asked with `search_mode: "vector"` (its `vector_groups`) has that figure beside it, as "<group> (vector)"."""
    rows, found, questions = run["rows"], run["find"], corpus.QUESTIONS
    asked_vector = {row["question"] for row in run.get("vector_rows", ())}

    def shares(asked: set, rows: list[dict], found: dict) -> dict:
        return {"/find@10": statistics.mean(found[n]["at10"] for n in asked)} | {
            gate_request(endpoint, budget): _answer_rate(
                [r for r in rows if r["question"] in asked and r["endpoint"] == endpoint and r["budget"] == budget]
            )
            for endpoint in ENDPOINTS
            for budget in BUDGETS
        }

    figures = {}
    for metric, counts in groups.items():
        asked = {n for n, q in enumerate(questions) if q.item and counts(q)}
        figures[metric] = shares(asked, rows, found)
        if metric in RECALL_GROUPS and asked and asked <= asked_vector:
            figures[f"{metric} (vector)"] = shares(asked, run["vector_rows"], run["find_vector"])
    recall = {budget: [r for r in rows if r["endpoint"] == "recall" and r["budget"] == budget] for budget in BUDGETS}
    none = {budget: [r for r in cell if r["answered"] is None] for budget, cell in recall.items()}
    top3 = {budget: [r for r in cell if found.get(r["question"], {}).get("at3")] for budget, cell in recall.items()}
    figures["unanswerable: budget used, mean"] = {
        gate_request("recall", budget): _mean_share(cell) for budget, cell in none.items()
    }
    figures["unanswerable: empty block"] = {
        gate_request("recall", budget): statistics.mean(r["empty"] for r in cell) for budget, cell in none.items()
    }
    figures["answer in /find's top 3: budget used, mean"] = {
        gate_request("recall", budget): _mean_share(cell) for budget, cell in top3.items()
    }
    return {
        "figures": figures,
        "lower_is_better": ["unanswerable: budget used, mean", "answer in /find's top 3: budget used, mean"],
        "questions": len(questions),
    }


def _language_groups(corpus) -> dict:
    """EN→EN, ZH→ZH, ZH→EN, EN→ZH (question → item language), each a metric of `_gate_figures`."""
    return {group: (lambda q, group=group: corpus.group(q) == group) for group in RECALL_GROUPS}


CROSS_LANGUAGE = ("ZH→EN", "EN→ZH")  # issue 37: hybrid within 1 point of vector mode on these, asked in both


def gate_recall() -> dict:
    """bench/gate.py's recall suite, on the shipped settings: `_gate_figures` per language group and over all
    answerable questions; the cross-language groups in vector mode too."""
    run, server = run_recall_local(find=True, vector_groups=CROSS_LANGUAGE)
    groups = _language_groups(recall_corpus) | {"all answerable": lambda q: True}
    return _gate_figures(run, recall_corpus, groups) | {"server": server}


def gate_coding() -> dict:
    """bench/gate.py's coding suite (bench/coding_corpus.py: a coding agent's bilingual memory, answers in events'
    Details and deep in runbooks and design docs), on the shipped settings, with the recall suite's code:
    `_gate_figures` per language group, for the answers in an event's Details, those deep in a resource, the
    identifier questions, and over all answerable questions; the cross-language groups in vector mode too."""
    coding_corpus.validate()
    run, server = run_recall_local(find=True, corpus=coding_corpus, vector_groups=CROSS_LANGUAGE)
    groups = _language_groups(coding_corpus) | {
        "answer in details": lambda q: q.where == "details",
        "answer deep in a resource": lambda q: q.where == "deep",
        "identifier": lambda q: q.identifier,
        "all answerable": lambda q: True,
    }
    return _gate_figures(run, coding_corpus, groups) | {"server": server}


def recall_suite(args, command: str) -> int:
    started = time.perf_counter()
    recall_corpus.validate()
    if args.base_url:
        markers = (f"<!-- recall_quality-{args.label}:begin -->", f"<!-- recall_quality-{args.label}:end -->")
        run, server, title = measure_recall(args.base_url, args.api_key, args.user), args.base_url, args.label
    else:
        markers, title = RECALL_MARKERS, "ovsite's shipped defaults"
        run, server = run_recall_local()
    section = render_recall(run, command, server, markers, title, time.perf_counter() - started)
    harness.publish(section, *markers, write=not args.no_write)
    print(recall_misses(run))
    return 0


def main() -> int:
    parser = harness.parser(__doc__)
    parser.add_argument("--base-url", help="measure this server only (e.g. http://127.0.0.1:1933)")
    parser.add_argument("--api-key")
    parser.add_argument("--label", default="server", help="the row label of --base-url's results")
    parser.add_argument(
        "--suite",
        choices=("sections", "recall"),
        default="sections",
        help="sections: answers deep in resources (default); recall: /recall's defaults against "
        "/search context on a bilingual store",
    )
    parser.add_argument(
        "--user",
        default="default",
        help="recall suite with --base-url: the user the key acts as, whose memories are written",
    )
    parser.add_argument(
        "--database",
        help=f"without --base-url: the bench's own database on the embedded PostgreSQL (default {DATABASE}, with "
        f"--suite recall {RECALL_DATABASE})",
    )
    args = parser.parse_args()
    if not args.base_url:
        harness.configure(args.database or (RECALL_DATABASE if args.suite == "recall" else DATABASE))
    command = harness.command_line("bench.quality", secret=args.api_key)
    if args.suite == "recall":
        return recall_suite(args, command)
    if args.base_url:
        # Another server's figures get their own section, next to ovsite's before/after.
        markers = (f"<!-- quality-{args.label}:begin -->", f"<!-- quality-{args.label}:end -->")
        runs, server, title = {args.label: measure(args.base_url, args.api_key)}, args.base_url, args.label
    else:
        markers, title = (SECTION_BEGIN, SECTION_END), "before and after the section tree and its size cap"
        runs, server = run_local()
    harness.publish(render(runs, command, server, markers, title), *markers, write=not args.no_write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
