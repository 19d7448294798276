"""Operator commands (issue 30 §6): `manage.py accounts create|list|rotate-key|disable` through the admin API's
services, keys shown once and stored hashed; `manage.py doctor`, the checks of /ready plus configuration warnings,
exiting non-zero when a check fails."""

import re
import subprocess
import sys
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from core import accounts
from core.models import ApiKey, hash_key
from tests.live import ROOT, child_env, database_env, free_port, start_celery_worker, start_redis, wait_until

ROOT_KEY = "operator-commands-root-key"
CHECK_NAMES = ["database", "migrations", "embedder", "stored_vectors", "broker", "workers"]
pytestmark = pytest.mark.timeout(300)


def run(*args) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def issued_key(output: str) -> str:
    """A command's new key: its last line."""
    return output.strip().splitlines()[-1]


@pytest.fixture
def keyed(seeded, settings, client):
    """Keys are checked (a root key is set, so no dev mode); `keyed(key)` is the status a request with it gets."""
    settings.OVSITE_ROOT_API_KEY = ROOT_KEY
    return lambda key: client.get("/api/v1/system/status", HTTP_X_API_KEY=key).status_code


def test_accounts_create_prints_the_key_once_and_stores_only_its_digest(keyed):
    output = run("accounts", "create", "acme", "--admin-user", "ann")
    key = issued_key(output)
    assert "'acme'" in output and "'ann'" in output and "shown once" in output
    stored = ApiKey.objects.get(user__account__name="acme", user__user_id="ann")
    assert stored.key_hash == hash_key(key) and stored.key_hash != key
    assert keyed(key) == 200 and keyed(key + "x") == 401
    assert key not in run("accounts", "list")


def test_accounts_create_refuses_an_existing_account_and_an_id_the_api_refuses(seeded):
    run("accounts", "create", "acme")
    with pytest.raises(CommandError, match="already exists"):
        run("accounts", "create", "acme")
    for bad in ("..", "a/b", "x" * 65):
        with pytest.raises(CommandError, match="is not an id"):
            run("accounts", "create", bad)


def test_accounts_list_shows_every_user_with_role_and_active_keys(seeded):
    run("accounts", "create", "acme", "--admin-user", "ann")
    accounts.add_user(account_name="acme", user_id="bob", role="user")
    run("accounts", "create", "zeta")
    rows = [line.split()[:4] for line in run("accounts", "list").splitlines()]
    assert rows[0] == ["ACCOUNT", "USER", "ROLE", "ACTIVE"]
    assert rows[1:] == [
        ["acme", "ann", "admin", "1"],
        ["acme", "bob", "user", "1"],
        ["default", "default", "admin", "0"],
        ["zeta", "admin", "admin", "1"],
    ]


def test_accounts_rotate_key_revokes_the_old_key(keyed):
    old = issued_key(run("accounts", "create", "acme", "--admin-user", "ann"))
    new = issued_key(run("accounts", "rotate-key", "acme", "ann"))
    assert new != old and keyed(old) == 401 and keyed(new) == 200
    with pytest.raises(CommandError, match="user not found: nobody"):
        run("accounts", "rotate-key", "acme", "nobody")


def test_accounts_disable_revokes_the_keys_of_one_user_or_of_the_whole_account(keyed):
    ann = issued_key(run("accounts", "create", "acme", "--admin-user", "ann"))
    bob = accounts.add_user(account_name="acme", user_id="bob", role="user")["user_key"]
    assert "Revoked 1 active key(s) of user acme/bob" in run("accounts", "disable", "acme", "bob")
    assert keyed(bob) == 401 and keyed(ann) == 200
    assert "Revoked 1 active key(s) of account 'acme'" in run("accounts", "disable", "acme")
    assert keyed(ann) == 401
    assert ApiKey.objects.filter(user__account__name="acme").count() == 2  # revoked, not deleted
    with pytest.raises(CommandError, match="account not found: nowhere"):
        run("accounts", "disable", "nowhere")


