from django.core.management.base import BaseCommand
from tqdm import tqdm

from retrieval.models import Context
from retrieval.recount import counting_profile, recount_tokens
from retrieval.tokens import PROFILES


class Command(BaseCommand):
    help = ("Recounts every node's stored token counts with the deployment's tokenizer profile "
            "(RetrievalSettings.tokenizer_family); saving a new family in the admin starts the same recount.")

    def add_arguments(self, parser):
        parser.add_argument("--batch-size", type=int, default=500)

    def handle(self, *args, batch_size, **options):
        profile = counting_profile()
        with tqdm(total=Context.objects.count(), unit="node", desc="recount") as bar:
            changed = recount_tokens(profile=profile, batch_size=batch_size, progress=bar.update)
        self.stdout.write(f"recounted tokens with {profile} ({PROFILES[profile].label}): {changed} nodes changed")
