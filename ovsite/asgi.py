"""The ASGI application `make run` serves: Django, with the MCP endpoint mounted beside it at /mcp."""
import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ovsite.settings")
# Django runs each ASGI request in a thread of its own, which a persistent connection would outlive (Django's
# deployment docs): requests take their connections from a pool instead, or without it close them at the end.
os.environ.setdefault("OVSITE_DB_POOL", "true")
os.environ.setdefault("OVSITE_DB_CONN_MAX_AGE", "0")
django_application = get_asgi_application()

from ovsite.mcp_tools import build_application  # noqa: E402  (imports models: after Django's setup)

application = build_application(django_application)
