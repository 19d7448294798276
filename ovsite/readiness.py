"""Whether this process can serve: the checks behind `GET /ready` and `manage.py doctor` (one function for both),
and what a server does before it takes traffic.

Each check is named and says what it found. `/ready` answers 503 naming the failed ones; `/health` stays liveness.
A server loads the embedder before it accepts a connection (the model's 1.5 s would otherwise fall on the first
search), and refuses to start when the embedder's vectors and the stored ones disagree in dimension: no retry mends
that, only `manage.py reembed` or another embedder does (docs/design.md §2).
"""

import asyncio
import logging
from dataclasses import dataclass, replace
from functools import partial

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError, InterfaceError, OperationalError, connection
from django.db.migrations.executor import MigrationExecutor

log = logging.getLogger(__name__)

OK, FAILED, SKIPPED, NOT_CONFIGURED = "ok", "failed", "skipped", "not configured"
REEMBED = "`python manage.py reembed`"
# A load balancer's probe gives up after a few seconds: /ready waits no longer for an endpoint it has not reached yet
# (a server's start waits EMBEDDING_TIMEOUT_S).
PROBE_TIMEOUT_S = 5.0
WORKER_PING_TIMEOUT_S = 1.0
# Stored vectors whose model is compared with the embedder's: a sample, since a probe must not scan a large store.
# A model change without a re-embedding leaves every stored vector with the old name, so any sample shows it.
MODEL_SAMPLE_ROWS = 1000


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # OK | FAILED | SKIPPED | NOT_CONFIGURED
    detail: str
    error: str = ""  # the exception behind a failure: for the operator (doctor, the log), not for /ready's callers
    # A failure no retry mends (dimensions that disagree, the packaged model that does not load): a server refuses
    # to start on it.
    fatal: bool = False


def _database() -> Check:
    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        version = cursor.fetchone()[0]
    return Check("database", OK, f"PostgreSQL {version.split()[0]}, database {connection.settings_dict['NAME']}")


def _migrations() -> Check:
    executor = MigrationExecutor(connection)
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    if plan:
        names = [f"{migration.app_label}.{migration.name}" for migration, _ in plan]
        return Check(
            "migrations", FAILED, f"{len(names)} not applied ({', '.join(names)}): run `python manage.py migrate`"
        )
    return Check("migrations", OK, "all applied")


def _embedder(timeout_s: float) -> tuple[Check, object, int | None]:
    """The check, the embedder and the dimension of its vectors (None when it could not be loaded)."""
    from retrieval.embedders import EmbeddingError, get_embedder

    try:
        embedder = get_embedder()
        dim = embedder.loaded_dimension(timeout_s)
    except EmbeddingError as exc:
        return Check("embedder", FAILED, str(exc), fatal=not settings.EMBEDDING_URL), None, None
    return Check("embedder", OK, f"{embedder.model} loaded, {dim} dimensions"), embedder, dim


def dimension_problem(*, model: str, made: int | None, declared: int, stored: int) -> str:
    """What disagrees among the dimension of the embedder's vectors (`made`, None when it is not loaded), the one
    EMBEDDING_DIM declares and the stored vectors' one, and what to do about it; "" when nothing does."""
    if made is None:
        if declared == stored:
            return ""
        return (
            f"EMBEDDING_DIM is {declared} but the stored vectors have {stored} dimensions: set EMBEDDING_DIM="
            f"{stored}, or re-embed the store with an embedder of {declared} dimensions by {REEMBED}"
        )
    if made != stored:
        setting = "" if declared == made else f" (after setting EMBEDDING_DIM={made})"
        return (
            f"the embedder ({model}) makes {made}-dimensional vectors but the stored vectors have {stored} "
            f"dimensions: run {REEMBED}{setting} to re-embed the store with it, or configure an embedder of "
            f"{stored} dimensions"
        )
    if declared != made:
        return (
            f"EMBEDDING_DIM is {declared} but the embedder ({model}) makes {made}-dimensional vectors, as "
            f"stored: set EMBEDDING_DIM={made}"
        )
    return ""


