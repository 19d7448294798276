"""Writes of the console: recall events (one per assembly, REST or MCP), their daily roll-up, and the RFC reset."""

import datetime as dt
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count, F, Sum
from django.db.models.functions import TruncDate
from django.utils import timezone
from django.utils.crypto import salted_hmac
from django.utils.module_loading import import_string
from psycopg.types.json import Jsonb
from rest_framework.exceptions import ValidationError

from core.auth import Caller
from core.envelope import validation_errors
from core.errors import OvsiteError
from core.models import AccountUser
from profiles.models import (
    LLMUsage,
    PurposeProfile,
    RecallDaily,
    RecallEvent,
    RetrievalSettings,
    current_request_id,
)
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
    "request_id",
    "session_id",
    "query",
    "query_hashed",
    "request_params",
    "served",
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


QUERY_DIGEST_SALT = "profiles.recall-event-query"


def query_digest(query: str) -> str:
    """The salted SHA-256 (an HMAC keyed from SECRET_KEY) an event keeps of its query when the settings say hash:
    the same query always gives the same digest, so the console finds its events, and the text is not kept."""
    return salted_hmac(QUERY_DIGEST_SALT, query, algorithm="sha256").hexdigest()


@dataclass(frozen=True)
class EventRequest:
    """What a recall event keeps of its request."""

    request_id: str = ""
    session_id: str = ""
    query: str = ""
    query_hashed: bool = False
    params: dict | None = None  # the body as sent, the actor peer and the caller's user: what a replay needs


def event_request(*, caller, data: dict, sent: set[str], actor_peer: str, settings_row) -> EventRequest:
    """Taken while the request is served, so that the id is its own. `data` is the validated body, `sent` the
    fields the client gave (a replay applies today's defaults to the rest). Without the query's text (hashed, or
    recall_event_query_chars 0) the parameters, which hold it, are not kept either."""
    query = data.get("query") or ""
    hashed = settings_row.recall_event_query_hashed and bool(query)
    keep_text = not query or (not hashed and settings_row.recall_event_query_chars > 0)
    params = None
    if keep_text:
        params = {
            "body": {name: data[name] for name in sorted(sent) if name in data},
            "actor_peer": actor_peer,
            "user_id": caller.user_id,
            "role": caller.role,
        }
    return EventRequest(
        request_id=current_request_id(),
        session_id=data.get("session_id") or "",
        query=query_digest(query) if hashed else query[: settings_row.recall_event_query_chars],
        query_hashed=hashed,
        params=params,
    )


def served_entries(entries: list[dict]) -> list[dict]:
    return [{"uri": e["uri"], "detail": e["detail"], "score": e.get("score")} for e in entries]


def _event_row(
    *,
    endpoint: str,
    account_id: int | None,
    stats: dict,
    latency_ms: float,
    request: EventRequest,
    entries: list[dict],
) -> list:
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
        request.request_id,
        request.session_id,
        request.query,
        request.query_hashed,
        None if request.params is None else Jsonb(request.params),
        Jsonb(served_entries(entries)),
        timezone.now(),
    ]


def record_recall_event(
    *,
    endpoint: str,
    account_id: int | None,
    stats: dict,
    latency_ms: float,
    request: EventRequest = EventRequest(),
    entries: Sequence[dict] = (),
) -> None:
    """One RecallEvent from a context or bootstrap result's stats and entries; `endpoint` is one of RecallEvent's
    ENDPOINT_CHOICES, `request` what `event_request` took of the request. Accounting never fails the request it
    accounts for."""
    try:
        row = _event_row(
            endpoint=endpoint,
            account_id=account_id,
            stats=stats,
            latency_ms=latency_ms,
            request=request,
            entries=list(entries),
        )
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


@transaction.atomic
def reset_settings_to_rfc_defaults() -> tuple[RetrievalSettings, str]:
    """Every knob of the settings row back to its shipped (RFC) default; saved, so its signals run. What the
    stored token counts were made with is a fact, not a knob: it is kept, so only a change of family recounts.

    The shipped `recall_purpose` names a built-in purpose the operator may have disabled since (another one was
    /recall's then), and /recall would serve without its quotas: that purpose is enabled again, its quotas as
    they stand. Returns the row and the name of the purpose enabled again ("" when none was)."""
    kept = RetrievalSettings.objects.filter(pk=1).values_list("token_counts_version", flat=True).first() or ""
    row = RetrievalSettings(pk=1, token_counts_version=kept)
    row.save()
    purpose, created = PurposeProfile.objects.get_or_create(
        name=row.recall_purpose, defaults={**BUILTIN_PROFILES[row.recall_purpose], "builtin": True}
    )
    if created or not purpose.enabled:
        purpose.enabled = True
        purpose.save()
        return row, purpose.name
    return row, ""


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


# --- Replay: a recorded request run again now, as its caller, through the service its endpoint's view calls.


class ReplayUnavailable(Exception):
    """Why an event cannot be replayed; the console shows the message."""


@dataclass(frozen=True)
class Replay:
    result: dict | None  # None when the service refused the request now
    error: str = ""
    llm_calls: int = 0


def replay_caller(event: RecallEvent) -> Caller:
    """The caller to replay the event as: its user with their role in its account as it stands now (root has no
    membership); ReplayUnavailable says why there is none."""
    params = event.request_params
    if params is None:
        raise ReplayUnavailable(
            "the query was kept only as a hash, so the request's parameters were not kept"
            if event.query_hashed
            else "the request's parameters were not kept (recall_event_query_chars was 0, or it predates them)"
        )
    if event.account is None:
        raise ReplayUnavailable("the event's account no longer exists")
    user_id = params["user_id"]
    role = AccountUser.objects.filter(account=event.account, user_id=user_id).values_list("role", flat=True).first()
    if role is None and params["role"] != "root":
        raise ReplayUnavailable(f"user {user_id!r} is no longer a member of account {event.account.name!r}")
    return Caller(event.account_id, event.account.name, user_id, role or "root")


def replay_recall_event(event: RecallEvent) -> Replay:
    """Runs the event's request again through settings.OVSITE_RECALL_REPLAY's service for its endpoint, as its
    caller, with today's settings and store, and leaves no trace but the cost: what it wrote (the session's dedup
    ledger) is rolled back and it records no recall event, while its LLM calls stay in the LLM ledger under the
    console request's id."""
    caller = replay_caller(event)
    kind = "recall" if event.endpoint.removeprefix("mcp:") == "recall" else "search"
    run = import_string(settings.OVSITE_RECALL_REPLAY[kind])
    params = event.request_params
    request_id = current_request_id()
    result, error = None, ""
    with transaction.atomic():
        try:
            result, *_ = run(
                caller=caller, body=dict(params["body"]), actor_peer=params["actor_peer"], after_response=[]
            )
        except OvsiteError as exc:
            error = exc.message
        except ValidationError as exc:
            error = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['message']}" for e in validation_errors(exc.detail))
        llm_calls = list(LLMUsage.objects.filter(request_id=request_id).values()) if request_id else []
        transaction.set_rollback(True)
    LLMUsage.objects.bulk_create(LLMUsage(**{k: v for k, v in row.items() if k != "id"}) for row in llm_calls)
    return Replay(result=result, error=error, llm_calls=len(llm_calls))
