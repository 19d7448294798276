"""A read replica lost under a read (core/replicas.py, core/replica_backend): the read runs on the primary in the same
request, the replica is marked down, and the statement's own errors are still the request's.

tests/core/test_replicas.py kills a real standby under a live server, where the moment the standby's backend notices
its postmaster's death is the machine's to choose. Here that moment is the test's: `replica_0` is a second connection
to the test database, made as settings make one from DATABASE_REPLICA_URLS (`replica_databases`), and the server ends
its session after the scope chose it and before (or while) the read runs, with the SQLSTATE a standby's backend
answers when its postmaster died (57P01). The test database is no standby, so the lag check would never choose it: a
scope here reads it as `_choose` leaves a usable replica, its connection open and checked.
"""

import logging
import socket
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import pytest
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, OperationalError, ProgrammingError, connections
from django.test.utils import CaptureQueriesContext
from psycopg.errors import QueryCanceled

from core import replicas
from core.models import Account
from core.replicas import read_cursor, replica_databases, replica_reads
from retrieval.search.statements import prepared_cursor
from sessions_app.models import Session

REPLICA = "replica_0"  # the test database through a second connection
KILLED = "replica_1"  # a replica whose server was killed: its socket file is left behind and nobody listens on it
LOST = "read replica {} is unreachable"
SESSION_IDS = ["s1", "s2", "s3"]

pytestmark = pytest.mark.django_db(transaction=True, databases=[DEFAULT_DB_ALIAS, REPLICA, KILLED])


def database_url(config: dict, host: str | None = None) -> str:
    credentials = quote(config["USER"]) + (f":{quote(config['PASSWORD'])}" if config.get("PASSWORD") else "")
    host = host or config.get("HOST") or config["OPTIONS"].get("host", "")
    if host.startswith("/"):  # a unix socket folder
        return f"postgres://{credentials}@/{config['NAME']}?host={host}"
    return f"postgres://{credentials}@{host}:{config.get('PORT') or 5432}/{config['NAME']}"


@pytest.fixture(scope="module", autouse=True)
def replica_aliases(django_db_setup, django_db_blocker):
    """The two replicas' aliases, made from their URLs with the test database's connection settings as
    DATABASE_REPLICA_URLS makes them (`replica_databases`), for the module's tests (which a test's database list
    must name before it starts)."""
    primary = connections[DEFAULT_DB_ALIAS].settings_dict
    with tempfile.TemporaryDirectory(prefix="ovsite-killed-replica-") as folder, socket.socket(socket.AF_UNIX) as stale:
        stale.bind(str(Path(folder) / ".s.PGSQL.5432"))  # bound, never listening: a connection is refused
        urls = f"{database_url(primary)},{database_url(primary, host=folder)}"
        aliases = connections.configure_settings({DEFAULT_DB_ALIAS: {}, **replica_databases(urls, primary)})
        for alias in (REPLICA, KILLED):
            settings.DATABASES[alias] = connections.settings[alias] = aliases[alias]
        try:
            yield
        finally:
            with django_db_blocker.unblock():
                for alias in (REPLICA, KILLED):
                    connections[alias].close()
                    settings.DATABASES.pop(alias, None)
                    connections.settings.pop(alias, None)


@pytest.fixture(autouse=True)
def replica_marks(monkeypatch):
    """The process's replica marks (down, lag) start empty and are put back after each test."""
    for name in ("_down_until", "_lag_read", "_caught_up_at"):
        monkeypatch.setattr(replicas, name, {})


@pytest.fixture
def sessions(transactional_db):
    """Rows of a replica-read app, committed (the replica's connection sees them) before any scope opens."""
    account = Account.objects.create(name="acme")
    for session_id in SESSION_IDS:
        Session.objects.create(account=account, session_id=session_id, user="alice")


@pytest.fixture
def replica(sessions):
    return connections[REPLICA]


@contextmanager
def reading_replica(alias: str = REPLICA):
    """A replica-eligible scope whose reads go to `alias`, as `_choose` leaves a usable replica: chosen, and (when
    its server is up) its connection open and its health checked."""
    with replica_reads("reader") as scope:
        if alias == REPLICA:
            connections[alias].ensure_connection()
        scope.alias = alias
        yield scope


def end_session(connection) -> None:
    """The server ends `connection`'s session (57P01, as a standby's backend does once its postmaster died) and is
    waited for until its backend has exited."""
    pid = connection.connection.info.backend_pid
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s, 10000)", [pid])  # waits until the backend has exited
        assert cursor.fetchone()[0]


def primary_pid() -> int:
    connections[DEFAULT_DB_ALIAS].ensure_connection()
    return connections[DEFAULT_DB_ALIAS].connection.info.backend_pid


def session_ids() -> list[str]:
    return list(Session.objects.order_by("session_id").values_list("session_id", flat=True))


CURSORS = {"plain": read_cursor, "prepared": prepared_cursor}  # a search's raw SQL, unprepared and prepared


@pytest.mark.parametrize("make_cursor", CURSORS.values(), ids=CURSORS.keys())
def test_a_search_statement_whose_replica_died_after_it_was_chosen_runs_on_the_primary(replica, make_cursor, caplog):
    with caplog.at_level(logging.WARNING, logger="core.replicas"), reading_replica() as scope:
        end_session(replica)
        with make_cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid(), %s::text", ["same statement"])
            assert cursor.fetchall() == [(primary_pid(), "same statement")]
        assert session_ids() == SESSION_IDS  # the request's next reads too
    assert scope.served_by == "primary"
    assert LOST.format(REPLICA) in caplog.text


