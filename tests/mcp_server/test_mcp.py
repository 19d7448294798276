"""The MCP endpoint end to end: the `mcp` SDK's own streamable-HTTP client against a live uvicorn serving the
project's ASGI app (Django beside /mcp), on the test database. Every tool's answer equals the REST answer."""

import asyncio
import io
import json
import logging
import re

import httpx2
import pytest
from django.core.cache import cache
from django.test import override_settings
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from core import accounts
from profiles.models import RetrievalSettings
from tests.ovsite.test_operations import samples, value

TOOLS = {"find", "search", "recall", "bootstrap", "read", "ls", "remember"}
ROOT_KEY = "mcp-root-key"
REQUEST_ID = "3c9e1f7a5b2d4e8f9a0b1c2d3e4f5a6b"
POST_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}},
}


@pytest.fixture
def store(api):
    api.write_all(
        {
            "viking://~/memories/profile.md": "# Profile\nName: Ada. Builds ovsite.",
            "viking://~/memories/entities/caddy.md": "Caddy fronts the RTMP ingest on port 1935.",
            "viking://~/memories/events/2026/12/01/deploy.md": "# Summary\nDeployed ovsite 0.3 to production.",
            "viking://~/memories/preferences/reports.md": "Prefers reports that lead with the conclusion.",
            "viking://resources/runbooks/restart.md": "# Restart the workers\nsystemctl restart ovsite-worker",
        }
    )
    return api


def mcp_session(url: str, actions, headers: dict | None = None):
    """Runs `actions(client)` in one MCP client session over streamable HTTP and returns what it returns."""

    async def run():
        async with httpx2.AsyncClient(headers=headers or {}, timeout=60) as http:
            async with Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client:
                return await actions(client)

    return asyncio.run(run())


def text_of(result) -> str:
    assert not result.is_error, result.content
    return "".join(part.text for part in result.content)


def rest(url: str, method: str, path: str, **kwargs) -> dict:
    response = httpx2.request(method, url + path, timeout=60, **kwargs)
    assert response.status_code == 200, response.text
    return response.json()


def compact(value) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def test_lists_every_tool(live_url, store):
    async def actions(client):
        return await client.list_tools()

    tools = {tool.name: tool for tool in mcp_session(live_url, actions).tools}
    assert set(tools) == TOOLS
    assert "max_tokens" in tools["bootstrap"].input_schema["properties"]


SEARCH = "/api/v1/search/search"
# every tool, with the arguments its REST twin takes; find, search and recall take their REST body whole
# (context_type, detail per bucket, peer_scope, time_field, node_limit included)
CALLS = {
    "find": ("find", {"query": "RTMP ingest port", "limit": 3, "context_type": ["memory", "resource"]}),
    "search_list": ("search", {"query": "RTMP ingest port", "node_limit": 2, "time_field": "created_at"}),
    "search_context": (
        "search",
        {
            "query": "how did the deploy go?",
            "mode": "context",
            "max_tokens": 300,
            "context_type": "memory",
            "detail": {"events": "full"},
            "peer_scope": "all",
            "other_peer_penalty": 0.1,
        },
    ),
    "recall": ("recall", {"query": "how did the deploy go?", "max_tokens": 300, "peer_scope": "actor"}),
    "bootstrap": ("bootstrap", {"session_id": "mcp-s", "max_tokens": 900}),
    "read": ("read", {"uris": ["viking://~/memories/entities/caddy.md"], "level": "full"}),
    "ls": ("ls", {"uri": "viking://~/memories"}),
    "remember": (
        "remember",
        {
            "session_id": "mcp-r",
            "messages": [
                {"role": "user", "content": "Remember: the staging host is stg-3."},
                {"role": "assistant", "content": "Noted."},
            ],
        },
    ),
}


