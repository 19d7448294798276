#!/usr/bin/env python
"""Answer quality on resources whose answers sit deep in later sections (issue 10): is the gold document among the
entries, and does the answer string reach `rendered`, at 400 and 1600 tokens, for detail auto, abstract and full?

    .venv/bin/python bench/quality.py                                  # before/after on a local ovsite
    .venv/bin/python bench/quality.py --base-url URL [--api-key KEY] --label NAME [--no-write]

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
"""
import argparse
import datetime as dt
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from quality_corpus import DOCUMENTS, QUESTIONS  # noqa: E402

DB = "ovsite_bench_quality"
ROOT_URI = "viking://resources/quality"
BUDGETS = (400, 1600)
DETAILS = ("auto", "abstract", "full")
SECTION_BEGIN, SECTION_END = "<!-- quality:begin -->", "<!-- quality:end -->"
LARGE_URI = f"{ROOT_URI}-large/manual.md"


def large_manual() -> str:
    """A 200 KB manual of 60 sections of three long paragraphs (tests/test_section_ingest.py's shape)."""
    return "".join(f"## Part {n}\n\n" + (f"Paragraph {n:02d} of the operations manual goes on. " * 24 + "\n\n") * 3
                   for n in range(60))


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
    _result(client.post("/api/v1/resources", json={"temp_file_id": uploaded["temp_file_id"], "to": uri,
                                                   "wait": True}))


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


def ask(client, query: str, max_tokens: int, detail: str) -> dict:
    return _result(client.post("/api/v1/search/search", json={"query": query, "mode": "context",
                                                              "max_tokens": max_tokens, "detail": detail}))


def measure(base_url: str, api_key: str | None = None) -> dict:
    """Loads the corpus on the server at `base_url`, asks every question at every budget and detail, removes it."""
    with _client(base_url, api_key) as client:
        started = time.perf_counter()
        nodes = load_corpus(client)
        ingest_s = time.perf_counter() - started
        cells = {}
        try:
            for max_tokens in BUDGETS:
                for detail in DETAILS:
                    rows = []
                    for question in QUESTIONS:
                        result = ask(client, question.query, max_tokens, detail)
                        gold = f"{ROOT_URI}/{question.document}"
                        uris = [entry["uri"] for entry in result["entries"]]
                        stats = result.get("stats") or {}  # OpenViking's answer carries none
                        rows.append({"language": question.language, "deep": question.deep,
                                     "gold": any(uri == gold or uri.startswith(gold + "/") for uri in uris),
                                     "answer": question.answer in result["rendered"],
                                     "used": stats.get("used_tokens"), "entries": len(uris),
                                     "merged": stats.get("merged", {}).get("sections", 0),
                                     "saved": stats.get("merged", {}).get("saved_tokens", 0)})
                    cells[(max_tokens, detail)] = rows
        finally:
            remove_corpus(client)
        large_nodes, large_s = large_ingest(client)
    return {"nodes": nodes, "ingest_s": ingest_s, "large_nodes": large_nodes, "large_s": large_s, "cells": cells}


def _saved(rows: list[dict]) -> str:
    """Sections merged and tokens saved over the questions, and the saving's share of what unmerged would use."""
    saved, used = sum(r["saved"] for r in rows), sum(r["used"] or 0 for r in rows)
    return f"{sum(r['merged'] for r in rows)} / {saved} ({saved / (used + saved):.1%})" if used + saved else "0 / 0"


def _rate(rows: list[dict], key: str, language: str | None = None, deep: bool | None = None) -> str:
    chosen = [row for row in rows if (language is None or row["language"] == language)
              and (deep is None or row["deep"] == deep)]
    hits = sum(row[key] for row in chosen)
    return f"{hits}/{len(chosen)} ({hits / len(chosen):.0%})"


def _median_used(rows: list[dict]) -> str:
    """Median used tokens; '—' for a server whose answer does not report them."""
    used = [row["used"] for row in rows if row["used"] is not None]
    return f"{statistics.median(used):.0f}" if used else "—"


