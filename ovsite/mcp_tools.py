"""The MCP endpoint (`/mcp`, streamable HTTP, the official `mcp` SDK): agent tools over the service functions the
REST views call — each tool builds the REST request body, so the same serializers validate it and the same
service answers. `find`, `search` and `recall` take their REST route's body as it is: their input schema is the
REST serializer's (as drf-spectacular writes it for /api/schema/) and the serializer alone validates, so bad input
is the REST error envelope, as a tool error. Context tools return the `rendered` text (the digest when one was
written), `recall` with the deprecated v1 aliases it was given in `_meta`; the others compact JSON. Auth is the
REST API keys' (`core.auth`), checked per HTTP request before MCP sees it; `X-OpenViking-Actor-Peer` names the
actor peer as on REST. Each tool call counts against its key's rate limit, on the REST throttle's own counter
(profiles/throttling.py), and in the request metrics as route `mcp:<tool>` (core/metrics.py); an assembly's recall
event names its endpoint `mcp:<tool>` too (`mcp:bootstrap` for a bootstrap by either tool). Each HTTP request to
/mcp, refused or not, has a request id and is counted as route `/mcp`, as a REST request is by Django's middleware.

The ORM is synchronous: every tool and the auth check run in Django's thread-sensitive executor, as Django runs
sync views under ASGI, with the same connection housekeeping around them.
"""

import json
import math
import time
import uuid
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections
from django.urls import path
from django_guid.config import settings as guid_settings
from django_guid.context import guid
from django_guid.utils import get_id_from_header
from drf_spectacular.drainage import GENERATOR_STATS
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.settings import patched_settings
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase, FuncMetadata
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import CallToolResult, TextContent
from pydantic import ConfigDict
from starlette.applications import Starlette
from starlette.datastructures import Headers, MutableHeaders
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route

from assembly.views import run_recall, run_search, search_view
from core.api import parse
from core.auth import Caller, authenticate_headers, require_account_caller
from core.envelope import error_envelope
from core.errors import InvalidArgument, ResourceExhausted
from core.metrics import record_request
from profiles.throttling import admit_key
from retrieval import selectors
from retrieval.search.find import find as find_hits
from retrieval.views import FindRequest, LsParams, find_query_from, find_view
from sessions_app import commit, services
from sessions_app.views import BatchMessagesRequest, CommitRequest, SessionPath

MCP_PATH = "/mcp"
DEPRECATED_META = "ovsite/deprecated"  # the recall tool's `_meta` key naming the v1 aliases a call used
READ_LEVELS = {"abstract": selectors.read_abstract, "overview": selectors.read_overview}
INSTRUCTIONS = (
    "ovsite stores memories, resources and skills under viking:// URIs. Call bootstrap once at session "
    "start, recall before a turn that may depend on the past, search or find to look something up, "
    "read to expand a URI, ls to browse, remember to keep what was said."
)


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


def _state(ctx: Context):
    return ctx.request_context.request.state


def _admitted(function, *, key: str | None, **kwargs):
    """The tool body, once the key's rate limit lets the call through."""
    wait = admit_key(key)
    if wait is not None:
        retry_after = max(1, math.ceil(wait))
        raise ResourceExhausted(f"rate limited, retry after {retry_after} s", {"retry_after_s": retry_after})
    return function(**kwargs)


@dataclass(frozen=True)
class Answer:
    """A tool body's text, with `_meta` for the client rather than the model (a body may return the text alone)."""

    text: str
    meta: dict | None = None


async def _call(ctx: Context, tool: str, function, **kwargs) -> CallToolResult:
    """Runs a tool body with the request's caller; an error becomes a tool error whose text is the REST answer's
    envelope (`{"status": "error", "error": {code, message, details}}`), unprefixed, so a client can parse it.

    A call over the rate limit is such a tool error too (429's `RESOURCE_EXHAUSTED`, with `details.retry_after_s`),
    not an HTTP 429: the model sees why and when to retry, and the client's session goes on; the protocol's own
    requests (initialize, tools/list) are not counted, as only tool calls do work."""
    state = _state(ctx)
    started = time.perf_counter()
    try:
        answer = await sync_to_async(_in_django, thread_sensitive=True)(
            _admitted, function, key=state.ovsite_key, caller=state.ovsite_caller, **kwargs
        )
    except Exception as exc:
        # without the request id: the text goes to the model, and the HTTP answer's X-Request-ID names the request
        status, body = error_envelope(exc, with_request_id=False)
        result = CallToolResult(content=[TextContent(type="text", text=_compact(body))], is_error=True)
    else:
        answer = answer if isinstance(answer, Answer) else Answer(answer)
        status, result = 200, CallToolResult(content=[TextContent(type="text", text=answer.text)], meta=answer.meta)
    record_request(
        route=f"mcp:{tool}", method="POST", path=MCP_PATH, status=status, elapsed_s=time.perf_counter() - started
    )
    return result