@pytest.mark.parametrize("logged", [False, True], ids=["quiet", "queries logged"])
def test_an_orm_read_whose_replica_died_after_it_was_chosen_runs_on_the_primary(replica, logged, caplog):
    """Through the cursor Django logs queries with (DEBUG, or a test capturing them) as through the plain one."""
    with (
        caplog.at_level(logging.WARNING, logger="core.replicas"),
        CaptureQueriesContext(connections[DEFAULT_DB_ALIAS]) as on_primary,
        reading_replica() as scope,
    ):
        replica.force_debug_cursor = logged
        end_session(replica)
        assert session_ids() == SESSION_IDS
    assert scope.served_by == "primary"
    assert LOST.format(REPLICA) in caplog.text
    assert any('FROM "sessions_app_session"' in query["sql"] for query in on_primary.captured_queries)


def test_a_cursor_opened_on_the_replica_before_it_was_lost_reads_the_primary_after(replica):
    with reading_replica() as scope, read_cursor() as first, read_cursor() as second:
        end_session(replica)
        for cursor in (first, second):  # the first read notices the loss; the second's cursor is on the lost replica
            cursor.execute("SELECT pg_backend_pid()")
            assert cursor.fetchone()[0] == primary_pid()
    assert scope.served_by == "primary"


def test_a_replica_read_has_all_its_rows_before_its_replica_can_die(replica):
    """QuerySet.iterator() on a replica reads the whole result as its statement runs: no server-side cursor, whose
    next fetch would fail once the replica is gone, after some rows were handed out."""
    with reading_replica() as scope:
        rows = Session.objects.order_by("session_id").values_list("session_id", flat=True).iterator(chunk_size=1)
        first = next(rows)
        end_session(replica)
        assert [first, *rows] == SESSION_IDS
    assert scope.served_by == REPLICA


@pytest.mark.parametrize("read", ["orm", "plain", "prepared"])
def test_a_replica_that_refuses_connections_after_it_was_chosen_is_read_on_the_primary(sessions, read, caplog):
    with caplog.at_level(logging.WARNING, logger="core.replicas"), reading_replica(KILLED) as scope:
        if read == "orm":
            assert session_ids() == SESSION_IDS
        else:
            with CURSORS[read]() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                assert cursor.fetchone()[0] == primary_pid()
    assert scope.served_by == "primary"
    assert "Connection refused" in caplog.text and LOST.format(KILLED) in caplog.text


def test_every_request_whose_replica_connection_died_reads_the_primary(replica):
    """Each thread of a server keeps its own connection to the replica, and the replica's down mark is the process's:
    requests already reading it when it dies each fall back on their own, whichever marked it down."""
    chosen, ended = threading.Barrier(3), threading.Event()
    backends, answers, errors = [], [], []

    def request():
        try:
            with reading_replica() as scope:
                backends.append(connections[REPLICA].connection.info.backend_pid)
                chosen.wait(10)
                assert ended.wait(10)
                answers.append((session_ids(), scope.served_by))
        except Exception as error:  # reported by the test's thread
            errors.append(error)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=request) for _ in range(2)]
    for thread in threads:
        thread.start()
    chosen.wait(10)
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute("SELECT bool_and(pg_terminate_backend(pid, 10000)) FROM unnest(%s::int[]) AS pid", [backends])
        assert cursor.fetchone()[0]
    ended.set()
    for thread in threads:
        thread.join(30)
    assert not errors, errors
    assert answers == [(SESSION_IDS, "primary")] * 2


def test_a_statements_own_error_on_a_live_replica_is_the_requests(replica, caplog):
    with caplog.at_level(logging.WARNING, logger="core.replicas"), reading_replica() as scope:
        with pytest.raises(ProgrammingError), read_cursor() as cursor:
            cursor.execute("SELEC 1")
        with read_cursor() as cursor:
            cursor.execute("SET statement_timeout = 50")
        with pytest.raises(OperationalError) as timeout, read_cursor() as cursor:
            cursor.execute("SELECT pg_sleep(5)")
        assert isinstance(timeout.value.__cause__, QueryCanceled)
        assert session_ids() == SESSION_IDS  # still on the replica, which was never lost
    assert scope.served_by == REPLICA
    assert LOST.format(REPLICA) not in caplog.text


@contextmanager
def primary_statement_timeout(milliseconds: int):
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute(f"SET statement_timeout = {int(milliseconds)}")
    try:
        yield
    finally:
        with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
            cursor.execute("RESET statement_timeout")


@pytest.mark.parametrize(
    "statement, error, cause",
    [("SELEC 1", ProgrammingError, None), ("SELECT pg_sleep(5)", OperationalError, QueryCanceled)],
    ids=["syntax error", "statement timeout"],
)
def test_a_statements_own_error_on_the_primary_after_its_replica_died_is_the_requests(replica, statement, error, cause):
    with reading_replica() as scope:
        end_session(replica)
        with primary_statement_timeout(50), pytest.raises(error) as raised, read_cursor() as cursor:
            cursor.execute(statement)
    assert scope.served_by == "primary"  # the statement failed there, after the replica was lost under it
    assert cause is None or isinstance(raised.value.__cause__, cause)
