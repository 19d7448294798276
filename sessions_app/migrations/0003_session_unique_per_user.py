from django.db import migrations, models


def commit_tasks_belong_to_the_session_user(apps, schema_editor):
    """A commit's task is its session user's (new commits are created so); older ones carried no owner."""
    Commit = apps.get_model("sessions_app", "Commit")
    ProcessingTask = apps.get_model("retrieval", "ProcessingTask")
    for commit_id, user in Commit.objects.values_list("id", "session__user").iterator():
        ProcessingTask.objects.filter(id=commit_id, owner="").update(owner=user)


class Migration(migrations.Migration):
    dependencies = [
        ("ovsite", "0002_default_account"),
        ("retrieval", "0004_processing_task_owner"),
        ("sessions_app", "0002_commit"),
    ]

    operations = [
        migrations.AddConstraint(
            model_name="session",
            constraint=models.UniqueConstraint(
                fields=("account", "user", "session_id"), name="session_unique_per_user"
            ),
        ),
        migrations.RemoveConstraint(
            model_name="session",
            name="session_unique_per_account",
        ),
        migrations.RunPython(commit_tasks_belong_to_the_session_user, migrations.RunPython.noop),
    ]
