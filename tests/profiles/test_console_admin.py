"""The operator console: settings and purpose profiles edited in the admin — validated as form errors, never a 500,
recorded in the admin history, live on the next request — and the staff-only dashboards with their CSV export."""

import csv
import datetime as dt
import io
import json
from decimal import Decimal

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth.models import User
from django.forms.models import model_to_dict
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from core.models import Account
from profiles.models import LLMUsage, ModelPrice, PurposeProfile, RecallDaily, RecallEvent, RetrievalSettings
from profiles.seeds import BUILTIN_PROFILES

SEARCH = "/api/v1/search/search"


def form_data(obj, **overrides) -> dict:
    """What the admin's change form posts for `obj`, with `overrides`: every editable field, as the browser
    sends it (JSON as text, None as an empty field)."""
    data = {}
    for name, value in {**model_to_dict(obj), **overrides}.items():
        if name == "id":
            continue
        if isinstance(value, dict):
            value = json.dumps(value)
        data[name] = "" if value is None else value
    return {k: v for k, v in data.items() if v is not False}  # an unchecked box is absent


def change_url(obj) -> str:
    return reverse(f"admin:profiles_{obj._meta.model_name}_change", args=[obj.pk])


def coding() -> PurposeProfile:
    return PurposeProfile.objects.get(name="coding")


def settings_row() -> RetrievalSettings:
    return RetrievalSettings.objects.get(pk=1)


def search_stats(api, **body) -> dict:
    status, result = api.post(SEARCH, {"query": "anything", "mode": "context", **body})
    assert status == 200, result
    return result["result"]["stats"]


# Retrieval settings


def test_every_settings_knob_says_what_it_does_and_its_default():
    for field in RetrievalSettings._meta.get_fields():
        if field.name in ("id", "updated_at", "token_counts_version"):  # bookkeeping, not knobs
            continue
        assert len(field.help_text) > 20, field.name
        assert "default" in field.help_text.lower() or "RFC:" in field.help_text, field.name


@pytest.mark.parametrize(
    "field,value",
    [
        ("context_score_threshold", "1.5"),
        ("recall_score_threshold", "-0.1"),
        ("default_max_tokens", "10"),
        ("default_max_tokens", "40000"),
        ("recall_dedup_turns", "101"),
        ("per_entry_cap_tokens", "8"),
        ("recall_intent_timeout_s", "0"),
        ("recall_rewrite_timeout_s", "301"),
        ("max_expansion_queries", "4"),
        ("rewrite_max_bullets", "0"),
        ("recall_event_retention_days", "0"),
        ("memory_detail_cap", "everything"),
        ("default_max_tokens", "many"),
    ],
)
def test_out_of_range_settings_are_form_errors_and_change_nothing(operator, field, value):
    before = model_to_dict(settings_row())
    response = operator.post(change_url(settings_row()), form_data(settings_row(), **{field: value}))
    assert response.status_code == 200
    assert field in response.context["adminform"].form.errors
    assert model_to_dict(settings_row()) == before


def test_a_settings_change_applies_to_the_next_request_and_is_in_the_history(operator, api):
    assert search_stats(api)["max_tokens"] == 1600
    response = operator.post(change_url(settings_row()), form_data(settings_row(), default_max_tokens=900))
    assert response.status_code == 302, response.context["adminform"].form.errors
    assert search_stats(api)["max_tokens"] == 900
    entry = LogEntry.objects.get(object_id="1", content_type__model="retrievalsettings")
    assert entry.user == operator.user and entry.action_flag == CHANGE
    assert "Default max tokens" in entry.get_change_message()


