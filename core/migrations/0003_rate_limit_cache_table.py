from django.core.management import call_command
from django.db import migrations


def create_cache_table(apps, schema_editor):
    """The database cache's table (`CACHES`, for the rate-limit counters); a no-op when the cache is elsewhere."""
    call_command("createcachetable", database=schema_editor.connection.alias, verbosity=0)


class Migration(migrations.Migration):
    dependencies = [
        ("ovsite", "0002_default_account"),
    ]

    operations = [
        migrations.RunPython(create_cache_table, migrations.RunPython.noop),
    ]
