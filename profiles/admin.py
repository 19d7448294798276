from django.contrib import admin, messages

from profiles.models import LLMUsage, PurposeProfile, RetrievalSettings


@admin.register(PurposeProfile)
class PurposeProfileAdmin(admin.ModelAdmin):
    list_display = ("name", "enabled", "builtin", "quotas", "events_budget_ratio", "detail", "max_tokens",
                    "score_threshold")
    list_filter = ("enabled", "builtin")
    search_fields = ("name",)
    readonly_fields = ("builtin",)

    def has_delete_permission(self, request, obj=None):
        return obj is None or not obj.builtin  # built-in purposes can be edited or disabled, not deleted

    def delete_queryset(self, request, queryset):
        builtin = queryset.filter(builtin=True)
        if builtin.exists():
            messages.warning(request, "Built-in purposes were kept: " + ", ".join(b.name for b in builtin))
        queryset.filter(builtin=False).delete()


@admin.register(RetrievalSettings)
class RetrievalSettingsAdmin(admin.ModelAdmin):
    list_display = ("__str__", "default_max_tokens", "context_score_threshold", "recall_score_threshold",
                    "tokenizer_family", "token_counts_version", "updated_at")
    readonly_fields = ("token_counts_version", "updated_at")

    def has_add_permission(self, request):
        return not RetrievalSettings.objects.exists()

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(LLMUsage)
class LLMUsageAdmin(admin.ModelAdmin):
    """The ledger of LLM calls: read-only, filterable by what each call was for and how it ended."""

    list_display = ("created_at", "kind", "model", "account", "prompt_tokens", "completion_tokens", "latency_ms",
                    "outcome")
    list_filter = ("kind", "outcome", "model")
    search_fields = ("model", "error", "account__name")
    date_hierarchy = "created_at"

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
