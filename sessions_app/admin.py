"""Read-only admin of sessions, their messages and commits, and the recall ledger: the operator inspects, never
edits."""

from django.contrib import admin

from sessions_app.models import Commit, Message, RecallLedgerEntry, Session


class ReadOnly:
    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class MessageInline(ReadOnly, admin.TabularInline):
    model = Message
    fields = ("index", "role", "content", "peer_id", "created_at")
    readonly_fields = fields
    ordering = ("index",)
    extra = 0


class CommitInline(ReadOnly, admin.TabularInline):
    model = Commit
    fields = (
        "created_at",
        "actor_peer",
        "archived_messages",
        "archive_summary",
        "extraction",
        "memories_extracted",
        "memories_deduplicated",
        "memories_skipped",
        "error",
        "finished_at",
    )
    readonly_fields = fields
    ordering = ("-created_at",)
    extra = 0


@admin.register(Session)
class SessionAdmin(ReadOnly, admin.ModelAdmin):
    list_display = ("session_id", "account", "user", "total_message_count", "created_at", "updated_at")
    list_filter = ("account",)
    list_select_related = ("account",)
    search_fields = ("session_id", "user", "account__name")
    readonly_fields = (
        "account",
        "session_id",
        "user",
        "total_message_count",
        "archive_overview",
        "created_at",
        "updated_at",
    )
    ordering = ("-updated_at",)
    inlines = (MessageInline, CommitInline)


@admin.register(RecallLedgerEntry)
class RecallLedgerEntryAdmin(ReadOnly, admin.ModelAdmin):
    list_display = ("uri", "detail", "msg_index", "session", "created_at")
    list_filter = ("detail",)
    list_select_related = ("session",)
    search_fields = ("uri", "session__session_id", "session__user")
    readonly_fields = ("session", "uri", "detail", "msg_index", "created_at")
    ordering = ("-created_at", "-id")
