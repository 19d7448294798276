"""The MCP endpoint end to end: the `mcp` SDK's own streamable-HTTP client against a live uvicorn serving the
project's ASGI app (Django beside /mcp), on the test database. Every tool's answer equals the REST answer."""
import asyncio
import json
import socket
import threading
import time

import httpx2
import pytest
import uvicorn
from django.test import override_settings
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from ovsite import accounts

TOOLS = {"find", "search", "recall", "bootstrap", "read", "ls", "remember"}
ROOT_KEY = "mcp-root-key"


@pytest.fixture(scope="module")
def live_url():
    """A real uvicorn on a free port, in a thread of this process so that it uses the test database. Django runs
    each ASGI request in a thread of its own, so connections are not kept (as ovsite/asgi.py sets for make run)."""
    from django.conf import settings

    from ovsite.asgi import django_application
    from ovsite.mcp_tools import build_application

    database = settings.DATABASES["default"]
    kept_age, database["CONN_MAX_AGE"] = database["CONN_MAX_AGE"], 0

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(build_application(django_application), log_level="warning",
                                           lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    server.should_exit = True
    thread.join(10)
    sock.close()
    database["CONN_MAX_AGE"] = kept_age


@pytest.fixture
def store(api):
    api.write("viking://~/memories/profile.md", "# Profile\nName: Ada. Builds ovsite.")
    api.write("viking://~/memories/entities/caddy.md", "Caddy fronts the RTMP ingest on port 1935.")
    api.write("viking://~/memories/events/2026/12/01/deploy.md", "# Summary\nDeployed ovsite 0.3 to production.")
    api.write("viking://~/memories/preferences/reports.md", "Prefers reports that lead with the conclusion.")
    api.write("viking://resources/runbooks/restart.md", "# Restart the workers\nsystemctl restart ovsite-worker")
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


def test_each_tool_answers_as_rest_does(live_url, store):
    calls = {
        "bootstrap": {"session_id": "mcp-s", "max_tokens": 900},
        "search_context": {"query": "how did the deploy go?", "mode": "context", "max_tokens": 300},
        "recall": {"query": "how did the deploy go?", "max_tokens": 300},
        "search_list": {"query": "RTMP ingest port"},
        "find": {"query": "RTMP ingest port", "limit": 3},
        "read": {"uris": ["viking://~/memories/entities/caddy.md"], "level": "full"},
        "ls": {"uri": "viking://~/memories"},
    }

    async def actions(client):
        answers = {}
        for name, arguments in calls.items():
            answers[name] = text_of(await client.call_tool(name.split("_")[0], arguments))
        return answers

    answers = mcp_session(live_url, actions)
    search = "/api/v1/search/search"
    assert answers["bootstrap"] == rest(live_url, "POST", search, json={"mode": "bootstrap", **calls["bootstrap"]}
                                        )["result"]["rendered"]
    assert "viking://user/default/memories/profile.md" in answers["bootstrap"]
    assert answers["search_context"] == rest(live_url, "POST", search, json=calls["search_context"]
                                             )["result"]["rendered"]
    assert "deploy.md" in answers["search_context"]
    assert answers["recall"] == rest(live_url, "POST", "/api/v1/search/recall", json=calls["recall"]
                                     )["result"]["rendered"]
    assert answers["search_list"] == compact(rest(live_url, "POST", search, json=calls["search_list"])["result"])
    assert answers["find"] == compact(rest(live_url, "POST", "/api/v1/search/find", json=calls["find"])["result"])
    assert json.loads(answers["read"]) == [{
        "uri": "viking://~/memories/entities/caddy.md", "level": "full",
        "content": rest(live_url, "GET", "/api/v1/content/read",
                        params={"uri": "viking://~/memories/entities/caddy.md"})["result"]}]
    listed = rest(live_url, "GET", "/api/v1/fs/ls", params={"uri": "viking://~/memories"})
    assert json.loads(answers["ls"]) == {"entries": listed["result"], "has_more": listed["has_more"]}


def test_read_levels(live_url, store):
    async def actions(client):
        return [json.loads(text_of(await client.call_tool("read", {"uris": [uri], "level": level})))[0]["content"]
                for uri, level in (("viking://~/memories/entities/caddy.md", "abstract"),
                                   ("viking://~/memories", "overview"))]

    abstract, overview = mcp_session(live_url, actions)
    assert abstract == rest(live_url, "GET", "/api/v1/content/abstract",
                            params={"uri": "viking://~/memories/entities/caddy.md"})["result"]
    assert overview == rest(live_url, "GET", "/api/v1/content/overview", params={"uri": "viking://~/memories"})[
        "result"]


def test_remember_commits_the_messages(live_url, store):
    messages = [{"role": "user", "content": "Remember: the staging host is stg-3."},
                {"role": "assistant", "content": "Noted."}]

    async def actions(client):
        return json.loads(text_of(await client.call_tool("remember", {"session_id": "mcp-r", "messages": messages})))

    answer = mcp_session(live_url, actions)
    assert answer["session_id"] == "mcp-r" and answer["status"] == "accepted" and answer["archived_messages"] == 2
    session = rest(live_url, "GET", "/api/v1/sessions/mcp-r")["result"]
    assert session["total_message_count"] == 2 and "stg-3" in session["archive_overview"]


def test_tool_errors_carry_the_rest_envelope(live_url, store):
    async def actions(client):
        return [await client.call_tool("search", {"query": "x", "mode": "list", "max_tokens": 500}),
                await client.call_tool("read", {"uris": ["viking://~/memories/entities/none.md"]}),
                await client.call_tool("read", {"uris": ["not-a-uri"]})]

    misplaced, missing, invalid = mcp_session(live_url, actions)
    codes = [json.loads(r.content[0].text)["error"]["code"] for r in (misplaced, missing, invalid)]
    assert all(r.is_error for r in (misplaced, missing, invalid))
    assert codes == ["INVALID_ARGUMENT", "NOT_FOUND", "INVALID_URI"]
    status, body = store.post("/api/v1/search/search", {"query": "x", "mode": "list", "max_tokens": 500})
    assert json.loads(misplaced.content[0].text) == body


def test_auth_failures_are_refused(live_url, seeded):
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                  "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                             "clientInfo": {"name": "test", "version": "1"}}}
    post_headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    with override_settings(OVSITE_ROOT_API_KEY=ROOT_KEY):
        key = accounts.create_account(name="acme", admin_user_id="alice")["user_key"]
        for headers, status, code in (({}, 401, "UNAUTHENTICATED"),
                                      ({"X-API-Key": "wrong"}, 401, "UNAUTHENTICATED"),
                                      ({"Authorization": "Bearer wrong"}, 401, "UNAUTHENTICATED"),
                                      ({"X-API-Key": ROOT_KEY, "X-OpenViking-Account": "nope"}, 403,
                                       "PERMISSION_DENIED")):
            response = httpx2.post(f"{live_url}/mcp", json=initialize, headers={**post_headers, **headers})
            assert response.status_code == status, (headers, response.text)
            assert response.json()["error"]["code"] == code

        with pytest.raises(Exception):
            mcp_session(live_url, lambda client: client.list_tools())

        async def actions(client):
            return text_of(await client.call_tool("ls", {"uri": "viking://"}))

        for headers in ({"X-API-Key": key}, {"Authorization": f"Bearer {key}"}):
            listed = json.loads(mcp_session(live_url, actions, headers))
            assert [entry["name"] for entry in listed["entries"]] == ["user", "agent", "resources"]
