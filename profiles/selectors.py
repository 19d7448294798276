import copy
import datetime as dt
from decimal import Decimal

from django.db import connection
from django.db.models import Aggregate, Count, FloatField, OuterRef, Q, Subquery, Sum
from django.db.models.functions import TruncDate, TruncHour

from core.config_cache import ConfigCache, watch
from profiles.models import LLMUsage, ModelPrice, PurposeProfile, RecallDaily, RecallEvent, RetrievalSettings


class _RowReader:
    """One model row by plain SQL, built with `Model.from_db`: read on every request, where composing the ORM (or
    RawQuerySet) query and mapping its columns cost several times the round trip (0.66 → 0.22 ms a read). The
    row's values are kept in a per-process cache (core/config_cache.py) and each call builds its own instance, so a
    caller may change the one it gets (calibrate_scores saves it)."""

    def __init__(self, model, where: str):
        self.model = model
        self.fields = model._meta.concrete_fields
        self.names = [field.attname for field in self.fields]
        columns = ", ".join(f'"{field.column}"' for field in self.fields)
        self.sql = f"SELECT {columns} FROM {model._meta.db_table} WHERE {where}"
        # JSON columns arrive as text (Django's psycopg loaders): each field's own conversion, as the ORM applies.
        self.converters = [
            (index, field.from_db_value) for index, field in enumerate(self.fields) if hasattr(field, "from_db_value")
        ]
        self.cache = ConfigCache(model._meta.label)
        watch(self.cache, model)

    def _values(self, params) -> tuple | None:
        with connection.cursor() as cursor:
            cursor.execute(self.sql, params)
            row = cursor.fetchone()
        if row is None or not self.converters:
            return row
        row = list(row)
        for index, convert in self.converters:
            row[index] = convert(row[index], None, connection)
        return tuple(row)

    def one(self, params=()):
        row = self.cache.get(tuple(params), lambda: self._values(params))
        if row is None:
            return None
        # JSON values (a profile's quotas) are copied with the row, so that no caller changes the cached one.
        return self.model.from_db(connection.alias, self.names, copy.deepcopy(row) if self.converters else row)


_SETTINGS = _RowReader(RetrievalSettings, "id = 1")
_PROFILE = _RowReader(PurposeProfile, "name = %s AND enabled")


def current_settings() -> RetrievalSettings:
    """Read per request through the per-process cache: an operator's change applies to the next request of the
    process that saved it and within `OVSITE_CONFIG_CACHE_SECONDS` in every other worker."""
    settings_row = _SETTINGS.one()
    return settings_row if settings_row is not None else RetrievalSettings(pk=1)


def purpose_profile(name: str) -> PurposeProfile | None:
    return _PROFILE.one([name])


def enabled_purposes() -> list[str]:
    return list(PurposeProfile.objects.filter(enabled=True).order_by("name").values_list("name", flat=True))


# --- The dashboards' reads: a date range of recall traffic and of LLM cost, summed in SQL per day or per hour (UTC),
# shaped in Python; every bucket of the range is listed, so a chart draws a quiet day as zero, not as a gap.

PER_HOUR_MAX_DAYS = 14  # 336 points a series


class Percentile(Aggregate):
    """PostgreSQL's ordered-set aggregate percentile_cont(f) WITHIN GROUP (ORDER BY x)."""

    function = "PERCENTILE_CONT"
    template = "%(function)s(%(fraction)s) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = FloatField()

    def __init__(self, expression, fraction: float, **extra):
        super().__init__(expression, fraction=float(fraction), **extra)


EVENT_SUMS = (
    "used_tokens",
    "max_tokens",
    "returned",
    "dropped",
    "cooled",
    "tier_full",
    "tier_overview",
    "tier_abstract",
    "tier_uri",
)
DAILY_SUMS = ("used_tokens", "max_tokens", "returned", "dropped", "cooled")  # what RecallDaily keeps
OUTCOMES = {
    "expansion_used": Q(query_expansion="used"),
    "expansion_failed": Q(query_expansion="failed"),
    "rewrite_ok": Q(rewrite="ok"),
    "rewrite_failed": Q(rewrite="failed"),
    "rewrite_timeout": Q(rewrite="timeout"),
    "rewrite_empty": Q(rewrite="empty"),
}
PERCENTILES = {"latency_p50": 0.5, "latency_p95": 0.95, "latency_p99": 0.99}
# `events` and `answered` (events that served at least one entry) count kept events only, as the percentiles do:
# the hit rate is answered / events, never diluted by the roll-ups' requests.
TRAFFIC_COLUMNS = ("requests", "events", "answered", *EVENT_SUMS, *OUTCOMES, "latency_ms_sum", *PERCENTILES)


