from django.db import migrations, models

USER_PREFIX = "viking://user/"


def owner_from_uris(apps, schema_editor):
    """A task that touched a private space (`viking://user/{u}/…`) becomes that user's, as new tasks are."""
    ProcessingTask = apps.get_model("retrieval", "ProcessingTask")
    for task in ProcessingTask.objects.filter(owner="").only("id", "uris").iterator():
        owners = {uri[len(USER_PREFIX) :].split("/", 1)[0] for uri in task.uris if uri.startswith(USER_PREFIX)}
        owners.discard("")
        if owners:
            ProcessingTask.objects.filter(id=task.id).update(owner=sorted(owners)[0])


class Migration(migrations.Migration):
    dependencies = [
        ("retrieval", "0003_bucket_hnsw_indexes"),
    ]

    operations = [
        migrations.AddField(
            model_name="processingtask",
            name="owner",
            field=models.CharField(
                blank=True,
                default="",
                help_text="The user whose private space the task touches; empty for shared spaces.",
                max_length=64,
            ),
        ),
        migrations.RunPython(owner_from_uris, migrations.RunPython.noop),
    ]
