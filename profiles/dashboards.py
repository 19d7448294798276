"""The console's dashboards: the selectors' sums shaped as plotly.js charts over every bucket of the range (a quiet
day is a zero, not a gap), and as CSV rows, per page and per chart."""

import csv
import datetime as dt

from django import forms
from django.http import HttpResponse

from profiles.selectors import PER_HOUR_MAX_DAYS, PERCENTILES

DEFAULT_DAYS = 30
MAX_DAYS = 366
DAY_MS = 86_400_000
DAILY_TICKS_UP_TO = 31  # beyond, plotly spaces the date ticks itself


class DateRangeForm(forms.Form):
    since = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))
    until = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))
    per = forms.ChoiceField(choices=[("day", "per day"), ("hour", "per hour")], required=False)

    def clean(self):
        data = super().clean()
        until = data.get("until") or dt.datetime.now(dt.UTC).date()
        since = data.get("since") or until - dt.timedelta(days=DEFAULT_DAYS - 1)
        per = data.get("per") or "day"
        if since > until:
            raise forms.ValidationError("since must not be after until")
        if (until - since).days >= MAX_DAYS:
            raise forms.ValidationError(f"a range is at most {MAX_DAYS} days")
        if per == "hour" and (until - since).days >= PER_HOUR_MAX_DAYS:
            raise forms.ValidationError(f"per hour, a range is at most {PER_HOUR_MAX_DAYS} days")
        data["since"], data["until"], data["per"] = since, until, per
        return data


def date_range(params) -> tuple[DateRangeForm, dt.date, dt.date, str]:
    """The requested range and bucket, or the last 30 days per day when the form is empty or invalid (its errors
    are shown)."""
    form = DateRangeForm(params)
    if form.is_valid():
        data = form.cleaned_data
        shown = DateRangeForm({"since": data["since"], "until": data["until"], "per": data["per"]})
        return shown, data["since"], data["until"], data["per"]  # shows the range it resolved to
    until = dt.datetime.now(dt.UTC).date()
    return form, until - dt.timedelta(days=DEFAULT_DAYS - 1), until, "day"


def _key(bucket) -> str:
    return bucket.isoformat() if isinstance(bucket, dt.date) and not isinstance(bucket, dt.datetime) else _hour(bucket)


