"""Management commands: import_dir, reembed, retry_failed, and the embedded PostgreSQL launcher."""
import os
import shutil
import signal
import tempfile
from pathlib import Path

import psycopg
import pytest
from django.core.management import call_command

from ovsite import embedded_pg
from retrieval.models import Context
from retrieval.reembed import stored_dimension
from tests.conftest import hit_uris


def test_import_dir_writes_text_files_and_reports_binary(api, tmp_path, capsys):
    (tmp_path / "guide").mkdir()
    (tmp_path / "guide" / "install.md").write_text("# Summary\nInstall with make run.")
    (tmp_path / "faq.txt").write_text("Why is the sky blue? Rayleigh scattering.")
    (tmp_path / "logo.png").write_bytes(b"\x89PNG\x00\x00binary")
    call_command("import_dir", str(tmp_path), "--to", "viking://resources/handbook")
    out = capsys.readouterr().out
    assert "imported 2 files under viking://resources/handbook" in out and "logo.png" in out
    assert hit_uris(api.find("how do I install", level=2))[0] == "viking://resources/handbook/guide/install.md"


def test_reembed_rewrites_every_searchable_vector_and_none_of_the_containers(api, capsys):
    api.write("viking://resources/a/one.md", "Alpha document.")
    api.write("viking://~/memories/preferences/tea.md", "Prefers green tea.")
    Context.objects.filter(uri="viking://user/default/memories/preferences").update(embedding=[0.1] * 512)
    call_command("reembed")
    assert "re-embedded 3 nodes" in capsys.readouterr().out  # both files and the folder a/
    assert stored_dimension() == 512
    assert hit_uris(api.find("alpha document", level=2, limit=1)) == ["viking://resources/a/one.md"]
    assert hit_uris(api.find("green tea", limit=1)) == ["viking://user/default/memories/preferences/tea.md"]
    assert not Context.objects.filter(kind="dir", uri__startswith="viking://user/", embedding__isnull=False).exists()


def test_retry_failed_command_reports(api, capsys):
    call_command("retry_failed")
    assert "re-queued 0 failed nodes" in capsys.readouterr().out


def _postmaster_pid(pgdata: Path) -> int:
    return int((pgdata / "postmaster.pid").read_text().split("\n", 1)[0])


@pytest.fixture
def own_pgdata():
    """Not pytest's tmp_path: concurrent pytest sessions prune each other's numbered temp folders."""
    folder = Path(tempfile.mkdtemp(prefix="ovsite-pgtest-"))
    yield folder / "pg"
    embedded_pg.stop(folder / "pg")
    shutil.rmtree(folder, ignore_errors=True)


def test_embedded_pg_restarts_after_kill_and_stale_handle_file(own_pgdata):
    """A killed server, a stale postmaster.pid and a broken handle file must not break the next start."""
    pgdata = own_pgdata
    socket_dir = embedded_pg.start(pgdata, "probe")
    assert embedded_pg.start(pgdata, "probe") == socket_dir  # idempotent while running
    os.kill(_postmaster_pid(pgdata), signal.SIGKILL)
    (pgdata / ".handle_pids.json").write_text("")  # the corrupt state NOTES.md warns about
    embedded_pg.start(pgdata, "probe")
    with psycopg.connect(host=str(socket_dir), user="postgres", dbname="probe") as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
    assert embedded_pg.stop(pgdata)
    assert not embedded_pg.is_running(pgdata)


@pytest.mark.parametrize("action", ["status"])
def test_pg_command_reports_status(action, capsys):
    call_command("pg", action)
    assert capsys.readouterr().out.strip() == "running"
