"""Processing of written nodes, what `process_task` runs for writes, removals and retries: files are summarised,
counted and embedded, then their directories and every ancestor are refreshed, deepest first."""

import logging

from django.db import transaction
from django.utils import timezone

from retrieval.embedders import EmbeddingError, get_embedder
from retrieval.models import Context, ProcessingTask
from retrieval.recount import write_counter
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


def _embed_rows(rows: list[Context], texts: list[str]) -> str:
    """Sets each row's embedding; returns "" on success or the error (rows are then left unembedded)."""
    if not rows:
        return ""
    embedder = get_embedder()
    try:
        vectors = embedder.embed(texts)
    except EmbeddingError as exc:
        return str(exc)
    for row, vector in zip(rows, vectors, strict=True):  # the embedders check one vector per text
        row.embedding, row.embedding_model = vector, embedder.model
    return ""


def process_files(account_id: int, uris: list[str], summarizer: Summarizer) -> list[str]:
    """Summarises, counts and embeds pending files. Returns the errors (the failed rows say why, too)."""
    rows = list(
        Context.objects.filter(account_id=account_id, uri__in=uris, kind="file", state__in=("pending", "failed"))
    )
    counter = write_counter()
    for row in rows:
        row.abstract = summarizer.file_abstract(row.uri, row.content)
        row.abstract_tokens = counter.count(row.abstract)
        row.overview, row.overview_tokens = "", 0
        row.content_tokens = counter.count(row.content)
    error = _embed_rows(rows, [row.abstract or _name(row.uri) for row in rows])
    for row in rows:
        if error:
            row.state, row.error, row.attempts = "failed", error, row.attempts + 1
        else:
            row.state, row.error = "ready", ""
    Context.objects.bulk_update(
        rows,
        [
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
        ],
        batch_size=500,
    )
    if error:
        log.warning("embedding failed for %d node(s): %s", len(rows), error)
    return [f"{row.uri}: {error}" for row in rows] if error else []


def refresh_directories(account_id: int, uris: list[str], summarizer: Summarizer) -> list[str]:
    """Rebuilds overview and abstract of these directories and all their ancestors, deepest first."""
    wanted = set()
    for uri in uris:
        wanted.add(uri)
        wanted.update(_ancestors_in_store(uri))
    dirs = {row.uri: row for row in Context.objects.filter(account_id=account_id, uri__in=wanted, kind="dir")}
    ordered = sorted(dirs.values(), key=lambda row: row.uri.count("/"), reverse=True)
    # A document (a SKILL.md too) is a hit of its own, wherever it lives.
    searchable = [row for row in ordered if row.content_hash or not parse_stored_uri(row.uri).is_structural]
    fresh: dict[str, str] = {}
    counter = write_counter()
    for row in ordered:
        if row.content_hash:
            row.abstract = summarizer.file_abstract(row.uri, row.content)
            sections = (
                Context.objects.filter(account_id=account_id, parent_uri=row.uri)
                .order_by("uri")
                .values("uri", "abstract")
            )
            row.overview = document_outline(_name(row.uri), [(_name(s["uri"]), s["abstract"]) for s in sections])
        else:
            children = list(
                Context.objects.filter(account_id=account_id, parent_uri=row.uri)
                .order_by("-updated_at", "uri")
                .values("uri", "kind", "abstract")
            )
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
    error = _embed_rows(searchable, [row.abstract for row in searchable])
    for row in ordered:
        row.state, row.error = "ready", ""
    if error:
        for row in searchable:
            row.state, row.error, row.attempts = "failed", error, row.attempts + 1
    Context.objects.bulk_update(
        ordered,
        [
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
        ],
        batch_size=500,
    )
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