def _hour(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M")


def _trace(name: str, x: list, y: list, kind: str = "bar") -> dict:
    trace = {"name": name, "x": x, "y": y, "type": "bar" if kind == "bar" else "scatter"}
    if kind == "line":
        trace["mode"] = "lines+markers"
    return trace


def _x_range(first, last, per: str) -> list[str]:
    """The whole range and nothing past it, half a bucket either side so the first and last bars show whole."""
    if per == "hour":
        half = dt.timedelta(minutes=30)
        return [_hour(first - half), _hour(last + half)]
    return [f"{first - dt.timedelta(days=1)}T12:00", f"{last}T12:00"]


def _chart(chart_id: str, title: str, traces: list[dict], y_title: str, *, per: str, bounds: tuple, **options) -> dict:
    """A chart over time, `bounds` its first and last bucket: one tick per day up to a month of days."""
    xaxis = {"type": "date", "title": {"text": f"{per} (UTC)"}, "range": _x_range(*bounds, per)}
    points = len(traces[0]["x"])
    if per == "day":
        xaxis["tickformat"] = "%b %d"
        if points <= DAILY_TICKS_UP_TO:
            xaxis["dtick"] = DAY_MS
    else:
        xaxis["tickformat"] = "%b %d %H:%M"
    yaxis = {"title": {"text": y_title}, "rangemode": "tozero"}
    if options.get("percent"):
        yaxis["range"], yaxis["ticksuffix"] = [0, 100], " %"
    return {
        "id": chart_id,
        "title": title,
        "x_title": per,
        "traces": traces,
        "layout": {"barmode": "stack" if options.get("stacked") else "group", "yaxis": yaxis, "xaxis": xaxis},
    }


def _category_chart(chart_id: str, title: str, x_title: str, traces: list[dict], y_title: str, stacked=False) -> dict:
    return {
        "id": chart_id,
        "title": title,
        "x_title": x_title,
        "traces": traces,
        "layout": {
            "barmode": "stack" if stacked else "group",
            "yaxis": {"title": {"text": y_title}, "rangemode": "tozero"},
            "xaxis": {"type": "category", "title": {"text": x_title}},
        },
    }


def _round(value):
    return None if value is None else round(value, 2)


def traffic_charts(traffic: dict) -> list[dict]:
    days, endpoints, per = traffic["days"], traffic["endpoints"], traffic["per"]
    x = [_key(row["day"]) for row in days]
    chart = {"per": per, "bounds": (days[0]["day"], days[-1]["day"])}
    by_group: dict[str, dict[str, int]] = {}
    for row in traffic["groups"]:
        label = f"{row['endpoint']} · {row['purpose'] or 'no purpose'}"
        by_group.setdefault(label, {})[_key(row["day"])] = row["requests"]
    return [
        _chart(
            "requests",
            "Requests by endpoint and purpose",
            [_trace(label, x, [counts.get(day, 0) for day in x]) for label, counts in sorted(by_group.items())]
            or [_trace("requests", x, [0] * len(x))],
            "requests",
            stacked=True,
            **chart,
        ),
        _chart(
            "hit-rate",
            "Hit rate: requests that served at least one entry",
            [_trace("hit rate", x, [_percent(r["hit_rate"]) for r in days], "line")],
            "%",
            percent=True,
            **chart,
        ),
        _chart(
            "latency",
            "Latency p50 / p95 / p99 (ms)",
            [_trace(p.removeprefix("latency_"), x, [_round(r[p]) for r in days], "line") for p in PERCENTILES],
            "ms",
            **chart,
        ),
        _chart(
            "tokens",
            "Mean used vs max tokens",
            [
                _trace("used tokens", x, [round(r["mean_used_tokens"], 1) for r in days], "line"),
                _trace("max tokens", x, [round(r["mean_max_tokens"], 1) for r in days], "line"),
            ],
            "tokens",
            **chart,
        ),
        _chart(
            "tiers",
            "Entries by tier",
            [_trace(tier, x, [r[f"tier_{tier}"] for r in days]) for tier in ("full", "overview", "abstract", "uri")],
            "entries",
            stacked=True,
            **chart,
        ),
        _chart(
            "dropped",
            "Dropped and cooled entries",
            [
                _trace("dropped", x, [r["dropped"] for r in days], "line"),
                _trace("cooled", x, [r["cooled"] for r in days], "line"),
            ],
            "entries",
            **chart,
        ),
        _chart(
            "outcomes",
            "Expansion and rewrite outcomes",
            [
                _trace(name.replace("_", " "), x, [r[name] for r in days])
                for name in (
                    "expansion_used",
                    "expansion_failed",
                    "rewrite_ok",
                    "rewrite_failed",
                    "rewrite_timeout",
                    "rewrite_empty",
                )
            ],
            "requests",
            stacked=True,
            **chart,
        ),
        _category_chart(
            "endpoint-latency",
            "Latency p50 / p95 / p99 by endpoint (ms)",
            "endpoint",
            [
                _trace(
                    p.removeprefix("latency_"), [r["endpoint"] for r in endpoints], [_round(r[p]) for r in endpoints]
                )
                for p in PERCENTILES
            ],
            "ms",
        ),
    ]


def _percent(rate):
    return None if rate is None else round(rate * 100, 1)


def _tokens_per(rows: list[dict], key: str, x: list[str]) -> list[dict]:
    """One stacked trace per value of `key`: prompt + completion tokens per bucket."""
    series: dict[str, dict[str, int]] = {}
    for row in rows:
        per_bucket = series.setdefault(row[key], {})
        bucket = _key(row["day"])
        per_bucket[bucket] = per_bucket.get(bucket, 0) + row["prompt_tokens"] + row["completion_tokens"]
    return [_trace(name, x, [counts.get(b, 0) for b in x]) for name, counts in sorted(series.items())] or [
        _trace("tokens", x, [0] * len(x))
    ]


def cost_charts(cost: dict) -> list[dict]:
    x = [_key(bucket) for bucket in cost["buckets"]]
    chart = {"per": cost["per"], "bounds": (cost["buckets"][0], cost["buckets"][-1])}
    by_day = {_key(bucket): row for bucket, row in cost["by_day"].items()}
    models = sorted(cost["by_model"])
    return [
        _chart(
            "llm-tokens",
            "Prompt and completion tokens",
            [
                _trace(column, x, [by_day[b][f"{column}_tokens"] if b in by_day else 0 for b in x])
                for column in ("prompt", "completion")
            ],
            "tokens",
            stacked=True,
            **chart,
        ),
        _chart("llm-kinds", "Tokens by kind", _tokens_per(cost["rows"], "kind", x), "tokens", stacked=True, **chart),
        _chart(
            "rewrite-purposes",
            "Digest rewrite tokens by purpose",
            _tokens_per(cost["rewrite"], "purpose", x),
            "tokens",
            stacked=True,
            **chart,
        ),
        _chart(
            "rewrite-models",
            "Digest rewrite tokens by model",
            _tokens_per(cost["rewrite"], "model", x),
            "tokens",
            stacked=True,
            **chart,
        ),
        _category_chart(
            "llm-models",
            "Tokens by model",
            "model",
            [_trace(c, models, [cost["by_model"][m][f"{c}_tokens"] for m in models]) for c in ("prompt", "completion")],
            "tokens",
            stacked=True,
        ),
    ]


def money(costs: dict) -> str:
    return ", ".join(f"{amount:.4f} {currency}" for currency, amount in sorted(costs.items())) or "—"


def csv_response(filename: str, header: list[str], rows: list[list]) -> HttpResponse:
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    writer = csv.writer(response)
    writer.writerow(header)
    writer.writerows(rows)
    return response


def chart_csv(chart: dict) -> tuple[list[str], list[list]]:
    """A chart as a table: its x (bucket or category) then one column per trace, an empty cell where a trace has
    no value (a percentile of a bucket without requests)."""
    header = [chart["x_title"], *(trace["name"] for trace in chart["traces"])]
    x = chart["traces"][0]["x"] if chart["traces"] else []
    rows = [[label, *("" if t["y"][i] is None else t["y"][i] for t in chart["traces"])] for i, label in enumerate(x)]
    return header, rows


TRAFFIC_CSV = [
    "day",
    "endpoint",
    "purpose",
    "requests",
    "mean_used_tokens",
    "mean_max_tokens",
    "returned",
    "tier_full",
    "tier_overview",
    "tier_abstract",
    "tier_uri",
    "dropped",
    "cooled",
    "expansion_used",
    "expansion_failed",
    "rewrite_ok",
    "rewrite_failed",
    "rewrite_timeout",
    "rewrite_empty",
    "hit_rate",
    "latency_p50_ms",
    "latency_p95_ms",
    "latency_p99_ms",
]
COST_CSV = ["day", "kind", "model", "account", "calls", "prompt_tokens", "completion_tokens", "cost", "currency"]


def traffic_csv(traffic: dict) -> tuple[list[str], list[list]]:
    def cell(row, column):
        if column.startswith("latency_"):
            value = row[column.removesuffix("_ms")]
            return "" if value is None else f"{value:.2f}"
        if column == "hit_rate":
            return "" if row[column] is None else f"{row[column]:.4f}"
        if column.startswith("mean_"):
            return f"{row[column]:.1f}"
        return _key(row[column]) if column == "day" else row[column]

    header = [traffic["per"], *TRAFFIC_CSV[1:]]
    return header, [[cell(row, column) for column in TRAFFIC_CSV] for row in traffic["groups"]]


def cost_csv(cost: dict) -> tuple[list[str], list[list]]:
    rows = [
        [
            _key(row["day"]),
            row["kind"],
            row["model"],
            row["account"],
            row["calls"],
            row["prompt_tokens"],
            row["completion_tokens"],
            "" if row["cost"] is None else f"{row['cost']:.6f}",
            row["currency"],
        ]
        for row in cost["rows"]
    ]
    return [cost["per"], *COST_CSV[1:]], rows
