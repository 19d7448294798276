"""The console's admin site: Django's, plus a "Dashboards" section in the index and the sidebar (each page's
`available_apps`) that links the dashboards (profiles/views.py) and the settings' change history."""

from django.contrib import admin
from django.contrib.admin.apps import AdminConfig
from django.urls import reverse


def _link(name: str, url_name: str, *args) -> dict:
    # The keys the admin's app_list.html reads for a model row: a view-only row with no add link.
    return {
        "name": name,
        "object_name": name.replace(" ", ""),
        "admin_url": reverse(url_name, args=args),
        "add_url": None,
        "view_only": True,
        "perms": {"view": True},
    }


class ConsoleSite(admin.AdminSite):
    site_header = site_title = "ovsite console"
    index_title = "Console"
    # The header's "View site": ovsite has no site at `/` (a JSON 404); the API reference is the page beside it.
    site_url = "/api/docs/"

    def get_app_list(self, request, app_label=None):
        apps = super().get_app_list(request, app_label)
        if app_label is not None:
            return apps
        links = [
            _link("Recall traffic", "dashboard-recall-traffic"),
            _link("LLM cost", "dashboard-llm-cost"),
            _link("Settings change history", "admin:profiles_retrievalsettings_history", 1),
        ]
        dashboards = {
            "name": "Dashboards",
            "app_label": "dashboards",
            "app_url": links[0]["admin_url"],
            "has_module_perms": True,
            "models": links,
        }
        return [dashboards, *apps]


class ConsoleAdminConfig(AdminConfig):
    """django.contrib.admin with ConsoleSite as `admin.site`, so that every app's admin registers on it (Django's
    documented way to replace the default site); settings.INSTALLED_APPS names it in place of the admin."""

    default_site = "profiles.console.ConsoleSite"
