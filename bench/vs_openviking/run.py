"""ovsite side by side with OpenViking 0.5.2: same corpus, same embeddings, same requests, one run.

    make bench-vs-openviking        (= .venv/bin/python -m bench.vs_openviking.run)
    .venv/bin/python -m bench.vs_openviking.run [--size 2000] [--rounds 200] [--clients 8] [--seconds 30]

1. Creates `bench/.venv-openviking` and installs `openviking==0.5.2` from PyPI into it (once).
2. Starts our OpenAI-compatible model server (model_server.py: the packaged USE embeddings, 512 dims, and
   deterministic chat replies) in its own process; OpenViking's `ov.conf` points its embedding and VLM at it.
3. Starts ovsite (uvicorn as the Procfile runs it, or gunicorn with `--server gunicorn`; its own database on the
   embedded PostgreSQL, packaged embedder in process) and `openviking-server` (local storage in a temporary
   workspace), both in dev-mode auth on loopback.
4. Loads the same deterministic corpus (corpus.py) into both with `POST /api/v1/content/batch-write` and waits
   for processing with `POST /api/v1/system/wait`, then compares their scores (measure.score_check): OpenViking's
   score against the cosine of the vectors it stored (read back through its debug API), and, for every URI both
   return in their top 10 of /find and /search list, |ovsite score − OpenViking score|, over all such pairs and over
   the pairs whose two vectors are the same (score_probe.py measures OpenViking's score function in more detail).
5. Sends /find, /search list, /search context (1600 tokens, without and with `purpose`) and /recall for each
   query to both servers in turn (the order flips every query), then 8 concurrent clients per server, the two
   servers alternating phase by phase; the first search-context phase of each server runs under py-spy
   (`--no-profile` skips it). "recall, same request" sends one explicit body to both servers (OpenViking's own
   preset spelled out), so that row compares equal work.
6. bench/quality.py's corpus and questions on both servers, on top of the corpus above (`--no-quality` skips it):
   gold in entries and answer in rendered at 400 and 1600 tokens.
Prints p50/p95, req/s and the ratios ovsite/OpenViking, and rewrites its section of bench/RESULTS.md.
"""

import datetime as dt
import os
import pickle
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

from bench import find_latency, harness, quality
from bench.vs_openviking import corpus, measure, openviking_server

DATABASE = "ovsite_bench_vs_openviking"

SECTION_BEGIN, SECTION_END = "<!-- vs_openviking:begin -->", "<!-- vs_openviking:end -->"
# Issue 40's targets: p50 at most half OpenViking's on every search route, 2.5x its requests a second with 8 clients,
# its ingest time at most 0.7x.
GOAL_P50_RATIO, GOAL_THROUGHPUT, GOAL_INGEST_RATIO = 0.5, 2.5, 0.7
GOAL_P50_REQUESTS = ("find", "search list", "search context", "recall")
THROUGHPUT_REQUESTS = ("search context", "find")


def start_model_server(log_dir: Path) -> tuple[subprocess.Popen, str]:
    port = harness.free_port()
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="ovsite.settings")
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.vs_openviking.model_server", str(port)],
        env=env,
        cwd=harness.ROOT,
        stdout=subprocess.PIPE,
        stderr=open(log_dir / "model-server.log", "ab"),
        text=True,
        start_new_session=True,
    )
    url = proc.stdout.readline().strip()  # printed once the model is loaded and the port is open
    if not url:
        raise RuntimeError(f"model server failed; see {log_dir / 'model-server.log'}")
    return proc, url


def reset_ovsite() -> None:
    harness.migrated_database()
    with harness.raw_connection() as conn:
        conn.execute("TRUNCATE retrieval_context RESTART IDENTITY CASCADE")


def ovsite_vectors(uris: list[str]) -> dict:
    """{uri: stored embedding} of ovsite's nodes, read from the bench database (one account)."""
    import json

    import numpy as np

    with harness.raw_connection() as conn:
        rows = conn.execute(
            "SELECT uri, embedding::text FROM retrieval_context WHERE uri = ANY(%s) AND embedding IS NOT NULL", (uris,)
        ).fetchall()
    return {uri: np.asarray(json.loads(text), dtype=np.float64) for uri, text in rows}


def warm(client, queries: list[str]) -> None:
    """One untimed pass of every request: lazy model loads and first-use costs out of the figures."""
    for query in queries[:4]:
        for path, extra in measure.REQUESTS.values():
            client.post(path, json={"query": query, **extra}, timeout=120)


