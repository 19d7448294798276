import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ovsite.settings")

app = Celery("ovsite")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