def test_every_settings_knob_is_on_the_change_form_and_saves(operator):
    """The admin lists the form's fields by fieldset: a field left out of them is not on the page, and a post that
    sends it is saved without it, silently."""
    page = operator.get(change_url(settings_row()))
    adminform = page.context["adminform"]
    knobs = {field.name for field in RetrievalSettings._meta.concrete_fields} - {"id"}
    missing = knobs - set(adminform.form.fields) - set(adminform.readonly_fields)
    assert not missing, f"settings fields in no fieldset of profiles/admin.py: {sorted(missing)}"
    assert 'name="bootstrap_working_state_peer_share"' in page.content.decode()

    too_high = form_data(settings_row(), bootstrap_working_state_peer_share="1.5")
    assert (
        "bootstrap_working_state_peer_share"
        in operator.post(change_url(settings_row()), too_high).context["adminform"].form.errors
    )
    response = operator.post(
        change_url(settings_row()), form_data(settings_row(), bootstrap_working_state_peer_share=0.6)
    )
    assert response.status_code == 302, response.context["adminform"].form.errors
    assert settings_row().bootstrap_working_state_peer_share == 0.6


def test_reset_to_rfc_defaults_restores_every_knob_and_is_logged(operator):
    RetrievalSettings.objects.filter(pk=1).update(
        default_max_tokens=900, recall_score_threshold=0.9, max_expansion_queries=1
    )
    response = operator.post(
        reverse("admin:profiles_retrievalsettings_changelist"),
        {"action": "reset_to_rfc_defaults", "_selected_action": ["1"]},
    )
    assert response.status_code == 302
    row, shipped = settings_row(), RetrievalSettings()
    for field in RetrievalSettings._meta.concrete_fields:
        if field.name not in ("id", "updated_at", "token_counts_version"):
            assert getattr(row, field.name) == getattr(shipped, field.name), field.name
    assert LogEntry.objects.get(content_type__model="retrievalsettings").change_message == "Reset to RFC defaults."


def test_reset_enables_again_the_purpose_recall_names_so_recall_keeps_its_quotas(operator, api):
    """An operator moved /recall to their own purpose and disabled coding; the reset names coding again, so it
    must be enabled again (with the quotas it has), or /recall would serve without a purpose."""
    PurposeProfile.objects.create(name="triage", quotas={"events": 3})
    RetrievalSettings.objects.filter(pk=1).update(recall_purpose="triage")
    PurposeProfile.objects.filter(name="coding").update(enabled=False, quotas={"events": 5, "skills": 1})
    response = operator.post(
        reverse("admin:profiles_retrievalsettings_changelist"),
        {"action": "reset_to_rfc_defaults", "_selected_action": ["1"]},
        follow=True,
    )
    assert settings_row().recall_purpose == "coding"
    assert (coding().enabled, coding().quotas) == (True, {"events": 5, "skills": 1})
    assert "Purpose &#x27;coding&#x27; was disabled and is enabled again" in response.content.decode()
    status, result = api.post("/api/v1/search/recall", {"query": "anything", "max_tokens": 400})
    assert status == 200, result
    assert (result["result"]["stats"]["purpose"], result["result"]["stats"]["quotas"]) == (
        "coding",
        {"events": 5, "skills": 1},
    )


def test_reset_says_nothing_of_purposes_when_recalls_is_enabled(operator):
    response = operator.post(
        reverse("admin:profiles_retrievalsettings_changelist"),
        {"action": "reset_to_rfc_defaults", "_selected_action": ["1"]},
        follow=True,
    )
    assert "Retrieval settings reset to RFC defaults." in response.content.decode()
    assert "enabled again" not in response.content.decode()


# Purpose profiles


@pytest.mark.parametrize(
    "quotas,message",
    [
        ("{not json", "Enter a valid JSON"),
        ('{"memes": 3}', "unknown bucket"),
        ('{"events": -1}', "must be an integer 0–100"),
        ('{"events": 101}', "must be an integer 0–100"),
        ('{"events": 2.5}', "must be an integer 0–100"),
        ('{"events": true}', "must be an integer 0–100"),
        ("[4, 6]", "must be an object"),
        ('"events"', "must be an object"),
    ],
)
def test_bad_quotas_are_form_errors_never_a_500(operator, quotas, message):
    before = coding().quotas
    response = operator.post(change_url(coding()), form_data(coding(), quotas=quotas))
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors["quotas"]
    assert any(message in error for error in errors), errors
    assert message.split()[0] in response.content.decode()
    assert coding().quotas == before


