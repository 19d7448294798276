import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ovsite.settings")
application = get_wsgi_application()

# A gunicorn worker imports this before it accepts a request: the first request finds the embedder loaded, and a
# store of another dimension stops the start (ovsite/readiness.py).
from ovsite.readiness import prepare_server  # noqa: E402  (after Django's setup)

prepare_server()
