"""Reads of the search routes on PostgreSQL read replicas (docs/operations.md, "Read replicas").

`DATABASE_REPLICA_URLS` names streaming standbys of the primary (`DATABASE_URL`); settings make each one a database
alias, `replica_0`, `replica_1`, …, with the primary's connection options (`replica_databases`). A read goes to a
replica only inside a replica-eligible scope: `ReplicaMiddleware` opens one around the search routes
(settings.REPLICA_READ_PATHS), `route_reads` around an MCP tool as around its REST twin, `replica_reads` around any
other search. In a scope `ReplicaRouter` sends the ORM's reads of the searched apps (settings.REPLICA_READ_APPS) to
the scope's replica, and `read_connection()` gives the search's raw SQL the same connection.

The primary serves everything else: every write, a read inside a transaction, a read of a model the request itself
wrote, every read of a caller that wrote within OVSITE_REPLICA_STICKY_SECONDS (read-after-write, remembered in the
shared cache, so every web node knows), and every read when no replica is usable. A replica that cannot be reached
is skipped for OVSITE_REPLICA_DOWN_SECONDS and the request reads the primary instead; one more than
OVSITE_REPLICA_MAX_LAG_SECONDS behind the primary is skipped until it has caught up. A replica lost after it was
chosen, under one of the request's reads (its server died, the connection was cut), is marked down the same way and
the read runs on the primary, as do the request's next ones (`reads_primary_instead`, through the replicas' database
backend, core.replica_backend). A search response names the server that answered its reads in `X-Ovsite-Served-By`:
`primary` (also when its replica was lost under it) or the replica's alias.
"""

import copy
import hashlib
import logging
import math
import random
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from contextvars import ContextVar
from dataclasses import dataclass, field

import environ
from django.conf import settings
from django.core.cache import cache
from django.core.exceptions import ImproperlyConfigured
from django.db import DEFAULT_DB_ALIAS, DatabaseError, InterfaceError, OperationalError, connections

logger = logging.getLogger(__name__)

REPLICA_PREFIX = "replica_"
REPLICA_ENGINE = "core.replica_backend"  # Django's PostgreSQL backend, its reads falling back to the primary
SERVED_BY_HEADER = "X-Ovsite-Served-By"
PRIMARY = "primary"  # the header's value when the primary served the reads
STICKY_KEY = "ovsite:replica-sticky:"
# How long a replica's measured lag is trusted: one pair of short queries a second per process, not per request.
LAG_CHECK_SECONDS = 1.0
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})
# Run on the replica with the primary's WAL flush position as the request began: the bytes of that WAL it has not
# replayed yet, and the age of the last transaction it replayed. With synchronous_commit on (the default) every
# transaction committed before the request is at or below that position: a replica that has replayed up to it misses
# nothing the request could have seen on the primary, however old its last transaction (an idle primary). Read
# later, the position would include the request's own rate-limit counter: after an idle spell the replica would
# look as far behind as its last transaction is old, while it is a millisecond from replaying it.
LAG_SQL = (
    "SELECT pg_is_in_recovery(), pg_wal_lsn_diff(%s::pg_lsn, pg_last_wal_replay_lsn()), "
    "extract(epoch FROM clock_timestamp() - pg_last_xact_replay_timestamp())::float8"
)
# SQLSTATEs after which a server has ended the session: connection exceptions (class 08), and its shutdown or crash
# (57P01 admin_shutdown, also what a backend says when its postmaster died; 57P02 crash_shutdown; 57P03).
SESSION_ENDED_SQLSTATES = ("08", "57P01", "57P02", "57P03")


def replica_databases(urls: str, primary: dict) -> dict[str, dict]:
    """The database aliases of `DATABASE_REPLICA_URLS` (comma-separated): each URL's server, user and database
    with the primary's connection settings (its OPTIONS first, the URL's own query options over them). Tests never
    create a database on a replica: a replica mirrors the primary's test database."""
    databases = {}
    for index, url in enumerate(url.strip() for url in urls.split(",") if url.strip()):
        config = environ.Env.db_url_config(url)
        if config.get("ENGINE") != "django.db.backends.postgresql":
            raise ImproperlyConfigured(
                f"DATABASE_REPLICA_URLS entry {index} is not a PostgreSQL URL (postgres://user@host:port/name)"
            )
        options = copy.deepcopy(primary.get("OPTIONS", {}))
        options.update(config.pop("OPTIONS", {}))
        databases[f"{REPLICA_PREFIX}{index}"] = {
            **config,
            "ENGINE": REPLICA_ENGINE,
            "OPTIONS": options,
            "CONN_MAX_AGE": primary.get("CONN_MAX_AGE", 0),
            "CONN_HEALTH_CHECKS": primary.get("CONN_HEALTH_CHECKS", False),
            # Every result read whole as its statement runs, none fetched in parts from a server-side cursor
            # (QuerySet.iterator): a replica lost under a read fails the statement, which then runs on the primary,
            # never after some of its rows were handed out.
            "DISABLE_SERVER_SIDE_CURSORS": True,
            "TEST": {"MIRROR": DEFAULT_DB_ALIAS},
        }
    return databases


