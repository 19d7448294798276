from django.apps import AppConfig


class OvsiteConfig(AppConfig):
    name = "ovsite"
    verbose_name = "Accounts and keys"
