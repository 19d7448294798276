"""The stored-contexts console at scale: the admin changelist's pages (retrieval/admin.py) timed on a loaded store.

    .venv/bin/python -m bench.console [--database ovsite_bench_console] [--runs 5] [--failed 200] [--quiet-wait S]
                                      [--no-write]

On a database that bench/scale.py loaded (`--database`, e.g.
`.venv/bin/python -m bench.scale --size 1000000 --base 20000 --database ovsite_bench_console --no-write`):

1. builds whichever of the model's B-tree and GIN indexes of `retrieval_context` are missing (a scale run stopped
   after its load has only the primary key and the (account, uri) constraint; the HNSW indexes are left as they
   are: the console reads no vector), moves every 1,000th node to a second account (the generator writes one;
   the account filter is timed on both) and marks `--failed` nodes failed, spread over the ids (the generator
   writes only ready ones), then VACUUM ANALYZE when it changed anything;
2. as a superuser, in-process through Django's test client (the request's whole server side, no socket): each
   page once to warm the caches, then `--runs` times, and reports the median; the first page, each filter, a
   URI-prefix search, full-text searches, pages deep in the list and a node's detail page. It also checks that
   no page counts the whole table (a COUNT over retrieval_context without a LIMIT).
"""

import re
import time
from urllib.parse import urlencode

from bench import harness

DATABASE = "ovsite_bench_console"
SECTION_BEGIN, SECTION_END = "<!-- console:begin -->", "<!-- console:end -->"
CHANGELIST = "/admin/retrieval/context/"
GOAL_MS = 1000.0
OTHER_ACCOUNT = "bench-other"  # a second account, so that the account filter selects


