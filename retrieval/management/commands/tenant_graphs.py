from django.core.management.base import BaseCommand

from retrieval.tenant_graphs import refresh


class Command(BaseCommand):
    help = (
        "Builds the HNSW graph and the GIN index of each tenant of OVSITE_TENANT_GRAPHS_FROM nodes or more and "
        "drops those no longer wanted (the Celery beat schedule does this every hour); CREATE INDEX CONCURRENTLY, "
        "so searches and writes go on."
    )

    def handle(self, *args, **options):
        done = refresh(log=self.stdout.write)
        self.stdout.write(f"built {len(done.create)} tenant indexes, dropped {len(done.drop)}")