def rest_twin(url: str, name: str, arguments: dict, headers: dict | None = None):
    """The REST answer to the same arguments, in the form the tool gives it (text for context tools)."""
    post = lambda path, body: rest(url, "POST", path, json=body, headers=headers)["result"]  # noqa: E731
    if name == "find":
        return compact(post("/api/v1/search/find", arguments))
    if name == "search_list":
        return compact(post(SEARCH, arguments))
    if name == "search_context":
        return post(SEARCH, arguments)["rendered"]
    if name == "recall":
        return post("/api/v1/search/recall", arguments)["rendered"]
    if name == "bootstrap":
        return post(SEARCH, {"mode": "bootstrap", **arguments})["rendered"]
    if name == "read":
        return compact(
            [
                {
                    "uri": uri,
                    "level": "full",
                    "content": rest(url, "GET", "/api/v1/content/read", params={"uri": uri})["result"],
                }
                for uri in arguments["uris"]
            ]
        )
    if name == "ls":
        listed = rest(url, "GET", "/api/v1/fs/ls", params=arguments)
        return compact({"entries": listed["result"], "has_more": listed["has_more"]})
    session = "rest-r"
    post(f"/api/v1/sessions/{session}/messages/batch", {"messages": arguments["messages"]})
    return compact(post(f"/api/v1/sessions/{session}/commit", {}))


def without_ids(commit_text: str) -> dict:
    return {k: v for k, v in json.loads(commit_text).items() if k not in ("session_id", "task_id")}


def test_each_tool_answers_as_rest_does(live_url, store):
    async def actions(client):
        """Each tool's answer, then its REST twin's (the server runs in its own thread: a blocking REST call here
        waits for it), so that remember's session cannot change what an earlier pair saw."""
        return {
            name: (text_of(await client.call_tool(tool, arguments)), rest_twin(live_url, name, arguments))
            for name, (tool, arguments) in CALLS.items()
        }

    pairs = mcp_session(live_url, actions)
    assert pairs.keys() == CALLS.keys() and {tool for tool, _ in CALLS.values()} == TOOLS
    answers = {name: answer for name, (answer, _) in pairs.items()}
    for name, (answer, expected) in pairs.items():
        if name == "remember":
            assert without_ids(answer) == without_ids(expected)
            assert json.loads(answer)["session_id"] == "mcp-r"
        else:
            assert answer == expected, name
    assert "viking://user/default/memories/profile.md" in answers["bootstrap"]
    assert "deploy.md" in answers["search_context"] and "caddy.md" in answers["find"]


def test_search_tool_schema_is_the_rest_serializer(live_url, store):
    from assembly.requests import SearchRequest
    from retrieval.requests import FindRequest

    async def actions(client):
        return {tool.name: tool.input_schema for tool in (await client.list_tools()).tools}

    schemas = mcp_session(live_url, actions)
    assert set(schemas["search"]["properties"]) == set(SearchRequest().fields)
    assert set(schemas["find"]["properties"]) == set(FindRequest().fields)
    assert set(schemas["recall"]["properties"]) == set(SearchRequest().fields) - {"mode"}
    assert schemas["search"]["additionalProperties"] is False
    assert schemas["search"]["properties"]["mode"]["allOf"][0]["enum"] == ["list", "context", "bootstrap"]


def test_actor_peer_header_reaches_the_tools(live_url, store):
    from retrieval.models import Context

    Context.objects.filter(uri__endswith="/deploy.md").update(peer="bot-b")
    headers = {"X-OpenViking-Actor-Peer": "bot-a"}
    arguments = {"query": "how did the deploy go?", "max_tokens": 300, "peer_scope": "actor"}

    async def actions(client):
        return [
            text_of(await client.call_tool("recall", arguments)),
            text_of(await client.call_tool("bootstrap", {"max_tokens": 900})),
        ]

    recalled, booted = mcp_session(live_url, actions, headers)
    assert recalled == rest_twin(live_url, "recall", arguments, headers) and "deploy.md" not in recalled
    assert booted == rest_twin(live_url, "bootstrap", {"max_tokens": 900}, headers)


