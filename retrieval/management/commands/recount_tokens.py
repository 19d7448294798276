from django.core.management.base import BaseCommand
from tqdm import tqdm

from profiles.selectors import current_settings
from retrieval.models import Context
from retrieval.recount import recount_for_deployment, stored_counts_are_current
from retrieval.tokenizers import LABELS, version_of


class Command(BaseCommand):
    help = (
        "Recounts every node's stored token counts with the deployment's tokenizer family "
        "(RetrievalSettings.tokenizer_family) and stamps what counted them; saving the settings in the "
        "admin starts the same recount when the family changed, and `--if-stale` when a release changed the "
        "tokenizer or the estimator's weights."
    )

    def add_arguments(self, parser):
        parser.add_argument("--batch-size", type=int, default=500)
        parser.add_argument(
            "--if-stale",
            action="store_true",
            help="only when the counts were made with another family or version (make run uses it after migrate)",
        )

    def handle(self, *args, batch_size, if_stale, **options):
        if if_stale and stored_counts_are_current():
            self.stdout.write(f"token counts are current ({version_of(current_settings().tokenizer_family)})")
            return
        total = Context.objects.count()
        if not total:  # a first `make run`: nothing to count, and no progress bar of nothing
            counter, _ = recount_for_deployment(batch_size=batch_size)
            self.stdout.write(f"no stored nodes to recount; token counts will be made with {counter.version}")
            return
        with tqdm(total=total, unit="node", desc="recount") as bar:
            counter, changed = recount_for_deployment(batch_size=batch_size, progress=bar.update)
        self.stdout.write(
            f"recounted tokens with {counter.family} ({LABELS[counter.family]}, {counter.version}): "
            f"{changed} nodes changed"
        )
