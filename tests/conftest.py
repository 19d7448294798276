import fcntl
import json
import os
import socket
import threading
import time
from pathlib import Path

import pytest
import uvicorn
from django.conf import settings
from django.db import connection, connections, transaction
from openviking_sdk import SyncHTTPClient
from rest_framework.test import APIClient

from core import config_cache, embedded_pg
from tests import live, servers

# The lanes of pytest.ini, given at collection from what a test uses. pytest has already resolved the closure of its
# fixtures (item.fixturenames): every database fixture, pytest-django's (db, transactional_db, admin_client...) and
# the suite's (seeded, api, operator...), depends on django_db_setup, and so marks every test that uses it.
DATABASE_FIXTURES = frozenset({"django_db_setup", "live_server"})
SERVER_FIXTURES = frozenset({"live_server", "live_url", "fake_openai"})
BROWSER_FIXTURES = frozenset({"browser"})  # headless Chromium (tests/browser.py)
# A module holding one of these starts server processes itself (tests/live.py, tests/servers.py): seconds a test.
SERVER_STARTERS = (
    live.Process,
    live.start_ovsite,
    live.start_asgi,
    live.start_celery_worker,
    live.start_redis,
    servers.Gunicorn,
)
NOT_UNIT = ("db", "http", "browser", "slow")


def _starts_servers(module) -> bool:
    return any(value is starter for value in vars(module).values() for starter in SERVER_STARTERS)


def _node_ids_with_their_parameters(items):
    """schemathesis 4.32 names each of its items after an operation (`test_x[GET /api/v1/fs/ls]`) but, under pytest
    9, leaves the operation out of the node id, so a schema's items all share one id; xdist hands tests out by id,
    and ran one operation of 34 (tests/core/test_schema_fuzz.py). Such an item gets its name's brackets back."""
    for item in items:
        if item.name != item.originalname and item._id.params is None:
            item._id = item._id.with_params(item.name.removeprefix(item.originalname)[1:-1])


def pytest_collection_modifyitems(config, items):
    """`unit` is what is left: a quick test with no database, no server and no browser (`make test-fast`). A test
    marked `unit` that reaches the test database anyway fails: pytest-django refuses it the connection."""
    _node_ids_with_their_parameters(items)
    for item in items:
        fixtures = set(item.fixturenames)
        if fixtures & DATABASE_FIXTURES or item.get_closest_marker("django_db"):
            item.add_marker(pytest.mark.db)
        if fixtures & SERVER_FIXTURES:
            item.add_marker(pytest.mark.http)
        if _starts_servers(item.module):
            item.add_marker(pytest.mark.http)
            item.add_marker(pytest.mark.slow)
        if fixtures & BROWSER_FIXTURES:
            item.add_marker(pytest.mark.browser)
            item.add_marker(pytest.mark.slow)
        if not any(item.get_closest_marker(lane) for lane in NOT_UNIT):
            item.add_marker(pytest.mark.unit)


def pytest_collection_finish(session):
    """The suite runs against the real embedded PostgreSQL: it is started (idempotent) once the tests are selected,
    unless all of them are `unit`, which run without it. xdist's workers each get here: they take turns, holding a
    lock on the data folder's parent, since two first starts of one server at once would both take its folder."""
    if settings.EMBEDDED_PG_ENABLED and not all(item.get_closest_marker("unit") for item in session.items):
        parent = Path(settings.EMBEDDED_PG_DATA).parent
        parent.mkdir(parents=True, exist_ok=True)
        folder = os.open(parent, os.O_RDONLY)
        try:
            fcntl.flock(folder, fcntl.LOCK_EX)
            embedded_pg.start_configured(settings.DATABASES["default"]["NAME"])
        finally:
            os.close(folder)  # and the lock with it


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """The test database commits without waiting for its WAL flush (about 3 ms a commit here, and the suite commits
    tens of thousands of times); data is lost only if PostgreSQL itself crashes, which no test does to this server.
    A database setting, so the servers the tests start (gunicorn, Celery workers) commit the same way."""
    with django_db_blocker.unblock():
        with connection.cursor() as cursor:
            cursor.execute(
                f"ALTER DATABASE {connection.ops.quote_name(connection.settings_dict['NAME'])} "
                "SET synchronous_commit = off"
            )
        connection.close()  # the setting applies to connections opened from now on


