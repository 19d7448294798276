"""Reads on a real streaming standby (issue 25 item 4, core/replicas.py).

A throwaway embedded PostgreSQL, migrated, gets a hot standby made by `pg_basebackup -R` (core.embedded_pg.
make_standby), and ovsite under gunicorn reads the search routes from it (DATABASE_REPLICA_URLS). A caller that has
just written reads the primary, another caller the standby (whose own statistics count the scans), and the writer
too once its sticky window has passed; a standby whose replay is paused falls behind and is skipped, and once it is
killed every read goes to the primary: 200, the same results, nothing lost. A standby of the suite's shared server
would copy every database on it, so both servers are the test's own, in a temporary folder.
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import psycopg
import pytest

from core import embedded_pg
from tests.live import ROOT, child_env, start_ovsite, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

DATABASE = "ovsite"
ROOT_KEY = "replica-test-root-key"
STICKY_S = 5.0
MAX_LAG_S = 2.0
FIND = "/api/v1/search/find"
SEARCH = "/api/v1/search/search"
KESTREL = "viking://resources/birds/kestrel.md"
OSPREY = "viking://resources/birds/osprey.md"


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


def find(client: httpx.Client, query: str) -> tuple[str, list[str]]:
    """(which server served it, the URIs found)."""
    response = client.post(FIND, json={"query": query, "limit": 5, "level": 2})
    assert response.status_code == 200, response.text
    return response.headers["X-Ovsite-Served-By"], sorted(hit["uri"] for hit in response.json()["result"]["resources"])


def write(client: httpx.Client, uri: str, content: str) -> None:
    response = client.post("/api/v1/content/write", json={"uri": uri, "content": content, "wait": True}, timeout=120)
    assert response.status_code == 200, response.text


def test_search_reads_go_to_the_standby_and_fall_back_to_the_primary(servers, tmp_path):
    env = child_env(
        DATABASE_URL=servers.url(servers.primary_socket),
        DATABASE_REPLICA_URLS=servers.url(servers.standby_socket),
        OVSITE_ROOT_API_KEY=ROOT_KEY,
        OVSITE_REPLICA_STICKY_SECONDS=STICKY_S,
        OVSITE_REPLICA_MAX_LAG_SECONDS=MAX_LAG_S,
        OVSITE_REPLICA_DOWN_SECONDS=300,
    )
    web, url = start_ovsite(tmp_path, env, threads=4)
    try:
        with httpx.Client(base_url=url, headers={"X-API-Key": ROOT_KEY}, timeout=60) as root:
            alice_key = root.post("/api/v1/admin/accounts", json={"account_id": "acme", "admin_user_id": "alice"})
            bob_key = root.post("/api/v1/admin/accounts/acme/users", json={"user_id": "bob"})
        alice = httpx.Client(base_url=url, headers={"X-API-Key": alice_key.json()["result"]["user_key"]}, timeout=60)
        bob = httpx.Client(base_url=url, headers={"X-API-Key": bob_key.json()["result"]["user_key"]}, timeout=60)
        with alice, bob:
            write(alice, KESTREL, "The kestrel hovers over the meadow before it drops on a vole.")
            written_at = time.monotonic()
            wait_until(lambda: replayed_all(servers), 30, "the standby's replay of the write")

            # Read-after-write: the writer reads the primary; another caller of the same account the standby.
            assert find(alice, "hovering kestrel") == ("primary", [KESTREL])
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
            write(alice, OSPREY, "The osprey dives feet first into the lake for fish.")
            time.sleep(MAX_LAG_S + 1.5)
            assert find(bob, "birds of prey hunting") == ("primary", [KESTREL, OSPREY])
            with servers.connect(servers.standby_socket) as standby:
                standby.execute("SELECT pg_wal_replay_resume()")
            wait_until(lambda: replayed_all(servers), 30, "the standby's replay after its resume")
            time.sleep(1.5)  # the lag read is kept a second
            assert find(bob, "birds of prey hunting") == ("replica_0", [KESTREL, OSPREY])

            # The searches ran on the standby: its own statistics count their scans of the store (a backend reports
            # them within seconds).
            wait_until(lambda: standby_scans(servers) > 0, 30, "the standby's scans of retrieval_context")

            # The standby dies: the next reads go to the primary in the same request, and find the same.
            os.kill(int((servers.standby / "postmaster.pid").read_text().split("\n", 1)[0]), signal.SIGKILL)
            for _ in range(6):  # the first finds its kept connection dead and marks the standby down
                assert find(bob, "birds of prey hunting") == ("primary", [KESTREL, OSPREY])
            context = bob.post(SEARCH, json={"query": "hovering kestrel", "mode": "context"})
            assert context.status_code == 200, context.text
            assert context.headers["X-Ovsite-Served-By"] == "primary"
            assert KESTREL in context.json()["result"]["rendered"]
        assert "read replica replica_0 is unreachable" in web.tail(100_000)
    finally:
        web.stop()
