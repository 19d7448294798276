# The embedding dimension comes from the deployment's embedder (EMBEDDING_DIM); `manage.py reembed` changes it.

import django.contrib.postgres.fields
import django.db.models.deletion
import pgvector.django.indexes
import pgvector.django.vector
from django.conf import settings
from django.db import migrations, models
from pgvector.django import VectorExtension


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("ovsite", "0001_initial"),
    ]

    operations = [
        VectorExtension(),
        migrations.CreateModel(
            name="ProcessingTask",
            fields=[
                ("id", models.UUIDField(primary_key=True, serialize=False)),
                ("kind", models.CharField(max_length=32)),
                (
                    "status",
                    models.CharField(
                        choices=[
                            ("pending", "pending"),
                            ("running", "running"),
                            ("done", "done"),
                            ("failed", "failed"),
                        ],
                        default="pending",
                        max_length=8,
                    ),
                ),
                (
                    "uris",
                    django.contrib.postgres.fields.ArrayField(
                        base_field=models.CharField(max_length=1024), default=list, size=None
                    ),
                ),
                ("error", models.TextField(blank=True, default="")),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("finished_at", models.DateTimeField(blank=True, null=True)),
                ("account", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, to="ovsite.account")),
            ],
        ),
        migrations.CreateModel(
            name="Context",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("uri", models.CharField(max_length=1024)),
                ("parent_uri", models.CharField(db_index=True, max_length=1024)),
                ("kind", models.CharField(choices=[("file", "file"), ("dir", "dir")], max_length=4)),
                (
                    "context_type",
                    models.CharField(
                        choices=[("memory", "memory"), ("resource", "resource"), ("skill", "skill")], max_length=8
                    ),
                ),
                ("category", models.CharField(blank=True, default="", max_length=16)),
                (
                    "owner",
                    models.CharField(
                        blank=True,
                        default="",
                        help_text='The user whose private space holds the node; "" when shared in the account.',
                        max_length=64,
                    ),
                ),
                ("peer", models.CharField(blank=True, default="", max_length=64)),
                ("abstract", models.TextField(blank=True, default="")),
                ("overview", models.TextField(blank=True, default="")),
                ("content", models.TextField(blank=True, default="")),
                ("abstract_tokens", models.PositiveIntegerField(default=0)),
                ("overview_tokens", models.PositiveIntegerField(default=0)),
                ("content_tokens", models.PositiveIntegerField(default=0)),
                (
                    "tags",
                    django.contrib.postgres.fields.ArrayField(
                        base_field=models.CharField(max_length=64), blank=True, default=list, size=None
                    ),
                ),
                ("created_at", models.DateTimeField()),
                ("updated_at", models.DateTimeField()),
                ("event_time", models.DateTimeField(blank=True, null=True)),
                (
                    "embedding",
                    pgvector.django.vector.VectorField(blank=True, dimensions=settings.EMBEDDING_DIM, null=True),
                ),
                ("embedding_model", models.CharField(blank=True, default="", max_length=128)),
                ("content_hash", models.CharField(blank=True, default="", max_length=64)),
                (
                    "state",
                    models.CharField(
                        choices=[("pending", "pending"), ("ready", "ready"), ("failed", "failed")],
                        default="pending",
                        max_length=8,
                    ),
                ),
                ("error", models.TextField(blank=True, default="")),
                ("attempts", models.PositiveSmallIntegerField(default=0)),
                (
                    "account",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="contexts", to="ovsite.account"
                    ),
                ),
            ],
            options={
                "indexes": [
                    models.Index(fields=["account", "state"], name="context_account_state"),
                    models.Index(
                        fields=["account", "uri"],
                        name="context_account_uri_prefix",
                        opclasses=["int8_ops", "varchar_pattern_ops"],
                    ),
                    pgvector.django.indexes.HnswIndex(
                        ef_construction=64,
                        fields=["embedding"],
                        m=16,
                        name="context_embedding_hnsw",
                        opclasses=["vector_cosine_ops"],
                    ),
                ],
                "constraints": [models.UniqueConstraint(fields=("account", "uri"), name="context_account_uri_unique")],
            },
        ),
    ]