def _stored_vectors(embedder, made: int | None) -> Check:
    from retrieval.reembed import stored_dimension

    model = embedder.model if embedder is not None else settings.EMBEDDING_MODEL
    stored = stored_dimension()
    problem = dimension_problem(model=model, made=made, declared=settings.EMBEDDING_DIM, stored=stored)
    if problem:
        return Check("stored_vectors", FAILED, problem, fatal=True)
    if made is None:
        return Check("stored_vectors", SKIPPED, f"vector({stored}); the embedder is not loaded")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT DISTINCT embedding_model FROM (SELECT embedding_model FROM retrieval_context "
            "WHERE embedding IS NOT NULL LIMIT %s) sample",
            [MODEL_SAMPLE_ROWS],
        )
        models = sorted(row[0] for row in cursor.fetchall())
    others = [name for name in models if name != embedder.model]
    if others:
        return Check(
            "stored_vectors",
            FAILED,
            f"stored vectors were made by {', '.join(others)}, not by the "
            f"configured embedder ({embedder.model}): run {REEMBED}",
        )
    return Check(
        "stored_vectors", OK, f"vector({stored})" + (f", made by {embedder.model}" if models else ", none stored yet")
    )


def _broker_and_workers() -> list[Check]:
    if settings.CELERY_TASK_ALWAYS_EAGER:
        why = "no CELERY_BROKER_URL: tasks run inside the web process"
        return [Check("broker", NOT_CONFIGURED, why), Check("workers", NOT_CONFIGURED, why)]
    from ovsite.celery import app

    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=0)
    except Exception as exc:  # kombu raises its transport's own errors
        return [
            Check("broker", FAILED, "unreachable", str(exc)),
            Check("workers", SKIPPED, "the broker is unreachable"),
        ]
    broker = Check("broker", OK, f"{conn.transport_cls} reachable")
    try:  # the first answer is enough; with none, this waits the whole timeout
        answers = app.control.ping(timeout=WORKER_PING_TIMEOUT_S, limit=1)
    except Exception as exc:  # the broker went away meanwhile
        return [broker, Check("workers", FAILED, "the broker failed during the ping", str(exc))]
    if not answers:
        return [
            broker,
            Check(
                "workers",
                FAILED,
                f"no Celery worker answered within {WORKER_PING_TIMEOUT_S:g} s: writes would wait in the queue",
            ),
        ]
    return [broker, Check("workers", OK, f"{next(iter(answers[0]))} answered")]


def _in_database(name: str, check, *args) -> Check:
    try:
        return check(*args)
    except (OperationalError, InterfaceError):
        raise  # the database itself: _database_checks says so
    except DatabaseError as exc:  # e.g. a schema not migrated yet
        return Check(name, FAILED, "its query failed", str(exc).strip())


def _database_checks(embedder, made: int | None) -> tuple[Check, Check, Check]:
    """database, migrations, stored_vectors. A connection lost during any of them is the database's failure (so a
    probe during an outage always names the database), and the other two are skipped."""
    try:
        return (
            _database(),
            _in_database("migrations", _migrations),
            _in_database("stored_vectors", _stored_vectors, embedder, made),
        )
    except (OperationalError, InterfaceError) as exc:
        skipped = Check("", SKIPPED, "the database is unavailable")
        return (
            Check("database", FAILED, "cannot connect or query", str(exc).strip()),
            replace(skipped, name="migrations"),
            replace(skipped, name="stored_vectors"),
        )


def run_checks(*, embedder_timeout_s: float = PROBE_TIMEOUT_S) -> list[Check]:
    """Every check, in order: database, migrations, embedder, stored_vectors, broker, workers. The ones that need
    the database are skipped while it is down."""
    embedder_check, embedder, made = _embedder(embedder_timeout_s)
    database, migrations, stored_vectors = _database_checks(embedder, made)
    return [database, migrations, embedder_check, stored_vectors, *_broker_and_workers()]


def failed(checks: list[Check]) -> list[Check]:
    return [check for check in checks if check.status == FAILED]


def configuration_warnings() -> list[str]:
    """What `manage.py doctor` warns of beside the checks: the deployment checks of `check --deploy` (the root key,
    the secret key, DEBUG, HTTPS; core/checks.py) and the optional parts left off."""
    from django.core.checks import Tags
    from django.core.checks import run_checks as run_system_checks
    from django.core.checks.messages import WARNING

    warnings = [
        f"{message.id}: {message.msg}" + (f" Hint: {message.hint}" if message.hint else "")
        for message in run_system_checks(tags=[Tags.security], include_deployment_checks=True)
        if message.level >= WARNING and not message.is_silenced()
    ]
    missing = [name for name in ("LLM_URL", "LLM_MODEL") if not getattr(settings, name)]
    if missing:
        warnings.append(
            f"LLM not configured ({' and '.join(missing)} unset): every LLM step is off — abstracts are "
            "the text's head, no query expansion, no rewrite, no memories extracted at commit."
        )
    elif not settings.QUERY_PLANNER_MODEL:
        warnings.append('QUERY_PLANNER_MODEL is unset: rewrite="auto" does not run (query expansion uses LLM_MODEL).')
    return warnings