@pytest.fixture(scope="session", autouse=True)
def fast_password_hasher():
    """Tests log in superusers by the hundred; the production hasher (PBKDF2, ~0.3 s a hash by design) would be a
    tenth of the suite. tests/profiles/test_live_config.py keeps the production hasher: its gunicorn workers check
    the login."""
    from django.test import override_settings

    with override_settings(PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"]):
        yield


# Rows that migrate's post_migrate handler creates and no test changes: flushing them only to have the handler
# create them again would be wasted work.
MIGRATED_TABLES = frozenset({"django_content_type", "auth_permission"})


def _empty_tables(test_case):
    """Transactional tests end with every table empty, as Django's flush leaves them, by DELETE in one transaction
    (foreign keys are deferred to its commit): ~15 ms against ~200 ms for the flush's TRUNCATE of every table, its
    indexes and its TOAST table, paid after each of some 800 tests."""
    for name in test_case._databases_names(include_mirrors=False):
        conn = connections[name]
        tables = [
            table
            for table in conn.introspection.django_table_names(only_existing=True, include_views=False)
            if table not in MIGRATED_TABLES
        ]
        with transaction.atomic(using=name), conn.cursor() as cursor:
            cursor.execute("".join(f"DELETE FROM {conn.ops.quote_name(table)};" for table in tables))
    config_cache.clear_all()  # the rows it kept are gone, and plain SQL sends no signal


@pytest.fixture(scope="session", autouse=True)
def delete_instead_of_truncate():
    """Installs `_empty_tables` as the transactional tests' teardown (no test uses available_apps or serialized
    rollback, which need the flush)."""
    from django.test import TransactionTestCase

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(TransactionTestCase, "_fixture_teardown", _empty_tables)
        yield


class Api:
    """A thin JSON client over Django's test client: returns (status, body) and keeps the last response."""

    def __init__(self, client: APIClient):
        self.client = client
        self.last = None

    def _send(self, method, path, body=None, params=None, **headers):
        kwargs = {"HTTP_" + k.upper().replace("-", "_"): v for k, v in headers.items()}
        if body is not None:
            kwargs.update(data=json.dumps(body), content_type="application/json")
        elif params is not None:
            kwargs.update(data=params)
        self.last = getattr(self.client, method)(path, **kwargs)
        return self.last.status_code, self.last.json()

    def post(self, path, body=None, **headers):
        return self._send("post", path, body if body is not None else {}, **headers)

    def get(self, path, **params_and_headers):
        headers = {
            k: params_and_headers.pop(k) for k in list(params_and_headers) if k.startswith("x_") or k == "authorization"
        }
        return self._send(
            "get", path, params=params_and_headers, **{k.replace("_", "-"): v for k, v in headers.items()}
        )

    def delete(self, path, **params):
        query = "&".join(f"{k}={v}" for k, v in params.items())
        self.last = self.client.delete(f"{path}?{query}")
        return self.last.status_code, self.last.json()

    def write(self, uri, content, **extra):
        status, body = self.post("/api/v1/content/write", {"uri": uri, "content": content, **extra})
        assert status == 200, body
        return body["result"]

    def write_all(self, files: dict[str, str]):
        """Writes a fixture's corpus in one batch (one task, its texts embedded in chunks, each ancestor refreshed
        once): the same nodes as a write per file, in a third of the time."""
        status, body = self.post(
            "/api/v1/content/batch-write",
            {"operations": [{"uri": uri, "content": content} for uri, content in files.items()]},
        )
        assert status == 200, body
        return body["result"]

    def find(self, query, **extra):
        status, body = self.post("/api/v1/search/find", {"query": query, **extra})
        assert status == 200, body
        return body["result"]


@pytest.fixture
def seeded(transactional_db):
    """Transactional tests flush every table after each test; put the shipped rows back first."""
    from core.models import Account, AccountUser
    from profiles.models import PurposeProfile, RetrievalSettings
    from profiles.seeds import seed_rows

    seed_rows(PurposeProfile, RetrievalSettings)
    account, _ = Account.objects.get_or_create(name="default")  # as ovsite's data migration does
    AccountUser.objects.get_or_create(account=account, user_id="default", defaults={"role": "admin"})


@pytest.fixture
def operator(seeded):
    """A Django test client logged in to the admin as a superuser (`operator.user`)."""
    from django.contrib.auth.models import User
    from django.test import Client

    user = User.objects.create_superuser("operator", "op@example.com", "pw-operator")
    client = Client()
    client.force_login(user)
    client.user = user
    return client


@pytest.fixture
def api(seeded):
    """Dev mode (no root key): loopback callers act as account `default`, user `default`."""
    return Api(APIClient())


def hnsw_definitions() -> dict[str, str]:
    """The HNSW indexes of `retrieval_context` as PostgreSQL defines them, by name."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'retrieval_context' "
            "AND indexdef LIKE '%USING hnsw%'"
        )
        return dict(cursor.fetchall())


def hit_uris(result) -> list[str]:
    return [hit["uri"] for key in ("memories", "resources", "skills") for hit in result[key]]


@pytest.fixture
def fake_openai():
    from tests.fake_openai import FakeOpenAI

    server = FakeOpenAI().start()
    yield server
    server.stop()


@pytest.fixture
def remote_embedder(fake_openai, settings):
    """Points the embedder at the fake OpenAI-compatible server for one test."""
    from retrieval.embedders import get_embedder

    settings.EMBEDDING_URL = fake_openai.url
    settings.EMBEDDING_MODEL = "fake-embedding"
    settings.EMBEDDING_TIMEOUT_S = 2.0
    get_embedder.cache_clear()
    yield fake_openai
    get_embedder.cache_clear()


@pytest.fixture
def fake_llm(fake_openai, settings):
    """Configures the LLM (main model and query planner) to the fake OpenAI-compatible server for one test."""
    settings.LLM_URL = fake_openai.url
    settings.LLM_MODEL = "fake-main"
    settings.QUERY_PLANNER_MODEL = "fake-planner"
    settings.LLM_API_KEY = "test"
    return fake_openai


@pytest.fixture(scope="module")
def live_url():
    """A real uvicorn on a free port, in a thread of this process so that it uses the test database. Django runs
    each ASGI request in a thread of its own, so connections are not kept (as ovsite/asgi.py sets for make run)."""
    from django.conf import settings

    from mcp_server.app import build_application
    from ovsite.asgi import django_application

    database = settings.DATABASES["default"]
    kept_age, database["CONN_MAX_AGE"] = database["CONN_MAX_AGE"], 0

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(build_application(django_application), log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    server.should_exit = True
    thread.join(10)
    sock.close()
    database["CONN_MAX_AGE"] = kept_age


@pytest.fixture
def sdk_connect(live_server, tmp_path, monkeypatch):
    """Opens SDK clients on the live server; the SDK's own env vars and config file must not leak in."""
    for name in (
        "OPENVIKING_URL",
        "OPENVIKING_API_KEY",
        "OPENVIKING_ACCOUNT",
        "OPENVIKING_USER",
        "OPENVIKING_ACTOR_PEER_ID",
        "OPENVIKING_TIMEOUT",
        "OPENVIKING_AUTH_MODE",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENVIKING_CLI_CONFIG_FILE", str(tmp_path / "no-ovcli.conf"))
    opened = []

    def open_client(api_key=None, **identity):  # identity: the SDK's `account` and `user` (its headers)
        client = SyncHTTPClient(url=live_server.url, api_key=api_key, **identity)
        client.initialize()
        opened.append(client)
        return client

    yield open_client
    for client in opened:
        client.close()


@pytest.fixture
def sdk(sdk_connect):
    """The real openviking-sdk client in dev mode (no key)."""
    return sdk_connect()
