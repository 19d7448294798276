"""The operator console: purpose profiles and retrieval settings (live: read per request) with their change
history (django-simple-history: who, when, old → new, revert), the usage ledgers and model prices, recall events
with their replay, and the dashboards (profiles/views.py, linked from the sidebar by profiles/console.py)."""

import json

from django.contrib import admin, messages
from django.http import HttpResponseRedirect
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join
from simple_history.admin import SimpleHistoryAdmin

from profiles import services, views
from profiles.models import LLMUsage, ModelPrice, PurposeProfile, RecallDaily, RecallEvent, RetrievalSettings
from profiles.selectors import current_settings

NO_VALUE = "—"


def milliseconds(value: float | None) -> str:
    """A latency as an operator reads it: `6.1 ms`, not the float's 15 decimals."""
    return NO_VALUE if value is None else f"{value:,.1f} ms"


class HistoryAdmin(SimpleHistoryAdmin):
    """A revert is the admin's own change form filled with the old values: saved through the same form and model
    validation (clean) as an edit, and recorded as a new version that says which one it restored."""

    def save_model(self, request, obj, form, change):
        match = request.resolver_match
        if match is not None and match.url_name.endswith("_simple_history"):
            obj._change_reason = f"reverted to version {match.args[1]}"
        super().save_model(request, obj, form, change)

    def set_history_delta_changes(self, request, historical_records, *args, **kwargs):
        # Only a revert states a reason; the history list shows the others' empty one as a dash, not "None".
        super().set_history_delta_changes(request, historical_records, *args, **kwargs)
        for record in historical_records:
            record.history_change_reason = record.history_change_reason or NO_VALUE


@admin.register(PurposeProfile)
class PurposeProfileAdmin(HistoryAdmin):
    """Quotas are a JSON editor validated by `validate_quotas` (bad JSON, an unknown bucket or an out-of-range
    count is a form error). A new enabled profile is a valid `purpose` on the next request."""

    list_display = (
        "name",
        "enabled",
        "builtin",
        "quotas",
        "events_budget_ratio",
        "detail",
        "max_tokens",
        "score_threshold",
        "tokenizer_family",
    )
    list_filter = ("enabled", "builtin")
    search_fields = ("name",)
    actions = ["reset_to_rfc_defaults"]

    def get_readonly_fields(self, request, obj=None):
        # A built-in purpose keeps its name: the RFC's presets and /recall's default refer to it.
        return ("builtin", "name") if obj is not None and obj.builtin else ("builtin",)

    def has_delete_permission(self, request, obj=None):
        # Built-in purposes and the one /recall's preset names (recall_purpose) are not deleted; a bulk delete
        # that selects one is refused whole.
        return obj is None or not (obj.builtin or obj.name == current_settings().recall_purpose)

    @admin.action(description="Reset selected built-in purposes to RFC defaults")
    def reset_to_rfc_defaults(self, request, queryset):
        reset, skipped = [], []
        for profile in queryset:
            if services.reset_profile_to_rfc_defaults(profile):
                self.log_change(request, profile, "Reset to RFC defaults.")
                reset.append(profile.name)
            else:
                skipped.append(profile.name)
        if reset:
            messages.success(request, "Reset to RFC defaults: " + ", ".join(reset))
        if skipped:
            messages.warning(request, "Not built-in, so no RFC defaults: " + ", ".join(skipped))


