"""Processing of written nodes, what `process_task` runs for writes, removals and retries: files are summarised,
counted and embedded, then their directories and every ancestor are refreshed, deepest first."""

import logging
from collections import Counter

from django.db import connection, transaction
from django.utils import timezone

from retrieval.bulk import embedded
from retrieval.embedders import EmbeddingError, get_embedder
from retrieval.models import Context, ProcessingTask
from retrieval.recount import write_counter
from retrieval.search.statements import vector_text
from retrieval.summaries import Summarizer, directory_texts, document_outline
from retrieval.uris import SCHEME, parse_stored_uri

# The logger this code had in retrieval/tasks.py: the worker's log lines keep their name for those who filter on it.
log = logging.getLogger("retrieval.tasks")


def _name(uri: str) -> str:
    return uri.rsplit("/", 1)[-1]


def _ancestors_in_store(uri: str) -> list[str]:
    """Parent URIs up to (not including) the bare `viking://` root; absent ones are skipped by the caller."""
    parts = uri[len(SCHEME) :].split("/")
    return [SCHEME + "/".join(parts[:n]) for n in range(len(parts) - 1, 0, -1)]


# A task embeds its texts in chunks of this many, EMBED_WORKERS threads ahead of the writes (retrieval.bulk.embedded):
# PostgreSQL puts one chunk's rows into the HNSW graphs (most of an UPDATE's cost) while the next chunk embeds.
EMBED_CHUNK = 32
EMBED_WORKERS = 1
FILE_FIELDS = [
    "abstract",
    "abstract_tokens",
    "overview",
    "overview_tokens",
    "content_tokens",
    "embedding",
    "embedding_model",
    "state",
    "error",
    "attempts",
]
DIRECTORY_FIELDS = [
    "abstract",
    "overview",
    "abstract_tokens",
    "overview_tokens",
    "updated_at",
    "embedding",
    "embedding_model",
    "state",
    "error",
    "attempts",
]
VECTOR_FIELDS = ("embedding", "embedding_model")


def _chunks(items: list, size: int = EMBED_CHUNK) -> list[list]:
    return [items[start : start + size] for start in range(0, len(items), size)]


