"""Rebuilds the seven HNSW indexes with m = 24 and ef_construction = 200 (was 16 / 64).

On 100k real embeddings of the bench corpus the old graph found 0.70 of the exact top 10 at ef_search 100 and
0.79 at 400, the new one 0.90 and 0.96 (bench/RESULTS.md, hnsw_sweep; 1M in its scale section). Each index is
dropped and built again inside the migration's transaction: the table is locked for writes and reads until it
commits, and the builds use the session's `maintenance_work_mem` (README, "HNSW: recall against speed": raise it
first on a large store).
"""

import pgvector.django.indexes
from django.db import migrations, models

BUCKETS = {
    "events": models.Q(("category", "events"), ("context_type", "memory")),
    "entities": models.Q(("category__in", ("entities", "profile")), ("context_type", "memory")),
    "preferences": models.Q(("category", "preferences"), ("context_type", "memory")),
    "experiences": models.Q(("category", "experiences"), ("context_type", "memory")),
    "resources": models.Q(("context_type", "resource")),
    "skills": models.Q(("context_type", "skill")),
}
INDEXES = {"context_embedding_hnsw": None, **{f"context_hnsw_{bucket}": q for bucket, q in BUCKETS.items()}}


def hnsw(name: str, condition, m: int, ef_construction: int):
    return pgvector.django.indexes.HnswIndex(
        condition=condition,
        ef_construction=ef_construction,
        fields=["embedding"],
        m=m,
        name=name,
        opclasses=["vector_cosine_ops"],
    )


class Migration(migrations.Migration):
    dependencies = [
        ("retrieval", "0005_newest_first_indexes"),
    ]

    operations = [
        operation
        for name, condition in INDEXES.items()
        for operation in (
            migrations.RemoveIndex(model_name="context", name=name),
            migrations.AddIndex(model_name="context", index=hnsw(name, condition, 24, 200)),
        )
    ]
