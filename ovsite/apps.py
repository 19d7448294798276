from django.apps import AppConfig


class RootConfig(AppConfig):
    """The composition root: settings, URLs, the ASGI/WSGI entry points, Celery, readiness and the MCP mount. It
    imports the apps; nothing imports it (docs/architecture.md). An app only for its management commands."""

    name = "ovsite"
    label = "root"
    verbose_name = "ovsite"
