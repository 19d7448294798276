from django.core.management.base import BaseCommand

from retrieval.services import retry_failed


class Command(BaseCommand):
    help = "Re-queues nodes whose processing failed (the Celery beat schedule does this every minute)."

    def handle(self, *args, **options):
        self.stdout.write(f"re-queued {retry_failed()} failed nodes")