def test_read_levels(live_url, store):
    async def actions(client):
        return [
            json.loads(text_of(await client.call_tool("read", {"uris": [uri], "level": level})))[0]["content"]
            for uri, level in (
                ("viking://~/memories/entities/caddy.md", "abstract"),
                ("viking://~/memories", "overview"),
            )
        ]

    abstract, overview = mcp_session(live_url, actions)
    assert (
        abstract
        == rest(live_url, "GET", "/api/v1/content/abstract", params={"uri": "viking://~/memories/entities/caddy.md"})[
            "result"
        ]
    )
    assert (
        overview == rest(live_url, "GET", "/api/v1/content/overview", params={"uri": "viking://~/memories"})["result"]
    )


def test_remember_commits_the_messages(live_url, store):
    messages = [
        {"role": "user", "content": "Remember: the staging host is stg-3."},
        {"role": "assistant", "content": "Noted."},
    ]

    async def actions(client):
        return json.loads(text_of(await client.call_tool("remember", {"session_id": "mcp-r", "messages": messages})))

    answer = mcp_session(live_url, actions)
    assert answer["session_id"] == "mcp-r" and answer["status"] == "accepted" and answer["archived_messages"] == 2
    session = rest(live_url, "GET", "/api/v1/sessions/mcp-r")["result"]
    assert session["total_message_count"] == 2 and "stg-3" in session["archive_overview"]


@pytest.mark.parametrize(
    "tool,arguments,path",
    [
        ("search", {"query": "x", "mode": "list", "max_tokens": 500}, SEARCH),  # context field in list mode
        ("search", {"query": "x", "max_tokens": "many"}, SEARCH),  # wrong type: the serializer's words, not pydantic's
        ("search", {"query": "x", "mode": "context", "max_tokens": 10}, SEARCH),  # out of range
        ("search", {"query": "x", "slots": 3}, SEARCH),  # unknown field
        ("search", {"query": "x", "mode": "context", "detail": {"events": "huge"}}, SEARCH),
        ("search", {}, SEARCH),  # no query
        ("find", {"query": "x", "context_type": "secrets"}, "/api/v1/search/find"),
        ("recall", {"query": "x", "max_chars": -1}, "/api/v1/search/recall"),
    ],
)
def test_bad_input_is_a_tool_error_with_the_rest_envelope(live_url, store, tool, arguments, path):
    async def actions(client):
        return await client.call_tool(tool, arguments)

    result = mcp_session(live_url, actions)
    status, body = store.post(path, arguments)
    assert status == 422 and body["error"]["code"] == "INVALID_ARGUMENT", body
    # the REST body's request id names its HTTP request; a tool error's text, which the model reads, has none
    rest_error = {name: value for name, value in body["error"].items() if name != "request_id"}
    assert result.is_error and json.loads(result.content[0].text) == {**body, "error": rest_error}


def test_tool_errors_carry_the_rest_envelope(live_url, store):
    async def actions(client):
        return [
            await client.call_tool("read", {"uris": ["viking://~/memories/entities/none.md"]}),
            await client.call_tool("read", {"uris": ["not-a-uri"]}),
            await client.call_tool(
                "remember", {"messages": [{"role": "user", "content": "x"}], "keep_recent_count": -1}
            ),
        ]

    missing, invalid, negative = mcp_session(live_url, actions)
    codes = [json.loads(r.content[0].text)["error"]["code"] for r in (missing, invalid, negative)]
    assert all(r.is_error for r in (missing, invalid, negative))
    assert codes == ["NOT_FOUND", "INVALID_URI", "INVALID_ARGUMENT"]


READ_URIS_MAX = 200  # mcp_server/tools.py READ_URIS_MAX, as docs/mcp.md gives it


