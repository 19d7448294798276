from django.core.management.base import BaseCommand
from tqdm import tqdm

from retrieval.models import Context
from retrieval.reembed import reembed_all


class Command(BaseCommand):
    help = "Re-embeds every node with the configured embedder (EMBEDDING_*); retypes the column if the dim changed."

    def add_arguments(self, parser):
        parser.add_argument("--batch-size", type=int, default=256)

    def handle(self, *args, batch_size, **options):
        with tqdm(total=Context.objects.count(), unit="node", desc="reembed") as bar:
            done = reembed_all(batch_size=batch_size, progress=bar.update)
        self.stdout.write(f"re-embedded {done} nodes")
