import operator
from functools import reduce

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.db import models
from django.db.models.functions import Left
from pgvector.django import HnswIndex, VectorField

from core.models import Account

# Build parameters of every HNSW index (README, "HNSW: recall against speed"); a change needs a migration that
# rebuilds them.
HNSW_M = 24
HNSW_EF_CONSTRUCTION = 200

BUCKET_CONDITIONS = {
    "events": models.Q(context_type="memory", category="events"),
    "entities": models.Q(context_type="memory", category__in=("entities", "profile")),
    "preferences": models.Q(context_type="memory", category="preferences"),
    "experiences": models.Q(context_type="memory", category="experiences"),
    "resources": models.Q(context_type="resource"),
    "skills": models.Q(context_type="skill"),
}
# In a large store a vector search walks one small graph per partition and merges (retrieval.search): one graph of
# the whole store mixes languages and kinds of text, and a question far from all of them is led into one region
# and misses the rest (bench/RESULTS.md, scale). The URI rules put each embedded node in a quota bucket; "other"
# holds any node they do not place, so no search can miss it.
SEARCH_PARTITIONS = {**BUCKET_CONDITIONS, "other": ~reduce(operator.or_, BUCKET_CONDITIONS.values())}

# The lexical index (docs/retrieval.md, "Search modes"): English stemming and stop words; ovsite_lexical
# (migration 0008) cuts runs of Chinese, Japanese and Korean, which PostgreSQL's parser leaves whole, into
# overlapping character pairs, and a query is cut the same way. A file's content counts up to its first
# LEXICAL_CONTENT_CHARS characters (a tsvector holds at most 1 MB); a parsed document's sections are files of
# their own, each indexed whole.
LEXICAL_CONFIG = "english"
LEXICAL_CONTENT_CHARS = 100_000


def _lexical(text, weight: str) -> SearchVector:
    return SearchVector(
        models.Func(text, function="ovsite_lexical", output_field=models.TextField()),
        config=LEXICAL_CONFIG,
        weight=weight,
    )


class Context(models.Model):
    """One node of the `viking://` tree (docs/design.md §3): L0 abstract, L1 overview, L2 content, with token counts."""

    KIND_CHOICES = [("file", "file"), ("dir", "dir")]
    TYPE_CHOICES = [("memory", "memory"), ("resource", "resource"), ("skill", "skill")]
    STATE_CHOICES = [("pending", "pending"), ("ready", "ready"), ("failed", "failed")]

    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="contexts")
    uri = models.CharField(max_length=1024)
    parent_uri = models.CharField(max_length=1024, db_index=True)
    kind = models.CharField(max_length=4, choices=KIND_CHOICES)
    context_type = models.CharField(max_length=8, choices=TYPE_CHOICES)
    category = models.CharField(max_length=16, blank=True, default="")
    owner = models.CharField(
        max_length=64,
        blank=True,
        default="",
        help_text='The user whose private space holds the node; "" when shared in the account.',
    )
    peer = models.CharField(max_length=64, blank=True, default="")
    abstract = models.TextField(blank=True, default="")
    overview = models.TextField(blank=True, default="")
    content = models.TextField(blank=True, default="")
    abstract_tokens = models.PositiveIntegerField(default=0)
    overview_tokens = models.PositiveIntegerField(default=0)
    content_tokens = models.PositiveIntegerField(default=0)
    tags = ArrayField(models.CharField(max_length=64), default=list, blank=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    event_time = models.DateTimeField(null=True, blank=True)
    embedding = VectorField(dimensions=settings.EMBEDDING_DIM, null=True, blank=True)
    embedding_model = models.CharField(max_length=128, blank=True, default="")
    content_hash = models.CharField(max_length=64, blank=True, default="")
    state = models.CharField(max_length=8, choices=STATE_CHOICES, default="pending")
    error = models.TextField(blank=True, default="")
    attempts = models.PositiveSmallIntegerField(default=0)
    # Computed by PostgreSQL from the three levels on every write (write path, bulk load, reembed alike), so it
    # can never lag them; abstracts weigh most, then overviews, then content.
    # A directory's content is a parsed document's whole text, which its sections index already; left out, it is
    # not tokenised again on every refresh of the directory's overview.
    lexemes = models.GeneratedField(
        expression=_lexical("abstract", "A")
        + _lexical("overview", "B")
        + _lexical(
            models.Case(
                models.When(kind="file", then=Left("content", LEXICAL_CONTENT_CHARS)), default=models.Value("")
            ),
            "C",
        ),
        output_field=SearchVectorField(),
        db_persist=True,
    )

    class Meta:
        constraints = [models.UniqueConstraint(fields=["account", "uri"], name="context_account_uri_unique")]
        indexes = [
            models.Index(fields=["account", "state"], name="context_account_state"),
            # Whether a quota bucket has any node at all, before its HNSW scan (the gate of
            # retrieval.search.statements.nearest_select); and a bucket's newest first, as bootstrap's working state
            # reads its events (retrieval.search.bootstrap.newest_events).
            models.Index(
                fields=["account", "context_type", "category", "-updated_at", "uri"], name="context_account_bucket"
            ),
            # The newest nodes first, as bootstrap's listing reads them (retrieval.search.bootstrap.newest_files):
            # without it every visible row is sorted.
            models.Index(fields=["account", "-updated_at", "uri"], name="context_account_updated"),
            # Prefix scans (`uri LIKE 'viking://…/%'`) for target_uri, ls -r and rm -r.
            models.Index(
                fields=["account", "uri"],
                opclasses=["int8_ops", "varchar_pattern_ops"],
                name="context_account_uri_prefix",
            ),
            # The whole table's graph, which searches in score order walk in a small store, and one partial index
            # per search partition (retrieval.search.query.partition_predicate), which purposes walk always and searches
            # in score order in a large store (retrieval.search.query.score_order_scans).
            HnswIndex(
                name="context_embedding_hnsw",
                fields=["embedding"],
                m=HNSW_M,
                ef_construction=HNSW_EF_CONSTRUCTION,
                opclasses=["vector_cosine_ops"],
            ),
            *[
                HnswIndex(
                    name=f"context_hnsw_{name}",
                    fields=["embedding"],
                    m=HNSW_M,
                    ef_construction=HNSW_EF_CONSTRUCTION,
                    opclasses=["vector_cosine_ops"],
                    condition=condition,
                )
                for name, condition in SEARCH_PARTITIONS.items()
            ],
            GinIndex(fields=["lexemes"], name="context_lexemes_gin"),
        ]

    def __str__(self):
        return self.uri


class ProcessingTask(models.Model):
    """A unit of background processing that a client can poll (`GET /api/v1/tasks/{id}`)."""

    STATUS_CHOICES = [("pending", "pending"), ("running", "running"), ("done", "done"), ("failed", "failed")]
    id = models.UUIDField(primary_key=True)
    account = models.ForeignKey(Account, on_delete=models.CASCADE)
    kind = models.CharField(max_length=32)
    status = models.CharField(max_length=8, choices=STATUS_CHOICES, default="pending")
    uris = ArrayField(models.CharField(max_length=1024), default=list)
    owner = models.CharField(
        max_length=64,
        blank=True,
        default="",
        help_text="The user whose private space the task touches; empty for shared spaces.",
    )
    error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