def test_read_takes_at_most_read_uris_max_uris(live_url, store):
    """A read of 10,000 URIs was 8 s of work in one call: past READ_URIS_MAX it is refused before any is read."""
    from mcp_server import tools

    uri = "viking://~/memories/entities/caddy.md"

    async def actions(client):
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        return (
            tools["read"].description,
            await client.call_tool("read", {"uris": [uri] * READ_URIS_MAX, "level": "abstract"}),
            await client.call_tool("read", {"uris": [uri] * (READ_URIS_MAX + 1)}),
            await client.call_tool("read", {"uris": []}),
        )

    description, most, over, empty = mcp_session(live_url, actions)
    assert len(json.loads(text_of(most))) == READ_URIS_MAX
    for refused, words in ((over, f"at most {READ_URIS_MAX} URIs"), (empty, "at least one URI")):
        assert refused.is_error
        error = json.loads(refused.content[0].text)["error"]
        assert error["code"] == "INVALID_ARGUMENT" and words in error["message"], error
        assert error["details"]["validation_errors"][0]["loc"] == ["uris"], error
    assert getattr(tools, "READ_URIS_MAX", None) == READ_URIS_MAX and f"1 to {READ_URIS_MAX}" in description


@pytest.mark.parametrize(
    "tool,arguments,field",
    [
        ("bootstrap", {"exclude_uris": ["viking://resources/x"] * 201}, "exclude_uris"),
        ("remember", {"messages": [{"role": "user", "content": "x"}] * 1001}, "messages"),
    ],
    ids=["bootstrap-exclude_uris", "remember-messages"],
)
def test_list_arguments_are_capped_by_their_rest_serializers(live_url, store, tool, arguments, field):
    """bootstrap's exclude_uris (/search: at most 200) and remember's messages (/messages/batch: at most 1000)."""

    async def actions(client):
        return await client.call_tool(tool, arguments)

    result = mcp_session(live_url, actions)
    assert result.is_error
    error = json.loads(result.content[0].text)["error"]
    assert error["code"] == "INVALID_ARGUMENT" and error["details"]["validation_errors"][0]["loc"][0] == field, error
    assert "no more than" in error["message"] and error["details"]["validation_errors"][0]["type"] == "max_length"


def post_mcp(url: str, body: dict, headers: dict | None = None) -> httpx2.Response:
    """One HTTP request to /mcp, outside a client session: stateless, a tool call needs no initialize before it."""
    return httpx2.post(f"{url}/mcp", json=body, headers={**POST_HEADERS, **(headers or {})}, timeout=60)


def tool_call(name: str, arguments: dict) -> dict:
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}}


def test_auth_failures_are_refused(live_url, seeded):
    with override_settings(OVSITE_ROOT_API_KEY=ROOT_KEY):
        key = accounts.create_account(name="acme", admin_user_id="alice")["user_key"]
        for headers, status, code in (
            ({}, 401, "UNAUTHENTICATED"),
            ({"X-API-Key": "wrong"}, 401, "UNAUTHENTICATED"),
            ({"Authorization": "Bearer wrong"}, 401, "UNAUTHENTICATED"),
            ({"X-API-Key": ROOT_KEY, "X-OpenViking-Account": "nope"}, 403, "PERMISSION_DENIED"),
        ):
            response = post_mcp(live_url, INITIALIZE, headers)
            assert response.status_code == status, (headers, response.text)
            assert response.json()["error"]["code"] == code

        # the SDK's MCPError for the 401, inside the task groups of its transport
        with pytest.raises(ExceptionGroup):
            mcp_session(live_url, lambda client: client.list_tools())

        async def actions(client):
            return text_of(await client.call_tool("ls", {"uri": "viking://"}))

        for headers in ({"X-API-Key": key}, {"Authorization": f"Bearer {key}"}):
            listed = json.loads(mcp_session(live_url, actions, headers))
            assert [entry["name"] for entry in listed["entries"]] == ["user", "agent", "resources"]


