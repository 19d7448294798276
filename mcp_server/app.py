"""The ASGI application of the MCP endpoint: /mcp to the MCP server (mcp_server/tools.py), everything else to Django.
Auth is the REST API keys' (`core.auth`), checked per HTTP request before MCP sees it, on the header lines as
received (a key header given twice, both forms, or `X_API_KEY` is refused as on REST); `X-OpenViking-Actor-Peer`
names the actor peer as on REST, and the caller's read-after-write identity is REST's (`core.replicas`). Each HTTP
request to /mcp, refused or not, has a request id and is counted as route `/mcp`, as a REST request is by Django's
middleware.
"""

import time
from contextlib import asynccontextmanager

from asgiref.sync import sync_to_async
from django.conf import settings
from django_guid.config import settings as guid_settings
from django_guid.context import guid
from django_guid.utils import get_id_from_header
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.datastructures import Headers, MutableHeaders
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route

from core.auth import Caller, authenticate_headers, require_account_caller, scope_field_lines
from core.envelope import error_envelope
from core.metrics import record_request
from core.replicas import caller_identity
from mcp_server import MCP_PATH
from mcp_server.tools import build_server, in_django


def _authenticate(headers: Headers, remote_addr: str, field_lines: list[tuple[str, str]]) -> tuple[Caller, str | None]:
    """The caller and the key it presented (None for the keyless dev caller, whom the rate limit does not count)."""
    caller, key = authenticate_headers(headers, remote_addr, field_lines) or (None, None)
    return require_account_caller(caller), key


class ApiKeyMiddleware:
    """Refuses an HTTP request to /mcp as the REST API would (401/403 with the error envelope); otherwise the
    caller rides in the ASGI scope's state to the tools, with the identity REST's ReplicaMiddleware gives the same
    request, so a REST write and an MCP read by one key (or the other way round) are read-after-write."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        client = scope.get("client") or ("",)
        headers = Headers(scope=scope)
        try:
            caller, key = await sync_to_async(in_django, thread_sensitive=True)(
                _authenticate, headers, client[0], scope_field_lines(scope)
            )
        except Exception as exc:
            status, body = error_envelope(exc)
            await JSONResponse(
                body, status_code=status, headers={"WWW-Authenticate": "Bearer"} if status == 401 else None
            )(scope, receive, send)
            return
        identity = caller_identity(headers, client[0], Request(scope).cookies.get(settings.SESSION_COOKIE_NAME, ""))
        scope = {
            **scope,
            "state": {
                **scope.get("state", {}),
                "ovsite_caller": caller,
                "ovsite_key": key,
                "ovsite_actor_peer": headers.get("X-OpenViking-Actor-Peer", ""),
                "ovsite_identity": identity,
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
