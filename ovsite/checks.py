"""Deployment checks of ovsite's own (`manage.py check --deploy`), beside Django's security checks."""
from django.conf import settings
from django.core.checks import Error, Tags, register


@register(Tags.security, deploy=True)
def dev_secret_key(app_configs, **kwargs):
    """The dev key is long and varied enough to pass Django's own W009, yet public: it must not reach production."""
    if settings.SECRET_KEY == settings.DEV_SECRET_KEY:
        return [Error("OVSITE_SECRET_KEY is not set: the server signs sessions with the public dev-only key.",
                      hint="Set OVSITE_SECRET_KEY to a long random value, e.g. from "
                           "`python -c 'import secrets; print(secrets.token_urlsafe(50))'`.",
                      id="ovsite.E001")]
    return []
