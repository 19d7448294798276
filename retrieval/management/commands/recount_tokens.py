from django.core.management.base import BaseCommand
from tqdm import tqdm

from retrieval.models import Context
from retrieval.recount import counting_profile, recount_for_deployment, stored_counts_are_current
from retrieval.tokens import PROFILES


class Command(BaseCommand):
    help = ("Recounts every node's stored token counts with the deployment's tokenizer profile "
            "(RetrievalSettings.tokenizer_family) and stamps the profile's version; saving the settings in the "
            "admin starts the same recount when the family or the shipped weights changed.")

    def add_arguments(self, parser):
        parser.add_argument("--batch-size", type=int, default=500)
        parser.add_argument("--if-stale", action="store_true",
                            help="only when the counts were made with another profile version (make run uses it "
                                 "after migrate)")

    def handle(self, *args, batch_size, if_stale, **options):
        if if_stale and stored_counts_are_current():
            profile = counting_profile()
            self.stdout.write(f"token counts are current ({PROFILES[profile].version})")
            return
        with tqdm(total=Context.objects.count(), unit="node", desc="recount") as bar:
            profile, changed = recount_for_deployment(batch_size=batch_size, progress=bar.update)
        chosen = PROFILES[profile]
        self.stdout.write(f"recounted tokens with {profile} ({chosen.label}, {chosen.version}): "
                          f"{changed} nodes changed")
