"""Accounts, their users and API keys in the admin console. Every write goes through core/accounts.py, the
services of the REST admin API. A new key's plain text is shown once, on the page that answers the save, and is
kept nowhere (the database holds its digest only). Nothing here deletes: a key is revoked, which the API honours
on the next request, and a user or account keeps its memories."""

from django import forms
from django.contrib import admin, messages
from django.db.models import Count, Q
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.cache import add_never_cache_headers

from core import accounts
from core.models import Account, AccountUser, ApiKey


class ShowsIssuedKeyOnce:
    """An add that issues a key answers with a page that shows it, never cached, instead of the usual redirect: a
    message would carry the key through a cookie or a session row."""

    def response_add(self, request, obj, post_url_continue=None):
        key_user, plain = obj.issued_key
        opts = self.opts
        response = TemplateResponse(
            request,
            "admin/ovsite/key_issued.html",
            {
                **self.admin_site.each_context(request),
                "title": "API key issued",
                "opts": opts,
                "obj": obj,
                "key_user": key_user,
                "key": plain,
                "obj_url": reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[obj.pk]),
                "changelist_url": reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist"),
            },
        )
        add_never_cache_headers(response)
        return response


class AccountAddForm(forms.ModelForm):
    admin_user_id = forms.SlugField(
        max_length=64,
        initial="admin",
        label="First user",
        help_text="The account's first user, an admin; its API key is shown once after saving.",
    )

    class Meta:
        model = Account
        fields = ["name"]


@admin.register(Account)
class AccountAdmin(ShowsIssuedKeyOnce, admin.ModelAdmin):
    """An account is opened with its first user, an admin, and that user's key (as `POST /api/v1/admin/accounts`).
    Its name is read-only once saved: clients name it in X-OpenViking-Account."""

    list_display = ("name", "user_count", "created_at")
    search_fields = ("name",)
    date_hierarchy = "created_at"

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(user_count=Count("users"))

    @admin.display(description="users", ordering="user_count")
    def user_count(self, obj):
        return obj.user_count

    def get_form(self, request, obj=None, **kwargs):
        if obj is None:
            kwargs["form"] = AccountAddForm
        return super().get_form(request, obj, **kwargs)

    def get_fields(self, request, obj=None):
        return ["name", "admin_user_id"] if obj is None else ["name", "created_at"]

    def get_readonly_fields(self, request, obj=None):
        return () if obj is None else ("name", "created_at")

    def save_model(self, request, obj, form, change):
        if not change:
            obj.issued_key = accounts.open_account(account=obj, admin_user_id=form.cleaned_data["admin_user_id"])

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(AccountUser)
class AccountUserAdmin(ShowsIssuedKeyOnce, admin.ModelAdmin):
    """A user is added with a key of its own (as `POST /api/v1/admin/accounts/{a}/users`); its account and id are
    read-only once saved, since they name its `viking://user/{user}` space. More keys: API keys → Add."""

    list_display = ("user_id", "account", "role", "active_keys", "created_at")
    list_filter = ("role", "account")
    search_fields = ("user_id", "account__name")
    list_select_related = ("account",)

    def get_queryset(self, request):
        return (
            super().get_queryset(request).annotate(active_keys=Count("keys", filter=Q(keys__revoked_at__isnull=True)))
        )

    @admin.display(description="active keys", ordering="active_keys")
    def active_keys(self, obj):
        return obj.active_keys

    def get_fields(self, request, obj=None):
        return ["account", "user_id", "role"] + ([] if obj is None else ["created_at"])

    def get_readonly_fields(self, request, obj=None):
        return () if obj is None else ("account", "user_id", "created_at")

    def save_model(self, request, obj, form, change):
        if change:
            super().save_model(request, obj, form, change)
        else:
            obj.issued_key = (obj, accounts.enrol_user(user=obj))

    def has_delete_permission(self, request, obj=None):
        return False


class KeyStatusFilter(admin.SimpleListFilter):
    title = parameter_name = "status"

    def lookups(self, request, model_admin):
        return [("active", "active"), ("revoked", "revoked")]

    def queryset(self, request, queryset):
        if self.value() in ("active", "revoked"):
            return queryset.filter(revoked_at__isnull=self.value() == "active")
        return queryset


@admin.register(ApiKey)
class ApiKeyAdmin(ShowsIssuedKeyOnce, admin.ModelAdmin):
    """Adding a key for a user shows it once; the digest is never shown. Revoking is an action on the list."""

    list_display = ("id", "user", "status", "created_at", "revoked_at")
    list_filter = (KeyStatusFilter, "user__account")
    search_fields = ("user__user_id", "user__account__name")
    list_select_related = ("user__account",)
    ordering = ("-created_at",)
    actions = ["revoke_selected_keys"]

    @admin.display(description="status")
    def status(self, obj):
        return "revoked" if obj.revoked_at else "active"

    def get_fields(self, request, obj=None):
        return ["user"] if obj is None else ["user", "status", "created_at", "revoked_at"]

    def get_readonly_fields(self, request, obj=None):
        return () if obj is None else ("user", "status", "created_at", "revoked_at")

    def save_model(self, request, obj, form, change):
        if not change:
            obj.issued_key = (obj.user, accounts.issue_key(key=obj))

    @admin.action(description="Revoke selected keys (refused by the API from the next request)", permissions=["change"])
    def revoke_selected_keys(self, request, queryset):
        active = list(queryset.filter(revoked_at__isnull=True))
        accounts.revoke_keys(keys=queryset.filter(pk__in=[key.pk for key in active]))
        for key in active:
            self.log_change(request, key, "Revoked.")
        messages.success(request, f"Revoked {len(active)} key(s).")

    def has_delete_permission(self, request, obj=None):
        return False