def _context_text(result: dict) -> str:
    return result["digest"] or result["rendered"]


def _find(*, caller: Caller, body: dict) -> str:
    return _compact(find_hits(caller=caller, spec=find_query_from(parse(FindRequest, body))))


def _search(*, caller: Caller, body: dict, actor_peer: str) -> str:
    result, _ = run_search(caller=caller, body=body, actor_peer=actor_peer, mcp=True)
    return _context_text(result) if "rendered" in result else _compact(result)


def _recall(*, caller: Caller, body: dict, actor_peer: str) -> Answer:
    result, _, deprecated = run_recall(caller=caller, body=body, actor_peer=actor_peer, mcp=True)
    # REST's Deprecation header and stats.deprecated, for the client: the model's text stays REST's `rendered`
    return Answer(_context_text(result), {DEPRECATED_META: list(deprecated)} if deprecated else None)


def _read(*, caller: Caller, uris: list[str], level: str) -> str:
    if not uris:
        raise InvalidArgument("uris must name at least one URI", loc=["uris"])
    read = READ_LEVELS.get(level, selectors.read_content)
    return _compact([{"uri": uri, "level": level, "content": read(caller=caller, uri=uri)} for uri in uris])


def _ls(*, caller: Caller, body: dict) -> str:
    params = parse(LsParams, body)
    entries, more = selectors.list_children(
        caller=caller,
        uri=params["uri"],
        recursive=params["recursive"],
        node_limit=params.get("limit") or params["node_limit"],
        offset=params["offset"],
        abs_limit=params["abs_limit"],
    )
    return _compact({"entries": entries, "has_more": more})


def _remember(
    *, caller: Caller, session_id: str | None, messages: list, keep_recent_count: int, actor_peer: str
) -> str:
    session_id = parse(SessionPath, {"session_id": session_id or uuid.uuid4().hex})["session_id"]
    parsed = parse(BatchMessagesRequest, {"messages": messages})["messages"]
    keep = parse(CommitRequest, {"keep_recent_count": keep_recent_count})["keep_recent_count"]
    services.add_messages(caller=caller, session_id=session_id, messages=[services.message_from(**m) for m in parsed])
    return _compact(
        commit.commit_session(
            caller=caller, session_id=session_id, keep_recent_count=keep, event_tags=[], actor_peer=actor_peer
        )
    )


class RequestBody(ArgModelBase):
    """A body tool's arguments: whatever the client sent, passed on whole as the REST request body. The REST
    serializer is the one validation; a pydantic one before it would answer bad input in other words."""

    model_config = ConfigDict(extra="allow")

    def model_dump_one_level(self) -> dict:
        return {"body": dict(self.model_extra or {})}


def _inlined(node, components: dict):
    """A schema with its `#/components/schemas/…` references replaced by what they name: a tool's input schema
    stands alone."""
    if isinstance(node, dict):
        if "$ref" in node:
            return _inlined(components[node["$ref"].rsplit("/", 1)[1]], components)
        return {key: _inlined(value, components) for key, value in node.items()}
    if isinstance(node, list):
        return [_inlined(item, components) for item in node]
    return node


def request_schemas() -> dict[str, dict]:
    """The JSON schemas of the /find and /search request bodies, from the REST views' serializers, as
    drf-spectacular writes them for /api/schema/ (OpenAPI 3.1: its schemas are JSON Schema)."""
    routes = {"find": find_view, "search": search_view}
    with patched_settings({"OAS_VERSION": "3.1.0"}), GENERATOR_STATS.silence():
        schema = SchemaGenerator(patterns=[path(name, view) for name, view in routes.items()]).get_schema(
            request=None, public=True
        )
    components = schema["components"]["schemas"]
    bodies = {
        name: _inlined(
            schema["paths"][f"/{name}"]["post"]["requestBody"]["content"]["application/json"]["schema"], components
        )
        for name in routes
    }
    # the serializer's docstring is for developers; an unknown field is a 422, as on REST
    return {
        name: {**{k: v for k, v in body.items() if k != "description"}, "additionalProperties": False}
        for name, body in bodies.items()
    }


