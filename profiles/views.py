"""The console's dashboards: staff-only admin pages (wrapped by `admin.site.admin_view` in profiles/urls.py)."""

from django.contrib import admin
from django.template.response import TemplateResponse

from profiles import dashboards
from profiles.selectors import llm_cost, recall_traffic


def _page(request, *, title: str, form, charts: list[dict], extra: dict) -> TemplateResponse:
    query = request.GET.copy()
    query["format"] = "csv"
    return TemplateResponse(
        request,
        "profiles/dashboard.html",
        {
            **admin.site.each_context(request),
            "title": title,
            "form": form,
            "charts": charts,
            "csv_query": query.urlencode(),
            **extra,
        },
    )


def recall_traffic_view(request):
    form, since, until = dashboards.date_range(request.GET)
    traffic = recall_traffic(since=since, until=until)
    if request.GET.get("format") == "csv":
        return dashboards.csv_response(
            f"recall-traffic-{since}-{until}.csv", dashboards.TRAFFIC_CSV, dashboards.traffic_csv_rows(traffic)
        )
    return _page(
        request,
        title="Recall traffic",
        form=form,
        charts=dashboards.traffic_charts(traffic),
        extra={"since": since, "until": until, "traffic": traffic},
    )


def llm_cost_view(request):
    form, since, until = dashboards.date_range(request.GET)
    cost = llm_cost(since=since, until=until)
    if request.GET.get("format") == "csv":
        return dashboards.csv_response(
            f"llm-cost-{since}-{until}.csv", dashboards.COST_CSV, dashboards.cost_csv_rows(cost)
        )
    tables = {
        name: sorted(
            ((str(key), {**row, "money": dashboards.money(row["cost"])}) for key, row in cost[name].items()),
            key=lambda item: item[0],
        )
        for name in ("by_kind", "by_model", "by_account")
    }
    return _page(
        request,
        title="LLM cost",
        form=form,
        charts=dashboards.cost_charts(cost),
        extra={
            "since": since,
            "until": until,
            "cost_total": {**cost["total"], "money": dashboards.money(cost["total"]["cost"])},
            "cost_tables": [
                ("kind", tables["by_kind"]),
                ("model", tables["by_model"]),
                ("account", tables["by_account"]),
            ],
        },
    )