@pytest.fixture
def limited(seeded):
    """`limited(n)` sets the operator's rate to n per minute and returns an account key; keys are required (no dev
    mode) and the rate-limit counters start empty."""
    cache.clear()
    key = accounts.create_account(name="mcp-rate", admin_user_id="ann")["user_key"]

    def at_rate(per_minute: int) -> str:
        RetrievalSettings.objects.filter(pk=1).update(api_rate_limit_per_minute=per_minute)
        return key

    with override_settings(OVSITE_ROOT_API_KEY=ROOT_KEY):
        yield at_rate
    cache.clear()


def ls_calls(n: int):
    async def actions(client):
        return [await client.call_tool("ls", {"uri": "viking://"}) for _ in range(n)]

    return actions


def test_tool_call_over_the_rate_limit_is_a_tool_error_saying_when_to_retry(live_url, limited):
    key = limited(2)
    first, second, third = mcp_session(live_url, ls_calls(3), {"X-API-Key": key})
    # initialize and tools/list were not counted: the two calls the rate allows both ran
    assert not first.is_error and not second.is_error
    assert third.is_error
    error = json.loads(third.content[0].text)["error"]
    assert error["code"] == "RESOURCE_EXHAUSTED", error
    retry_after = error["details"]["retry_after_s"]
    assert 1 <= retry_after <= 60 and error["message"] == f"rate limited, retry after {retry_after} s"


def test_rest_and_mcp_share_one_budget_per_key(live_url, limited):
    key = limited(3)
    headers = {"X-API-Key": key}
    ls = lambda: httpx2.get(f"{live_url}/api/v1/fs/ls", params={"uri": "viking://"}, headers=headers)  # noqa: E731
    assert [ls().status_code for _ in range(2)] == [200, 200]
    allowed, refused = mcp_session(live_url, ls_calls(2), headers)
    assert not allowed.is_error
    assert refused.is_error and json.loads(refused.content[0].text)["error"]["code"] == "RESOURCE_EXHAUSTED"
    rest_answer = ls()
    assert rest_answer.status_code == 429 and "Retry-After" in rest_answer.headers


def scrape_live(url: str) -> dict:
    return samples(httpx2.get(f"{url}/metrics").text)


def test_tool_calls_are_counted_per_tool_in_the_request_metrics(live_url, store):
    async def actions(client):
        await client.list_tools()
        return [
            await client.call_tool("find", {"query": "RTMP ingest port"}),
            await client.call_tool("read", {"uris": ["viking://~/memories/entities/none.md"]}),
            await client.call_tool("find", {"query": "x", "limit": 0}),
        ]

    before = scrape_live(live_url)
    found, missing, invalid = mcp_session(live_url, actions)
    after = scrape_live(live_url)
    assert not found.is_error and missing.is_error and invalid.is_error
    for route, status, calls in (
        ("mcp:find", "200", 1),
        ("mcp:read", "404", 1),
        ("mcp:find", "422", 1),
        ("mcp:ls", "200", 0),
    ):
        counted = dict(name="ovsite_http_requests_total", route=route, method="POST", status=status)
        assert value(after, **counted) == value(before, **counted) + calls, (route, status)
    timed = dict(name="ovsite_http_request_duration_seconds_count", route="mcp:find", method="POST")
    assert value(after, **timed) == value(before, **timed) + 2


@pytest.fixture
def server_log(settings):
    """The JSON lines the live server logs meanwhile, from its console handler (settings.LOGGING), access lines and
    SQL statements included: with DEBUG on, Django logs each statement (`django.db.backends`) in the thread that
    runs it, for a tool the thread its ORM work runs in, not the event loop that read the request's header."""
    console = next(handler for handler in logging.getLogger().handlers if handler.name == "console")
    loggers = {logging.getLogger("django.db.backends"): logging.DEBUG, logging.getLogger("ovsite.access"): logging.INFO}
    levels = {logger: logger.level for logger in loggers}
    stream, kept_stream = io.StringIO(), console.stream
    settings.DEBUG = True
    console.setStream(stream)
    for logger, level in loggers.items():
        logger.setLevel(level)
    try:
        yield lambda: [json.loads(line) for line in stream.getvalue().splitlines() if line.startswith("{")]
    finally:
        for logger, level in levels.items():
            logger.setLevel(level)
        console.setStream(kept_stream)


