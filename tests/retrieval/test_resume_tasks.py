"""Without a broker (`make run`) a processing task runs in the request that queued it: a server stopped mid-task
(Ctrl-C during an import) leaves the task running and its files pending, and nothing would finish them.
`manage.py resume_tasks`, which `make run` runs before serving, does (retrieval/processing.py resume_unfinished)."""

import io

from django.core.management import call_command
from django.test import override_settings

from retrieval.models import Context, ProcessingTask
from tests.conftest import hit_uris

NOTE = "viking://~/memories/preferences/editor.md"
OTHER = "viking://~/memories/preferences/coffee.md"


def _stopped_mid_task(api) -> ProcessingTask:
    """The state a server killed after the write's commit, during its processing, leaves: the task running, the
    files stored but neither summarised nor embedded (one of them already done: it must not be processed again)."""
    api.write_all({NOTE: "The user writes code in Neovim with a tmux split.", OTHER: "Black coffee, no sugar."})
    task = ProcessingTask.objects.latest("created_at")
    Context.objects.filter(uri__endswith="/preferences/editor.md").update(
        state="pending", embedding=None, embedding_model="", abstract=""
    )
    ProcessingTask.objects.filter(id=task.id).update(status="running", finished_at=None)
    return task


def test_resume_tasks_finishes_what_a_stopped_eager_server_left(api):
    task = _stopped_mid_task(api)
    done = Context.objects.get(uri__endswith="/preferences/coffee.md")
    assert not [uri for uri in hit_uris(api.find("which editor do I use?")) if uri.endswith("/editor.md")]
    out = io.StringIO()
    call_command("resume_tasks", stdout=out)
    assert out.getvalue().strip() == "finished 1 processing tasks a stopped server left: 1 done"
    task.refresh_from_db()
    note = Context.objects.get(uri__endswith="/preferences/editor.md")
    assert task.status == "done" and task.finished_at is not None
    assert note.state == "ready" and note.embedding is not None and "Neovim" in note.abstract
    assert hit_uris(api.find("which editor do I use?", limit=1))[0].endswith("/preferences/editor.md")
    # The file the task had finished was left as it was.
    assert Context.objects.get(pk=done.pk).updated_at == done.updated_at
    call_command("resume_tasks", stdout=(out := io.StringIO()))
    assert out.getvalue().strip() == "no unfinished processing task"


@override_settings(CELERY_TASK_ALWAYS_EAGER=False)
def test_with_a_broker_resume_tasks_leaves_unfinished_tasks_to_the_workers(api):
    task = _stopped_mid_task(api)
    call_command("resume_tasks", stdout=(out := io.StringIO()))
    assert "nothing to do" in out.getvalue()
    task.refresh_from_db()
    assert task.status == "running"