def _lock_rows(rows: list[Context]) -> None:
    """Locks the rows a task is about to write, by id: the order writers lock them in (services._lock_rows)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f'SELECT 1 FROM "{Context._meta.db_table}" WHERE id = ANY(%s) ORDER BY id FOR UPDATE',
            [[row.id for row in rows]],
        )


def _update_rows(rows: list[Context], fields: list[str]) -> None:
    """Writes `fields` of `rows` in one UPDATE that joins the rows' values, one array per column, on their ids.
    Django's bulk_update builds a CASE per column with a branch per row: 2.1 s for 320 rows, nearly all of it
    Python, where this takes 0.6 (bench/RESULTS.md, ingest's note)."""
    if not rows:
        return
    columns = [Context._meta.get_field(name) for name in fields]
    values = [[getattr(row, column.attname) for row in rows] for column in columns]
    for column, column_values in zip(columns, values, strict=True):
        if column.name == "embedding":
            column_values[:] = [None if vector is None else vector_text(vector) for vector in column_values]
    assignments = ", ".join(f'"{column.column}" = v."{column.column}"' for column in columns)
    arrays = ", ".join(f"%s::{column.db_type(connection)}[]" for column in columns)
    names = ", ".join(f'"{column.column}"' for column in columns)
    with connection.cursor() as cursor:
        cursor.execute(
            f'UPDATE "{Context._meta.db_table}" AS c SET {assignments} '
            f"FROM unnest(%s::bigint[], {arrays}) AS v(id, {names}) WHERE c.id = v.id",
            [[row.id for row in rows], *values],
        )


def _embed_and_write(rows: list[Context], texts: list[str], written: list[Context], fields: list[str]) -> str:
    """Embeds `texts` (one per row of `rows`, all of them in `written`), setting each row's vector, and writes
    `fields` of every row of `written`: each chunk of `rows` as soon as its vectors arrive, the others last. Returns
    "" or the embedder's error, after which none of it is written (a savepoint) and the rows' vectors in memory are
    not to be written either. The rows are locked, by id, before any of it."""
    if not written:
        return ""
    embedder = get_embedder()
    _lock_rows(written)
    embedding = {id(row) for row in rows}
    try:
        with transaction.atomic():
            vectors = embedded(embedder.embed, _chunks(texts), EMBED_WORKERS)
            for chunk, chunk_vectors in zip(_chunks(rows), vectors, strict=True):
                for row, vector in zip(chunk, chunk_vectors, strict=True):  # the embedders check one per text
                    row.embedding, row.embedding_model = vector, embedder.model
                _update_rows(chunk, fields)
            _update_rows([row for row in written if id(row) not in embedding], fields)
    except EmbeddingError as exc:
        return str(exc)
    return ""


def process_files(account_id: int, uris: list[str], summarizer: Summarizer) -> list[str]:
    """Summarises, counts and embeds pending files. Returns the errors (the failed rows say why, too)."""
    rows = list(
        Context.objects.filter(
            account_id=account_id, uri__in=uris, kind="file", state__in=("pending", "failed")
        ).order_by("id")
    )
    counter = write_counter()
    for row in rows:
        row.abstract = summarizer.file_abstract(row.uri, row.content)
        row.abstract_tokens = counter.count(row.abstract)
        row.overview, row.overview_tokens = "", 0
        row.content_tokens = counter.count(row.content)
        row.state, row.error = "ready", ""
    error = _embed_and_write(rows, [row.abstract or _name(row.uri) for row in rows], rows, FILE_FIELDS)
    if not error:
        return []
    for row in rows:
        row.state, row.error, row.attempts = "failed", error, row.attempts + 1
    # The vectors stay as they were: a failed embedding writes none.
    _update_rows(rows, [field for field in FILE_FIELDS if field not in VECTOR_FIELDS])
    log.warning("embedding failed for %d node(s): %s", len(rows), error)
    return [f"{row.uri}: {error}" for row in rows]


def refresh_directories(account_id: int, uris: list[str], summarizer: Summarizer) -> list[str]:
    """Rebuilds overview and abstract of these directories and all their ancestors, deepest first."""
    wanted = set()
    for uri in uris:
        wanted.add(uri)
        wanted.update(_ancestors_in_store(uri))
    dirs = {
        row.uri: row for row in Context.objects.filter(account_id=account_id, uri__in=wanted, kind="dir").order_by("id")
    }
    # Deepest first; siblings by id, so that their new updated_at (which orders a folder's listing) follows one rule.
    ordered = sorted(dirs.values(), key=lambda row: row.uri.count("/"), reverse=True)
    # A document (a SKILL.md too) is a hit of its own, wherever it lives.
    searchable = [row for row in ordered if row.content_hash or not parse_stored_uri(row.uri).is_structural]
    fresh: dict[str, str] = {}
    counter = write_counter()
    # The children of every directory in two statements (folders' newest first, documents' sections in URI order),
    # read before any directory of this pass is written, as each directory's own read used to be.
    children_of: dict[str, list[dict]] = {uri: [] for uri in dirs}
    documents = [uri for uri, row in dirs.items() if row.content_hash]
    folders = [uri for uri, row in dirs.items() if not row.content_hash]
    for parents, order in ((folders, ("-updated_at", "uri")), (documents, ("uri",))):
        if parents:
            for child in (
                Context.objects.filter(account_id=account_id, parent_uri__in=parents)
                .order_by(*order)
                .values("parent_uri", "uri", "kind", "abstract")
            ):
                children_of[child.pop("parent_uri")].append(child)
    for row in ordered:
        if row.content_hash:
            row.abstract = summarizer.file_abstract(row.uri, row.content)
            sections = children_of[row.uri]
            row.overview = document_outline(_name(row.uri), [(_name(s["uri"]), s["abstract"]) for s in sections])
        else:
            children = children_of[row.uri]
            for child in children:
                child["name"] = _name(child["uri"])
                child["abstract"] = fresh.get(child["uri"], child["abstract"])
            # Structural folders (memory categories, event dates, skills) are never hits: not worth an LLM call.
            row.abstract, row.overview = (
                summarizer.directory_texts(row.uri, _name(row.uri), children)
                if row in searchable
                else directory_texts(_name(row.uri), children)
            )
        row.abstract_tokens = counter.count(row.abstract)
        row.overview_tokens = counter.count(row.overview)
        row.updated_at = timezone.now()
        fresh[row.uri] = row.abstract
    for row in ordered:
        row.state, row.error = "ready", ""
    error = _embed_and_write(searchable, [row.abstract for row in searchable], ordered, DIRECTORY_FIELDS)
    if error:
        for row in searchable:
            row.state, row.error, row.attempts = "failed", error, row.attempts + 1
        _update_rows(ordered, [field for field in DIRECTORY_FIELDS if field not in VECTOR_FIELDS])
    return [f"{row.uri}: {error}" for row in searchable] if error else []


def run_processing(*, task_id: str) -> str:
    """Runs one ProcessingTask and records how it ended: "done", "failed", or "gone" when there is nothing to do."""
    task = ProcessingTask.objects.filter(id=task_id).first()
    if task is None or task.status == "done":
        return "gone"
    ProcessingTask.objects.filter(id=task_id).update(status="running")
    summarizer = Summarizer(account_id=task.account_id)
    try:
        with transaction.atomic():
            errors = process_files(task.account_id, task.uris, summarizer)
            kinds = dict(
                Context.objects.filter(account_id=task.account_id, uri__in=task.uris).values_list("uri", "kind")
            )
            dirs = [uri for uri in task.uris if kinds.get(uri, "dir") == "dir"]
            parents = [uri.rsplit("/", 1)[0] for uri in task.uris if kinds.get(uri) == "file"]
            errors += refresh_directories(task.account_id, dirs + parents, summarizer)
    except Exception as exc:
        log.exception("processing task %s failed", task_id)
        errors = [f"{type(exc).__name__}: {exc}"]
    ProcessingTask.objects.filter(id=task_id).update(
        status="failed" if errors else "done", error="\n".join(errors), finished_at=timezone.now()
    )
    return "failed" if errors else "done"


def resume_unfinished() -> dict[str, int]:
    """Runs again every processing task a stopped eager server left pending or running, oldest first; how each ended.
    Without a broker a task runs in the request that queued it, so a server stopped mid-task (Ctrl-C during an
    import) leaves its nodes pending with nothing to finish them; a broker hands such a task to another worker
    (`acks_late`) instead. A task's done files are not processed twice (`process_files` takes pending and failed)."""
    unfinished = ProcessingTask.objects.filter(status__in=("pending", "running")).order_by("created_at")
    return dict(Counter(run_processing(task_id=str(task_id)) for task_id in unfinished.values_list("id", flat=True)))
