"""A partial HNSW index for "other", the nodes no quota bucket places (none under the URI rules today): with it
the search partitions cover every node, and a large store's searches in score order walk them and merge
(retrieval.search.query.score_order_scans). It holds only such nodes, so it builds at once.

At 1M real embeddings the whole-table graph found 0.74 of the exact top 10 at ef_search 400, the partitions 0.95
at 100 (bench/RESULTS.md, scale).
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
        migrations.AddIndex(
            model_name="context",
            index=pgvector.django.indexes.HnswIndex(
                condition=models.Q(*BUCKETS, _connector="OR", _negated=True),
                ef_construction=200,
                fields=["embedding"],
                m=24,
                name="context_hnsw_other",
                opclasses=["vector_cosine_ops"],
            ),
        ),
    ]
