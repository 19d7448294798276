"""Derives /recall's relevance floor for the embedder in use from the stored files (the chance level of its cosines),
and saves it in the settings row (admin: Retrieval settings, "/recall"). Run it after `reembed` with a new
embedder, or after the store changed in kind; --dry-run prints it only."""

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from profiles.selectors import current_settings
from retrieval.search.calibration import FLOOR_PERCENTILE, derive_relevance_floor
from retrieval.search.query import FindQuery
from retrieval.search.ranking import ranking_for


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser):
        parser.add_argument("--sample", type=int, default=1000, help="files sampled (default 1000)")
        parser.add_argument(
            "--percentile",
            type=float,
            default=FLOOR_PERCENTILE,
            help=f"percentile of random pairs' cosines (default {FLOOR_PERCENTILE})",
        )
        parser.add_argument("--dry-run", action="store_true", help="print the floor, save nothing")

    def handle(self, *args, sample, percentile, dry_run, **options):
        if sample < 2 or not 0 <= percentile <= 100:
            raise CommandError("--sample must be at least 2 and --percentile within 0-100")
        settings_row = current_settings()
        ranking = ranking_for(FindQuery(query=""), settings_row)
        if ranking.mode == "lexical":
            raise CommandError("search_mode is lexical: BM25's order has no chance level to calibrate a floor on")
        calibration = derive_relevance_floor(ranking=ranking, sample=sample, percentile=percentile)
        if calibration is None:
            raise CommandError("fewer than two searchable files: nothing to calibrate against")
        self.stdout.write(
            f"relevance floor {calibration.floor} for {settings.EMBEDDING_MODEL} (percentile "
            f"{calibration.percentile:g} of random pairs' cosines among {calibration.sampled} files, "
            f"{ranking.mode} mode, lexical weight {ranking.lexical_weight:g})"
        )
        if dry_run:
            return
        settings_row.recall_relevance_floor = calibration.floor
        settings_row.relevance_floor_model = settings.EMBEDDING_MODEL
        settings_row.relevance_calibrated_at = timezone.now()
        settings_row.save(
            update_fields=["recall_relevance_floor", "relevance_floor_model", "relevance_calibrated_at", "updated_at"]
        )