@pytest.mark.parametrize(
    "field,value",
    [("events_budget_ratio", "1.2"), ("max_tokens", "20"), ("score_threshold", "2"), ("detail", "verbose")],
)
def test_out_of_range_profile_fields_are_form_errors(operator, field, value):
    response = operator.post(change_url(coding()), form_data(coding(), **{field: value}))
    assert response.status_code == 200 and field in response.context["adminform"].form.errors


def test_edited_quotas_apply_to_the_next_request_and_are_in_the_history(operator, api):
    assert search_stats(api, purpose="coding")["quotas"] == BUILTIN_PROFILES["coding"]["quotas"]
    new = {"events": 1, "entities": 2, "preferences": 3, "experiences": 0, "resources": 5, "skills": 0}
    response = operator.post(change_url(coding()), form_data(coding(), quotas=json.dumps(new)))
    assert response.status_code == 302
    assert search_stats(api, purpose="coding")["quotas"] == new
    entry = LogEntry.objects.get(content_type__model="purposeprofile")
    assert entry.user == operator.user and entry.object_repr == "coding" and "Quotas" in entry.get_change_message()


def test_builtin_profiles_are_editable_but_not_deletable(operator):
    chat = PurposeProfile.objects.get(name="chat")
    assert operator.get(change_url(chat)).status_code == 200
    delete_url = reverse("admin:profiles_purposeprofile_delete", args=[chat.pk])
    assert operator.get(delete_url).status_code == 403
    assert operator.post(delete_url, {"post": "yes"}).status_code == 403
    extra = PurposeProfile.objects.create(name="triage", quotas={"events": 2})
    changelist = reverse("admin:profiles_purposeprofile_changelist")
    refused = operator.post(
        changelist, {"action": "delete_selected", "post": "yes", "_selected_action": [chat.pk, coding().pk, extra.pk]}
    )
    assert refused.status_code == 403
    assert PurposeProfile.objects.count() == 3
    operator.post(changelist, {"action": "delete_selected", "_selected_action": [extra.pk], "post": "yes"})
    assert sorted(PurposeProfile.objects.values_list("name", flat=True)) == ["chat", "coding"]


def test_a_builtin_profile_keeps_its_name(operator):
    response = operator.post(change_url(coding()), form_data(coding(), name="renamed"))
    assert response.status_code == 302 and coding().name == "coding"


def test_a_new_profile_is_a_valid_purpose_at_once(operator, api):
    status, body = api.post(SEARCH, {"query": "x", "mode": "context", "purpose": "triage"})
    assert status == 422 and body["error"]["code"] == "INVALID_ARGUMENT"
    response = operator.post(
        reverse("admin:profiles_purposeprofile_add"),
        {
            "name": "triage",
            "enabled": "on",
            "quotas": '{"events": 3, "skills": 1}',
            "events_budget_ratio": "0.5",
            "detail": "",
            "max_tokens": "800",
            "score_threshold": "",
        },
    )
    assert response.status_code == 302
    stats = search_stats(api, purpose="triage")
    assert (stats["purpose"], stats["quotas"], stats["max_tokens"]) == ("triage", {"events": 3, "skills": 1}, 800)
    PurposeProfile.objects.filter(name="triage").update(enabled=False)
    assert api.post(SEARCH, {"query": "x", "mode": "context", "purpose": "triage"})[0] == 422