def prepare(failed: int) -> list[str]:
    """The missing non-HNSW indexes built, `failed` nodes failed; returns what it did."""
    from django.db import connection
    from pgvector.django import HnswIndex

    from core.models import Account
    from retrieval.models import Context

    done = []
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'retrieval_context'")
        present = {name for (name,) in cursor.fetchall()}
        # Index builds are maintenance, not requests: the GIN index of a million nodes takes minutes.
        cursor.execute("SET statement_timeout = 0")
        cursor.execute("SET maintenance_work_mem = '1GB'")
    with connection.schema_editor(atomic=False) as editor:
        for field in Context._meta.local_fields:  # the single-column indexes of db_index=True, and their _like twins
            if field.db_index and not field.unique:
                for sql in editor._field_indexes_sql(Context, field):
                    name = re.search(r'INDEX "([^"]+)"', str(sql)).group(1)
                    if name not in present:
                        started = time.perf_counter()
                        editor.execute(sql)
                        done.append(f"{name} {time.perf_counter() - started:.0f} s")
        for index in Context._meta.indexes:
            if index.name not in present and not isinstance(index, HnswIndex):
                started = time.perf_counter()
                editor.add_index(Context, index)
                done.append(f"{index.name} {time.perf_counter() - started:.0f} s")
    other, _ = Account.objects.get_or_create(name=OTHER_ACCOUNT)
    if not Context.objects.filter(account=other).exists():
        moved = Context.objects.filter(id__in=range(500, 1_000_001, 1000)).update(account=other)
        done.append(f"{moved} nodes moved to account {OTHER_ACCOUNT}")
    have = Context.objects.filter(state="failed").count()
    if have < failed:
        total = Context.objects.order_by("-id").values_list("id", flat=True).first() or 0
        step = max(1, total // failed)
        ids = list(range(step, total + 1, step))[: failed - have]
        Context.objects.filter(id__in=ids).update(
            state="failed", error="embedding endpoint failed: Timeout (bench/console.py)", attempts=5
        )
        done.append(f"{len(ids)} nodes marked failed")
    with connection.cursor() as cursor:
        if done:
            cursor.execute("VACUUM (ANALYZE) retrieval_context")
        cursor.execute("RESET statement_timeout")
        cursor.execute("RESET maintenance_work_mem")
    return done


def pages() -> list[tuple[str, str]]:
    """(label, path) of every page timed, on the store's own data."""
    from urllib.parse import quote

    from django.urls import reverse
    from django.utils import timezone

    from core.models import Account
    from retrieval.models import Context

    default, other = Account.objects.get(name="default"), Account.objects.get(name=OTHER_ACCOUNT)
    middle = Context.objects.order_by("-id").values_list("id", flat=True).first() // 2
    node = Context.objects.filter(id__gte=middle, kind="file").order_by("id").values("id", "parent_uri").first()
    # As the list's "This year" link does: aware datetimes.
    year = timezone.localtime().replace(month=1, day=1, hour=0, minute=0, second=0, microsecond=0)
    this_year = urlencode({"updated_at__gte": str(year), "updated_at__lt": str(year.replace(year=year.year + 1))})
    last_page = -(-planned_size() // 100)
    return [
        ("first page", CHANGELIST),
        ("account filter, 99.9 % of the nodes", f"{CHANGELIST}?account__id__exact={default.id}"),
        ("account filter, 0.1 % of the nodes", f"{CHANGELIST}?account__id__exact={other.id}"),
        ("state = failed (200 nodes)", f"{CHANGELIST}?state__exact=failed"),
        ("type = memory", f"{CHANGELIST}?context_type__exact=memory"),
        ("bucket = events", f"{CHANGELIST}?bucket=events"),
        ("updated this year", f"{CHANGELIST}?{this_year}"),
        (
            "account + type + state = ready",
            f"{CHANGELIST}?account__id__exact={default.id}&context_type__exact=resource&state__exact=ready",
        ),
        ("URI prefix search", f"{CHANGELIST}?q={quote(node['parent_uri'] + '/')}"),
        ("full-text search, a rare term", f"{CHANGELIST}?q=NIMBUS-6230"),
        ("full-text search, a common term", f"{CHANGELIST}?q=nimbus"),
        ("full-text search, Chinese", f"{CHANGELIST}?q={quote('数据库迁移')}"),
        ("page 50", f"{CHANGELIST}?p=50"),
        ("last page", f"{CHANGELIST}?p={last_page}"),
        ("sorted by last update, in an account", f"{CHANGELIST}?account__id__exact={default.id}&o=-7"),
        ("detail page", reverse("admin:retrieval_context_change", args=[node["id"]])),
    ]


def planned_size() -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT reltuples::bigint FROM pg_class WHERE relname = 'retrieval_context'")
        return cursor.fetchone()[0]


def statements(client, path: str):
    """The response to one GET of `path` and the statements it ran. They are read from the request's own
    connection: the test client's request has its own context, and so its own connection object."""
    from django.core.signals import request_finished, request_started
    from django.db import connections

    logged = {}

    def started(**kwargs):
        connection = connections["default"]
        connection.force_debug_cursor, logged["from"] = True, len(connection.queries_log)

    def finished(**kwargs):
        connection = connections["default"]
        logged["sql"] = [q["sql"] for q in list(connection.queries_log)[logged["from"] :]]
        connection.force_debug_cursor = False

    request_started.connect(started)
    request_finished.connect(finished)
    try:
        response = client.get(path)
    finally:
        request_started.disconnect(started)
        request_finished.disconnect(finished)
    return response, logged["sql"]


def time_pages(runs: int) -> list[dict]:
    from django.contrib.auth.models import User
    from django.test import Client

    user = User.objects.filter(username="bench-console").first() or User.objects.create_superuser(
        "bench-console", "bench@example.com", None
    )
    client = Client()
    client.force_login(user)
    out = []
    for label, path in pages():
        response, sql = statements(client, path)  # also warms the page: its templates, its rows in the cache
        assert response.status_code == 200, (path, response.status_code)
        full_counts = [q for q in sql if "COUNT(" in q.upper() and "retrieval_context" in q and "LIMIT" not in q]
        samples = []
        for _ in range(runs):
            started = time.perf_counter()
            response = client.get(path)
            samples.append((time.perf_counter() - started) * 1000)
        count = re.search(r'id="result-count">([^<]+?) contexts?<', response.content.decode())
        shown = count.group(1) if count else "—"
        out.append(
            {
                "label": label,
                "median_ms": harness.median(samples),
                "max_ms": max(samples),
                "statements": len(sql),
                "full_counts": len(full_counts),
                "count": shown,
            }
        )
        harness.log(f"{label}: {out[-1]['median_ms']:.0f} ms ({shown}; {len(sql)} statements)")
    return out


def render(command: str, size: int, prepared: list[str], rows: list[dict], runs: int, busy: float) -> str:
    store = "built now: " + ", ".join(prepared) if prepared else "indexes and failed nodes already in place"
    lines = [
        SECTION_BEGIN,
        f"## console — the stored-contexts changelist at {size:,} nodes",
        "",
        *harness.heading(command),
        f"Store: {size:,} nodes of bench/scale.py's generator; {store}.  ",
        f"Each page in-process through Django's test client as a superuser (the whole server side, no socket): "
        f"once to warm, then {runs} times; median and slowest, ms; the CPU was {busy:.0%} busy (other work) as "
        "the timing began. Statements: what the page ran; full COUNT: those counting retrieval_context without a "
        'LIMIT. Count: what the list shows ("about": the planner\'s estimate, past 1,000 rows).',
        "",
        "| page | median ms | slowest ms | statements | full COUNT | count shown |",
        "|---|---:|---:|---:|---:|---|",
        *(
            f"| {r['label']} | {r['median_ms']:.0f} | {r['max_ms']:.0f} | {r['statements']} | {r['full_counts']} | "
            f"{r['count']} |"
            for r in rows
        ),
        "",
        f"Goal: every changelist page under {GOAL_MS:.0f} ms at 1M nodes — "
        + ("met." if all(r["median_ms"] < GOAL_MS for r in rows) else "NOT met."),
        SECTION_END,
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = harness.parser(__doc__, DATABASE)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--failed", type=int, default=200, help="nodes marked failed if fewer are")
    parser.add_argument(
        "--quiet-wait", type=float, default=0.0, help="seconds to wait at most for a quiet CPU before timing"
    )
    args = parser.parse_args()
    harness.configure(args.database)
    harness.start_database()
    from retrieval.models import Context

    if not Context.objects.exists():
        raise SystemExit(f"{args.database} holds no nodes: load it with bench/scale.py first (see --help)")
    prepared = prepare(args.failed)
    for step in prepared:
        harness.log(f"prepared: {step}")
    busy = harness.wait_quiet(args.quiet_wait)
    rows = time_pages(args.runs)
    size = harness.loaded_nodes()
    section = render(harness.command_line("bench.console"), size, prepared, rows, args.runs, busy)
    harness.publish(section, SECTION_BEGIN, SECTION_END, write=not args.no_write)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
