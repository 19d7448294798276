"""The ASGI application `make run` serves: Django, as a WSGI app on a pool of threads, with the MCP endpoint mounted
beside it at /mcp.

Django's own ASGI handler runs a sync view and each sync-capable middleware through its own thread hops
(sync_to_async per middleware method, async_to_sync back): under uvicorn a bare /health took 2.8 ms against 1.3 ms
this way, and /find 2.4-3.7 ms more than under gunicorn against 0.6-1.0 ms (paired, same machine). Every view of
ovsite is sync, so one hop into a reused thread is all a request needs; and the threads being reused, each keeps
its database connection as a gunicorn thread does (OVSITE_DB_CONN_MAX_AGE).
"""

import os

from a2wsgi import WSGIMiddleware
from django.conf import settings
from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ovsite.settings")
django_application = WSGIMiddleware(get_wsgi_application(), workers=settings.ASGI_THREADS)

from mcp_server.app import build_application  # noqa: E402  (imports models: after Django's setup)
from ovsite.readiness import PreparedBeforeServing  # noqa: E402

# The embedder is loaded at the lifespan's startup, before uvicorn opens its port, on a thread of Django's pool: the
# first request finds it loaded and that thread's database connection open (ovsite/readiness.py).
application = PreparedBeforeServing(build_application(django_application), django_application.executor)