def replica_aliases() -> list[str]:
    return [alias for alias in settings.DATABASES if alias.startswith(REPLICA_PREFIX)]


@dataclass
class ReadScope:
    """One replica-eligible request: who calls, what it wrote, and where its reads go (chosen at the first)."""

    identity: str
    # (when read, the primary's WAL flush position) as the scope opened, when a replica's lag is due
    primary_position: tuple[float, str] | None = None
    written: set[str] = field(default_factory=set)  # labels of the models the request wrote
    alias: str | None = None
    replica_read: bool = False
    lost: str | None = None  # the replica lost under one of the scope's reads, which then went to the primary

    @property
    def served_by(self) -> str:
        return self.alias if self.replica_read and self.alias else PRIMARY


_scope: ContextVar[ReadScope | None] = ContextVar("ovsite_replica_scope", default=None)


@contextmanager
def replica_reads(identity: str) -> Iterator[ReadScope]:
    """A replica-eligible scope for a search by `identity` (see `caller_identity`), opened before the request
    writes anything (its rate-limit counter included). A scope that wrote makes its caller read the primary for
    the sticky window, as a write route does."""
    scope = ReadScope(identity, _primary_position_if_due())
    token = _scope.set(scope)
    try:
        yield scope
    finally:
        _scope.reset(token)
        if scope.written:
            note_write(identity)


@contextmanager
def route_reads(identity: str, method: str, path: str) -> Iterator[ReadScope | None]:
    """What ReplicaMiddleware does around a request to `method path`, for work that answers as that route outside
    Django's middleware (an MCP tool): a search route's work in a replica-eligible scope (yielded); any other work
    by an unsafe method that completes without raising makes its caller read the primary for the sticky window."""
    if path in settings.REPLICA_READ_PATHS:
        with replica_reads(identity) as scope:
            yield scope
        return
    yield None
    if method not in SAFE_METHODS:
        note_write(identity)


def read_alias() -> str:
    """The database the current search's next read goes to: its scope's replica, or the primary."""
    scope = _scope.get()
    if scope is None or connections[DEFAULT_DB_ALIAS].in_atomic_block:
        return DEFAULT_DB_ALIAS
    if scope.alias is None:
        scope.alias = _choose(scope)
    if scope.alias != DEFAULT_DB_ALIAS:
        scope.replica_read = True
    return scope.alias


def read_connection():
    """The connection for a search's raw SQL: what `django.db.connection` is for the primary."""
    return connections[read_alias()]


def read_cursor(cursor_class=None):
    """A cursor for a search's raw SQL on `read_connection()`: `connection.cursor()`, or with `cursor_class` (a
    psycopg cursor class: the server-binding one, which prepares) a cursor of that class with the same checks. On a
    replica lost while connecting here or when a statement runs, the read goes to the primary
    (`reads_primary_instead`)."""
    connection = read_connection()
    if cursor_class is None:
        return connection.cursor()
    try:
        return _cursor_of(connection, cursor_class)
    except (OperationalError, InterfaceError) as error:
        if not reads_primary_instead(connection, error):
            raise
    return primary_cursor(cursor_class)


def primary_cursor(cursor_class=None):
    """A cursor of the primary for a read its replica could not answer, of `cursor_class` as `read_cursor`'s."""
    return _cursor_of(connections[DEFAULT_DB_ALIAS], cursor_class)


def _cursor_of(connection, cursor_class):
    if cursor_class is None:
        return connection.cursor()
    # What `connection.cursor()` does, over a cursor of this class: health check, connection, thread sharing, logging.
    connection.close_if_health_check_failed()
    connection.ensure_connection()
    connection.validate_thread_sharing()
    with connection.wrap_database_errors:
        cursor = cursor_class(connection.connection)
    return connection.make_debug_cursor(cursor) if connection.queries_logged else connection.make_cursor(cursor)


