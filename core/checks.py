"""Deployment checks of ovsite's own (`manage.py check --deploy`), beside Django's security checks."""

from django.conf import settings
from django.core.checks import Error, Tags, register


@register(Tags.security, deploy=True)
def dev_secret_key(app_configs, **kwargs):
    """The dev key is long and varied enough to pass Django's own W009, yet public: it must not reach production."""
    if settings.SECRET_KEY == settings.DEV_SECRET_KEY:
        return [
            Error(
                "OVSITE_SECRET_KEY is not set: the server signs sessions with the public dev-only key.",
                hint="Set OVSITE_SECRET_KEY to a long random value, e.g. from "
                "`python -c 'import secrets; print(secrets.token_urlsafe(50))'`.",
                id="ovsite.E001",
            )
        ]
    return []


@register(Tags.security, deploy=True)
def dev_mode(app_configs, **kwargs):
    """Without a root key the server is in dev mode: no admin API behind a key, and a keyless caller on loopback is
    account `default`'s admin."""
    if not settings.OVSITE_ROOT_API_KEY:
        return [
            Error(
                "OVSITE_ROOT_API_KEY is not set: the server runs in dev mode, where a keyless loopback caller "
                "administers it.",
                hint="Set OVSITE_ROOT_API_KEY to a long random secret; callers then use the keys the admin "
                "API issues with it.",
                id="ovsite.E002",
            )
        ]
    return []


@register(Tags.security, deploy=True)
def debug_on(app_configs, **kwargs):
    """Django's own W018 is a warning, which `check --deploy` passes; a debug server shows any caller tracebacks
    and settings."""
    if settings.DEBUG:
        return [
            Error(
                "OVSITE_DEBUG is on: error pages show tracebacks and settings to any caller.",
                hint="Unset OVSITE_DEBUG (or set it to false) in production.",
                id="ovsite.E003",
            )
        ]
    return []
