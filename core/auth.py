"""API-key authentication: `X-API-Key: K` or `Authorization: Bearer K`; dev mode when no root key is set, which
serves a direct loopback caller that sends no key as account `default`, user `default`, and issued keys as
their users.

A key comes in one header field line, once: `check_credential_headers` refuses (401, `details.reason`) a request
that gives `X-API-Key` more than once or `Authorization` more than once (`duplicate_key_header`), gives both
(`two_key_forms`), or spells a credential header's name with underscores (`X_API_KEY`: `underscore_header`, since
servers map it onto the same WSGI name as `X-API-Key`). The MCP endpoint and the REST views apply the same rule
to the header lines as the server received them: the MCP endpoint from its ASGI scope (`scope_field_lines`), the
REST views (`environ_field_lines`) from the scope a2wsgi keeps in the environ under uvicorn, or, under a WSGI server
such as gunicorn, from the two environ entries, where repeated lines arrive joined by commas and underscore names
never arrive (gunicorn drops them, its `header_map = "drop"`). A comma in a credential header's value counts as a
repeat on every server, so the rule answers alike whichever served the request; a key never contains one.
"""

import hmac
import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

from django.conf import settings
from django.db import connection
from rest_framework.authentication import BaseAuthentication
from rest_framework.permissions import BasePermission

from core.config_cache import ConfigCache, watch
from core.errors import InvalidArgument, PermissionDenied, Unauthenticated
from core.models import DEFAULT_ACCOUNT, DEFAULT_USER, Account, AccountUser, ApiKey, hash_key


@dataclass(frozen=True)
class Caller:
    """Who is calling: the account every store query is scoped to, and the user whose `viking://~` this is."""

    account_id: int
    account: str
    user_id: str
    role: str  # "root" | "admin" | "user"
    is_authenticated: bool = True
    # The root key names the account and user it acts for in two headers; the ones a root caller left out (without
    # them it reaches only the admin API).
    unnamed: tuple[str, ...] = ()

    @property
    def is_root(self) -> bool:
        return self.role == "root"


# The credential headers by their lower-case name, as their refusals name them.
CREDENTIAL_HEADERS = {"x-api-key": "X-API-Key", "authorization": "Authorization"}
# The WSGI environ's names for them: where a WSGI server (gunicorn) leaves them, its lines joined by commas.
_ENVIRON_CREDENTIALS = {"x-api-key": "HTTP_X_API_KEY", "authorization": "HTTP_AUTHORIZATION"}
SEND_THE_KEY_ONCE = "send the key in one header, once: `X-API-Key: K` or `Authorization: Bearer K`"


def check_credential_headers(field_lines: Iterable[tuple[str, str]]) -> None:
    """The one rule for how a key may come, over the request's header field lines as received, (name, value) with
    the name in any case: at most one `X-API-Key` or one `Authorization`, each once, with no comma in its value
    (repeated lines may reach the app joined by commas, RFC 9110 5.3), and no credential header's name spelt with
    underscores. Anything else is refused (Unauthenticated, with `details.reason`): which header carried the key
    would be the server's or a proxy's guess, not the client's word."""
    seen = dict.fromkeys(CREDENTIAL_HEADERS, 0)
    bearer = False
    for name, value in field_lines:
        lowered = name.lower()
        canonical = lowered.replace("_", "-")
        if canonical not in seen:
            continue
        if "_" in lowered:
            raise Unauthenticated(
                f"header {name!r} is not a credential header (header names use hyphens, not underscores); "
                f"{SEND_THE_KEY_ONCE}",
                {"reason": "underscore_header", "header": name},
            )
        seen[canonical] += 1 + value.count(",")
        bearer = bearer or (canonical == "authorization" and value.strip().lower().startswith("bearer "))
    for lowered, count in seen.items():
        if count > 1:
            header = CREDENTIAL_HEADERS[lowered]
            raise Unauthenticated(
                f"the {header} header came more than once (or held a comma-separated list); {SEND_THE_KEY_ONCE}",
                {"reason": "duplicate_key_header", "header": header},
            )
    # Another scheme beside X-API-Key (Basic for a proxy in front, the SDK's ldap and oidc modes) carries no key.
    if seen["x-api-key"] and bearer:
        raise Unauthenticated(
            f"the request carried both X-API-Key and Authorization: Bearer; {SEND_THE_KEY_ONCE}",
            {"reason": "two_key_forms", "headers": list(CREDENTIAL_HEADERS.values())},
        )


