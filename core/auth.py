"""API-key authentication: `X-API-Key: K` or `Authorization: Bearer K`; dev mode when no root key is set, which
serves a direct loopback caller that sends no key as account `default`, user `default`, and issued keys as
their users."""

import hmac
import ipaddress
from dataclasses import dataclass

from django.conf import settings
from django.db import connection
from rest_framework.authentication import BaseAuthentication
from rest_framework.permissions import BasePermission

from core.errors import PermissionDenied, Unauthenticated
from core.models import DEFAULT_ACCOUNT, DEFAULT_USER, Account, AccountUser, ApiKey, hash_key


@dataclass(frozen=True)
class Caller:
    """Who is calling: the account every store query is scoped to, and the user whose `viking://~` this is."""

    account_id: int
    account: str
    user_id: str
    role: str  # "root" | "admin" | "user"
    is_authenticated: bool = True

    @property
    def is_root(self) -> bool:
        return self.role == "root"


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
_KEY_SQL = (
    f"SELECT k.key_hash, u.account_id, a.name, u.user_id, u.role FROM {ApiKey._meta.db_table} k "
    f"JOIN {AccountUser._meta.db_table} u ON u.id = k.user_id JOIN {Account._meta.db_table} a "
    f"ON a.id = u.account_id WHERE k.key_hash = %s AND k.revoked_at IS NULL"
)


def _fetch_one(sql: str, params: list):
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()


def _caller_for_names(account_name: str, user_id: str, role: str) -> Caller:
    if role != "root":
        member = _fetch_one(_MEMBER_SQL, [account_name, user_id])
        if member is not None:
            return Caller(member[0], account_name, user_id, role)
    account, _ = Account.objects.get_or_create(name=account_name)
    if role != "root":
        AccountUser.objects.get_or_create(account=account, user_id=user_id, defaults={"role": "admin"})
    return Caller(account.id, account.name, user_id, role)


def _root_caller(headers) -> Caller:
    """The root key may act inside any account (OpenViking's X-OpenViking-Account/User headers)."""
    account_name = headers.get("X-OpenViking-Account", "").strip() or DEFAULT_ACCOUNT
    user_id = headers.get("X-OpenViking-User", "").strip() or DEFAULT_USER
    account = Account.objects.filter(name=account_name).first()
    if account is None:
        if account_name != DEFAULT_ACCOUNT:
            return Caller(0, account_name, user_id, "root")
        account = Account.objects.create(name=DEFAULT_ACCOUNT)
    return Caller(account.id, account.name, user_id, "root")


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


def authenticate_headers(headers, remote_addr: str) -> tuple[Caller, str | None] | None:
    """(caller, the key presented) from request headers, or None when no key came and a root key is set.
    Shared by the REST views (DRF) and the MCP endpoint; `headers` is any case-insensitive mapping."""
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
    row = _fetch_one(_KEY_SQL, [digest])
    if row is None or not hmac.compare_digest(row[0], digest):
        raise Unauthenticated("invalid or revoked API key")
    _, account_id, account_name, user_id, role = row
    return Caller(account_id, account_name, user_id, role), key


def require_account_caller(caller: Caller | None) -> Caller:
    """A caller that may use the store: authenticated, in an account that exists."""
    if caller is None:
        raise Unauthenticated("an API key is required (X-API-Key or Authorization: Bearer)")
    if caller.account_id == 0:
        raise PermissionDenied(f"account {caller.account!r} does not exist")
    return caller


class ApiKeyAuthentication(BaseAuthentication):
    def authenticate(self, request):
        return authenticate_headers(request.headers, request.META.get("REMOTE_ADDR", ""))

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
