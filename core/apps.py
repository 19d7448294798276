from django.apps import AppConfig


class CoreConfig(AppConfig):
    """The kernel: accounts and keys, auth, the error envelope, the HTTP helpers, logging and metrics. It imports no
    other app (docs/architecture.md). Its label stays `ovsite`, the label its tables, migrations and admin URLs were
    created under before the kernel had a package of its own."""

    name = "core"
    label = "ovsite"
    verbose_name = "Accounts and keys"

    def ready(self):
        from core import checks  # noqa: F401  (registers the deployment checks)