def _without(schema: dict, *fields: str) -> dict:
    return {
        **schema,
        "properties": {k: v for k, v in schema["properties"].items() if k not in fields},
        "required": [k for k in schema.get("required", []) if k not in fields],
    }


def _body_tool(function, *, name: str, description: str, schema: dict) -> Tool:
    tool = Tool.from_function(function, name=name, description=description)
    return tool.model_copy(update={"parameters": schema, "fn_metadata": FuncMetadata(arg_model=RequestBody)})


def _body_tools(schemas: dict[str, dict]) -> list[Tool]:
    async def find(ctx: Context, body: dict) -> CallToolResult:
        return await _call(ctx, "find", _find, body=body)

    async def search(ctx: Context, body: dict) -> CallToolResult:
        return await _call(ctx, "search", _search, body=body, actor_peer=_state(ctx).ovsite_actor_peer)

    async def recall(ctx: Context, body: dict) -> CallToolResult:
        return await _call(ctx, "recall", _recall, body=body, actor_peer=_state(ctx).ovsite_actor_peer)

    return [
        _body_tool(
            find,
            name="find",
            schema=schemas["find"],
            description=(
                "Ranked hits for a query (the /api/v1/search/find primitive; its request body), as compact JSON."
            ),
        ),
        _body_tool(
            search,
            name="search",
            schema=schemas["search"],
            description=(
                '/api/v1/search/search with its request body: mode "list" gives ranked hits as compact JSON, mode '
                '"context" the assembled, token-budgeted block as text (the digest when a rewrite wrote one).'
            ),
        ),
        _body_tool(
            recall,
            name="recall",
            schema=_without(schemas["search"], "mode"),
            description=(
                "The recall preset (/api/v1/search/recall; its request body): context for this turn, as text. Pass "
                "session_id so what was served in the last turns is not served again."
            ),
        ),
    ]


def build_server() -> MCPServer:
    server = MCPServer("ovsite", instructions=INSTRUCTIONS, tools=_body_tools(request_schemas()))

    @server.tool(
        description='The session-start context (/search mode="bootstrap"): instructions, the user\'s '
        "profile, the session's archive, recent events and a listing, as text."
    )
    async def bootstrap(
        ctx: Context,
        session_id: str | None = None,
        max_tokens: int | None = None,
        exclude_uris: list[str] | None = None,
        tokenizer: str | None = None,
    ) -> CallToolResult:
        body = _body(
            mode="bootstrap",
            session_id=session_id,
            max_tokens=max_tokens,
            exclude_uris=exclude_uris,
            tokenizer=tokenizer,
        )
        return await _call(ctx, "bootstrap", _search, body=body, actor_peer=_state(ctx).ovsite_actor_peer)

    @server.tool(
        description="The content of viking:// URIs at one level (abstract, overview or full), as "
        "compact JSON [{uri, level, content}]."
    )
    async def read(
        ctx: Context, uris: list[str], level: Literal["abstract", "overview", "full"] = "full"
    ) -> CallToolResult:
        return await _call(ctx, "read", _read, uris=uris, level=level)

    @server.tool(description="The children of a viking:// directory (/api/v1/fs/ls), as compact JSON.")
    async def ls(
        ctx: Context, uri: str = "viking://", recursive: bool = False, node_limit: int | None = None
    ) -> CallToolResult:
        return await _call(ctx, "ls", _ls, body=_body(uri=uri, recursive=recursive, node_limit=node_limit))

    @server.tool(
        description="Adds messages [{role, content}] to a session (a new one without session_id) and "
        "commits it: the messages are archived and, with an LLM, memories are extracted."
    )
    async def remember(
        ctx: Context, messages: list[dict[str, Any]], session_id: str | None = None, keep_recent_count: int = 0
    ) -> CallToolResult:
        return await _call(
            ctx,
            "remember",
            _remember,
            session_id=session_id,
            messages=messages,
            keep_recent_count=keep_recent_count,
            actor_peer=_state(ctx).ovsite_actor_peer,
        )

    return server


