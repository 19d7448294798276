"""Stored token counts follow the deployment's tokenizer profile and its shipped weights (DESIGN.md §5).

Every node's `abstract_tokens`, `overview_tokens` and `content_tokens` are counted at write time with the profile
chosen in `RetrievalSettings.tokenizer_family`, and `RetrievalSettings.token_counts_version` names the profile
version (family and weights, `Profile.version`) the stored counts were made with. When the two differ — the
operator chose another family, or a release shipped refitted weights — every count is made again
(`recount_for_deployment`: a Celery task started by saving the settings, and `manage.py recount_tokens --if-stale`,
which `make run` runs after `migrate`). Until that has run, the planner works from the old counts and the final
fit in `assembly.pipeline` still keeps `rendered` within `max_tokens` by the new profile: stale counts cost
precision, never the budget.
"""
from celery import shared_task
from django.db import transaction

from profiles.models import RetrievalSettings
from profiles.selectors import current_settings
from retrieval.models import Context
from retrieval.tokens import PROFILES, estimate_tokens

FIELDS = ("abstract_tokens", "overview_tokens", "content_tokens")


def counting_profile() -> str:
    """The profile the write path counts with: the deployment's."""
    return current_settings().tokenizer_family


def recount_tokens(*, profile: str, batch_size: int = 500, progress=None) -> int:
    """Recounts every node's stored token counts with `profile`; returns how many rows changed."""
    if profile not in PROFILES:
        raise ValueError(f"unknown tokenizer profile {profile!r}; one of {', '.join(PROFILES)}")
    changed, batch, scanned = 0, [], 0
    rows = Context.objects.order_by("id").values_list("id", "abstract", "overview", "content", *FIELDS)
    for pk, abstract, overview, content, *stored in rows.iterator(chunk_size=batch_size):
        scanned += 1
        counts = [estimate_tokens(abstract, profile), estimate_tokens(overview, profile),
                  estimate_tokens(content, profile)]
        if counts != stored:
            batch.append(Context(id=pk, **dict(zip(FIELDS, counts))))
        if scanned % batch_size == 0:
            changed, batch = changed + _save(batch, progress, batch_size), []
    return changed + _save(batch, progress, scanned % batch_size)


def _save(batch: list[Context], progress, scanned: int) -> int:
    if batch:
        Context.objects.bulk_update(batch, FIELDS)
    if progress:
        progress(scanned)
    return len(batch)


def stored_counts_are_current() -> bool:
    """Whether the stored counts were made with the current version of the deployment's profile."""
    settings_row = current_settings()
    return settings_row.token_counts_version == PROFILES[settings_row.tokenizer_family].version


def recount_for_deployment(*, batch_size: int = 500, progress=None) -> tuple[str, int]:
    """Recounts every node with the deployment's profile and stamps its version; returns the profile and how many
    rows changed."""
    profile = counting_profile()
    changed = recount_tokens(profile=profile, batch_size=batch_size, progress=progress)
    # The version these counts were made with, even if the family changed meanwhile: the stamp then differs from
    # the new family's version, and the task that change started recounts again.
    RetrievalSettings.objects.filter(pk=1).update(token_counts_version=PROFILES[profile].version)
    return profile, changed


@shared_task(acks_late=True)
def recount_tokens_task() -> int | None:
    # Reads the profile when it runs: if the operator changed it again meanwhile, the latest one wins.
    return None if stored_counts_are_current() else recount_for_deployment()[1]


def recount_if_stale(sender, instance, **kwargs):
    """post_save of RetrievalSettings: counts made under another profile version → recount once committed."""
    if instance.token_counts_version != PROFILES[instance.tokenizer_family].version:
        transaction.on_commit(recount_tokens_task.delay)
