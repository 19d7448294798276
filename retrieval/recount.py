"""Stored token counts follow the deployment's tokenizer family, counted exactly (docs/tokens.md).

Every node's `abstract_tokens`, `overview_tokens` and `content_tokens` are counted at write time by the counter of
the family chosen in `RetrievalSettings.tokenizer_family` (`retrieval/tokenizers.py`), and
`RetrievalSettings.token_counts_version` names what they were counted with (the family and its packages'
versions, `version_of`). When the two differ — the operator chose another family, or a release ships another
tokenizer version or refitted estimator weights — every count is made again (`recount_for_deployment`: a Celery
task started by saving the settings, and `manage.py recount_tokens --if-stale`, which `make run` runs after
`migrate`). Until that has run, the planner works from the old counts and the final fit in `assembly.pipeline`
still keeps `rendered` within `max_tokens` as the request's family counts it: stale counts cost precision, never
the budget.
"""

from django.db import transaction

from profiles.models import RetrievalSettings
from profiles.selectors import current_settings
from retrieval.models import Context
from retrieval.tokenizers import Counter, counter_for, version_of

FIELDS = ("abstract_tokens", "overview_tokens", "content_tokens")


def write_counter() -> Counter:
    """The counter the write path stores counts with: the deployment's family's."""
    return counter_for(current_settings().tokenizer_family)


def recount_tokens(*, counter: Counter, batch_size: int = 500, progress=None, ids: list[int] | None = None) -> int:
    """Recounts the stored token counts of every node (or of the nodes `ids`) with `counter`; returns how many rows
    changed."""
    changed, batch, scanned = 0, [], 0
    rows = Context.objects.order_by("id").values_list("id", "abstract", "overview", "content", *FIELDS)
    if ids is not None:
        rows = rows.filter(id__in=ids)
    for pk, abstract, overview, content, *stored in rows.iterator(chunk_size=batch_size):
        scanned += 1
        counts = [counter.count(abstract), counter.count(overview), counter.count(content)]
        if counts != stored:
            batch.append(Context(id=pk, **dict(zip(FIELDS, counts, strict=True))))
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
    """Whether the stored counts were made with what the deployment's family counts with now."""
    settings_row = current_settings()
    return settings_row.token_counts_version == version_of(settings_row.tokenizer_family)


def recount_for_deployment(*, batch_size: int = 500, progress=None) -> tuple[Counter, int]:
    """Recounts every node with the deployment's family and stamps its version; returns the counter and how many
    rows changed."""
    counter = write_counter()
    changed = recount_tokens(counter=counter, batch_size=batch_size, progress=progress)
    # The version these counts were made with, even if the family changed meanwhile: the stamp then differs from
    # the new family's version, and the task that change started recounts again.
    RetrievalSettings.objects.filter(pk=1).update(token_counts_version=counter.version)
    return counter, changed


def recount_when_stale() -> int | None:
    """Recounts unless the stored counts are current; how many rows changed, None when they were."""
    # Reads the profile when it runs: if the operator changed it again meanwhile, the latest one wins.
    return None if stored_counts_are_current() else recount_for_deployment()[1]


def recount_if_stale(sender, instance, **kwargs):
    """post_save of RetrievalSettings: counts made under another profile version → recount once committed."""
    from retrieval.tasks import recount_tokens_task  # the tasks call into this module

    if instance.token_counts_version != version_of(instance.tokenizer_family):
        transaction.on_commit(recount_tokens_task.delay)
