"""Writes of the console: recall events (one per assembly, REST or MCP), their daily roll-up, and the RFC reset."""

import datetime as dt
import logging

from django.db import connection, transaction
from django.db.models import Count, F, Sum
from django.db.models.functions import TruncDate
from django.utils import timezone

from profiles.models import PurposeProfile, RecallDaily, RecallEvent, RetrievalSettings
from profiles.seeds import BUILTIN_PROFILES
from profiles.selectors import current_settings

log = logging.getLogger(__name__)

ROLLED_UP = ("used_tokens", "max_tokens", "returned", "dropped", "cooled")
ROLL_UP_LOCK = 0x5245_4341  # pg_advisory_xact_lock key of the roll-up ("RECA")


# The event's columns in the order `_event_row` gives them.
_EVENT_COLUMNS = (
    "endpoint",
    "purpose",
    "account_id",
    "max_tokens",
    "used_tokens",
    "candidates",
    "returned",
    "dropped",
    "cooled",
    "tier_full",
    "tier_overview",
    "tier_abstract",
    "tier_uri",
    "query_expansion",
    "rewrite",
    "search_mode",
    "score_threshold",
    "threshold_source",
    "below_threshold",
    "relevance_strong",
    "latency_ms",
    "created_at",
)
_EVENT_VALUES = ", ".join(["%s"] * len(_EVENT_COLUMNS))
_INSERT_EVENT = f"INSERT INTO {RecallEvent._meta.db_table} ({', '.join(_EVENT_COLUMNS)}) "
# One statement, one round trip, committed without waiting for the WAL flush: set_config(..., true) lasts for the
# statement's own transaction. The ORM's BEGIN/SET/INSERT/COMMIT cost ~4× as much, the flush ~10× (bench/RESULTS.md,
# recall_events); an event lost in a crash costs a dashboard point.
_INSERT_EVENT_RELAXED = (
    f"WITH relaxed AS (SELECT set_config('synchronous_commit', 'off', true)) "
    f"{_INSERT_EVENT}SELECT {_EVENT_VALUES} FROM relaxed"
)


def _event_row(*, endpoint: str, account_id: int | None, stats: dict, latency_ms: float) -> list:
    tiers = stats["tier_counts"]
    threshold = stats.get("threshold") or {}  # a bootstrap has none
    return [
        endpoint,
        stats["purpose"] or "",
        account_id or None,
        stats["max_tokens"],
        stats["used_tokens"],
        stats["candidates"],
        stats["returned"],
        stats["dropped"],
        stats["dedup"]["cooled"],
        tiers["full"],
        tiers["overview"],
        tiers["abstract"],
        tiers["uri"],
        stats["query_expansion"],
        stats["rewrite"],
        stats.get("search_mode", ""),
        threshold.get("score_threshold"),
        threshold.get("source", ""),
        threshold.get("below", 0),
        threshold.get("strong"),
        latency_ms,
        timezone.now(),
    ]


def record_recall_event(*, endpoint: str, account_id: int | None, stats: dict, latency_ms: float) -> None:
    """One RecallEvent from a context or bootstrap result's stats; `endpoint` is one of RecallEvent's
    ENDPOINT_CHOICES. Accounting never fails the request it accounts for."""
    try:
        row = _event_row(endpoint=endpoint, account_id=account_id, stats=stats, latency_ms=latency_ms)
        if connection.in_atomic_block:
            # Inside a caller's transaction (tests, ATOMIC_REQUESTS): a savepoint, so a failed INSERT leaves the
            # caller's transaction usable, and the caller's durability is left alone.
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(f"{_INSERT_EVENT}VALUES ({_EVENT_VALUES})", row)
        else:
            with connection.cursor() as cursor:
                cursor.execute(_INSERT_EVENT_RELAXED, row)
    except Exception:
        log.exception("could not record a recall event")


def roll_up_recall_events(*, now: dt.datetime | None = None) -> int:
    """Folds the events older than the retention window into RecallDaily (adding to a day already there) and
    deletes them, in one transaction; returns how many events were folded."""
    now = now or timezone.now()
    cutoff = now - dt.timedelta(days=current_settings().recall_event_retention_days)
    with transaction.atomic():
        with connection.cursor() as cursor:  # two roll-ups at once would count the same events twice
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [ROLL_UP_LOCK])
        old = RecallEvent.objects.filter(created_at__lt=cutoff)  # new events are never older than the cutoff
        groups = list(
            old.annotate(day=TruncDate("created_at"))
            .values("day", "endpoint", "purpose")
            .annotate(
                requests=Count("id"),
                latency_ms_sum=Sum("latency_ms"),
                **{f"{name}_sum": Sum(name) for name in ROLLED_UP},
            )
            .order_by()
        )
        for group in groups:
            daily, _ = RecallDaily.objects.get_or_create(
                day=group["day"], endpoint=group["endpoint"], purpose=group["purpose"]
            )
            RecallDaily.objects.filter(pk=daily.pk).update(
                requests=F("requests") + group["requests"],
                latency_ms_sum=F("latency_ms_sum") + group["latency_ms_sum"],
                **{name: F(name) + group[f"{name}_sum"] for name in ROLLED_UP},
            )
        folded, _ = old.delete()
    return folded


def reset_settings_to_rfc_defaults() -> RetrievalSettings:
    """Every knob of the settings row back to its shipped (RFC) default; saved, so its signals run. What the
    stored token counts were made with is a fact, not a knob: it is kept, so only a change of family recounts."""
    kept = RetrievalSettings.objects.filter(pk=1).values_list("token_counts_version", flat=True).first() or ""
    row = RetrievalSettings(pk=1, token_counts_version=kept)
    row.save()
    return row


def reset_profile_to_rfc_defaults(profile: PurposeProfile) -> bool:
    """A built-in purpose back to the RFC's quotas and ratio, its optional defaults cleared; False for a profile
    the RFC does not define."""
    shipped = BUILTIN_PROFILES.get(profile.name)
    if shipped is None:
        return False
    profile.quotas = dict(shipped["quotas"])
    profile.events_budget_ratio = shipped["events_budget_ratio"]
    profile.detail, profile.max_tokens, profile.score_threshold, profile.tokenizer_family = "", None, None, ""
    profile.enabled = True
    profile.save()
    return True
