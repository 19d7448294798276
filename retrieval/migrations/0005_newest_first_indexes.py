# bootstrap reads the newest nodes first (its listing, its working state's events): indexes in that order.
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("ovsite", "0003_rate_limit_cache_table"),
        ("retrieval", "0004_processing_task_owner"),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name="context",
            name="context_account_bucket",
        ),
        migrations.AddIndex(
            model_name="context",
            index=models.Index(
                fields=["account", "context_type", "category", "-updated_at", "uri"], name="context_account_bucket"
            ),
        ),
        migrations.AddIndex(
            model_name="context",
            index=models.Index(fields=["account", "-updated_at", "uri"], name="context_account_updated"),
        ),
    ]
