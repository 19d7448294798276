"""Stored token counts follow the deployment's tokenizer profile (DESIGN.md §5).

Every node's `abstract_tokens`, `overview_tokens` and `content_tokens` are counted at write time with the profile
chosen in `RetrievalSettings.tokenizer_family`; when the operator changes it, every count is made again with the
new profile (`recount_tokens`: a Celery task started by the change, or `manage.py recount_tokens`). Until that has
run, the planner works from the old counts and the final fit in `assembly.pipeline` still keeps `rendered` within
`max_tokens` by the new profile: stale counts cost precision, never the budget.
"""
from celery import shared_task
from django.db import transaction

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


@shared_task(acks_late=True)
def recount_tokens_task() -> int:
    # Reads the profile when it runs: if the operator changed it again meanwhile, the latest one wins.
    return recount_tokens(profile=counting_profile())


def remember_family(sender, instance, **kwargs):
    """pre_save of RetrievalSettings: the profile the stored counts were made with (the default before a row)."""
    previous = sender.objects.filter(pk=instance.pk).values_list("tokenizer_family", flat=True).first()
    instance._counted_with = previous or sender._meta.get_field("tokenizer_family").default


def recount_on_family_change(sender, instance, **kwargs):
    """post_save of RetrievalSettings: a new family → recount every node once the change is committed."""
    if instance.tokenizer_family != getattr(instance, "_counted_with", instance.tokenizer_family):
        transaction.on_commit(recount_tokens_task.delay)
