"""/search mode="bootstrap" latency at 10k nodes, and the MCP `recall` tool against REST /recall.

    .venv/bin/python -m bench.bootstrap_latency [--size 10000] [--rounds 200] [--workers 2] [--reuse]

Loads the corpus of bench/find_latency.py into its own database
`ovsite_bench_bootstrap` (with `--reuse`, keeps what is loaded there), adds a profile.md and a session with an
archive and messages through the REST API, and starts uvicorn on the ASGI app `make run` serves (Django and /mcp).
Then, per round, on one keep-alive connection each: REST /search mode="bootstrap" (with the session, 1600 tokens),
the MCP `bootstrap` tool with the same arguments, REST /recall {query} and the MCP `recall` tool {query}, the
order of REST and MCP swapped every round; every MCP answer is checked equal to the REST `rendered`. The MCP
client is the `mcp` SDK's own (streamable HTTP, one session), so its figures include its JSON-RPC framing.
Rewrites its section of bench/RESULTS.md.
"""

import asyncio
import json
import sys
import time
from functools import partial

from bench import find_latency as corpus
from bench import harness

DATABASE = "ovsite_bench_bootstrap"  # its own: this branch's migrations must not touch the other benches' databases
SECTION_BEGIN, SECTION_END = "<!-- bootstrap_latency:begin -->", "<!-- bootstrap_latency:end -->"
SESSION = "bench-boot"
BOOTSTRAP = {"session_id": SESSION, "max_tokens": 1600}
PROFILE = "# Profile\n" + "".join(
    f"- fact {i}: works on project {corpus.PROJECTS[i % len(corpus.PROJECTS)]}.\n" for i in range(120)
)
REQUESTS = ("bootstrap REST", "bootstrap MCP", "recall REST", "recall MCP")


def _seed_session_start(url: str) -> None:
    """What a bootstrap serves beyond the corpus: the user's profile and a session to continue."""
    import httpx

    with httpx.Client(base_url=url, timeout=120) as client:
        client.post(
            "/api/v1/content/write", json={"uri": "viking://~/memories/profile.md", "content": PROFILE, "wait": True}
        ).raise_for_status()
        client.delete(f"/api/v1/sessions/{SESSION}")
        client.post(
            f"/api/v1/sessions/{SESSION}/messages/batch",
            json={
                "messages": [
                    {"role": "user", "content": f"Round {i}: let us review the {corpus.PROJECTS[i]} migration plan."}
                    for i in range(8)
                ]
            },
        ).raise_for_status()
        client.post(f"/api/v1/sessions/{SESSION}/commit", json={"keep_recent_count": 4}).raise_for_status()


async def _rounds(url: str, rounds: int) -> dict[str, list[float]]:
    import httpx
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    samples: dict[str, list[float]] = {name: [] for name in REQUESTS}
    async with (
        httpx.AsyncClient(base_url=url, timeout=60) as rest,
        httpx.AsyncClient(timeout=60) as mcp_http,
        Client(streamable_http_client(f"{url}/mcp", http_client=mcp_http)) as mcp,
    ):

        async def rest_rendered(path: str, body: dict) -> str:
            response = await rest.post(path, json=body)
            response.raise_for_status()
            return response.json()["result"]["rendered"]

        async def mcp_text(tool: str, arguments: dict) -> str:
            result = await mcp.call_tool(tool, arguments)
            assert not result.is_error, result.content
            return "".join(part.text for part in result.content)

        async def timed(name: str, call) -> str:
            started = time.perf_counter()
            answer = await call
            samples[name].append((time.perf_counter() - started) * 1000)
            return answer

        async def pair(kind: str, rest_call, mcp_call, rest_first: bool) -> None:
            if rest_first:
                expected = await timed(f"{kind} REST", rest_call())
                answer = await timed(f"{kind} MCP", mcp_call())
            else:
                answer = await timed(f"{kind} MCP", mcp_call())
                expected = await timed(f"{kind} REST", rest_call())
            assert answer == expected, f"{kind}: the MCP answer differs from REST's rendered"

        for i in range(rounds + 1):  # round 0 is untimed: first-use costs out
            query = corpus.QUERIES[i % len(corpus.QUERIES)]
            await pair(
                "bootstrap",
                partial(rest_rendered, "/api/v1/search/search", {"mode": "bootstrap", **BOOTSTRAP}),
                partial(mcp_text, "bootstrap", BOOTSTRAP),
                rest_first=i % 2 == 0,
            )
            await pair(
                "recall",
                partial(rest_rendered, "/api/v1/search/recall", {"query": query}),
                partial(mcp_text, "recall", {"query": query}),
                rest_first=i % 2 == 1,
            )
            if i == 0:
                samples = {name: [] for name in REQUESTS}
    return samples


def run(args) -> dict:
    corpus.load_corpus(args.size, args.reuse)
    server = harness.Uvicorn(args.workers)  # REST and MCP each embed the query (no query-vector cache): equal work
    server.start()
    try:
        harness.warm_up(server, corpus.QUERIES)
        _seed_session_start(server.url)
        samples = asyncio.run(_rounds(server.url, args.rounds))
    finally:
        server.stop()
    return {
        "samples": samples,
        "server_command": server.command,
        "size": harness.loaded_nodes(),
        "rounds": args.rounds,
        "note": args.note,
    }


def render(result: dict, command: str) -> str:
    s = result["samples"]
    lines = [
        SECTION_BEGIN,
        '## bootstrap_latency — /search mode="bootstrap", and MCP tools vs REST',
        "",
        *harness.heading(command, f". {result['note']}" if result["note"] else ""),
        f"Server: `uvicorn {result['server_command']}` (the ASGI app of `make run`), database "
        f"`{harness.database()}`, {result['size']:,} nodes (the corpus of bench/find_latency.py plus a 120-line "
        f"profile.md and a session with an archive and 4 kept messages); {result['rounds']} rounds, each: bootstrap "
        f"`{json.dumps(BOOTSTRAP)}` by REST and by the MCP tool, then /recall {{query}} by REST and by the MCP tool, "
        "the order within a pair swapped every round; query-vector cache off. Clients: httpx (REST) and the `mcp` "
        "SDK's client over streamable HTTP (one session), one keep-alive connection each; every MCP answer "
        "equalled the REST `rendered`.",
        "",
        "| request | p50 ms | p95 ms |",
        "|---|---:|---:|",
    ]
    for name in REQUESTS:
        lines.append(f"| {name} | {harness.median(s[name]):.2f} | {harness.pct(s[name], 95):.2f} |")
    lines += [
        "",
        "MCP over REST (median over rounds of the paired difference, and the ratio of the medians):",
        "",
        "| tool | MCP − REST p50 ms | MCP / REST (p50) |",
        "|---|---:|---:|",
    ]
    for kind in ("bootstrap", "recall"):
        rest, mcp = s[f"{kind} REST"], s[f"{kind} MCP"]
        lines.append(
            f"| {kind} | {harness.paired_median(mcp, rest):.2f} | {harness.median(mcp) / harness.median(rest):.2f} |"
        )
    lines.append(SECTION_END)
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = harness.parser(__doc__, DATABASE)
    parser.add_argument("--size", type=int, default=10000)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--reuse", action="store_true", help="keep the corpus already loaded in its database")
    parser.add_argument("--note", default="", help="what the section should say about the machine's state")
    args = parser.parse_args()
    harness.configure(args.database)
    section = render(run(args), harness.command_line("bench.bootstrap_latency"))
    harness.publish(section, SECTION_BEGIN, SECTION_END, write=not args.no_write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
