"""Reads on a real streaming standby (issue 25 item 4, core/replicas.py).

A throwaway embedded PostgreSQL, migrated, gets a hot standby made by `pg_basebackup -R` (core.embedded_pg.
make_standby), and ovsite under gunicorn reads the search routes from it (DATABASE_REPLICA_URLS). A caller that has
just written reads the primary, another caller the standby (whose own statistics count the scans), and the writer
too once its sticky window has passed; a standby whose replay is paused falls behind and is skipped, and killed under
reads it fails none of them: every read goes to the primary, 200, the same results, nothing lost (the moments it can
die at in a request are each driven in tests/core/test_replica_fallback.py). A standby of the suite's shared server
would copy every database on it, so both servers are the test's own, in a temporary folder. The MCP tools, on the
ASGI app, read the standby as their REST twins do, with the same read-after-write per key across both.

Every wait is for a condition (the server answering, the standby's replay, its pause, its statistics) with a deadline
that fits a loaded two-core CI machine; the sleeps are the time a window or a lag must last, which a slow machine only
lengthens.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
import psycopg
import pytest

from core import embedded_pg
from mcp_server.tools import SERVED_BY_META
from tests.live import ROOT, child_env, start_asgi, start_ovsite, wait_until
from tests.mcp_server.test_mcp import mcp_session, text_of

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

DATABASE = "ovsite"
ROOT_KEY = "replica-test-root-key"
# The writer's first reads must fall inside its window on a loaded machine; the test then waits the window out.
STICKY_S = 15.0
MAX_LAG_S = 2.0
WAIT_S = 120  # the deadline of each wait for a condition (30 s once ran out at load 6 on two cores)
FIND = "/api/v1/search/find"
SEARCH = "/api/v1/search/search"
KESTREL = "viking://resources/birds/kestrel.md"
OSPREY = "viking://resources/birds/osprey.md"
THREADS = 4  # gunicorn's threads, each with its own connection to the standby


@dataclass
class Servers:
    primary: Path
    standby: Path
    primary_socket: Path
    standby_socket: Path

    def url(self, socket_dir: Path) -> str:
        return f"postgres://{embedded_pg.POSTGRES_USER}@/{DATABASE}?host={socket_dir}"

    def connect(self, socket_dir: Path) -> psycopg.Connection:
        return psycopg.connect(host=str(socket_dir), user=embedded_pg.POSTGRES_USER, dbname=DATABASE, autocommit=True)


@pytest.fixture
def servers():
    """A migrated primary and its streaming standby, both stopped and removed afterwards. Not under pytest's
    tmp_path: the servers run as their own system user, and pytest resets its temporary root to mode 0700."""
    folder = Path(tempfile.mkdtemp(prefix="ovsite-replica-pg-"))
    primary, standby = folder / "primary", folder / "standby"
    try:
        primary_socket = embedded_pg.start(primary, DATABASE)
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
            env=child_env(DATABASE_URL=f"postgres://{embedded_pg.POSTGRES_USER}@/{DATABASE}?host={primary_socket}"),
            check=True,
            cwd=ROOT,
            timeout=180,
        )
        embedded_pg.make_standby(primary, standby)
        standby_socket = embedded_pg.start(standby, DATABASE)
        yield Servers(primary, standby, primary_socket, standby_socket)
    finally:
        for pgdata in (standby, primary):
            if pgdata.exists():
                embedded_pg.stop(pgdata)
            shutil.rmtree(embedded_pg.socket_dir_for(pgdata), ignore_errors=True)
        shutil.rmtree(folder, ignore_errors=True)


def replayed_all(servers: Servers) -> bool:
    """The standby has replayed everything the primary has flushed."""
    with servers.connect(servers.primary_socket) as primary, servers.connect(servers.standby_socket) as standby:
        lsn = primary.execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()[0]
        return standby.execute("SELECT pg_wal_lsn_diff(pg_last_wal_replay_lsn(), %s) >= 0", [lsn]).fetchone()[0]


def standby_scans(servers: Servers) -> int:
    """Scans of the store that ran on the standby (statistics are each server's own, never replicated)."""
    with servers.connect(servers.standby_socket) as standby:
        return standby.execute(
            "SELECT coalesce(sum(seq_scan + coalesce(idx_scan, 0)), 0) FROM pg_stat_user_tables "
            "WHERE relname = 'retrieval_context'"
        ).fetchone()[0]


def replay_paused(servers: Servers) -> bool:
    with servers.connect(servers.standby_socket) as standby:
        return standby.execute("SELECT pg_get_wal_replay_pause_state() = 'paused'").fetchone()[0]


def find(client: httpx.Client, query: str) -> tuple[str, list[str]]:
    """(which server served it, the URIs found)."""
    response = client.post(FIND, json={"query": query, "limit": 5, "level": 2})
    assert response.status_code == 200, response.text
    return response.headers["X-Ovsite-Served-By"], sorted(hit["uri"] for hit in response.json()["result"]["resources"])


def finds_until(url: str, key: str, query: str, stop: threading.Event) -> list[tuple[str, list[str]]]:
    """`find`s by `key`, one after another, until `stop` is set (at least one)."""
    found = []
    with httpx.Client(base_url=url, headers={"X-API-Key": key}, timeout=60) as client:
        found.append(find(client, query))
        while not stop.is_set():
            found.append(find(client, query))
    return found


def write(client: httpx.Client, uri: str, content: str) -> None:
    response = client.post("/api/v1/content/write", json={"uri": uri, "content": content, "wait": True}, timeout=120)
    assert response.status_code == 200, response.text


def mcp_calls(url: str, key: str, *calls: tuple[str, dict]) -> list:
    """The results of the MCP tool calls (name, arguments) by `key`, in order, in one MCP session."""

    async def actions(client):
        return [await client.call_tool(name, arguments) for name, arguments in calls]

    return mcp_session(url, actions, {"X-API-Key": key})


def mcp_find(url: str, key: str, query: str) -> tuple[str | None, list[str]]:
    """(which server served it, the URIs found), as `find` gives them for the MCP tool."""
    (result,) = mcp_calls(url, key, ("find", {"query": query, "limit": 5, "level": 2}))
    uris = sorted(hit["uri"] for hit in json.loads(text_of(result))["resources"])
    return (result.meta or {}).get(SERVED_BY_META), uris


def server_env(servers: Servers, sticky_s: float) -> dict:
    return child_env(
        DATABASE_URL=servers.url(servers.primary_socket),
        DATABASE_REPLICA_URLS=servers.url(servers.standby_socket),
        OVSITE_ROOT_API_KEY=ROOT_KEY,
        OVSITE_REPLICA_STICKY_SECONDS=sticky_s,
        OVSITE_REPLICA_MAX_LAG_SECONDS=MAX_LAG_S,
        OVSITE_REPLICA_DOWN_SECONDS=300,
    )


def user_keys(url: str, *users: str) -> list[str]:
    """A key for each user of a new account, `acme` (the first its admin)."""
    with httpx.Client(base_url=url, headers={"X-API-Key": ROOT_KEY}, timeout=60) as root:
        created = [root.post("/api/v1/admin/accounts", json={"account_id": "acme", "admin_user_id": users[0]})]
        created += [root.post("/api/v1/admin/accounts/acme/users", json={"user_id": user}) for user in users[1:]]
    for response in created:
        assert response.status_code == 200, response.text
    return [response.json()["result"]["user_key"] for response in created]


def test_search_reads_go_to_the_standby_and_fall_back_to_the_primary(servers, tmp_path):
    web, url = start_ovsite(tmp_path, server_env(servers, STICKY_S), threads=THREADS, ready_s=WAIT_S)
    try:
        alice_key, bob_key = user_keys(url, "alice", "bob")
        alice = httpx.Client(base_url=url, headers={"X-API-Key": alice_key}, timeout=60)
        bob = httpx.Client(base_url=url, headers={"X-API-Key": bob_key}, timeout=60)
        with alice, bob:
            write(alice, KESTREL, "The kestrel hovers over the meadow before it drops on a vole.")
            written_at = time.monotonic()
            # Read-after-write: the writer reads the primary, whether or not the standby has the write yet
            assert find(alice, "hovering kestrel") == ("primary", [KESTREL])
            # another caller of the same account the standby, once it has replayed the write.
            wait_until(lambda: replayed_all(servers), WAIT_S, "the standby's replay of the write")
            assert find(bob, "hovering kestrel") == ("replica_0", [KESTREL])
            context = bob.post(SEARCH, json={"query": "hovering kestrel", "mode": "context"})
            assert context.status_code == 200, context.text
            assert context.headers["X-Ovsite-Served-By"] == "replica_0"
            assert KESTREL in context.json()["result"]["rendered"]

            time.sleep(max(0.0, written_at + STICKY_S + 0.5 - time.monotonic()))
            assert find(alice, "hovering kestrel") == ("replica_0", [KESTREL])

            # A standby that stops replaying falls behind: once it is more than the lag limit behind, reads skip it.
            with servers.connect(servers.standby_socket) as standby:
                standby.execute("SELECT pg_wal_replay_pause()")
            wait_until(lambda: replay_paused(servers), WAIT_S, "the standby's replay to pause")
            write(alice, OSPREY, "The osprey dives feet first into the lake for fish.")
            time.sleep(MAX_LAG_S + 1.5)
            assert find(bob, "birds of prey hunting") == ("primary", [KESTREL, OSPREY])
            with servers.connect(servers.standby_socket) as standby:
                standby.execute("SELECT pg_wal_replay_resume()")
            wait_until(lambda: replayed_all(servers), WAIT_S, "the standby's replay after its resume")
            # Used again once its lag reads under the limit: the lag read is kept a second, and WAL the primary writes
            # in the background (a checkpoint) may keep the standby a moment behind.
            wait_until(
                lambda: find(bob, "birds of prey hunting") == ("replica_0", [KESTREL, OSPREY]),
                WAIT_S,
                "reads on the standby again after it caught up",
                every_s=0.5,
            )

            # The searches ran on the standby: its own statistics count their scans of the store (a backend reports
            # them within seconds).
            wait_until(lambda: standby_scans(servers) > 0, WAIT_S, "the standby's scans of retrieval_context")

            # The standby dies under reads, the server's threads each reading it on a connection of its own: a read
            # it fails, whatever the moment its backend notices its postmaster's death (before, during or after the
            # request's statements), runs on the primary in the same request; no request fails, all find the same.
            stop = threading.Event()
            with ThreadPoolExecutor(THREADS) as pool:
                try:
                    streams = [
                        pool.submit(finds_until, url, bob_key, "birds of prey hunting", stop) for _ in range(THREADS)
                    ]
                    time.sleep(0.5)
                    os.kill(int((servers.standby / "postmaster.pid").read_text().split("\n", 1)[0]), signal.SIGKILL)
                    wait_until(lambda: not embedded_pg.is_running(servers.standby), WAIT_S, "the standby's death")
                    time.sleep(0.5)
                finally:
                    stop.set()
                found = [answer for stream in streams for answer in stream.result()]
            assert {served_by for served_by, _ in found} <= {"replica_0", "primary"}
            assert all(uris == [KESTREL, OSPREY] for _, uris in found), found
            # Dead (marked down by the first read that met it so): every read goes to the primary.
            for _ in range(6):
                assert find(bob, "birds of prey hunting") == ("primary", [KESTREL, OSPREY])
            context = bob.post(SEARCH, json={"query": "hovering kestrel", "mode": "context"})
            assert context.status_code == 200, context.text
            assert context.headers["X-Ovsite-Served-By"] == "primary"
            assert KESTREL in context.json()["result"]["rendered"]
        assert "read replica replica_0 is unreachable" in web.tail(100_000)
    finally:
        web.stop()


def test_mcp_tools_read_the_standby_with_rest_read_after_write_per_key(servers, tmp_path):
    """/mcp is outside Django's middleware: its search tools read the standby as their REST twins do, and one key's
    write on either side sends its reads on both to the primary for the sticky window (long here: never waited out)."""
    web, url = start_asgi(tmp_path, server_env(servers, sticky_s=300), ready_s=WAIT_S)
    try:
        alice_key, bob_key, carol_key = user_keys(url, "alice", "bob", "carol")
        with httpx.Client(base_url=url, headers={"X-API-Key": alice_key}, timeout=60) as alice:
            write(alice, KESTREL, "The kestrel hovers over the meadow before it drops on a vole.")
        wait_until(lambda: replayed_all(servers), WAIT_S, "the standby's replay of the write")
        scans_before = standby_scans(servers)

        # A key that has not written reads the standby; the REST writer's key reads the primary over MCP too.
        assert mcp_find(url, bob_key, "hovering kestrel") == ("replica_0", [KESTREL])
        assert mcp_find(url, alice_key, "hovering kestrel") == ("primary", [KESTREL])
        wait_until(lambda: standby_scans(servers) > scans_before, WAIT_S, "the standby's scans of the MCP find")

        # An MCP write: the same key's next reads, MCP and REST, go to the primary; another key's still the standby.
        remembered, found, context, listed = mcp_calls(
            url,
            bob_key,
            ("remember", {"messages": [{"role": "user", "content": "The kestrel nests in the church tower."}]}),
            ("find", {"query": "hovering kestrel", "limit": 5, "level": 2}),
            ("search", {"query": "hovering kestrel", "mode": "context"}),
            ("ls", {"uri": "viking://resources"}),
        )
        assert text_of(remembered)
        assert found.meta[SERVED_BY_META] == "primary" and KESTREL in text_of(found)
        assert context.meta[SERVED_BY_META] == "primary" and KESTREL in text_of(context)
        assert SERVED_BY_META not in (listed.meta or {})  # /fs/ls is not a search route: it reads the primary
        with httpx.Client(base_url=url, headers={"X-API-Key": bob_key}, timeout=60) as bob:
            assert find(bob, "hovering kestrel") == ("primary", [KESTREL])
        assert mcp_find(url, carol_key, "hovering kestrel") == ("replica_0", [KESTREL])
    finally:
        web.stop()
