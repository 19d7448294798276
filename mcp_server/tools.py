"""The MCP tools, over the service functions the REST views call. `find`, `search` and `recall` take their REST
route's body as it is: their input schema is the REST serializer's (mcp_server/schemas.py) and the serializer alone
validates, so bad input is the REST error envelope, as a tool error. The other tools build their REST request's
parts and validate them with the same serializers. Context tools return the `rendered` text (the digest when one was
written), `recall` with the deprecated v1 aliases it was given in `_meta`; the others compact JSON.

Each tool call counts against its key's rate limit, on the REST throttle's own counter (profiles/throttling.py), and
in the request metrics as route `mcp:<tool>` (core/metrics.py); an assembly's recall event names its endpoint
`mcp:<tool>` too (`mcp:bootstrap` for a bootstrap by either tool). The caller, its key, its read-after-write identity
and the actor peer come in the request's state from mcp_server/app.py.

A tool reads a replica when its REST twin's route does, and marks its caller for read-after-write when that route
would (`core.replicas.route_reads`, docs/operations.md "Read replicas"); a successful replica-eligible call names
the server that served its reads in `_meta` as `ovsite/served_by`, where REST answers `X-Ovsite-Served-By`.

The ORM is synchronous: every tool runs in Django's thread-sensitive executor, as Django runs sync views under ASGI,
with the same connection housekeeping around it.
"""

import json
import math
import time
import uuid
from dataclasses import dataclass
from typing import Any, Literal

from asgiref.sync import sync_to_async
from django.db import close_old_connections
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase, FuncMetadata
from mcp.types import CallToolResult, TextContent
from pydantic import ConfigDict

from assembly.requests import SearchRequest
from assembly.service import run_recall, run_search
from core.api import parse
from core.auth import Caller
from core.envelope import error_envelope
from core.errors import InvalidArgument, ResourceExhausted
from core.metrics import record_request
from core.replicas import route_reads
from mcp_server import MCP_PATH
from mcp_server.schemas import request_schema
from profiles.throttling import admit_key
from retrieval import selectors
from retrieval.requests import FindRequest, LsParams, find_query_from
from retrieval.search.find import find as find_hits
from sessions_app import services
from sessions_app.requests import BatchMessagesRequest, CommitRequest, parse_session_id

DEPRECATED_META = "ovsite/deprecated"  # the recall tool's `_meta` key naming the v1 aliases a call used
SERVED_BY_META = "ovsite/served_by"  # `primary` or the replica's alias, as REST's X-Ovsite-Served-By
# Each tool's REST twin (method, path): its route decides the tool's replica reads and read-after-write.
FIND_ROUTE = ("POST", "/api/v1/search/find")
SEARCH_ROUTE = ("POST", "/api/v1/search/search")
RECALL_ROUTE = ("POST", "/api/v1/search/recall")
READ_ROUTES = {
    "abstract": ("GET", "/api/v1/content/abstract"),
    "overview": ("GET", "/api/v1/content/overview"),
    "full": ("GET", "/api/v1/content/read"),
}
LS_ROUTE = ("GET", "/api/v1/fs/ls")
REMEMBER_ROUTE = ("POST", "/api/v1/sessions/<session_id>/commit")
READ_LEVELS = {"abstract": selectors.read_abstract, "overview": selectors.read_overview}
# The most URIs one `read` call takes, as REST caps its lists (/search's exclude_uris): each is a read of its own.
READ_URIS_MAX = 200
INSTRUCTIONS = (
    "ovsite stores memories, resources and skills under viking:// URIs. Call bootstrap once at session "
    "start, recall before a turn that may depend on the past, search or find to look something up, "
    "read to expand a URI, ls to browse, remember to keep what was said."
)


def in_django(function, *args, **kwargs):
    """`function` as Django runs a request: stale connections closed before and after."""
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


@dataclass(frozen=True)
class Answer:
    """A tool body's text, with `_meta` for the client rather than the model (a body may return the text alone)."""

    text: str
    meta: dict | None = None


def _admitted(function, *, key: str | None, identity: str, route: tuple[str, str], **kwargs) -> Answer:
    """The tool body, once the key's rate limit lets the call through, its reads routed as its REST twin's. The
    replica scope opens before the rate-limit counter is written, as ReplicaMiddleware's does."""
    with route_reads(identity, *route) as scope:
        wait = admit_key(key)
        if wait is not None:
            retry_after = max(1, math.ceil(wait))
            raise ResourceExhausted(f"rate limited, retry after {retry_after} s", {"retry_after_s": retry_after})
        answer = function(**kwargs)
    answer = answer if isinstance(answer, Answer) else Answer(answer)
    if scope is None:
        return answer
    return Answer(answer.text, {**(answer.meta or {}), SERVED_BY_META: scope.served_by})