def run(args) -> dict:
    import httpx

    workdir = Path(tempfile.mkdtemp(prefix="ovsite-vs-openviking-"))
    harness.log(f"workdir {workdir}")
    openviking_server.ensure_venv()
    files = corpus.build(args.size)
    queries = find_latency.QUERIES
    reset_ovsite()
    model_proc, model_url = start_model_server(workdir)
    ovsite = (
        harness.Uvicorn(args.workers, log_dir=workdir)
        if args.server == "uvicorn"
        else harness.Gunicorn(args.workers, log_dir=workdir, threads=args.threads)
    )
    openviking = openviking_server.OpenVikingServer(
        workdir=workdir / "openviking", model_url=model_url, port=harness.free_port()
    )
    out = {
        "size": len(files),
        "workdir": str(workdir),
        "model_url": model_url,
        "load_before": os.getloadavg(),
        "started": dt.datetime.now(dt.UTC),
    }
    try:
        ovsite.start()
        openviking.start()
        out["servers"] = {
            "ovsite": f"{ovsite.name} {ovsite.command}",
            "OpenViking": openviking.command,
        }
        clients = {
            "ovsite": httpx.Client(base_url=ovsite.url, timeout=120),
            "OpenViking": httpx.Client(base_url=openviking.url, timeout=120),
        }
        out["load"] = {}
        for name, client in clients.items():
            harness.log(f"loading {len(files)} files into {name}")
            out["load"][name] = corpus.load(client, files)
            harness.log(f"{name}: {out['load'][name]}")
        harness.log(f"score check: {len(queries)} queries × {list(measure.SCORE_ROUTES)} on both servers")
        out["scores"] = measure.score_check(clients, model_url, queries, our_vectors=ovsite_vectors)
        out["probe"] = measure.probe(clients, queries[0])
        names = [n for n in measure.REQUESTS if all(out["probe"][s][n]["status"] == 200 for s in clients)]
        out["na"] = {
            n: {s: out["probe"][s][n] for s in clients if out["probe"][s][n]["status"] != 200}
            for n in measure.REQUESTS
            if n not in names
        }
        harness.warm_up(
            ovsite, queries
        )  # every server worker loads its embedder once; one connection reaches one worker
        for client in clients.values():
            warm(client, queries)
        harness.log(f"alternating latency: {args.rounds} rounds of {names}")
        out["latency"] = measure.alternating(clients, names, queries, args.rounds)
        out["throughput"], out["profile"] = {}, {}
        servers = {"ovsite": ovsite, "OpenViking": openviking}
        for name in [n for n in THROUGHPUT_REQUESTS if n in names]:
            phases = {s: [] for s in clients}
            for phase in range(args.phases):
                for server, process in servers.items():
                    harness.log(f"throughput {name} on {server}, {args.clients} clients, {args.seconds}s")
                    # The first search-context phase runs under py-spy: where each server's CPU goes.
                    spy = (
                        measure.profile(process.proc.pid, args.seconds, workdir / f"{server}.collapsed")
                        if args.profile and name == "search context" and phase == 0
                        else None
                    )
                    phases[server].append(measure.throughput(process.url, name, queries, args.clients, args.seconds))
                    if spy is not None:
                        spy.wait(timeout=args.seconds + 60)
                        out["profile"][server] = measure.profile_summary(workdir / f"{server}.collapsed")
            out["throughput"][name] = phases
        out["quality"] = {}
        for server, url in (("ovsite", ovsite.url), ("OpenViking", openviking.url)) if args.quality else ():
            harness.log(f"quality corpus on {server}")
            try:
                out["quality"][server] = quality.measure(url)
            except (RuntimeError, KeyError, TypeError, httpx.HTTPError) as error:  # a server refusing the corpus
                out["quality"][server] = {"error": f"{type(error).__name__}: {str(error)[:300]}"}
        harness.log(f"model server alone, {args.clients} clients, {args.seconds}s")
        out["model_throughput"] = measure.model_throughput(model_url, queries, args.clients, args.seconds)
        out["rss_mb"] = {
            "OpenViking": openviking.rss_mb(),
            "model server": round(_tree_rss(model_proc.pid), 1),
            "ovsite": round(_tree_rss(ovsite.proc.pid), 1),
        }
    finally:
        openviking.stop()
        ovsite.stop()
        model_proc.terminate()
        model_proc.wait(timeout=20)
    out["load_after"] = os.getloadavg()
    return out


