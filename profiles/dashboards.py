"""The two console dashboards: the selectors' sums shaped as plotly.js charts and as CSV rows."""

import csv
import datetime as dt

from django import forms
from django.http import HttpResponse

DEFAULT_DAYS = 30
MAX_DAYS = 366
DAY_MS = 86_400_000  # one tick per day on the date axes


class DateRangeForm(forms.Form):
    since = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))
    until = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))

    def clean(self):
        data = super().clean()
        until = data.get("until") or dt.datetime.now(dt.UTC).date()
        since = data.get("since") or until - dt.timedelta(days=DEFAULT_DAYS - 1)
        if since > until:
            raise forms.ValidationError("since must not be after until")
        if (until - since).days >= MAX_DAYS:
            raise forms.ValidationError(f"a range is at most {MAX_DAYS} days")
        data["since"], data["until"] = since, until
        return data


def date_range(params) -> tuple[DateRangeForm, dt.date, dt.date]:
    """The requested range, or the last 30 days when the form is empty or invalid (its errors are shown)."""
    form = DateRangeForm(params)
    if form.is_valid():
        since, until = form.cleaned_data["since"], form.cleaned_data["until"]
        return DateRangeForm({"since": since, "until": until}), since, until  # shows the range it resolved to
    until = dt.datetime.now(dt.UTC).date()
    return form, until - dt.timedelta(days=DEFAULT_DAYS - 1), until


def _trace(name: str, x: list, y: list, kind: str = "bar") -> dict:
    trace = {"name": name, "x": x, "y": y, "type": "bar" if kind == "bar" else "scatter"}
    if kind == "line":
        trace["mode"] = "lines+markers"
    return trace


def _chart(chart_id: str, title: str, traces: list[dict], y_title: str, stacked: bool = False) -> dict:
    return {
        "id": chart_id,
        "title": title,
        "traces": traces,
        "layout": {
            "barmode": "stack" if stacked else "group",
            "yaxis": {"title": {"text": y_title}},
            "xaxis": {"type": "date", "dtick": DAY_MS, "tickformat": "%b %d"},
        },
    }


def traffic_charts(traffic: dict) -> list[dict]:
    days, endpoints = traffic["days"], traffic["endpoints"]
    x = [row["day"].isoformat() for row in days]
    by_group: dict[str, dict[str, int]] = {}
    for row in traffic["groups"]:
        label = f"{row['endpoint']} · {row['purpose'] or 'no purpose'}"
        by_group.setdefault(label, {})[row["day"].isoformat()] = row["requests"]
    return [
        _chart(
            "requests",
            "Requests by endpoint and purpose",
            [_trace(label, x, [counts.get(day, 0) for day in x]) for label, counts in sorted(by_group.items())],
            "requests",
            stacked=True,
        ),
        _chart(
            "tokens",
            "Mean used vs max tokens",
            [
                _trace("used tokens", x, [round(r["mean_used_tokens"], 1) for r in days], "line"),
                _trace("max tokens", x, [round(r["mean_max_tokens"], 1) for r in days], "line"),
            ],
            "tokens",
        ),
        _chart(
            "tiers",
            "Entries by tier",
            [_trace(tier, x, [r[f"tier_{tier}"] for r in days]) for tier in ("full", "overview", "abstract", "uri")],
            "entries",
            stacked=True,
        ),
        _chart(
            "dropped",
            "Dropped and cooled entries",
            [
                _trace("dropped", x, [r["dropped"] for r in days], "line"),
                _trace("cooled", x, [r["cooled"] for r in days], "line"),
            ],
            "entries",
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
        ),
        _chart(
            "latency",
            "Latency p50 / p95 (ms)",
            [
                _trace("p50", x, [_round(r["latency_p50"]) for r in days], "line"),
                _trace("p95", x, [_round(r["latency_p95"]) for r in days], "line"),
            ],
            "ms",
        ),
        {
            "id": "endpoint-latency",
            "title": "Latency p50 / p95 by endpoint (ms)",
            "traces": [
                _trace(p, [r["endpoint"] for r in endpoints], [_round(r[f"latency_{p}"]) for r in endpoints])
                for p in ("p50", "p95")
            ],
            "layout": {"barmode": "group", "yaxis": {"title": {"text": "ms"}}},
        },
    ]


def cost_charts(cost: dict) -> list[dict]:
    by_day = cost["by_day"]
    x = [day.isoformat() for day in sorted(by_day)]
    per_kind_day: dict[str, dict[str, int]] = {}
    for row in cost["rows"]:
        kind_days = per_kind_day.setdefault(row["kind"], {})
        day = row["day"].isoformat()
        kind_days[day] = kind_days.get(day, 0) + row["prompt_tokens"] + row["completion_tokens"]
    models = sorted(cost["by_model"])
    return [
        _chart(
            "llm-tokens",
            "Prompt and completion tokens per day",
            [
                _trace("prompt", x, [by_day[d]["prompt_tokens"] for d in sorted(by_day)]),
                _trace("completion", x, [by_day[d]["completion_tokens"] for d in sorted(by_day)]),
            ],
            "tokens",
            stacked=True,
        ),
        _chart(
            "llm-kinds",
            "Tokens per day by kind",
            [_trace(kind, x, [days.get(day, 0) for day in x]) for kind, days in sorted(per_kind_day.items())],
            "tokens",
            stacked=True,
        ),
        {
            "id": "llm-models",
            "title": "Tokens by model",
            "traces": [
                {
                    "name": column,
                    "type": "bar",
                    "x": models,
                    "y": [cost["by_model"][m][f"{column}_tokens"] for m in models],
                }
                for column in ("prompt", "completion")
            ],
            "layout": {"barmode": "stack", "yaxis": {"title": {"text": "tokens"}}},
        },
    ]


def _round(value):
    return None if value is None else round(value, 2)


def money(costs: dict) -> str:
    return ", ".join(f"{amount:.4f} {currency}" for currency, amount in sorted(costs.items())) or "—"


def csv_response(filename: str, header: list[str], rows: list[list]) -> HttpResponse:
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    writer = csv.writer(response)
    writer.writerow(header)
    writer.writerows(rows)
    return response


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
    "latency_p50_ms",
    "latency_p95_ms",
]
COST_CSV = ["day", "kind", "model", "account", "calls", "prompt_tokens", "completion_tokens", "cost", "currency"]


def traffic_csv_rows(traffic: dict) -> list[list]:
    def cell(row, column):
        if column in ("latency_p50_ms", "latency_p95_ms"):
            value = row[column.removesuffix("_ms")]
            return "" if value is None else f"{value:.2f}"
        if column.startswith("mean_"):
            return f"{row[column]:.1f}"
        return row[column].isoformat() if column == "day" else row[column]

    return [[cell(row, column) for column in TRAFFIC_CSV] for row in traffic["groups"]]


def cost_csv_rows(cost: dict) -> list[list]:
    return [
        [
            row["day"].isoformat(),
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