def reads_primary_instead(connection, error: Exception) -> bool:
    """Whether a read that failed with `error` on replica `connection` goes to the primary: yes when the replica is
    the current scope's (chosen, or lost earlier in the scope) and is lost (`_replica_lost`). The replica is then
    marked down, and this read and the scope's next ones go to the primary. Any other error is the request's: a
    syntax error or a statement timeout on the replica, and every error on the primary. Not a read of a scope: the
    probes of `_usable`, which run before a replica is chosen and mark it down themselves."""
    scope = _scope.get()
    if scope is None or connection.alias not in (scope.alias, scope.lost):
        return False
    if not _replica_lost(connection, error):
        return False
    if scope.lost is None:
        scope.lost, scope.alias, scope.replica_read = connection.alias, DEFAULT_DB_ALIAS, False
        # Its broken connection is left for Django to drop as the request ends (it checks one that saw an error).
        # Closed here, a later use of this alias in the request would connect to the lost server again, which can
        # take OVSITE_DB_CONNECT_TIMEOUT on a host that vanished; broken, it fails at once and reads the primary.
        _mark_down(connection, error, close=False)
    return True


def _replica_lost(connection, error: Exception) -> bool:
    """Whether `error` says the replica can no longer be read through `connection` (its server died or shut down,
    the connection was cut, refused, timed out or never made), rather than that the statement failed: a server's
    error on a session it keeps open (a syntax error, a cancelled statement, a recovery conflict) is the statement's.
    The libpq messages vary with the moment the server dies (the backend's 'terminating connection due to unexpected
    postmaster exit' on the statement, 'server closed the connection unexpectedly' on sending it or reading its
    result, 'the connection is closed' after), so the connection's state and the SQLSTATE decide, not the text."""
    if not isinstance(error, (OperationalError, InterfaceError)):
        return False
    session = connection.connection
    sqlstate = getattr(error.__cause__, "sqlstate", None)
    if session is None or session.closed:  # never made, or ended: psycopg closes a connection whose server left
        return True
    if sqlstate is None:  # raised by the client library, not by the server: the connection failed
        return isinstance(error, OperationalError)
    return sqlstate.startswith(SESSION_ENDED_SQLSTATES)


class ReplicaRouter:
    """settings.DATABASE_ROUTERS: reads of the searched apps inside a replica-eligible scope go where `read_alias`
    says; everything else, and every write and migration, goes to the primary."""

    def db_for_read(self, model, **hints):
        scope = _scope.get()
        if scope is None or model._meta.app_label not in settings.REPLICA_READ_APPS:
            return DEFAULT_DB_ALIAS
        if model._meta.label in scope.written:  # read-after-write inside the request
            return DEFAULT_DB_ALIAS
        return read_alias()

    def db_for_write(self, model, **hints):
        scope = _scope.get()
        if scope is not None and model._meta.app_label in settings.REPLICA_READ_APPS:
            scope.written.add(model._meta.label)
        return DEFAULT_DB_ALIAS

    def allow_relation(self, obj1, obj2, **hints):
        return True  # every alias is the same data

    def allow_migrate(self, db, app_label, model_name=None, **hints):
        return db == DEFAULT_DB_ALIAS


class ReplicaMiddleware:
    """Opens a replica-eligible scope around the search routes and names the server that answered in the
    response; remembers, after any other request that wrote, that its caller reads the primary for a while."""

    def __init__(self, get_response):
        self.get_response = get_response
        self.read_paths = frozenset(settings.REPLICA_READ_PATHS)

    def __call__(self, request):
        if request.path_info in self.read_paths:
            with replica_reads(request_identity(request)) as scope:
                response = self.get_response(request)
            response[SERVED_BY_HEADER] = scope.served_by
            return response
        response = self.get_response(request)
        if request.method not in SAFE_METHODS and response.status_code < 400:
            note_write(request_identity(request))
        return response


def caller_identity(headers, remote_addr: str, session_key: str = "") -> str:
    """Whom a read-after-write window belongs to, from the request alone (no database): the API key presented, or
    the console's session, or the address of a keyless (dev mode) caller. Hashed: the cache never holds a key."""
    credential = headers.get("X-API-Key", "") + "\0" + headers.get("Authorization", "")
    if credential == "\0":
        credential = f"session:{session_key}" if session_key else f"addr:{remote_addr}"
    return hashlib.sha256(credential.encode()).hexdigest()[:32]


def request_identity(request) -> str:
    return caller_identity(
        request.headers, request.META.get("REMOTE_ADDR", ""), request.COOKIES.get(settings.SESSION_COOKIE_NAME, "")
    )


def note_write(identity: str) -> None:
    """`identity` wrote: its reads go to the primary for OVSITE_REPLICA_STICKY_SECONDS, on every web node."""
    if not replica_aliases():
        return
    try:
        cache.set(STICKY_KEY + identity, 1, timeout=settings.OVSITE_REPLICA_STICKY_SECONDS)
    except Exception:  # any cache backend's failure: the write itself succeeded and its answer must say so
        logger.warning("could not remember a write for read-after-write; the caller may read a replica", exc_info=True)