def test_a_tool_call_keeps_a_uuid_request_id_on_its_answer_and_on_its_log_lines(live_url, store, server_log):
    response = post_mcp(
        live_url, tool_call("read", {"uris": ["viking://~/memories/entities/caddy.md"]}), {"X-Request-ID": REQUEST_ID}
    )
    assert response.status_code == 200 and "RTMP" in response.json()["result"]["content"][0]["text"]
    assert response.headers["X-Request-ID"] == REQUEST_ID
    mine = [line for line in server_log() if line.get("request_id") == REQUEST_ID]
    assert any(line["logger"] == "django.db.backends" and "retrieval_context" in line["sql"] for line in mine), [
        (line["logger"], line["message"][:100]) for line in mine
    ]
    access = {line["route"]: line["status"] for line in mine if line["logger"] == "ovsite.access"}
    assert access == {"mcp:read": 200, "/mcp": 200}, access


def test_an_mcp_request_without_a_uuid_request_id_gets_a_new_one(live_url, seeded):
    responses = [
        post_mcp(live_url, tool_call("ls", {"uri": "viking://"}), headers)
        for headers in ({}, {}, {"X-Request-ID": "not-a-uuid"})
    ]
    assert all(response.status_code == 200 and not response.json()["result"]["isError"] for response in responses)
    ids = [response.headers["X-Request-ID"] for response in responses]
    assert all(re.fullmatch(r"[0-9a-f]{32}", request_id) for request_id in ids) and len(set(ids)) == 3, ids
    assert responses[0].headers["Access-Control-Expose-Headers"] == "X-Request-ID"  # as on REST


def test_refused_mcp_requests_are_counted_with_their_status_and_carry_the_request_id(live_url, seeded):
    refused = dict(name="ovsite_http_requests_total", route="/mcp", method="POST", status="401")
    timed = dict(name="ovsite_http_request_duration_seconds_count", route="/mcp", method="POST")
    with override_settings(OVSITE_ROOT_API_KEY=ROOT_KEY):
        before = scrape_live(live_url)
        response = post_mcp(live_url, INITIALIZE, {"X-API-Key": "wrong", "X-Request-ID": REQUEST_ID})
        after = scrape_live(live_url)
    assert response.status_code == 401 and response.json()["error"]["code"] == "UNAUTHENTICATED"
    assert response.headers["X-Request-ID"] == REQUEST_ID
    assert value(after, **refused) == value(before, **refused) + 1
    assert value(after, **timed) == value(before, **timed) + 1


def test_each_mcp_http_request_is_counted_under_one_transport_route(live_url, seeded):
    before = scrape_live(live_url)
    called = post_mcp(live_url, tool_call("ls", {"uri": "viking://"}))
    refused = httpx2.get(f"{live_url}/mcp", headers={"Accept": "application/json"}, timeout=60)
    after = scrape_live(live_url)
    assert called.status_code == 200 and not called.json()["result"]["isError"]
    assert refused.status_code == 406  # the SDK's answer to a GET that does not accept an event stream
    for name, labels in (
        ("ovsite_http_requests_total", dict(route="/mcp", method="POST", status="200")),
        ("ovsite_http_request_duration_seconds_count", dict(route="/mcp", method="POST")),
        ("ovsite_http_requests_total", dict(route="mcp:ls", method="POST", status="200")),  # and the tool call
        ("ovsite_http_requests_total", dict(route="/mcp", method="GET", status="406")),
    ):
        assert value(after, name, **labels) == value(before, name, **labels) + 1, (name, labels)