def render(runs: dict[str, dict], command: str, server: str, markers=(SECTION_BEGIN, SECTION_END),
           title: str = "before and after the section tree") -> str:
    en = sum(q.language == "en" for q in QUESTIONS)
    deep = sum(q.deep for q in QUESTIONS)
    lines = [markers[0], f"## quality — answers deep in resources, {title}", "",
             f"Command: `{command}`  ",
             f"Date: {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC  ",
             f"Machine: {os.cpu_count()} CPU, Python {platform.python_version()} (shared with other work)  ",
             f"Server: {server}. Corpus: bench/quality_corpus.py, {len(DOCUMENTS)} documents "
             f"({sum(len(t) for t in DOCUMENTS.values()):,} characters), {len(QUESTIONS)} questions ({en} English, "
             f"{len(QUESTIONS) - en} Chinese); {len(QUESTIONS) - deep} answers sit in the head of the fourth section "
             f"of their document or a later one, {deep} past the first ~450 characters of a long section "
             "(\"deep\"). "
             "`/search mode=\"context\"` without purpose or quotas (score order, 10 candidates), packaged embedder, "
             "no LLM (abstracts are the head of their text). Gold in entries: an entry is the gold document or one "
             "of its sections. Answer in rendered: the answer string appears verbatim in `rendered`.", "",
             "| shape | nodes | corpus ingest s | 200 KB manual: nodes | 200 KB manual: ingest s |",
             "|---|---:|---:|---:|---:|"]
    lines += [f"| {label} | {run['nodes']} | {run['ingest_s']:.1f} | {run['large_nodes']} | {run['large_s']:.1f} |"
              for label, run in runs.items()]
    lines += ["",
              "| shape | max_tokens | detail | gold in entries | answer in rendered | answer EN | answer ZH | "
              "answer, section head | answer, deep | used tokens p50 | entries p50 | merged sections / tokens saved |",
              "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for label, run in runs.items():
        for (max_tokens, detail), rows in run["cells"].items():
            lines.append(f"| {label} | {max_tokens} | {detail} | {_rate(rows, 'gold')} | "
                         f"{_rate(rows, 'answer')} | {_rate(rows, 'answer', 'en')} | {_rate(rows, 'answer', 'zh')} | "
                         f"{_rate(rows, 'answer', deep=False)} | {_rate(rows, 'answer', deep=True)} | "
                         f"{_median_used(rows)} | "
                         f"{statistics.median(r['entries'] for r in rows):.0f} | {_saved(rows)} |")
    lines += ["", "Resources stay capped at `abstract` (RFC §3.4, `resource_detail_cap`), so `full` renders what "
              "`abstract` does; a document node is a directory and may reach `overview` (its outline). "
              "Merged sections / tokens saved: over all questions of the row, the sections served inside a merged "
              "document entry, the tokens merging saved (`stats.merged.saved_tokens`) and their share of the tokens "
              "the same entries would have used unmerged; the saved tokens are left unspent (merging runs after the "
              "plan).",
              markers[1], ""]
    return "\n".join(lines)


def run_local() -> tuple[dict, str]:
    """BEFORE and AFTER on a gunicorn of this checkout, one after the other, on the bench's own database."""
    import find_latency as common  # configures the environment (dev mode, no DATABASE_URL) before Django loads

    common.BENCH_DB = DB
    os.environ["OVSITE_PG_DATABASE"] = DB
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    from ovsite import embedded_pg
    from ovsite.models import Account, AccountUser

    embedded_pg.start_configured(DB)
    call_command("migrate", interactive=False, verbosity=0)
    account, _ = Account.objects.get_or_create(name="default")
    AccountUser.objects.get_or_create(account=account, user_id=common.USER, defaults={"role": "admin"})
    runs, command = {}, ""
    shapes = (("before (one node per file)", {"OVSITE_SECTION_TREES": "false"}),
              ("section tree, 4,000-char sections", {"OVSITE_SECTION_MAX_CHARS": "4000"}),
              ("section tree, 450-char sections (shipped)", {}))
    for label, env in shapes:
        server = common.Server(1, Path(tempfile.mkdtemp(prefix="ovsite-quality-")), extra_env=env)
        server.start()
        try:
            runs[label] = measure(server.url)
        finally:
            server.stop()
        command = server.command
    return runs, (f"gunicorn `{command}` of this checkout, database `{DB}`, `OVSITE_SECTION_TREES=false`, then "
                  "`OVSITE_SECTION_MAX_CHARS=4000`, then the defaults")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", help="measure this server only (e.g. http://127.0.0.1:1933)")
    parser.add_argument("--api-key")
    parser.add_argument("--label", default="server", help="the row label of --base-url's results")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    command = ".venv/bin/python bench/quality.py " + " ".join(
        a if a != args.api_key else "KEY" for a in sys.argv[1:])
    if args.base_url:
        # Another server's figures get their own section, next to ovsite's before/after.
        markers = (f"<!-- quality-{args.label}:begin -->", f"<!-- quality-{args.label}:end -->")
        runs, server, title = {args.label: measure(args.base_url, args.api_key)}, args.base_url, args.label
    else:
        markers, title = (SECTION_BEGIN, SECTION_END), "before and after the section tree and its size cap"
        runs, server = run_local()
    section = render(runs, command.strip(), server, markers, title)
    print(section)
    if not args.no_write:
        from assembly_latency import write_section

        write_section(section, *markers)
    return 0


if __name__ == "__main__":
    sys.exit(main())
