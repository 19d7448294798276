from django.apps import AppConfig


class OvsiteConfig(AppConfig):
    name = "ovsite"
    verbose_name = "Accounts and keys"

    def ready(self):
        from ovsite import checks  # noqa: F401  (registers the deployment checks)