@admin.register(RetrievalSettings)
class RetrievalSettingsAdmin(HistoryAdmin):
    """The one settings row; every field's help text says what it does and its default, validators its range."""

    list_display = (
        "__str__",
        "default_max_tokens",
        "context_score_threshold",
        "recall_score_threshold",
        "tokenizer_family",
        "token_counts_version",
        "updated_at",
    )
    readonly_fields = ("token_counts_version", "relevance_calibrated_at", "updated_at")
    actions = ["reset_to_rfc_defaults"]
    fieldsets = [
        (
            "Scores and budget",
            {"fields": ["context_score_threshold", "recall_score_threshold", "default_max_tokens", "tokenizer_family"]},
        ),
        ("Search", {"fields": ["search_mode", "hybrid_lexical_weight", "lexical_rescue_coverage"]}),
        (
            "/recall",
            {
                "fields": [
                    "recall_purpose",
                    "recall_dedup_turns",
                    "dedup_turn_seconds",
                    "recall_relevance_floor",
                    "relevance_floor_model",
                    "relevance_calibrated_at",
                ]
            },
        ),
        (
            "Detail caps",
            {
                "fields": [
                    "memory_detail_cap",
                    "resource_detail_cap",
                    "skill_detail_cap",
                    "directory_detail_cap",
                    "per_entry_cap_tokens",
                ]
            },
        ),
        (
            "LLM steps",
            {
                "fields": [
                    "recall_intent_timeout_s",
                    "max_expansion_queries",
                    "recall_rewrite_timeout_s",
                    "rewrite_max_bullets",
                ]
            },
        ),
        (
            "mode=bootstrap",
            {
                "fields": [
                    "bootstrap_identity_share",
                    "bootstrap_working_state_share",
                    "bootstrap_continuity_share",
                    "bootstrap_listing_share",
                    "bootstrap_instructions_share",
                    "bootstrap_working_state_days",
                    "bootstrap_working_state_max",
                    "bootstrap_working_state_peer_share",
                    "bootstrap_continuity_max",
                    "bootstrap_listing_max",
                ]
            },
        ),
        ("Rate limiting", {"fields": ["api_rate_limit_per_minute"]}),
        (
            "Recall events",
            {
                "fields": [
                    "record_recall_events",
                    "recall_event_retention_days",
                    "recall_event_query_chars",
                    "recall_event_query_hashed",
                    "token_counts_version",
                    "updated_at",
                ]
            },
        ),
    ]

    def has_add_permission(self, request):
        return not RetrievalSettings.objects.exists()

    def has_delete_permission(self, request, obj=None):
        return False

    @admin.action(description="Reset retrieval settings to RFC defaults")
    def reset_to_rfc_defaults(self, request, queryset):
        row, enabled = services.reset_settings_to_rfc_defaults()
        self.log_change(request, row, "Reset to RFC defaults.")
        messages.success(request, "Retrieval settings reset to RFC defaults.")
        if enabled:
            messages.warning(
                request, f"Purpose {enabled!r} was disabled and is enabled again: /recall's preset names it."
            )