def _authenticate(headers: Headers, remote_addr: str) -> tuple[Caller, str | None]:
    """The caller and the key it presented (None for the keyless dev caller, whom the rate limit does not count)."""
    caller, key = authenticate_headers(headers, remote_addr) or (None, None)
    return require_account_caller(caller), key


class ApiKeyMiddleware:
    """Refuses an HTTP request to /mcp as the REST API would (401/403 with the error envelope); otherwise the
    caller rides in the ASGI scope's state to the tools."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        client = scope.get("client") or ("",)
        headers = Headers(scope=scope)
        try:
            caller, key = await sync_to_async(_in_django, thread_sensitive=True)(_authenticate, headers, client[0])
        except Exception as exc:
            status, body = error_envelope(exc)
            await JSONResponse(
                body, status_code=status, headers={"WWW-Authenticate": "Bearer"} if status == 401 else None
            )(scope, receive, send)
            return
        scope = {
            **scope,
            "state": {
                **scope.get("state", {}),
                "ovsite_caller": caller,
                "ovsite_key": key,
                "ovsite_actor_peer": headers.get("X-OpenViking-Actor-Peer", ""),
            },
        }
        await self.app(scope, receive, send)


class RequestIdAndMetricsMiddleware:
    """An HTTP request to /mcp gets what Django's first two middlewares give a REST request (settings.MIDDLEWARE):
    a request id by django-guid's own rule (an incoming UUID `X-Request-ID` kept, otherwise a new one), in its
    context variable for the log lines and in the answer's `X-Request-ID`; and one count and time in the request
    metrics as route `/mcp`, whatever the JSON-RPC method, ApiKeyMiddleware's refusals included. The tools' log
    lines have the id too: the SDK starts its per-request task from this one, and sync_to_async copies the context
    into Django's thread."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        started = time.perf_counter()
        request_id = get_id_from_header(Request(scope))
        token = guid.set(request_id)
        status, recorded = 500, False  # 500: raised before answering, Starlette's error handler answers

        def record():
            nonlocal recorded
            if not recorded:
                recorded = True
                record_request(
                    route=MCP_PATH,
                    method=scope["method"],
                    path=MCP_PATH,
                    status=status,
                    elapsed_s=time.perf_counter() - started,
                )

        async def send_with_id(message):
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                if guid_settings.return_header:
                    headers = MutableHeaders(scope=message)
                    headers[guid_settings.guid_header_name] = request_id
                    if guid_settings.expose_header:
                        headers["Access-Control-Expose-Headers"] = guid_settings.guid_header_name
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                record()  # before the last bytes leave, as on REST: a client holding its answer finds it counted
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            record()  # if the answer was not completed (an error, a client gone)
            guid.reset(token)


def _transport_security() -> TransportSecuritySettings:
    """DNS-rebinding protection with Django's ALLOWED_HOSTS, so /mcp accepts the hosts the rest of the site does."""
    hosts = [host for host in settings.ALLOWED_HOSTS if host != "testserver"]
    if "*" in hosts:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    return TransportSecuritySettings(
        allowed_hosts=[pattern for host in hosts for pattern in (host, f"{host}:*")],
        allowed_origins=[
            f"{scheme}://{host}{port}" for host in hosts for scheme in ("http", "https") for port in ("", ":*")
        ],
    )


def build_application(django_app) -> Starlette:
    """The ASGI app: /mcp to the MCP server (stateless streamable HTTP with JSON answers, so any worker can take
    any request), everything else to Django. A new MCP server each call: its session manager runs once."""
    server = build_server()
    mcp_app = server.streamable_http_app(
        streamable_http_path=MCP_PATH, stateless_http=True, json_response=True, transport_security=_transport_security()
    )

    @asynccontextmanager
    async def lifespan(_app):
        async with server.session_manager.run():
            yield

    mcp_endpoint = RequestIdAndMetricsMiddleware(ApiKeyMiddleware(mcp_app))
    return Starlette(routes=[Route(MCP_PATH, endpoint=mcp_endpoint), Mount("/", app=django_app)], lifespan=lifespan)