def scope_field_lines(scope) -> list[tuple[str, str]]:
    """An ASGI scope's header field lines as received (uvicorn lower-cases the names, nothing more)."""
    return [(name.decode("latin-1"), value.decode("latin-1")) for name, value in scope.get("headers", ())]


def environ_field_lines(environ) -> list[tuple[str, str]]:
    """A WSGI request's header field lines for the rule: as received when the app runs under a2wsgi (ovsite/asgi.py
    keeps the ASGI scope in the environ); under a WSGI server, the credential headers' environ entries, where the
    server has joined repeated lines with commas and (gunicorn) dropped names with underscores."""
    scope = environ.get("asgi.scope")
    if scope is not None:
        return scope_field_lines(scope)
    return [(name, environ[key]) for name, key in _ENVIRON_CREDENTIALS.items() if key in environ]


def _presented_key(headers) -> str:
    key = headers.get("X-API-Key", "")
    if not key:
        scheme, _, token = headers.get("Authorization", "").partition(" ")
        if scheme.lower() == "bearer":
            key = token.strip()
    return key.strip()


def _is_loopback(remote_addr: str) -> bool:
    try:
        return ipaddress.ip_address(remote_addr).is_loopback
    except ValueError:
        return False


# Authentication runs on every request; plain SQL on the unique indexes costs a fraction of composing and
# compiling the equivalent ORM joins (bench/RESULTS.md, profile of /find).
_MEMBER_SQL = (
    f"SELECT u.account_id FROM {AccountUser._meta.db_table} u JOIN {Account._meta.db_table} a "
    f"ON a.id = u.account_id WHERE a.name = %s AND u.user_id = %s"
)
_ACCOUNT_SQL = f"SELECT id FROM {Account._meta.db_table} WHERE name = %s"
_KEY_SQL = (
    f"SELECT k.key_hash, u.account_id, a.name, u.user_id, u.role FROM {ApiKey._meta.db_table} k "
    f"JOIN {AccountUser._meta.db_table} u ON u.id = k.user_id JOIN {Account._meta.db_table} a "
    f"ON a.id = u.account_id WHERE k.key_hash = %s AND k.revoked_at IS NULL"
)


def _fetch_one(sql: str, params: list):
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()


# What the lookups below found, per process (core/config_cache.py): a change to a key, a user or an account made
# here clears it at once, one made in another process is seen within OVSITE_CONFIG_CACHE_SECONDS. Only rows that
# exist are kept, so a key nobody issued is looked up (and refused) every time, and a key issued elsewhere works at
# once.
_FOUND = ConfigCache("auth")
watch(_FOUND, Account, AccountUser, ApiKey)


def _found(sql: str, params: list):
    return _FOUND.get((sql, *params), lambda: _fetch_one(sql, params), keep_none=False)


def _caller_for_names(account_name: str, user_id: str, role: str) -> Caller:
    if role != "root":
        member = _found(_MEMBER_SQL, [account_name, user_id])
        if member is not None:
            return Caller(member[0], account_name, user_id, role)
    account, _ = Account.objects.get_or_create(name=account_name)
    if role != "root":
        AccountUser.objects.get_or_create(account=account, user_id=user_id, defaults={"role": "admin"})
    return Caller(account.id, account.name, user_id, role)


ACCOUNT_HEADER, USER_HEADER = "X-OpenViking-Account", "X-OpenViking-User"


def _root_caller(headers) -> Caller:
    """The root key may act inside any account, for the user OpenViking's X-OpenViking-Account/User headers name."""
    named_account = headers.get(ACCOUNT_HEADER, "").strip()
    named_user = headers.get(USER_HEADER, "").strip()
    account_name, user_id = named_account or DEFAULT_ACCOUNT, named_user or DEFAULT_USER
    unnamed = tuple(
        header for header, value in ((ACCOUNT_HEADER, named_account), (USER_HEADER, named_user)) if not value
    )
    found = _found(_ACCOUNT_SQL, [account_name])
    if found is not None:
        return Caller(found[0], account_name, user_id, "root", unnamed=unnamed)
    if account_name != DEFAULT_ACCOUNT:
        return Caller(0, account_name, user_id, "root", unnamed=unnamed)
    account, _ = Account.objects.get_or_create(name=DEFAULT_ACCOUNT)
    return Caller(account.id, account.name, user_id, "root", unnamed=unnamed)


# Headers a reverse proxy adds. Behind one, every caller reaches the server from the proxy's address, often
# loopback: dev mode would serve the whole network as its keyless caller.
PROXY_HEADERS = ("Forwarded", "X-Forwarded-For", "X-Real-IP")
SET_ROOT_KEY = "set a root key (OVSITE_ROOT_API_KEY=<secret> make run) and call with keys that the admin API issues"