async def _call(ctx: Context, tool: str, route: tuple[str, str], function, **kwargs) -> CallToolResult:
    """Runs a tool body with the request's caller, as a request to its REST twin `route` (method, path); an error
    becomes a tool error whose text is the REST answer's envelope (`{"status": "error", "error": {code, message,
    details}}`), unprefixed, so a client can parse it.

    A call over the rate limit is such a tool error too (429's `RESOURCE_EXHAUSTED`, with `details.retry_after_s`),
    not an HTTP 429: the model sees why and when to retry, and the client's session goes on; the protocol's own
    requests (initialize, tools/list) are not counted, as only tool calls do work."""
    state = _state(ctx)
    started = time.perf_counter()
    try:
        answer = await sync_to_async(in_django, thread_sensitive=True)(
            _admitted,
            function,
            key=state.ovsite_key,
            identity=state.ovsite_identity,
            route=route,
            caller=state.ovsite_caller,
            **kwargs,
        )
    except Exception as exc:
        # without the request id: the text goes to the model, and the HTTP answer's X-Request-ID names the request
        status, body = error_envelope(exc, with_request_id=False)
        result = CallToolResult(content=[TextContent(type="text", text=_compact(body))], is_error=True)
    else:
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
    if len(uris) > READ_URIS_MAX:
        raise InvalidArgument(f"uris names at most {READ_URIS_MAX} URIs, not {len(uris)}", loc=["uris"])
    read = READ_LEVELS.get(level, selectors.read_content)
    return _compact([{"uri": uri, "level": level, "content": read(caller=caller, uri=uri)} for uri in uris])


def _ls(*, caller: Caller, body: dict) -> str:
    params = parse(LsParams, body)
    entries, more = selectors.list_children(
        caller=caller,
        uri=params["uri"],
        recursive=params["recursive"],
        node_limit=params["node_limit"],
        offset=params["offset"],
        abs_limit=params["abs_limit"],
    )
    return _compact({"entries": entries, "has_more": more})


def _remember(
    *, caller: Caller, session_id: str | None, messages: list, keep_recent_count: int, actor_peer: str
) -> str:
    session_id = parse_session_id(session_id or uuid.uuid4().hex)
    parsed = parse(BatchMessagesRequest, {"messages": messages})["messages"]
    keep = parse(CommitRequest, {"keep_recent_count": keep_recent_count})["keep_recent_count"]
    return _compact(
        services.remember(
            caller=caller,
            session_id=session_id,
            messages=[services.message_from(**m) for m in parsed],
            keep_recent_count=keep,
            actor_peer=actor_peer,
        )
    )


class RequestBody(ArgModelBase):
    """A body tool's arguments: whatever the client sent, passed on whole as the REST request body. The REST
    serializer is the one validation; a pydantic one before it would answer bad input in other words."""

    model_config = ConfigDict(extra="allow")

    def model_dump_one_level(self) -> dict:
        return {"body": dict(self.model_extra or {})}


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
        return await _call(ctx, "find", FIND_ROUTE, _find, body=body)

    async def search(ctx: Context, body: dict) -> CallToolResult:
        return await _call(ctx, "search", SEARCH_ROUTE, _search, body=body, actor_peer=_state(ctx).ovsite_actor_peer)

    async def recall(ctx: Context, body: dict) -> CallToolResult:
        return await _call(ctx, "recall", RECALL_ROUTE, _recall, body=body, actor_peer=_state(ctx).ovsite_actor_peer)

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
    schemas = {"find": request_schema(FindRequest), "search": request_schema(SearchRequest)}
    server = MCPServer("ovsite", instructions=INSTRUCTIONS, tools=_body_tools(schemas))

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
        return await _call(ctx, "bootstrap", SEARCH_ROUTE, _search, body=body, actor_peer=_state(ctx).ovsite_actor_peer)

    @server.tool(
        description=f"The content of viking:// URIs (1 to {READ_URIS_MAX} in one call) at one level (abstract, "
        "overview or full), as compact JSON [{uri, level, content}]."
    )
    async def read(
        ctx: Context, uris: list[str], level: Literal["abstract", "overview", "full"] = "full"
    ) -> CallToolResult:
        return await _call(ctx, "read", READ_ROUTES[level], _read, uris=uris, level=level)

    @server.tool(description="The children of a viking:// directory (/api/v1/fs/ls), as compact JSON.")
    async def ls(
        ctx: Context, uri: str = "viking://", recursive: bool = False, node_limit: int | None = None
    ) -> CallToolResult:
        return await _call(ctx, "ls", LS_ROUTE, _ls, body=_body(uri=uri, recursive=recursive, node_limit=node_limit))

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
            REMEMBER_ROUTE,
            _remember,
            session_id=session_id,
            messages=messages,
            keep_recent_count=keep_recent_count,
            actor_peer=_state(ctx).ovsite_actor_peer,
        )

    return server
