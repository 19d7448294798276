"""The console's pages beside the model admins: the dashboards (staff-only, wrapped by `admin.site.admin_view` in
profiles/urls.py) and a recall event's replay (wired by RecallEventAdmin.get_urls)."""

from django.conf import settings
from django.contrib import admin
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.template.response import TemplateResponse

from profiles import dashboards, services
from profiles.models import LLMUsage, RecallEvent
from profiles.selectors import current_settings, llm_cost, recall_traffic


def _page(request, *, title: str, form, charts: list[dict], empty: dict | None, extra: dict) -> TemplateResponse:
    query = request.GET.copy()
    query["format"] = "csv"
    return TemplateResponse(
        request,
        "profiles/dashboard.html",
        {
            **admin.site.each_context(request),
            "title": title,
            "form": form,
            "charts": [] if empty else charts,
            "empty": empty,
            "csv_query": query.urlencode(),
            **extra,
        },
    )


def _csv(request, name: str, since, until, whole: tuple, charts: list[dict]):
    """The page's rows (format=csv), or one chart's series (format=csv&chart=<id>)."""
    chart_id = request.GET.get("chart")
    if chart_id is None:
        return dashboards.csv_response(f"{name}-{since}-{until}.csv", *whole)
    chart = next((c for c in charts if c["id"] == chart_id), None)
    if chart is None:
        raise Http404(f"no chart {chart_id!r} on this dashboard")
    return dashboards.csv_response(f"{name}-{chart_id}-{since}-{until}.csv", *dashboards.chart_csv(chart))


def _latest(model) -> str:
    latest = model.objects.order_by("-created_at").values_list("created_at", flat=True).first()
    return "" if latest is None else latest.strftime("%Y-%m-%d %H:%M UTC")


def recall_traffic_view(request):
    form, since, until, per = dashboards.date_range(request.GET)
    traffic = recall_traffic(since=since, until=until, per=per)
    charts = dashboards.traffic_charts(traffic)
    if request.GET.get("format") == "csv":
        return _csv(request, "recall-traffic", since, until, dashboards.traffic_csv(traffic), charts)
    empty = None
    if not traffic["total"]["requests"]:
        empty = {"latest": _latest(RecallEvent), "recording_off": not current_settings().record_recall_events}
    return _page(
        request,
        title="Recall traffic",
        form=form,
        charts=charts,
        empty=empty,
        extra={"since": since, "until": until, "traffic": traffic, "dashboard": "traffic"},
    )


def llm_cost_view(request):
    form, since, until, per = dashboards.date_range(request.GET)
    cost = llm_cost(since=since, until=until, per=per)
    charts = dashboards.cost_charts(cost)
    if request.GET.get("format") == "csv":
        return _csv(request, "llm-cost", since, until, dashboards.cost_csv(cost), charts)
    tables = {
        name: sorted(
            ((str(key), {**row, "money": dashboards.money(row["cost"])}) for key, row in cost[name].items()),
            key=lambda item: item[0],
        )
        for name in ("by_kind", "by_model", "by_account", "rewrite_by_purpose", "rewrite_by_model")
    }
    empty = None
    if not cost["total"]["calls"]:
        empty = {"latest": _latest(LLMUsage), "llm_off": not (settings.LLM_URL and settings.LLM_MODEL)}
    return _page(
        request,
        title="LLM cost",
        form=form,
        charts=charts,
        empty=empty,
        extra={
            "since": since,
            "until": until,
            "dashboard": "cost",
            "cost_total": {**cost["total"], "money": dashboards.money(cost["total"]["cost"])},
            "cost_tables": [
                ("kind", "kind", tables["by_kind"]),
                ("model", "model", tables["by_model"]),
                ("account", "account", tables["by_account"]),
                ("rewrite-purpose", "digest rewrite, per purpose", tables["rewrite_by_purpose"]),
                ("rewrite-model", "digest rewrite, per model", tables["rewrite_by_model"]),
            ],
        },
    )


def _compare(then: list[dict], now: list[dict]) -> list[dict]:
    """The entries served then and now, one row per URI: then's order first, then what only now serves."""
    now_by_uri = {entry["uri"]: entry for entry in now}
    then_uris = {entry["uri"] for entry in then}
    rows = []
    for entry in then:
        after = now_by_uri.get(entry["uri"])
        change = "gone" if after is None else "same" if after["detail"] == entry["detail"] else "changed"
        rows.append({"uri": entry["uri"], "then": entry, "now": after, "change": change})
    rows += [{"uri": e["uri"], "then": None, "now": e, "change": "new"} for e in now if e["uri"] not in then_uris]
    return rows


def replay_view(request, model_admin, object_id):
    """GET shows the event and a Replay button; POST runs the request again now (services.replay_recall_event) and
    shows what was served then beside what is served now."""
    event = model_admin.get_object(request, unquote(object_id))
    if event is None:
        raise Http404(f"no recall event {object_id}")
    if not model_admin.has_view_permission(request, event):
        raise PermissionDenied
    context = {
        **admin.site.each_context(request),
        "title": f"Replay of recall event {event.pk}",
        "opts": model_admin.opts,
        "event": event,
        "then_stats": {
            "used / max tokens": f"{event.used_tokens} / {event.max_tokens}",
            "returned": event.returned,
            "threshold": "—" if event.score_threshold is None else f"{event.score_threshold:.4f}",
            "threshold source": event.threshold_source or "—",
            "hits before → after the threshold": f"{event.hits_before_threshold} → {event.candidates}",
            "search mode": event.search_mode or "—",
            "latency": f"{event.latency_ms:.1f} ms",
        },
    }
    try:
        services.replay_caller(event)
    except services.ReplayUnavailable as exc:
        context["unavailable"] = str(exc)
        return TemplateResponse(request, "profiles/replay.html", context)
    if request.method == "POST":
        replay = services.replay_recall_event(event)
        context["replay"] = replay
        if replay.result is not None:
            stats = replay.result["stats"]
            threshold = stats.get("threshold") or {}
            below = threshold.get("below", 0)
            context["now_stats"] = {
                "used / max tokens": f"{stats['used_tokens']} / {stats['max_tokens']}",
                "returned": stats["returned"],
                "threshold": "—" if threshold.get("score_threshold") is None else f"{threshold['score_threshold']:.4f}",
                "threshold source": threshold.get("source") or "—",
                "hits before → after the threshold": f"{stats['candidates'] + below} → {stats['candidates']}",
                "search mode": stats.get("search_mode") or "—",
            }
            context["rows"] = _compare(event.served, services.served_entries(replay.result["entries"]))
    return TemplateResponse(request, "profiles/replay.html", context)
