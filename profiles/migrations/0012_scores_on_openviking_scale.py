"""Scores move to OpenViking 0.5.2's scale, (1 + cosine) / 2 (docs/retrieval.md, "Scores"): every stored threshold,
which was compared with the raw cosine, becomes the same floor on the new scale, so no search changes behaviour by
the migration itself. Backwards, the inverse."""

import django.core.validators
from django.db import migrations, models


def _convert(apps, to_score):
    settings_row = apps.get_model("profiles", "RetrievalSettings").objects.filter(pk=1).first()
    if settings_row is not None:
        settings_row.context_score_threshold = to_score(settings_row.context_score_threshold)
        settings_row.recall_score_threshold = to_score(settings_row.recall_score_threshold)
        settings_row.save(update_fields=["context_score_threshold", "recall_score_threshold"])
    for profile in apps.get_model("profiles", "PurposeProfile").objects.exclude(score_threshold=None):
        profile.score_threshold = to_score(profile.score_threshold)
        profile.save(update_fields=["score_threshold"])


def cosine_to_score(apps, schema_editor):
    _convert(apps, lambda cosine: round((1 + cosine) / 2, 6))


def score_to_cosine(apps, schema_editor):
    _convert(apps, lambda score: max(0.0, round(2 * score - 1, 6)))


class Migration(migrations.Migration):
    dependencies = [
        ("profiles", "0011_hybrid_search"),
    ]

    operations = [
        migrations.RunPython(cosine_to_score, score_to_cosine),
        migrations.AlterField(
            model_name="purposeprofile",
            name="score_threshold",
            field=models.FloatField(
                blank=True,
                help_text="Default score floor for this purpose, 0–1 on OpenViking's score scale, (1 + cosine) / 2 (default blank: the settings' context_score_threshold).",
                null=True,
                validators=[
                    django.core.validators.MinValueValidator(0.0),
                    django.core.validators.MaxValueValidator(1.0),
                ],
            ),
        ),
        migrations.AlterField(
            model_name="retrievalsettings",
            name="context_score_threshold",
            field=models.FloatField(
                default=0.55,
                help_text="Score floor of /search mode=context, on OpenViking's score scale, (1 + cosine) / 2 (default 0.55: the 0.1 cosine of before the scale changed).",
                validators=[django.core.validators.MinValueValidator(0), django.core.validators.MaxValueValidator(1)],
            ),
        ),
        migrations.AlterField(
            model_name="retrievalsettings",
            name="recall_score_threshold",
            field=models.FloatField(
                default=0.675,
                help_text="Score floor of /recall, on OpenViking's score scale, (1 + cosine) / 2 (default 0.675: the 0.35 cosine of before the scale changed).",
                validators=[django.core.validators.MinValueValidator(0), django.core.validators.MaxValueValidator(1)],
            ),
        ),
    ]