def test_reset_builtin_profiles_to_rfc_defaults(operator):
    PurposeProfile.objects.filter(name="coding").update(
        quotas={"events": 1}, events_budget_ratio=0.9, max_tokens=700, enabled=False, tokenizer_family="qwen"
    )
    extra = PurposeProfile.objects.create(name="triage", quotas={"events": 2})
    response = operator.post(
        reverse("admin:profiles_purposeprofile_changelist"),
        {"action": "reset_to_rfc_defaults", "_selected_action": [coding().pk, extra.pk]},
        follow=True,
    )
    profile = coding()
    assert (
        profile.quotas,
        profile.events_budget_ratio,
        profile.max_tokens,
        profile.enabled,
        profile.tokenizer_family,
    ) == (BUILTIN_PROFILES["coding"]["quotas"], BUILTIN_PROFILES["coding"]["events_budget_ratio"], None, True, "")
    assert PurposeProfile.objects.get(name="triage").quotas == {"events": 2}
    assert "Not built-in" in response.content.decode()
    assert LogEntry.objects.get(object_repr="coding").change_message == "Reset to RFC defaults."


def test_model_prices_are_validated(operator):
    response = operator.post(
        reverse("admin:profiles_modelprice_add"),
        {"model": "m", "prompt_per_million": "-1", "completion_per_million": "2", "currency": "USD"},
    )
    assert response.status_code == 200 and "prompt_per_million" in response.context["adminform"].form.errors


# Dashboards

TRAFFIC, COST = reverse("dashboard-recall-traffic"), reverse("dashboard-llm-cost")


def at(when: dt.datetime, ledger, **fields):
    row = ledger.objects.create(**fields)
    ledger.objects.filter(pk=row.pk).update(created_at=when)  # created_at is auto_now_add
    return row


@pytest.fixture
def traffic(seeded):
    today = timezone.now().replace(hour=12, minute=0)
    yesterday = today - dt.timedelta(days=1)
    account = Account.objects.get(name="default")
    for when, latency, endpoint, purpose, used in (
        (yesterday, 10.0, "search", "chat", 300),
        (yesterday, 20.0, "recall", "coding", 500),
        (today, 30.0, "recall", "coding", 700),
        (today, 40.0, "recall", "coding", 100),
    ):
        at(
            when,
            RecallEvent,
            endpoint=endpoint,
            purpose=purpose,
            account=account,
            max_tokens=1600,
            used_tokens=used,
            returned=4,
            tier_full=1,
            tier_abstract=3,
            dropped=1,
            cooled=2,
            query_expansion="used" if latency > 25 else "off",
            rewrite="timeout" if latency == 40 else "off",
            latency_ms=latency,
        )
    RecallDaily.objects.create(
        day=(today - dt.timedelta(days=40)).date(),
        endpoint="search",
        purpose="",
        requests=10,
        used_tokens=5000,
        max_tokens=16000,
        returned=30,
        latency_ms_sum=100,
    )
    return today


def test_dashboards_are_staff_only(traffic):
    anonymous = Client()
    for url in (TRAFFIC, COST):
        response = anonymous.get(url)
        assert response.status_code == 302 and "/admin/login/" in response["Location"]
    member = User.objects.create_user("member", password="pw")
    client = Client()
    client.force_login(member)
    assert client.get(TRAFFIC).status_code == 302


def test_traffic_dashboard_totals_come_from_the_events_in_range(operator, traffic):
    response = operator.get(TRAFFIC)
    assert response.status_code == 200
    total = response.context["traffic"]["total"]
    assert (total["requests"], total["used_tokens"], total["tier_abstract"], total["cooled"]) == (4, 1600, 12, 8)
    assert (total["expansion_used"], total["rewrite_timeout"]) == (2, 1)
    assert total["latency_p50"] == pytest.approx(25.0) and total["latency_p95"] == pytest.approx(38.5)
    page = response.content.decode()
    assert 'id="total-requests">4<' in page and 'id="total-p50">25.00<' in page
    assert "plotly/plotly.min.js" in page and 'id="chart-latency"' in page
    assert operator.get("/static/plotly/plotly.min.js").status_code == 200  # vendored


def test_traffic_range_filter_includes_the_roll_ups(operator, traffic):
    since = (traffic - dt.timedelta(days=60)).date().isoformat()
    total = operator.get(TRAFFIC, {"since": since}).context["traffic"]["total"]
    assert (total["requests"], total["used_tokens"]) == (14, 6600)
    only_today = traffic.date().isoformat()
    total = operator.get(TRAFFIC, {"since": only_today, "until": only_today}).context["traffic"]["total"]
    assert (total["requests"], total["latency_p50"]) == (2, pytest.approx(35.0))


