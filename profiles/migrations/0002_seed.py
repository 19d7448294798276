from django.db import migrations

from profiles.seeds import seed_rows


def seed(apps, schema_editor):
    seed_rows(apps.get_model("profiles", "PurposeProfile"), apps.get_model("profiles", "RetrievalSettings"))


class Migration(migrations.Migration):
    dependencies = [("profiles", "0001_initial")]
    operations = [migrations.RunPython(seed, migrations.RunPython.noop)]