def _load_token_counter() -> None:
    """Context requests count their block, and the write path every node, in the deployment's tokenizer family: its
    vocabulary (0.3–0.6 s to build) is loaded now, not by the first of them."""
    from profiles.selectors import current_settings
    from retrieval.tokenizers import DEFAULT_FAMILY, counter_for

    try:
        family = current_settings().tokenizer_family
    except DatabaseError:
        family = DEFAULT_FAMILY  # the database check has said why
    counter_for(family)


def prepare_server(*, keep_connection: bool = False) -> None:
    """What a server process does before it takes traffic: load the embedder and import every view (the URLconf is
    otherwise imported by the first request), then raise ImproperlyConfigured on a disagreement of dimensions. Any
    other failure (the database or the embedding endpoint down) is logged and left to /ready: it may mend.

    `keep_connection` for a thread that serves requests next: they find its database connection open and the
    server process behind it warm (its caches of the store's table and indexes loaded by the checks' queries)."""
    from django.urls import resolve

    resolve("/api/v1/search/find")  # imports the URLconf, and with it every view module
    try:
        checks = run_checks(embedder_timeout_s=settings.EMBEDDING_TIMEOUT_S)
        _load_token_counter()
    finally:
        if not keep_connection:
            connection.close()  # a thread that serves no request: its connection would only linger
    _refuse_or_warn(checks)


def _refuse_or_warn(checks: list[Check]) -> None:
    """ImproperlyConfigured naming the fatal failures; any other failure is logged, since it may mend."""
    fatal = [check.detail for check in checks if check.fatal]
    if fatal:
        raise ImproperlyConfigured("ovsite cannot start: " + "; ".join(fatal))
    for check in failed(checks):
        log.warning("not ready yet: %s: %s%s", check.name, check.detail, f" ({check.error})" if check.error else "")


def prepare_worker() -> None:
    """What a Celery worker does before its pool forks: load the embedder and the deployment's tokenizer (the write
    path counts every node in its family), which its processes then share instead of each loading them on its
    first task, and raise ImproperlyConfigured on a disagreement of dimensions, as a server does: every embedding
    it wrote would fail, or be stored beside vectors it cannot be compared with. The database or the embedding
    endpoint down is left to the tasks, which retry."""
    embedder_check, embedder, made = _embedder(settings.EMBEDDING_TIMEOUT_S)
    try:
        _, _, stored_vectors = _database_checks(embedder, made)
        _load_token_counter()
    finally:
        connection.close()  # a connection open across the fork would be shared by the pool's processes
        _forget_endpoint_connections()
    _refuse_or_warn([embedder_check, stored_vectors])


def _forget_endpoint_connections() -> None:
    """An embedding endpoint's client keeps its connection open after the probe, answered or not: forked, the
    pool's processes would all write to that one socket. Each builds its own client on its first task instead; the
    packaged model, loaded here, is what they share."""
    from retrieval.embedders import OpenAIEmbedder, get_embedder

    if not get_embedder.cache_info().currsize:
        return  # nothing was built: the configuration was refused
    built = get_embedder()
    if isinstance(built, OpenAIEmbedder):
        built.close()
        get_embedder.cache_clear()


class PreparedBeforeServing:
    """The ASGI app around `app` that runs `prepare_server` at the lifespan's startup, which uvicorn completes before
    it opens its port; a failure is reported as the startup's, and uvicorn exits with it.

    It runs on `executor`, the pool of threads that serves Django's requests (ovsite/asgi.py): the pool hands the
    first request to that thread, idle by then, with its database connection open and warm."""

    def __init__(self, app, executor):
        self.app = app
        self.executor = executor

    async def __call__(self, scope, receive, send):
        if scope["type"] != "lifespan":
            return await self.app(scope, receive, send)
        startup = await receive()
        try:
            await asyncio.get_running_loop().run_in_executor(
                self.executor, partial(prepare_server, keep_connection=True)
            )
        except ImproperlyConfigured as exc:
            await send({"type": "lifespan.startup.failed", "message": str(exc)})
            return None
        except Exception as exc:  # it must stop the start, not pass for "no lifespan support"
            log.exception("start-up failed")
            await send({"type": "lifespan.startup.failed", "message": f"{type(exc).__name__}: {exc}"})
            return None
        pending = [startup]

        async def replay_startup():
            return pending.pop() if pending else await receive()

        return await self.app(scope, replay_startup, send)
