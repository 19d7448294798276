"""The MCP endpoint (`/mcp`, streamable HTTP, the official `mcp` SDK): agent tools over the service functions the
REST views call — each tool builds the REST request body, so the same serializers validate it and the same
service answers. Context tools return the `rendered` text (the digest when one was written); the others compact
JSON. Auth is the REST API keys' (`ovsite.auth`), checked per HTTP request before MCP sees it.

The ORM is synchronous: every tool and the auth check run in Django's thread-sensitive executor, as Django runs
sync views under ASGI, with the same connection housekeeping around them.
"""
import json
import uuid
from contextlib import asynccontextmanager
from typing import Any, Literal

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import CallToolResult, TextContent
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route

from assembly.views import run_recall, run_search
from ovsite.api import parse
from ovsite.auth import Caller, authenticate_headers, require_account_caller
from ovsite.envelope import error_envelope
from ovsite.errors import InvalidArgument
from retrieval import selectors
from retrieval.find import find as find_hits
from retrieval.views import FindRequest, LsParams, find_query_from
from sessions_app import commit, services
from sessions_app.views import BatchMessagesRequest, SessionPath

MCP_PATH = "/mcp"
READ_LEVELS = {"abstract": selectors.read_abstract, "overview": selectors.read_overview}
INSTRUCTIONS = ("ovsite stores memories, resources and skills under viking:// URIs. Call bootstrap once at session "
                "start, recall before a turn that may depend on the past, search or find to look something up, "
                "read to expand a URI, ls to browse, remember to keep what was said.")


def _in_django(function, *args, **kwargs):
    close_old_connections()
    try:
        return function(*args, **kwargs)
    finally:
        close_old_connections()


def _compact(value) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _body(**fields) -> dict:
    """The REST request body: the arguments the client gave (MCP sends no value for an omitted one)."""
    return {name: value for name, value in fields.items() if value is not None}


def _caller(ctx: Context) -> Caller:
    return ctx.request_context.request.state.ovsite_caller


async def _call(ctx: Context, function, **kwargs) -> CallToolResult:
    """Runs a tool body with the request's caller; an error becomes a tool error whose text is the REST answer's
    envelope (`{"status": "error", "error": {code, message, details}}`), unprefixed, so a client can parse it."""
    caller = _caller(ctx)
    try:
        text = await sync_to_async(_in_django, thread_sensitive=True)(function, caller=caller, **kwargs)
    except Exception as exc:
        return CallToolResult(content=[TextContent(type="text", text=_compact(error_envelope(exc)[1]))],
                              is_error=True)
    return CallToolResult(content=[TextContent(type="text", text=text)])


def _context_text(result: dict) -> str:
    return result["digest"] or result["rendered"]


def _find(*, caller: Caller, body: dict) -> str:
    return _compact(find_hits(caller=caller, spec=find_query_from(parse(FindRequest, body))))


def _search(*, caller: Caller, body: dict) -> str:
    result, _ = run_search(caller=caller, body=body)
    return _context_text(result) if body.get("mode") in ("context", "bootstrap") else _compact(result)


def _recall(*, caller: Caller, body: dict) -> str:
    result, _, _ = run_recall(caller=caller, body=body)
    return _context_text(result)


def _read(*, caller: Caller, uris: list[str], level: str) -> str:
    if not uris:
        raise InvalidArgument("uris must name at least one URI", loc=["uris"])
    read = READ_LEVELS.get(level, selectors.read_content)
    return _compact([{"uri": uri, "level": level, "content": read(caller=caller, uri=uri)} for uri in uris])


def _ls(*, caller: Caller, body: dict) -> str:
    params = parse(LsParams, body)
    entries, more = selectors.list_children(caller=caller, uri=params["uri"], recursive=params["recursive"],
                                            node_limit=params.get("limit") or params["node_limit"],
                                            offset=params["offset"], abs_limit=params["abs_limit"])
    return _compact({"entries": entries, "has_more": more})


def _remember(*, caller: Caller, session_id: str | None, messages: list, keep_recent_count: int) -> str:
    session_id = parse(SessionPath, {"session_id": session_id or uuid.uuid4().hex})["session_id"]
    parsed = parse(BatchMessagesRequest, {"messages": messages})["messages"]
    services.add_messages(caller=caller, session_id=session_id,
                          messages=[services.message_from(**m) for m in parsed])
    return _compact(commit.commit_session(caller=caller, session_id=session_id,
                                          keep_recent_count=keep_recent_count, event_tags=[]))