def _choose(scope: ReadScope) -> str:
    aliases = replica_aliases()
    if not aliases or cache.get(STICKY_KEY + scope.identity) is not None:
        return DEFAULT_DB_ALIAS
    start = random.randrange(len(aliases))  # spreads the requests over the replicas
    for alias in aliases[start:] + aliases[:start]:
        if _usable(alias, scope.primary_position):
            return alias
    return DEFAULT_DB_ALIAS


_down_until: dict[str, float] = {}  # alias → monotonic time until which it is skipped (per process)
_lag_read: dict[str, tuple[float, float]] = {}  # alias → (when measured, seconds behind the primary)
_caught_up_at: dict[str, float] = {}  # alias → when the primary was at a position the replica has since replayed


def _lag_due(alias: str, now: float) -> bool:
    read = _lag_read.get(alias)
    return read is None or now - read[0] >= LAG_CHECK_SECONDS


def _primary_position_if_due() -> tuple[float, str] | None:
    """(now, the primary's WAL flush position), when a replica's lag is due to be measured again (at most once a
    second per process); None otherwise, or when the primary fails here (the request then fails on it as it
    would)."""
    now = time.monotonic()
    if not any(_lag_due(alias, now) for alias in replica_aliases()):
        return None
    with suppress(DatabaseError):
        return now, _primary_flush_lsn()
    return None


def _usable(alias: str, primary_position: tuple[float, str] | None) -> bool:
    now = time.monotonic()
    if _down_until.get(alias, 0.0) > now:
        return False
    read = _lag_read.get(alias)
    due = _lag_due(alias, now)
    if due and primary_position is None:
        # Read on the primary and outside the try: a primary that fails fails the request, whatever the replica.
        primary_position = now, _primary_flush_lsn()
    connection = connections[alias]
    try:
        # A connection kept from an earlier request is checked first: a replica that died since then is noticed
        # here, before the search's statements, and the request reads the primary instead.
        connection.close_if_health_check_failed()
        connection.ensure_connection()
        if due:
            read = _lag_read[alias] = (now, _replica_lag(connection, *primary_position))
    except DatabaseError as error:
        _mark_down(connection, error, close=True)
        return False
    if read[1] > settings.OVSITE_REPLICA_MAX_LAG_SECONDS:
        logger.info("read replica %s is %.1f s behind the primary; reads go to the primary", alias, read[1])
        return False
    return True


def _mark_down(connection, error: Exception, close: bool) -> None:
    """`connection`'s replica is skipped by this process for OVSITE_REPLICA_DOWN_SECONDS: every thread's next
    request reads the primary (a request already reading it falls back on its own, `reads_primary_instead`)."""
    _down_until[connection.alias] = time.monotonic() + settings.OVSITE_REPLICA_DOWN_SECONDS
    _lag_read.pop(connection.alias, None)
    if close:
        with suppress(DatabaseError):
            connection.close()
    logger.warning(
        "read replica %s is unreachable; its reads go to the primary for %s s: %s",
        connection.alias,
        settings.OVSITE_REPLICA_DOWN_SECONDS,
        error,
    )


def _primary_flush_lsn() -> str:
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute("SELECT pg_current_wal_flush_lsn()::text")
        return cursor.fetchone()[0]


def _replica_lag(connection, read_at: float, primary_lsn: str) -> float:
    """How old, at most, the oldest change the replica lacks is, in seconds: 0 once it has replayed the primary's WAL
    up to `primary_lsn` (the primary's position at `read_at`), else the lesser of two bounds: the age of the last
    transaction it replayed, and the time since the primary was at a position it has replayed. The second keeps a
    replica a few milliseconds behind in use when WAL without a transaction (a checkpoint, a vacuum) follows a quiet
    spell, and a replica that stopped replaying grows out of both. Not a standby (promoted, or the primary itself):
    never current."""
    with connection.cursor() as cursor:
        cursor.execute(LAG_SQL, [primary_lsn])
        in_recovery, unreplayed_bytes, replay_age_s = cursor.fetchone()
    if not in_recovery:
        logger.warning(
            "read replica %s is not a standby (pg_is_in_recovery() is false); it is skipped", connection.alias
        )
        return math.inf
    if unreplayed_bytes is not None and unreplayed_bytes <= 0:
        _caught_up_at[connection.alias] = read_at
        return 0.0
    since_caught_up = time.monotonic() - _caught_up_at.get(connection.alias, -math.inf)
    return min(replay_age_s if replay_age_s is not None else math.inf, since_caught_up)
