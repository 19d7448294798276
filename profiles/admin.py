"""The operator console: purpose profiles and retrieval settings (live: read per request), the usage ledgers and
model prices, and links to the dashboards (profiles/views.py). Every save and action is in the admin history."""

from django.contrib import admin, messages

from profiles import services
from profiles.models import LLMUsage, ModelPrice, PurposeProfile, RecallDaily, RecallEvent, RetrievalSettings
from profiles.selectors import current_settings

admin.site.index_template = "profiles/admin_index.html"  # the admin index plus links to the dashboards


@admin.register(PurposeProfile)
class PurposeProfileAdmin(admin.ModelAdmin):
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
class RetrievalSettingsAdmin(admin.ModelAdmin):
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
                    "bootstrap_continuity_max",
                    "bootstrap_listing_max",
                ]
            },
        ),
        ("Rate limiting", {"fields": ["api_rate_limit_per_minute"]}),
        (
            "Recall events",
            {"fields": ["record_recall_events", "recall_event_retention_days", "token_counts_version", "updated_at"]},
        ),
    ]

    def has_add_permission(self, request):
        return not RetrievalSettings.objects.exists()

    def has_delete_permission(self, request, obj=None):
        return False

    @admin.action(description="Reset retrieval settings to RFC defaults")
    def reset_to_rfc_defaults(self, request, queryset):
        row = services.reset_settings_to_rfc_defaults()
        self.log_change(request, row, "Reset to RFC defaults.")
        messages.success(request, "Retrieval settings reset to RFC defaults.")


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
        "latency_ms",
        "outcome",
    )
    list_filter = ("kind", "outcome", "model")
    search_fields = ("model", "error", "account__name")
    date_hierarchy = "created_at"


@admin.register(RecallEvent)
class RecallEventAdmin(ReadOnlyLedgerAdmin):
    list_display = (
        "created_at",
        "endpoint",
        "purpose",
        "account",
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
        "latency_ms",
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
    search_fields = ("purpose", "account__name")
    date_hierarchy = "created_at"


@admin.register(RecallDaily)
class RecallDailyAdmin(ReadOnlyLedgerAdmin):
    list_display = ("day", "endpoint", "purpose", "requests", "used_tokens", "max_tokens", "dropped", "cooled")
    list_filter = ("endpoint", "purpose")
    date_hierarchy = "day"


@admin.register(ModelPrice)
class ModelPriceAdmin(admin.ModelAdmin):
    list_display = ("model", "prompt_per_million", "completion_per_million", "currency")
    search_fields = ("model",)