def _bounds(since: dt.date, until: dt.date) -> tuple[dt.datetime, dt.datetime]:
    """The UTC instants of [since 00:00, until+1 00:00): a range on the indexed column, not a cast of it."""
    start = dt.datetime.combine(since, dt.time(), tzinfo=dt.UTC)
    return start, dt.datetime.combine(until + dt.timedelta(days=1), dt.time(), tzinfo=dt.UTC)


def buckets(since: dt.date, until: dt.date, per: str) -> list:
    """Every day (dates) or every hour (UTC datetimes) of the range, in order."""
    if per == "hour":
        start, end = _bounds(since, until)
        return [start + dt.timedelta(hours=h) for h in range(int((end - start).total_seconds()) // 3600)]
    return [since + dt.timedelta(days=d) for d in range((until - since).days + 1)]


def _trunc(per: str, column: str = "created_at"):
    return (TruncHour if per == "hour" else TruncDate)(column, tzinfo=dt.UTC)


def _rolled_bucket(day: dt.date, per: str):
    """Where a daily roll-up sits in the series: its day, or its day's first hour."""
    return dt.datetime.combine(day, dt.time(), tzinfo=dt.UTC) if per == "hour" else day


def _event_metrics() -> dict:
    return {
        "requests": Count("id"),
        "events": Count("id"),
        "answered": Count("id", filter=Q(returned__gt=0)),
        "latency_ms_sum": Sum("latency_ms"),
        **{n: Sum(n) for n in EVENT_SUMS},
        **{n: Count("id", filter=q) for n, q in OUTCOMES.items()},
        **{n: Percentile("latency_ms", fraction) for n, fraction in PERCENTILES.items()},
    }


def _traffic_row(**keys) -> dict:
    return {**keys, **{column: 0 for column in TRAFFIC_COLUMNS}, **dict.fromkeys(PERCENTILES)}


def _with_means(row: dict) -> dict:
    requests, events = row["requests"], row["events"]
    row["mean_used_tokens"] = row["used_tokens"] / requests if requests else 0.0
    row["mean_max_tokens"] = row["max_tokens"] / requests if requests else 0.0
    row["mean_latency_ms"] = row["latency_ms_sum"] / requests if requests else 0.0
    row["hit_rate"] = row["answered"] / events if events else None
    return row


def recall_traffic(*, since: dt.date, until: dt.date, per: str = "day") -> dict:
    """Per (bucket, endpoint, purpose), per bucket, per endpoint and in total: the events in range, plus the daily
    roll-ups of pruned events (which keep counts and token sums; tiers, outcomes, hit rate and latency percentiles
    come from events only). `day` is the bucket: a date, or per hour a UTC datetime. Per endpoint, because a
    bootstrap (no query) or an MCP call is not timed like a REST context request."""
    start, end = _bounds(since, until)
    events = RecallEvent.objects.filter(created_at__gte=start, created_at__lt=end)
    rolled = RecallDaily.objects.filter(day__gte=since, day__lte=until)
    bucket = _trunc(per)

    groups: dict[tuple, dict] = {}
    for row in events.annotate(day=bucket).values("day", "endpoint", "purpose").annotate(**_event_metrics()).order_by():
        groups[(row["day"], row["endpoint"], row["purpose"])] = {**_traffic_row(), **row}
    days = {key: _traffic_row(day=key) for key in buckets(since, until, per)}
    for row in events.annotate(day=bucket).values("day").annotate(**_event_metrics()).order_by():
        days[row["day"]] = {**_traffic_row(), **row}
    endpoints = {
        row["endpoint"]: {**_traffic_row(), **row}
        for row in events.values("endpoint").annotate(**_event_metrics()).order_by()
    }
    total = {**_traffic_row(), **{k: v for k, v in events.aggregate(**_event_metrics()).items() if v is not None}}
    for daily in rolled.values("day", "endpoint", "purpose", "requests", "latency_ms_sum", *DAILY_SUMS):
        day = _rolled_bucket(daily["day"], per)
        key = (day, daily["endpoint"], daily["purpose"])
        targets = (
            groups.setdefault(key, _traffic_row(day=day, endpoint=key[1], purpose=key[2])),
            days.setdefault(day, _traffic_row(day=day)),
            endpoints.setdefault(key[1], _traffic_row(endpoint=key[1])),
            total,
        )
        for target in targets:
            for column in ("requests", "latency_ms_sum", *DAILY_SUMS):
                target[column] += daily[column]
    return {
        "per": per,
        "groups": [_with_means(groups[key]) for key in sorted(groups)],
        "days": [_with_means(days[key]) for key in sorted(days)],
        "endpoints": [_with_means(endpoints[key]) for key in sorted(endpoints)],
        "total": _with_means(total),
    }


def _money(row: dict, prices: dict) -> tuple[Decimal | None, str]:
    price = prices.get(row["model"])
    if price is None:
        return None, ""
    cost = row["prompt_tokens"] * price.prompt_per_million + row["completion_tokens"] * price.completion_per_million
    return cost / Decimal(1_000_000), price.currency


def llm_cost(*, since: dt.date, until: dt.date, per: str = "day") -> dict:
    """LLM calls in range per (bucket, kind, model, account), rolled up per bucket, kind, model and account, with
    money from the ModelPrice table where a model has a price (per currency: prices need not share one). `rewrite`
    is the digest rewrite's share per (bucket, purpose, model): a call's purpose is its request's recall event's
    (the same request id), "(unknown)" once that event is pruned or for a call made outside a request."""
    start, end = _bounds(since, until)
    prices = {p.model: p for p in ModelPrice.objects.all()}
    calls = LLMUsage.objects.filter(created_at__gte=start, created_at__lt=end).annotate(day=_trunc(per))
    sums = {"calls": Count("id"), "prompt_tokens": Sum("prompt_tokens"), "completion_tokens": Sum("completion_tokens")}
    rows = (
        calls.values("day", "kind", "model", "account__name")
        .annotate(**sums)
        .order_by("day", "kind", "model", "account__name")
    )
    out = {
        "per": per,
        "buckets": buckets(since, until, per),
        "rows": [],
        "by_day": {},
        "by_kind": {},
        "by_model": {},
        "by_account": {},
        "total": _cost_row(),
        "rewrite": [],
        "rewrite_by_purpose": {},
        "rewrite_by_model": {},
    }
    for row in rows:
        cost, currency = _money(row, prices)
        line = {
            "day": row["day"],
            "kind": row["kind"],
            "model": row["model"],
            "account": row["account__name"] or "",
            "calls": row["calls"],
            "prompt_tokens": row["prompt_tokens"],
            "completion_tokens": row["completion_tokens"],
            "cost": cost,
            "currency": currency,
        }
        out["rows"].append(line)
        for table, key in (
            ("by_day", line["day"]),
            ("by_kind", line["kind"]),
            ("by_model", line["model"]),
            ("by_account", line["account"]),
        ):
            _add_cost(out[table].setdefault(key, _cost_row()), line)
        _add_cost(out["total"], line)
    event_purpose = RecallEvent.objects.filter(request_id=OuterRef("request_id")).exclude(request_id="")
    rewrites = (
        calls.filter(kind="rewrite")
        .annotate(purpose=Subquery(event_purpose.values("purpose")[:1]))
        .values("day", "purpose", "model")
        .annotate(**sums)
        .order_by("day", "purpose", "model")
    )
    for row in rewrites:
        cost, currency = _money(row, prices)
        purpose = "(unknown)" if row["purpose"] is None else row["purpose"] or "(no purpose)"
        line = {**row, "purpose": purpose, "cost": cost, "currency": currency}
        out["rewrite"].append(line)
        _add_cost(out["rewrite_by_purpose"].setdefault(purpose, _cost_row()), line)
        _add_cost(out["rewrite_by_model"].setdefault(row["model"], _cost_row()), line)
    return out


def _cost_row() -> dict:
    return {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "cost": {}}


def _add_cost(target: dict, line: dict) -> None:
    for column in ("calls", "prompt_tokens", "completion_tokens"):
        target[column] += line[column]
    if line["cost"] is not None:
        target["cost"][line["currency"]] = target["cost"].get(line["currency"], Decimal(0)) + line["cost"]
