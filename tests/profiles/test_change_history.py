"""Change history of the settings row and the purpose profiles (issue 27 §3, django-simple-history): who changed
what, when, old → new; a revert goes through the same form validation as an edit and applies on the next request."""

import importlib
import re

from django.apps import apps
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from profiles.models import PurposeProfile, RetrievalSettings
from retrieval.tokenizers import version_of
from tests.profiles.test_console_admin import change_url, form_data, search_stats, settings_row
from tests.retrieval.test_token_profiles import CHINESE, FILE, counted_with, stored

HISTORY = reverse("admin:profiles_retrievalsettings_history", args=[1])


def revert_url(obj, record) -> str:
    return reverse(f"admin:profiles_{obj._meta.model_name}_simple_history", args=[obj.pk, record.history_id])


def other_operator(name: str) -> Client:
    client = Client()
    client.force_login(User.objects.create_superuser(name, f"{name}@example.com", "pw"))
    return client


def test_a_settings_change_says_who_when_and_old_to_new(operator):
    response = operator.post(change_url(settings_row()), form_data(settings_row(), recall_score_threshold=0.7))
    assert response.status_code == 302
    latest = settings_row().history.first()
    assert (latest.history_user, latest.history_type, latest.recall_score_threshold) == (operator.user, "~", 0.7)
    [change] = latest.diff_against(latest.prev_record).changes
    assert (change.field, change.old, change.new) == ("recall_score_threshold", 0.55, 0.7)
    page = operator.get(HISTORY).content.decode()
    assert re.search(r"<strong>Recall score threshold:</strong>\s*0.55\s*&nbsp;&rarr;&nbsp;&nbsp;0.7\s*</li>", page)
    assert operator.user.username in page


def test_an_admin_action_is_in_the_history_under_its_operator(operator):
    RetrievalSettings.objects.filter(pk=1).update(default_max_tokens=900)
    operator.post(
        reverse("admin:profiles_retrievalsettings_changelist"),
        {"action": "reset_to_rfc_defaults", "_selected_action": ["1"]},
    )
    latest = settings_row().history.first()
    assert (latest.history_user, latest.default_max_tokens) == (operator.user, 1600)


def test_reverting_the_settings_restores_the_old_values_and_applies_at_once(operator, api):
    original = settings_row().history.first()
    editor = other_operator("editor")
    editor.post(change_url(settings_row()), form_data(settings_row(), default_max_tokens=700))
    assert search_stats(api)["max_tokens"] == 700

    form = operator.get(revert_url(settings_row(), original))
    assert form.status_code == 200 and form.context["adminform"].form.initial["default_max_tokens"] == 1600
    response = operator.post(revert_url(settings_row(), original), form_data(settings_row(), default_max_tokens=1600))
    assert response.status_code == 302
    assert search_stats(api)["max_tokens"] == 1600
    reverted = settings_row().history.first()
    assert reverted.history_user == operator.user
    assert reverted.history_change_reason == f"reverted to version {original.history_id}"
    users = [r.history_user.username for r in settings_row().history.all() if r.history_user]
    assert users == ["operator", "editor"]


def test_a_revert_is_validated_as_an_edit_is(operator):
    """The settings once named purpose `ops`; since, `ops` was disabled: going back to that version is refused by
    the same clean() that refuses the edit, and nothing changes."""
    PurposeProfile.objects.create(name="ops", quotas={"events": 2})
    operator.post(change_url(settings_row()), form_data(settings_row(), recall_purpose="ops"))
    with_ops = settings_row().history.first()
    assert with_ops.recall_purpose == "ops"
    operator.post(change_url(settings_row()), form_data(settings_row(), recall_purpose="coding"))
    ops = PurposeProfile.objects.get(name="ops")
    operator.post(change_url(ops), form_data(ops, enabled=False))
    versions = settings_row().history.count()

    response = operator.post(revert_url(settings_row(), with_ops), form_data(settings_row(), recall_purpose="ops"))
    assert response.status_code == 200
    [error] = response.context["adminform"].form.errors["recall_purpose"]
    assert error.startswith("'ops' is not an enabled purpose profile")
    assert settings_row().recall_purpose == "coding" and settings_row().history.count() == versions


def test_a_profile_revert_is_refused_while_recall_names_it(operator):
    ops = PurposeProfile.objects.create(name="ops", quotas={"events": 2}, enabled=False)
    disabled = ops.history.first()
    operator.post(change_url(ops), form_data(ops, enabled=True))
    operator.post(change_url(settings_row()), form_data(settings_row(), recall_purpose="ops"))
    response = operator.post(
        revert_url(ops, disabled), form_data(PurposeProfile.objects.get(name="ops"), enabled=False)
    )
    assert response.status_code == 200 and "name another one in the retrieval settings first" in str(
        response.context["adminform"].form.errors
    )
    assert PurposeProfile.objects.get(name="ops").enabled


def test_quotas_history_shows_the_old_and_new_json(operator):
    coding = PurposeProfile.objects.get(name="coding")
    new = {"events": 1, "skills": 1}
    operator.post(change_url(coding), form_data(coding, quotas=new))
    [change] = coding.history.first().diff_against(coding.history.first().prev_record).changes
    assert change.field == "quotas" and change.new == new and change.old["events"] == 4
    page = operator.get(reverse("admin:profiles_purposeprofile_history", args=[coding.pk])).content.decode()
    assert "<strong>Quotas:</strong>" in page


def test_a_revert_of_the_tokenizer_family_recounts(operator, api):
    """What the stored counts were made with is a fact, not a knob, and stays out of the history: a revert to a
    version saved under another family must recount, not bring back that version's stamp and skip the recount."""
    api.write("viking://~/memories/events/2026/11/30/deploy.md", CHINESE)
    call_command("recount_tokens")
    operator.post(change_url(settings_row()), form_data(settings_row(), default_max_tokens=1500))
    under_o200k = settings_row().history.first()
    assert settings_row().token_counts_version == version_of("o200k")
    operator.post(change_url(settings_row()), form_data(settings_row(), tokenizer_family="qwen"))
    assert counted_with(stored(FILE), "qwen")

    operator.post(revert_url(settings_row(), under_o200k), form_data(settings_row(), tokenizer_family="o200k"))
    assert settings_row().tokenizer_family == "o200k" and counted_with(stored(FILE), "o200k")
    assert settings_row().token_counts_version == version_of("o200k")


def test_the_migration_records_a_baseline_of_every_row(seeded):
    PurposeProfile.history.all().delete()
    RetrievalSettings.history.all().delete()
    migration = importlib.import_module("profiles.migrations.0018_recall_event_tracing_and_history")
    migration.history_baseline(apps, None)
    assert sorted(PurposeProfile.history.values_list("name", flat=True)) == ["chat", "coding"]
    [baseline] = RetrievalSettings.history.all()
    assert (baseline.id, baseline.history_type, baseline.recall_score_threshold) == (1, "+", 0.55)
