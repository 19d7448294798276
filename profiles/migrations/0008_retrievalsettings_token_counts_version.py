from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("profiles", "0007_record_recall_events_and_help_texts"),
    ]

    operations = [
        migrations.AddField(
            model_name="retrievalsettings",
            name="token_counts_version",
            field=models.CharField(
                blank=True,
                default="",
                editable=False,
                help_text="The profile version (family and weights) the stored token counts were made with; any other is recounted.",
                max_length=64,
            ),
        ),
    ]
