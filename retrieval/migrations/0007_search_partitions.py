"""Vector searches walk one partial HNSW index per search partition and merge (retrieval.find): the whole-table
index goes, and "other" gets its own for any node the quota buckets do not place.

At 100k real embeddings the whole-table graph found 0.92 of the exact top 10 at ef_search 400, the six bucket
graphs together 0.99 at 40 in the same time (bench/RESULTS.md, scale). Dropping an index is instant; the new one
holds only the nodes outside every bucket, which the URI rules do not write, so it builds at once.
"""
import pgvector.django.indexes
from django.db import migrations, models

BUCKETS = (
    models.Q(("category", "events"), ("context_type", "memory")),
    models.Q(("category__in", ("entities", "profile")), ("context_type", "memory")),
    models.Q(("category", "preferences"), ("context_type", "memory")),
    models.Q(("category", "experiences"), ("context_type", "memory")),
    ("context_type", "resource"),
    ("context_type", "skill"),
)


class Migration(migrations.Migration):

    dependencies = [
        ("ovsite", "0003_rate_limit_cache_table"),
        ("retrieval", "0006_hnsw_m24_ef_construction200"),
    ]

    operations = [
        migrations.RemoveIndex(model_name="context", name="context_embedding_hnsw"),
        migrations.AddIndex(
            model_name="context",
            index=pgvector.django.indexes.HnswIndex(
                condition=models.Q(*BUCKETS, _connector="OR", _negated=True), ef_construction=200,
                fields=["embedding"], m=24, name="context_hnsw_other", opclasses=["vector_cosine_ops"]),
        ),
    ]