def statuses(doctor_output: str) -> dict[str, str]:
    """Each check's status as doctor prints it."""
    return dict(re.findall(r"^  (\w+) +(ok|failed|skipped|not configured) ", doctor_output, re.MULTILINE))


def manage(*args, **env) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        env=child_env(**database_env(), **env),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_accounts_from_the_command_line_exits_non_zero_on_refusal(seeded):
    created = manage("accounts", "create", "cli-acme")
    assert created.returncode == 0 and issued_key(created.stdout).startswith("ovk_"), created.stderr
    refused = manage("accounts", "create", "cli-acme")
    assert refused.returncode == 1 and "already exists" in refused.stderr


def test_doctor_prints_every_check_of_ready_and_the_configuration_warnings(db, client):
    output = run("doctor")
    report = client.get("/ready").json()["result"]["checks"]
    lines = output.splitlines()
    for name, check in report.items():  # the same checks, the same words
        assert any(
            line.split()[:1] == [name] and check["status"] in line and check["detail"] in line for line in lines
        ), (name, output)
    assert list(report) == CHECK_NAMES and output.rstrip().endswith("Ready.")
    for warning in ("OVSITE_ROOT_API_KEY", "OVSITE_SECRET_KEY", "LLM not configured"):
        assert warning in output, (warning, output)


def test_doctor_warns_of_debug_and_of_an_llm_without_a_planner_model(db, settings):
    settings.DEBUG = True
    settings.LLM_URL, settings.LLM_MODEL, settings.QUERY_PLANNER_MODEL = "http://127.0.0.1:9/v1", "main", ""
    output = run("doctor")
    assert "DEBUG" in output and "QUERY_PLANNER_MODEL is unset" in output and "LLM not configured" not in output


def test_doctor_fails_naming_the_failed_check(db):
    with connection.cursor() as cursor:  # rolled back with the test's transaction
        cursor.execute("DELETE FROM django_migrations WHERE id = (SELECT max(id) FROM django_migrations)")
    out = StringIO()
    with pytest.raises(CommandError, match="not ready: migrations failed"):
        call_command("doctor", stdout=out)
    assert "manage.py migrate" in out.getvalue()


def test_doctor_on_an_unreachable_database_exits_1_and_skips_what_needs_it():
    result = manage(
        "doctor", DATABASE_URL=f"postgres://ovsite@127.0.0.1:{free_port()}/ovsite", OVSITE_DB_CONNECT_TIMEOUT="2"
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert statuses(result.stdout) == {
        "database": "failed",
        "migrations": "skipped",
        "embedder": "ok",
        "stored_vectors": "skipped",
        "broker": "not configured",
        "workers": "not configured",
    }, result.stdout
    assert "not ready: database failed" in result.stderr


def test_doctor_checks_the_broker_and_its_workers(seeded, tmp_path):
    unreachable = manage("doctor", CELERY_BROKER_URL=f"redis+socket://{tmp_path}/none.sock")
    assert unreachable.returncode == 1 and "not ready: broker failed" in unreachable.stderr, unreachable.stdout
    redis, broker_url = start_redis(tmp_path)
    worker = None
    try:
        no_worker = manage("doctor", CELERY_BROKER_URL=broker_url)
        assert no_worker.returncode == 1 and "not ready: workers failed" in no_worker.stderr, no_worker.stdout
        assert "no Celery worker answered" in no_worker.stdout
        worker = start_celery_worker(
            tmp_path, child_env(**database_env(), CELERY_BROKER_URL=broker_url, OVSITE_LOG_LEVEL="INFO"), "doctor"
        )
        wait_until(lambda: "ready." in worker.tail(100_000), 60, "the worker ready", worker, every_s=0.1)
        served = manage("doctor", CELERY_BROKER_URL=broker_url)
        assert served.returncode == 0, served.stdout + served.stderr
        assert "doctor@" in served.stdout  # the worker that answered
    finally:
        for process in (worker, redis):
            if process is not None:
                process.stop()