@pytest.mark.parametrize(
    "params,message",
    [
        ({"since": "2026-13-01"}, "Enter a valid date"),
        ({"since": "2026-02-01", "until": "2026-01-01"}, "must not be after"),
        ({"since": "2020-01-01", "until": "2026-01-01"}, "at most 366 days"),
    ],
)
def test_a_bad_date_range_is_a_form_error_not_a_500(operator, traffic, params, message):
    for url in (TRAFFIC, COST):
        response = operator.get(url, params)
        assert response.status_code == 200 and message in response.content.decode()


def test_traffic_csv_export_has_one_row_per_day_endpoint_and_purpose(operator, traffic):
    response = operator.get(TRAFFIC, {"format": "csv"})
    assert response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [(r["endpoint"], r["purpose"], r["requests"]) for r in rows] == [
        ("recall", "coding", "1"),
        ("search", "chat", "1"),
        ("recall", "coding", "2"),
    ]
    assert rows[2]["mean_used_tokens"] == "400.0" and rows[2]["latency_p50_ms"] == "35.00"


@pytest.fixture
def usage(seeded):
    today = timezone.now().replace(hour=12, minute=0)
    account = Account.objects.get(name="default")
    for when, kind, model, prompt, completion in (
        (today, "rewrite", "fake-planner", 1000, 100),
        (today, "expansion", "fake-planner", 500, 50),
        (today - dt.timedelta(days=2), "summary", "fake-main", 2000, 300),
        (today, "extraction", "fake-main", 4000, 800),
    ):
        at(
            when,
            LLMUsage,
            kind=kind,
            model=model,
            account=account,
            prompt_tokens=prompt,
            completion_tokens=completion,
            latency_ms=5,
            outcome="ok",
        )
    ModelPrice.objects.create(
        model="fake-main", prompt_per_million=Decimal("2.5"), completion_per_million=Decimal("10"), currency="USD"
    )
    return today


def test_cost_dashboard_sums_tokens_and_prices_the_priced_models(operator, usage):
    response = operator.get(COST)
    assert response.status_code == 200
    total = response.context["cost_total"]
    assert (total["calls"], total["prompt_tokens"], total["completion_tokens"]) == (4, 7500, 1250)
    # fake-main: 6000 prompt × 2.5/M + 1100 completion × 10/M = 0.015 + 0.011
    assert total["cost"] == {"USD": Decimal("0.026")} and total["money"] == "0.0260 USD"
    page = response.content.decode()
    assert 'id="total-prompt">7500<' in page and 'id="chart-llm-kinds"' in page
    tables = {table: rows for table, _, rows in response.context["cost_tables"]}
    assert {key: row["prompt_tokens"] for key, row in tables["kind"]} == {
        "expansion": 500,
        "extraction": 4000,
        "rewrite": 1000,
        "summary": 2000,
    }
    assert {key: row["money"] for key, row in tables["model"]} == {"fake-main": "0.0260 USD", "fake-planner": "—"}
    assert [key for key, _ in tables["account"]] == ["default"]


def test_cost_csv_export(operator, usage):
    rows = list(csv.DictReader(io.StringIO(operator.get(COST, {"format": "csv"}).content.decode())))
    assert len(rows) == 4
    summary = next(r for r in rows if r["kind"] == "summary")
    assert (summary["model"], summary["account"], summary["prompt_tokens"], summary["cost"], summary["currency"]) == (
        "fake-main",
        "default",
        "2000",
        "0.008000",
        "USD",
    )
    assert next(r for r in rows if r["kind"] == "rewrite")["cost"] == ""


def test_the_admin_index_links_the_dashboards(operator):
    page = operator.get(reverse("admin:index")).content.decode()
    assert TRAFFIC in page and COST in page
