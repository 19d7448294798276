from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from retrieval.embedders import EmbeddingError
from retrieval.models import Context
from retrieval.reembed import reembed_all


class Command(BaseCommand):
    help = (
        "Re-embeds every node with the configured embedder (EMBEDDING_*); retypes the column if the dim changed. "
        "Searches wait while the HNSW indexes are rebuilt at the end."
    )

    def add_arguments(self, parser):
        parser.add_argument("--batch-size", type=int, default=256)
        parser.add_argument("--workers", type=int, default=2, help="embedding threads (one BLAS thread each)")
        parser.add_argument(
            "--maintenance-work-mem",
            default="1GB",
            help="for the HNSW rebuild: a graph that outgrows it builds far slower",
        )

    def handle(self, *args, batch_size, workers, maintenance_work_mem, **options):
        try:
            with tqdm(total=Context.objects.count(), unit="node", desc="reembed") as bar:
                done = reembed_all(
                    batch_size=batch_size,
                    workers=workers,
                    maintenance_work_mem=maintenance_work_mem,
                    progress=bar.update,
                    announce=bar.set_postfix_str,
                )
        except EmbeddingError as exc:
            raise CommandError(f"nothing changed: {exc}") from exc
        self.stdout.write(f"re-embedded {done} nodes")
