"""Re-embedding the whole store with the configured embedder (after a model change; the dimension may change)."""
from django.conf import settings
from django.db import connection, transaction

from retrieval.bulk import build_vector_indexes, drop_vector_indexes
from retrieval.embedders import get_embedder
from retrieval.models import Context
from retrieval.uris import parse_uri


def stored_dimension() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT atttypmod FROM pg_attribute WHERE attrelid = 'retrieval_context'::regclass "
                       "AND attname = 'embedding'")
        return cursor.fetchone()[0]


def change_dimension(dim: int) -> None:
    """Drops every vector and the HNSW indexes, and retypes the column; the caller re-embeds."""
    with transaction.atomic(), connection.cursor() as cursor:
        drop_vector_indexes(cursor)
        cursor.execute(f"ALTER TABLE retrieval_context ALTER COLUMN embedding TYPE vector({int(dim)}) USING NULL")
        build_vector_indexes(cursor)


def reembed_all(*, batch_size: int = 256, progress=None) -> int:
    """Re-embeds every searchable node in batches; returns how many were embedded."""
    if stored_dimension() != settings.EMBEDDING_DIM:
        change_dimension(settings.EMBEDDING_DIM)
    embedder = get_embedder()
    rows = (Context.objects.filter(state__in=("ready", "failed")).order_by("id")
            .values_list("id", "uri", "kind", "abstract", "content_hash"))
    pending, containers = [], []
    for pk, uri, kind, abstract, digest in rows.iterator():
        if kind == "dir" and not digest and parse_uri(uri, user_id="").is_structural:  # a document is a hit
            containers.append(pk)
        else:
            pending.append((pk, abstract or uri.rsplit("/", 1)[-1]))
    # Containers are never search hits (VikingUri.is_structural); drop any vector an older rule gave them.
    Context.objects.filter(id__in=containers).update(embedding=None, embedding_model="", state="ready", error="")
    for start in range(0, len(pending), batch_size):
        chunk = pending[start: start + batch_size]
        vectors = embedder.embed([text for _, text in chunk])
        updates = [Context(id=pk, embedding=vector, embedding_model=embedder.model, state="ready", error="")
                   for (pk, _), vector in zip(chunk, vectors)]
        Context.objects.bulk_update(updates, ["embedding", "embedding_model", "state", "error"])
        if progress:
            progress(len(chunk))
    return len(pending)
