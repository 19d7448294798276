"""An operator's change in the admin of one worker process applies to its next request at once, and to another's
within OVSITE_CONFIG_CACHE_SECONDS (core/config_cache.py), no restart."""

import json
import re
import time

import httpx
import pytest
from django.conf import global_settings, settings
from django.contrib.auth.models import User
from django.forms.models import model_to_dict

from profiles.models import PurposeProfile, RetrievalSettings
from profiles.seeds import BUILTIN_PROFILES
from tests.servers import Gunicorn

SEARCH = "/api/v1/search/search"


@pytest.fixture
def two_workers(seeded, tmp_path, settings):
    settings.PASSWORD_HASHERS = global_settings.PASSWORD_HASHERS  # the workers check the password with these
    User.objects.create_superuser("operator", "op@example.com", "pw-operator")
    servers = []
    try:
        for _ in range(2):
            servers.append(Gunicorn(tmp_path).start())
        yield servers
    finally:
        for server in servers:
            server.stop()


def stats(server: Gunicorn, **body) -> dict:
    response = httpx.post(server.url + SEARCH, json={"query": "deploy", "mode": "context", **body}, timeout=60)
    assert response.status_code == 200, response.text
    return response.json()["result"]["stats"]


def admin_session(server: Gunicorn) -> httpx.Client:
    """Logs in through the admin's login form, as a person would."""
    client = httpx.Client(base_url=server.url, timeout=30)
    client.get("/admin/login/")
    response = client.post(
        "/admin/login/?next=/admin/",
        data={
            "username": "operator",
            "password": "pw-operator",
            "csrfmiddlewaretoken": client.cookies["csrftoken"],
            "next": "/admin/",
        },
    )
    assert response.status_code == 302 and response.headers["location"] == "/admin/", response.text[:500]
    return client


def save(client: httpx.Client, obj, **changes) -> None:
    url = f"/admin/profiles/{obj._meta.model_name}/{obj.pk}/change/"
    data = {
        k: (json.dumps(v) if isinstance(v, dict) else "" if v is None else v)
        for k, v in {**model_to_dict(obj), **changes}.items()
        if k != "id" and v is not False
    }
    response = client.post(url, data={**data, "csrfmiddlewaretoken": client.cookies["csrftoken"], "_save": "Save"})
    assert response.status_code == 302, re.findall(r'class="errorlist[^>]*>(.*?)</ul>', response.text)


def test_admin_changes_apply_in_the_saving_worker_at_once_and_in_another_within_the_bound(two_workers):
    editor, server = two_workers
    for worker in two_workers:  # both have read (and used, and cached) the old rows
        before = stats(worker, purpose="coding")
        assert before["quotas"] == BUILTIN_PROFILES["coding"]["quotas"] and before["max_tokens"] == 1600

    client = admin_session(editor)
    new_quotas = {"events": 1, "entities": 1, "preferences": 1, "experiences": 1, "resources": 2, "skills": 0}
    save(client, PurposeProfile.objects.get(name="coding"), quotas=new_quotas)
    save(client, RetrievalSettings.objects.get(pk=1), default_max_tokens=700)
    client.close()

    after = stats(editor, purpose="coding")
    assert after["quotas"] == new_quotas and after["max_tokens"] == 700
    time.sleep(settings.OVSITE_CONFIG_CACHE_SECONDS + 0.2)
    after = stats(server, purpose="coding")
    assert after["quotas"] == new_quotas and after["max_tokens"] == 700