class ReadOnlyLedgerAdmin(admin.ModelAdmin):
    """Ledgers are written by the request path and the roll-up task only."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(LLMUsage)
class LLMUsageAdmin(ReadOnlyLedgerAdmin):
    """The ledger of LLM calls: read-only, filterable by what each call was for and how it ended."""

    list_display = (
        "created_at",
        "kind",
        "model",
        "account",
        "prompt_tokens",
        "completion_tokens",
        "latency",
        "outcome",
    )
    list_filter = ("kind", "outcome", "model")
    search_fields = ("model", "error", "account__name", "=request_id")
    date_hierarchy = "created_at"
    exclude = ("latency_ms",)  # shown as `latency`, in ms with one decimal
    readonly_fields = ("latency",)

    @admin.display(description="latency", ordering="latency_ms")
    def latency(self, usage):
        return milliseconds(usage.latency_ms)


@admin.register(RecallEvent)
class RecallEventAdmin(ReadOnlyLedgerAdmin):
    """Each event answers "why did the agent (not) see X": what was asked (query, request id, session), which
    threshold applied and from where, how many hits it cut, what was served; Replay runs the request again now."""

    change_form_template = "profiles/recallevent_change_form.html"
    list_display = (
        "created_at",
        "endpoint",
        "purpose",
        "account",
        "query_text",
        "used_tokens",
        "max_tokens",
        "returned",
        "dropped",
        "cooled",
        "search_mode",
        "score_threshold",
        "threshold_source",
        "below_threshold",
        "relevance_strong",
        "query_expansion",
        "rewrite",
        "latency",
    )
    list_filter = (
        "endpoint",
        "purpose",
        "search_mode",
        "threshold_source",
        "relevance_strong",
        "query_expansion",
        "rewrite",
    )
    list_select_related = ("account",)
    search_fields = ("purpose", "account__name", "=request_id", "=session_id", "query")
    date_hierarchy = "created_at"
    actions = ["replay"]
    fieldsets = [
        (
            "Request",
            {
                "fields": [
                    "created_at",
                    "endpoint",
                    "account",
                    "request_id_links",
                    "session_link",
                    "query_text",
                    "purpose",
                    "request_body",
                ]
            },
        ),
        (
            "Threshold",
            {
                "fields": [
                    "search_mode",
                    "score_threshold",
                    "threshold_source",
                    "hits_before_after",
                    "below_threshold",
                    "relevance_strong",
                ]
            },
        ),
        (
            "Served",
            {
                "fields": [
                    "tokens",
                    "returned",
                    "served_entries",
                    "tier_full",
                    "tier_overview",
                    "tier_abstract",
                    "tier_uri",
                    "dropped",
                    "cooled",
                    "query_expansion",
                    "rewrite",
                    "latency",
                ]
            },
        ),
    ]
    readonly_fields = (
        "request_id_links",
        "session_link",
        "query_text",
        "request_body",
        "hits_before_after",
        "tokens",
        "served_entries",
        "latency",
    )

    def get_search_results(self, request, queryset, search_term):
        # An event whose query was hashed is found by its exact query: the digest of the term is looked up too.
        found, duplicates = super().get_search_results(request, queryset, search_term)
        if search_term:
            found |= queryset.filter(query_hashed=True, query=services.query_digest(search_term))
        return found, duplicates

    def get_urls(self):
        replay = self.admin_site.admin_view(self.replay_view)
        return [path("<path:object_id>/replay/", replay, name="profiles_recallevent_replay"), *super().get_urls()]

    def replay_view(self, request, object_id):
        return views.replay_view(request, self, object_id)

    @admin.action(description="Replay the selected event now")
    def replay(self, request, queryset):
        if queryset.count() != 1:
            messages.warning(request, "Select one event to replay.")
            return None
        return HttpResponseRedirect(reverse("admin:profiles_recallevent_replay", args=[queryset.get().pk]))

    @admin.display(description="query")
    def query_text(self, event):
        if event.query_hashed:
            return f"(hashed) {event.query[:12]}…"
        return event.query

    @admin.display(description="request id")
    def request_id_links(self, event):
        if not event.request_id:
            return "—"
        calls = reverse("admin:profiles_llmusage_changelist")
        return format_html(
            "<code>{}</code> (the <code>X-Request-ID</code> header and the logs' request_id) · "
            '<a href="{}?q={}">its LLM calls</a>',
            event.request_id,
            calls,
            event.request_id,
        )

    @admin.display(description="session")
    def session_link(self, event):
        if not event.session_id:
            return "—"
        sessions = reverse("admin:sessions_app_session_changelist")
        return format_html(
            '<a href="{}?q={}&amp;account__id__exact={}">{}</a>',
            sessions,
            event.session_id,
            event.account_id or "",
            event.session_id,
        )

    @admin.display(description="request body")
    def request_body(self, event):
        if event.request_params is None:
            return "not kept (the query was hashed or not kept): no replay"
        return format_html("<pre>{}</pre>", json.dumps(event.request_params, indent=2, ensure_ascii=False))

    @admin.display(description="hits before → after the threshold")
    def hits_before_after(self, event):
        return f"{event.hits_before_threshold} → {event.candidates}"

    @admin.display(description="latency", ordering="latency_ms")
    def latency(self, event):
        return milliseconds(event.latency_ms)

    @admin.display(description="used / max tokens")
    def tokens(self, event):
        return f"{event.used_tokens} / {event.max_tokens}"

    @admin.display(description="entries served")
    def served_entries(self, event):
        if not event.served:
            return "—"
        return format_html(
            "<table><tr><th>uri</th><th>detail</th><th>score</th></tr>{}</table>",
            format_html_join(
                "",
                "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
                ((e["uri"], e["detail"], "—" if e["score"] is None else f"{e['score']:.4f}") for e in event.served),
            ),
        )


@admin.register(RecallDaily)
class RecallDailyAdmin(ReadOnlyLedgerAdmin):
    list_display = ("day", "endpoint", "purpose", "requests", "used_tokens", "max_tokens", "dropped", "cooled")
    list_filter = ("endpoint", "purpose")
    date_hierarchy = "day"


@admin.register(ModelPrice)
class ModelPriceAdmin(admin.ModelAdmin):
    list_display = ("model", "prompt_per_million", "completion_per_million", "currency")
    search_fields = ("model",)