def build_server() -> MCPServer:
    server = MCPServer("ovsite", instructions=INSTRUCTIONS)

    @server.tool(description="Ranked hits for a query (the /api/v1/search/find primitive), as compact JSON.")
    async def find(ctx: Context, query: str, target_uri: str | list[str] | None = None,
                   context_type: str | list[str] | None = None, limit: int | None = None,
                   score_threshold: float | None = None, filter: dict[str, Any] | None = None,
                   tags: list[str] | None = None, since: str | None = None,
                   until: str | None = None) -> CallToolResult:
        return await _call(ctx, _find, body=_body(
            query=query, target_uri=target_uri, context_type=context_type, limit=limit,
            score_threshold=score_threshold, filter=filter, tags=tags, since=since, until=until))

    @server.tool(description='/api/v1/search/search: mode "list" gives ranked hits as compact JSON, mode '
                             '"context" the assembled, token-budgeted block as text.')
    async def search(ctx: Context, query: str, mode: Literal["list", "context"] = "list",
                     session_id: str | None = None, max_tokens: int | None = None, purpose: str | None = None,
                     quotas: dict[str, int] | None = None, detail: str | dict[str, str] | None = None,
                     exclude_uris: list[str] | None = None, dedup_turns: int | None = None,
                     score_threshold: float | None = None, limit: int | None = None,
                     filter: dict[str, Any] | None = None, tags: list[str] | None = None,
                     since: str | None = None, until: str | None = None,
                     query_expansion: Literal["auto", "off"] | None = None,
                     rewrite: bool | Literal["auto"] | None = None) -> CallToolResult:
        return await _call(ctx, _search, body=_body(
            query=query, mode=mode, session_id=session_id, max_tokens=max_tokens, purpose=purpose, quotas=quotas,
            detail=detail, exclude_uris=exclude_uris, dedup_turns=dedup_turns, score_threshold=score_threshold,
            limit=limit, filter=filter, tags=tags, since=since, until=until, query_expansion=query_expansion,
            rewrite=rewrite))

    @server.tool(description="The recall preset (/api/v1/search/recall): context for this turn, as text. Pass "
                             "session_id so what was served in the last turns is not served again.")
    async def recall(ctx: Context, query: str, session_id: str | None = None, max_tokens: int | None = None,
                     purpose: str | None = None, detail: str | dict[str, str] | None = None,
                     exclude_uris: list[str] | None = None, dedup_turns: int | None = None,
                     score_threshold: float | None = None,
                     rewrite: bool | Literal["auto"] | None = None) -> CallToolResult:
        return await _call(ctx, _recall, body=_body(
            query=query, session_id=session_id, max_tokens=max_tokens, purpose=purpose, detail=detail,
            exclude_uris=exclude_uris, dedup_turns=dedup_turns, score_threshold=score_threshold, rewrite=rewrite))

    @server.tool(description='The session-start context (/search mode="bootstrap"): instructions, the user\'s '
                             "profile, the session's archive, recent events and a listing, as text.")
    async def bootstrap(ctx: Context, session_id: str | None = None, max_tokens: int | None = None,
                        exclude_uris: list[str] | None = None) -> CallToolResult:
        return await _call(ctx, _search, body=_body(mode="bootstrap", session_id=session_id,
                                                     max_tokens=max_tokens, exclude_uris=exclude_uris))

    @server.tool(description="The content of viking:// URIs at one level (abstract, overview or full), as "
                             "compact JSON [{uri, level, content}].")
    async def read(ctx: Context, uris: list[str],
                   level: Literal["abstract", "overview", "full"] = "full") -> CallToolResult:
        return await _call(ctx, _read, uris=uris, level=level)

    @server.tool(description="The children of a viking:// directory (/api/v1/fs/ls), as compact JSON.")
    async def ls(ctx: Context, uri: str = "viking://", recursive: bool = False,
                 node_limit: int | None = None) -> CallToolResult:
        return await _call(ctx, _ls, body=_body(uri=uri, recursive=recursive, node_limit=node_limit))

    @server.tool(description="Adds messages [{role, content}] to a session (a new one without session_id) and "
                             "commits it: the messages are archived and, with an LLM, memories are extracted.")
    async def remember(ctx: Context, messages: list[dict[str, Any]], session_id: str | None = None,
                       keep_recent_count: int = 0) -> CallToolResult:
        return await _call(ctx, _remember, session_id=session_id, messages=messages,
                           keep_recent_count=keep_recent_count)

    return server


def _authenticate(headers: Headers, remote_addr: str) -> Caller:
    found = authenticate_headers(headers, remote_addr)
    return require_account_caller(found[0] if found else None)


class ApiKeyMiddleware:
    """Refuses an HTTP request to /mcp as the REST API would (401/403 with the error envelope); otherwise the
    caller rides in the ASGI scope's state to the tools."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        client = scope.get("client") or ("",)
        try:
            caller = await sync_to_async(_in_django, thread_sensitive=True)(
                _authenticate, Headers(scope=scope), client[0])
        except Exception as exc:
            status, body = error_envelope(exc)
            await JSONResponse(body, status_code=status,
                               headers={"WWW-Authenticate": "Bearer"} if status == 401 else None)(scope, receive, send)
            return
        scope = {**scope, "state": {**scope.get("state", {}), "ovsite_caller": caller}}
        await self.app(scope, receive, send)


def _transport_security() -> TransportSecuritySettings:
    """DNS-rebinding protection with Django's ALLOWED_HOSTS, so /mcp accepts the hosts the rest of the site does."""
    hosts = [host for host in settings.ALLOWED_HOSTS if host != "testserver"]
    if "*" in hosts:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    return TransportSecuritySettings(
        allowed_hosts=[pattern for host in hosts for pattern in (host, f"{host}:*")],
        allowed_origins=[f"{scheme}://{host}{port}" for host in hosts for scheme in ("http", "https")
                         for port in ("", ":*")])


def build_application(django_app) -> Starlette:
    """The ASGI app: /mcp to the MCP server (stateless streamable HTTP with JSON answers, so any worker can take
    any request), everything else to Django. A new MCP server each call: its session manager runs once."""
    server = build_server()
    mcp_app = server.streamable_http_app(streamable_http_path=MCP_PATH, stateless_http=True, json_response=True,
                                         transport_security=_transport_security())

    @asynccontextmanager
    async def lifespan(_app):
        async with server.session_manager.run():
            yield

    return Starlette(routes=[Route(MCP_PATH, endpoint=ApiKeyMiddleware(mcp_app)), Mount("/", app=django_app)],
                     lifespan=lifespan)
