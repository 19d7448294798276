from django.conf import settings
from django.core.management.base import BaseCommand

from retrieval.processing import resume_unfinished


class Command(BaseCommand):
    help = (
        "Finishes the processing tasks a stopped server left unfinished, when tasks run without a broker "
        "(`make run` runs it before serving; with a broker, its workers are handed them again)."
    )

    def handle(self, *args, **options):
        if not settings.CELERY_TASK_ALWAYS_EAGER:
            self.stdout.write("tasks run on a broker, whose workers are handed unfinished ones again: nothing to do")
            return
        ended = resume_unfinished()
        if not ended:
            self.stdout.write("no unfinished processing task")
            return
        self.stdout.write(
            f"finished {sum(ended.values())} processing tasks a stopped server left: "
            + ", ".join(f"{count} {outcome}" for outcome, count in sorted(ended.items()))
        )