def _check_dev_mode_caller(headers, remote_addr: str, key: str) -> None:
    """Dev mode serves one caller: a direct loopback one with no key. What else it refuses, it refuses with the
    way out, since the usual cause is a server put behind a proxy or on the network without a root key."""
    proxied = [name for name in PROXY_HEADERS if name in headers]
    if proxied:
        raise Unauthenticated(
            f"dev mode (no OVSITE_ROOT_API_KEY) serves only direct loopback callers, and this request came through "
            f"a proxy ({', '.join(proxied)}); to serve through a proxy, {SET_ROOT_KEY}",
            {"reason": "dev_mode_proxied", "proxy_headers": proxied},
        )
    if not key and not _is_loopback(remote_addr):
        raise Unauthenticated(
            f"dev mode (no OVSITE_ROOT_API_KEY) serves only loopback callers; to serve other hosts, {SET_ROOT_KEY}",
            {"reason": "dev_mode_not_loopback"},
        )


def authenticate_headers(
    headers, remote_addr: str, field_lines: Iterable[tuple[str, str]]
) -> tuple[Caller, str | None] | None:
    """(caller, the key presented) from request headers, or None when no key came and a root key is set.
    Shared by the REST views (DRF) and the MCP endpoint; `headers` is any case-insensitive mapping, `field_lines`
    the same request's header lines as received (`scope_field_lines`, `environ_field_lines`)."""
    check_credential_headers(field_lines)
    key = _presented_key(headers)
    root_key = settings.OVSITE_ROOT_API_KEY
    if not root_key:
        _check_dev_mode_caller(headers, remote_addr, key)
        if not key:
            return _caller_for_names(DEFAULT_ACCOUNT, DEFAULT_USER, "admin"), None
    elif not key:
        return None
    if root_key and hmac.compare_digest(key.encode(), root_key.encode()):
        return _root_caller(headers), key
    # The digest is looked up by a unique index; the final compare is constant-time. A key nobody issued is
    # refused in dev mode too: taking it for the dev caller would hide a client's wrong key until production.
    digest = hash_key(key)
    row = _found(_KEY_SQL, [digest])
    if row is None or not hmac.compare_digest(row[0], digest):
        raise Unauthenticated("invalid or revoked API key")
    _, account_id, account_name, user_id, role = row
    return Caller(account_id, account_name, user_id, role), key


def require_account_caller(caller: Caller | None) -> Caller:
    """A caller that may use the store: authenticated, in an account that exists, as a user it names. The root key
    without the account and user headers is refused with the headers to send, rather than answering for an account
    and user the client never named (an empty result that says nothing)."""
    if caller is None:
        raise Unauthenticated("an API key is required (X-API-Key or Authorization: Bearer)")
    if caller.account_id == 0:
        raise PermissionDenied(f"account {caller.account!r} does not exist")
    if caller.unnamed:
        message = (
            f"the root key reaches the store as the user it names: send {ACCOUNT_HEADER}: <account> and "
            f"{USER_HEADER}: <user> with it (this request left out {' and '.join(caller.unnamed)}), or call with "
            f"that user's own key"
        )
        errors = [
            {"loc": ["header", header], "message": f"{header} is required with the root key", "type": "missing"}
            for header in caller.unnamed
        ]
        raise InvalidArgument(
            message,
            details={"validation_errors": errors, "reason": "root_key_names_no_user", "headers": list(caller.unnamed)},
        )
    return caller


class ApiKeyAuthentication(BaseAuthentication):
    def authenticate(self, request):
        return authenticate_headers(
            request.headers, request.META.get("REMOTE_ADDR", ""), environ_field_lines(request.META)
        )

    def authenticate_header(self, request):
        return "Bearer"


class IsAccountCaller(BasePermission):
    def has_permission(self, request, view):
        require_account_caller(request.user)
        return True


class IsRoot(BasePermission):
    def has_permission(self, request, view):
        caller = request.user
        if caller is None:
            raise Unauthenticated("the root API key is required")
        # Dev mode (no root key) lets the keyless loopback caller administer; a presented account key never
        # may, or any account's admin could add users to another account and take their keys.
        dev_caller = not settings.OVSITE_ROOT_API_KEY and request.auth is None and caller.role == "admin"
        if not caller.is_root and not dev_caller:
            raise PermissionDenied("the admin API needs the root key")
        return True