def _tree_rss(pid: int) -> float:
    """Resident MB of a process and all its descendants."""
    import psutil

    proc = psutil.Process(pid)
    return sum(p.memory_info().rss for p in [proc, *proc.children(recursive=True)]) / 2**20


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if b else "n/a"


def render(r: dict, command: str) -> str:
    lat = r["latency"]
    load_ov, load_os = r["load"]["OpenViking"], r["load"]["ovsite"]
    lines = [
        SECTION_BEGIN,
        "## vs_openviking — ovsite and OpenViking 0.5.2 side by side",
        "",
        f"Command: `{command}`  ",
        f"Date: {r['started']:%Y-%m-%d %H:%M} UTC  ",
        f"Machine: {os.cpu_count()} CPU, {harness.ram_gb()} GB RAM, Python {platform.python_version()}; load average "
        f"{' '.join(f'{x:.2f}' for x in r['load_before'])} at start, "
        f"{' '.join(f'{x:.2f}' for x in r['load_after'])} at end (shared machine: both servers, PostgreSQL, the "
        "model server and the clients share the cores).  ",
        f"ovsite: `{r['servers']['ovsite']}`, database `{harness.database()}`, packaged USE embedder in process.  ",
        f"OpenViking: `{r['servers']['OpenViking']}` (openviking=={openviking_server.VERSION} from PyPI in "
        "bench/.venv-openviking, 1 uvicorn worker — its default; local vectordb and agfs; dev-mode auth), "
        "embedding and VLM `provider: openai` at our model server (bench/vs_openviking/model_server.py: the same "
        "USE vectors, 512 dims, deterministic chat replies).  ",
        f"Corpus (bench/vs_openviking/corpus.py): {r['size']:,} files — memories of the four categories and "
        f"resource documents of 2.5–6 K characters, 40 % Chinese; {load_os['chars'] / 1e6:.1f} M characters. "
        f"Loaded through `POST /api/v1/content/batch-write` + `POST /api/v1/system/wait`: ovsite "
        f"{load_os['processed_s']:.0f} s, OpenViking {load_ov['processed_s']:.0f} s.  ",
        f"Latency: {len(lat['ovsite'][next(iter(lat['ovsite']))]['ms'])} rounds over "
        f"{len(find_latency.QUERIES)} EN/ZH queries (cycling); in each round every request goes to both servers in "
        "turn, the order flipping every round; one keep-alive connection per server; client-side ms.",
        "",
        "| request | ovsite p50 | ovsite p95 | OpenViking p50 | OpenViking p95 | ratio p50 | ratio p95 | "
        "ovsite Server-Timing p50 | ovsite answer p50 | OpenViking answer p50 |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for name in lat["ovsite"]:
        a, b = lat["ovsite"][name], lat["OpenViking"][name]
        stages = f"{harness.median(a['server_ms']):.1f}" if a["server_ms"] else "—"
        lines.append(
            f"| {name} | {harness.median(a['ms']):.1f} | {harness.pct(a['ms'], 95):.1f} | "
            f"{harness.median(b['ms']):.1f} | {harness.pct(b['ms'], 95):.1f} | "
            f"{_ratio(harness.median(a['ms']), harness.median(b['ms']))} | "
            f"{_ratio(harness.pct(a['ms'], 95), harness.pct(b['ms'], 95))} | {stages} | "
            f"{_answer(a['summaries'])} | {_answer(b['summaries'])} |"
        )
    for name, refusals in r["na"].items():
        why = "; ".join(f"{s} answered {x['status']}: `{x['body'][:120]}`" for s, x in refusals.items())
        lines.append(f"| {name} | n/a | | | | n/a | | | | {why} |")
    lines += [
        "",
        f"Throughput: {r['clients']} concurrent keep-alive clients (asyncio + httpx) per server, "
        "the next query as soon as the answer arrives; phases alternate between the servers; totals over "
        "the phases.",
        "",
        "| request | ovsite req/s | OpenViking req/s | ratio | ovsite p50 / p95 ms | OpenViking p50 / p95 ms | "
        "errors (ovsite / OpenViking) | CPU busy (ovsite / OpenViking) |",
        "|---|---:|---:|---:|---|---|---|---|",
    ]
    rps = {}
    for name, phases in r["throughput"].items():
        row = {}
        for server, ps in phases.items():
            requests, seconds = sum(p["requests"] for p in ps), sum(p["seconds"] for p in ps)
            row[server] = (requests / seconds, ps, sum(p["errors"] for p in ps))
        rps[name] = row["ovsite"][0] / row["OpenViking"][0] if row["OpenViking"][0] else float("inf")
        lines.append(
            f"| {name} | {row['ovsite'][0]:.1f} | {row['OpenViking'][0]:.1f} | {rps[name]:.1f}× | "
            f"{_p(row['ovsite'][1])} | {_p(row['OpenViking'][1])} | {row['ovsite'][2]} / "
            f"{row['OpenViking'][2]} | {_busy(row['ovsite'][1])} / {_busy(row['OpenViking'][1])} |"
        )
    model = r["model_throughput"]
    lines += [
        "",
        f"The model server alone (OpenViking's embedder: one query embedding per request, "
        f"{r['clients']} clients, {model['seconds']:.0f} s): {model['rps']:.1f} req/s, p50 / p95 "
        f"{model['p50']:.0f} / {model['p95']:.0f} ms, {model['errors']} errors, CPU busy "
        f"{model['cpu_busy']:.0%}. It encodes one request at a time (`_ENCODE_LOCK` in tests/fake_openai.py: "
        "concurrent numpy encodes under one GIL are slower, not faster), so this is the ceiling of any "
        "OpenViking request that embeds its query.",
    ]
    lines += _score_lines(r.get("scores"))
    lines += _profile_lines(r["profile"], r["clients"])
    lines += _quality_lines(r["quality"])
    lines += [
        "",
        _memory_line(r["rss_mb"]),
        "",
    ]
    lines += _goal_lines(r, rps)
    lines.append(SECTION_END)
    return "\n".join(lines) + "\n"


def _memory_line(rss: dict) -> str:
    ovsite, openviking, model = rss["ovsite"], rss["OpenViking"], rss.get("model server")
    if model is None:  # a result pickled before the model server was measured
        return f"Resident memory at the end: ovsite {ovsite} MB, OpenViking {openviking} MB (model server not counted)."
    return (
        f"Resident memory at the end: ovsite (server master + workers, its embedder in process) {ovsite} MB; "
        f"OpenViking {openviking + model:.1f} MB: its server {openviking} MB and the model server that embeds for it "
        f"{model} MB; ratio {_ratio(ovsite, openviking + model)}."
    )


def _goal_lines(r: dict, rps: dict) -> list[str]:
    """Issue 40's targets against this run."""
    lat, lines = r["latency"], [""]
    for name in GOAL_P50_REQUESTS:
        if name not in lat["ovsite"]:
            lines.append(f"Goal {name} p50 ≤ {GOAL_P50_RATIO}× OpenViking's: n/a (a server refused it).  ")
            continue
        ours, theirs = harness.median(lat["ovsite"][name]["ms"]), harness.median(lat["OpenViking"][name]["ms"])
        stages = ", ".join(f"{k} {harness.median(v):.1f}" for k, v in lat["ovsite"][name]["stages"].items())
        met = ours <= GOAL_P50_RATIO * theirs
        lines.append(
            f"Goal {name} p50 ≤ {GOAL_P50_RATIO}× OpenViking's: {'met' if met else 'NOT met'}"
            f" ({ours / theirs:.2f}: {ours:.1f} against {theirs:.1f} ms"
            + (f"; Server-Timing stages {stages} ms" if stages else "")
            + ").  "
        )
    health = {s: harness.median(lat[s][measure.HEALTH]["ms"]) for s in lat if measure.HEALTH in lat[s]}
    if len(health) == 2:
        lines.append(
            f"`GET /health` alone (routing, middleware, HTTP): {health['ovsite']:.1f} ms on ovsite, "
            f"{health['OpenViking']:.1f} ms on OpenViking.  "
        )
    for name in THROUGHPUT_REQUESTS:
        if name in rps:
            met = rps[name] >= GOAL_THROUGHPUT
            lines.append(
                f"Goal throughput ≥ {GOAL_THROUGHPUT}× OpenViking's ({name}, {r['clients']} clients): "
                f"{'met' if met else 'NOT met'} ({rps[name]:.1f}×)."
                + ("" if met else " " + _cpu_bound(r["throughput"][name]))
                + "  "
            )
    ours, theirs = r["load"]["ovsite"]["processed_s"], r["load"]["OpenViking"]["processed_s"]
    lines.append(
        f"Goal ingest ≤ {GOAL_INGEST_RATIO}× OpenViking's time: "
        f"{'met' if ours <= GOAL_INGEST_RATIO * theirs else 'NOT met'} ({ours / theirs:.2f}: {ours:.0f} against "
        f"{theirs:.0f} s)."
    )
    return lines


def _f(spread: dict) -> str:
    if not spread["pairs"]:
        return "0 pairs"

    def x(value: float) -> str:
        return f"{value:.4f}" if value >= 1e-3 or value == 0 else f"{value:.1e}"

    return f"{spread['pairs']} pairs, max {x(spread['max'])}, median {x(spread['median'])}"


def _score_lines(s: dict | None) -> list[str]:
    """measure.score_check's figures: OpenViking's score function, then ovsite's scores against OpenViking's."""
    if not s:
        return []
    goal = measure.GOAL_SCORE_DIFF
    same = s["same_vector"]
    met = same["pairs"] and same["max"] <= goal
    kinds = "; ".join(f"{kind} {n['same_vector']}/{n['pairs']}" for kind, n in s["kinds"].items()) or "none"
    return [
        "",
        f"Scores ({s['queries']} EN/ZH queries, {' and '.join(s['routes'])} with limit 10, measured after the "
        "load, before the timed phases; `measure.score_check`). OpenViking's `score` against the cosine c of the "
        "query vector and the stored vector of the record it returned (all its records read back with `GET "
        f"/api/v1/debug/vector/scroll`; hits by level L0/L1/L2: "
        f"{'/'.join(str(s['openviking_levels'][lv]) for lv in (0, 1, 2))}): |score − (1 + c)/2| "
        f"{_f(s['openviking_affine'])}; its engine's int8 arithmetic (flat index, `Quant: int8`, clamp((1 + s)/2, "
        f"0, 1) of the quantised inner product) reproduces it to {_f(s['openviking_int8'])}.  ",
        f"ovsite against OpenViking on every (URI, level) both return for a query and route: |ovsite score − "
        f"OpenViking score| {_f(s['all'])}. The embedded texts differ by node kind — OpenViking embeds a file's "
        "content (memories stripped, resources whole, up to 4096 estimated tokens) and a directory's L0/L1 with a "
        "`directory:` front matter, ovsite (today) the abstract (a `# Summary` section or the whole short text) — "
        "so the scale is compared where both stored vectors (ovsite's: "
        f"{s.get('ovsite_vectors', 'its database')}) are the same (cosine ≥ {measure.SAME_VECTOR}): "
        f"{_f(same)} (same-vector pairs / pairs by node kind: {kinds}).  ",
        f"Goal |ovsite − OpenViking| ≤ {goal} on same-vector pairs: {'met' if met else 'NOT met'}"
        + (f" ({same['max']:.4f})." if same["pairs"] else " (no same-vector pairs)."),
    ]


def _profile_lines(profiles: dict, clients: int) -> list[str]:
    """py-spy's view of the first search-context throughput phase (non-idle samples of the server's processes)."""
    lines = []
    for server, p in profiles.items():
        if not p:
            lines += ["", f"Profile of {server}: no samples (py-spy could not attach)."]
            continue
        buckets = ", ".join(f"{k} {v:.0%}" for k, v in p["buckets"].items())
        own = "; ".join(f"`{k}` {v:.0%}" for k, v in p["own"])
        lines += [
            "",
            f"Profile of {server} under {clients} search-context clients (py-spy record --subprocesses, "
            f"200 Hz, {p['samples']:,} non-idle samples): {buckets}. Most samples of their own: {own}.",
        ]
    return lines


def _quality_lines(runs: dict) -> list[str]:
    """bench/quality.py's figures for both servers, measured in this run on top of the side-by-side corpus."""
    if not runs:
        return []
    lines = [
        "",
        f"Quality (bench/quality.py's corpus and questions, {len(quality.QUESTIONS)} EN/ZH questions whose "
        "answers sit deep in 8 documents, uploaded to each server with `POST /api/v1/resources/temp_upload` + "
        "`POST /api/v1/resources {wait}` on top of the corpus above and removed afterwards; `/search "
        'mode="context"`, no purpose): gold in entries = an entry is the gold document or one of its '
        "sections; answer in rendered = the answer string appears verbatim in `rendered`.",
        "",
        "| server | nodes | request | max_tokens | detail | gold in entries | answer in rendered | used tokens p50 | "
        "entries p50 |",
        "|---|---:|---|---:|---|---:|---:|---:|---:|",
    ]
    for server, run in runs.items():
        if "error" in run:
            lines.append(f"| {server} | n/a | | | | | | | {run['error']} |")
            continue
        for (request, max_tokens, detail), rows in run["cells"].items():
            lines.append(
                f"| {server} | {run['nodes']} | {request} | {max_tokens} | {detail} | {quality._rate(rows, 'gold')} | "
                f"{quality._rate(rows, 'answer')} | {quality._median_used(rows)} | "
                f"{harness.median([r['entries'] for r in rows]):.0f} |"
            )
    return lines


def _busy(phases: list[dict]) -> str:
    return " · ".join(f"{p['cpu_busy']:.0%}" for p in phases)


def _p(phases: list[dict]) -> str:
    return " · ".join(f"{p['p50']:.0f} / {p['p95']:.0f}" for p in phases)


def _answer(summaries: list[dict]) -> str:
    if not summaries:
        return "—"
    if "entries" in summaries[0]:
        used = [s["used"] for s in summaries if s["used"] is not None]
        return (
            f"{harness.median([s['entries'] for s in summaries]):.0f} entries, {harness.median(used):.0f} tokens"
            if used
            else ""
        )
    tops = [s["top"] for s in summaries if s["top"] is not None]
    top = f", top score {harness.median(tops):.3f}" if tops else ""
    return f"{harness.median([s['hits'] for s in summaries]):.0f} hits{top}"


def _cpu_ms_per_request(phases: list[dict]) -> float:
    """Machine CPU (both servers' processes, PostgreSQL, the clients) per answered request, ms. The first phase is
    left out when there are more: py-spy samples the servers during it."""
    timed = phases[1:] or phases
    busy_s = sum(p["cpu_busy"] * (os.cpu_count() or 1) * p["seconds"] for p in timed)
    return 1000 * busy_s / max(1, sum(p["requests"] for p in timed))


def _cpu_bound(phases: dict) -> str:
    ours, theirs = _cpu_ms_per_request(phases["ovsite"]), _cpu_ms_per_request(phases["OpenViking"])
    theirs_rps = sum(p["requests"] for p in phases["OpenViking"]) / sum(p["seconds"] for p in phases["OpenViking"])
    budget = 1000 * (os.cpu_count() or 1) / (GOAL_THROUGHPUT * theirs_rps)
    return (
        f"The machine spends {ours:.1f} ms of CPU per ovsite request (server, PostgreSQL, clients; "
        f"{theirs:.1f} ms per OpenViking request): {GOAL_THROUGHPUT}× OpenViking's rate, "
        f"{GOAL_THROUGHPUT * theirs_rps:.0f} req/s, would leave {budget:.1f} ms per request with both cores "
        f"busy, so CPU, spent as the profile above shows, is what limits it."
    )


def main() -> int:
    parser = harness.parser(__doc__, DATABASE)
    parser.add_argument("--size", type=int, default=2000, help="files in the corpus")
    parser.add_argument("--rounds", type=int, default=200, help="queries in the alternating latency phase")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=20, help="length of one throughput phase")
    parser.add_argument("--phases", type=int, default=2, help="throughput phases per server and request")
    parser.add_argument(
        "--server",
        choices=("uvicorn", "gunicorn"),
        default="uvicorn",
        help="ovsite's server: uvicorn is the Procfile's and `make run`'s (default), gunicorn a WSGI alternative",
    )
    parser.add_argument("--workers", type=int, default=2, help="ovsite server processes")
    parser.add_argument("--threads", type=int, default=2, help="gunicorn threads per worker (--server gunicorn)")
    parser.add_argument(
        "--no-profile",
        dest="profile",
        action="store_false",
        help="skip py-spy on the first search-context throughput phase",
    )
    parser.add_argument(
        "--no-quality", dest="quality", action="store_false", help="skip bench/quality.py's corpus on both servers"
    )
    args = parser.parse_args()
    harness.configure(args.database)
    result = run(args)
    result["clients"] = args.clients
    # The figures survive a rendering error: `render(pickle.load(...), command)` again from the workdir.
    (Path(result["workdir"]) / "result.pickle").write_bytes(pickle.dumps(result))
    section = render(result, harness.command_line("bench.vs_openviking.run"))
    harness.publish(section, SECTION_BEGIN, SECTION_END, write=not args.no_write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
