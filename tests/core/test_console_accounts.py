"""Accounts, users and API keys in the admin console, through the real admin views: a new key is shown once and
works on the API at once, a revoked key is refused at once, the plain key is kept nowhere, bad input is a form
error, and every change is in the admin history."""

import pytest
from django.contrib.admin.models import ADDITION, CHANGE, LogEntry
from django.db import connection
from django.test import override_settings
from django.urls import reverse

from core.models import Account, AccountUser, ApiKey, hash_key

ROOT_KEY = "root-key-for-the-console-tests"  # with a root key set, a bad key is 401 (no dev-mode fallback)
FIND = "/api/v1/search/find"


@pytest.fixture
def keyed_api(api):
    with override_settings(OVSITE_ROOT_API_KEY=ROOT_KEY):
        yield api


def url(model, view, *args) -> str:
    return reverse(f"admin:ovsite_{model._meta.model_name}_{view}", args=args)


def issued(response) -> str:
    """The plain key on the page that answers the save, checked to be shown there and never cached."""
    assert response.status_code == 200 and "key" in response.context, response.context["adminform"].form.errors
    key = response.context["key"]
    assert '<code id="issued-key"' in response.content.decode() and key in response.content.decode()
    assert "no-store" in response["Cache-Control"]
    return key


def open_account(operator, name="acme", first_user="alice") -> str:
    return issued(operator.post(url(Account, "add"), {"name": name, "admin_user_id": first_user}))


def find_status(api, key) -> tuple[int, dict]:
    return api.post(FIND, {"query": "anything"}, x_api_key=key)


def test_an_account_opened_in_the_admin_has_an_admin_user_whose_shown_key_works(operator, keyed_api):
    key = open_account(operator)
    user = AccountUser.objects.get(account__name="acme", user_id="alice")
    assert user.role == "admin" and ApiKey.objects.get(user=user).key_hash == hash_key(key)
    status, body = find_status(keyed_api, key)
    assert status == 200 and body["status"] == "ok"
    entry = LogEntry.objects.get(content_type__model="account")
    assert (entry.user, entry.action_flag, entry.object_repr) == (operator.user, ADDITION, "acme")


def test_a_key_revoked_in_the_admin_is_refused_at_once_with_the_envelope(operator, keyed_api):
    key = open_account(operator)
    assert find_status(keyed_api, key)[0] == 200
    api_key = ApiKey.objects.get(key_hash=hash_key(key))
    response = operator.post(
        url(ApiKey, "changelist"), {"action": "revoke_selected_keys", "_selected_action": [api_key.pk]}, follow=True
    )
    assert "Revoked 1 key(s)." in response.content.decode()
    status, body = find_status(keyed_api, key)
    assert status == 401
    assert body["status"] == "error" and body["error"]["code"] == "UNAUTHENTICATED"
    entry = LogEntry.objects.get(content_type__model="apikey")
    assert (entry.user, entry.action_flag, entry.change_message) == (operator.user, CHANGE, "Revoked.")


def test_users_and_extra_keys_added_in_the_admin_each_work_and_revoking_one_leaves_the_other(operator, keyed_api):
    open_account(operator)
    account = Account.objects.get(name="acme")
    bob_key = issued(operator.post(url(AccountUser, "add"), {"account": account.pk, "user_id": "bob", "role": "user"}))
    bob = AccountUser.objects.get(account=account, user_id="bob")
    second_key = issued(operator.post(url(ApiKey, "add"), {"user": bob.pk}))
    assert bob_key != second_key and bob.keys.count() == 2
    assert find_status(keyed_api, bob_key)[0] == find_status(keyed_api, second_key)[0] == 200
    first = ApiKey.objects.get(key_hash=hash_key(bob_key))
    operator.post(url(ApiKey, "changelist"), {"action": "revoke_selected_keys", "_selected_action": [first.pk]})
    assert find_status(keyed_api, bob_key)[0] == 401 and find_status(keyed_api, second_key)[0] == 200
    assert {e.content_type.model for e in LogEntry.objects.filter(action_flag=ADDITION)} == {
        "account",
        "accountuser",
        "apikey",
    }


def every_text_column_containing(text: str) -> list[str]:
    """Every table of the database whose rows, read as text, contain `text`."""
    found = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names(cursor):
            cursor.execute(f'SELECT count(*) FROM "{table}" t WHERE t::text LIKE %s', [f"%{text}%"])
            if cursor.fetchone()[0]:
                found.append(table)
    return found


def test_the_plain_key_is_in_no_table_and_on_no_later_page(operator):
    key = open_account(operator)
    account = Account.objects.get(name="acme")
    user = AccountUser.objects.get(account=account)
    api_key = ApiKey.objects.get(user=user)
    assert every_text_column_containing(key) == []
    assert every_text_column_containing(hash_key(key)) == [ApiKey._meta.db_table]  # the digest, and only there
    for page in (
        url(Account, "changelist"),
        url(Account, "change", account.pk),
        url(AccountUser, "changelist"),
        url(AccountUser, "change", user.pk),
        url(ApiKey, "changelist"),
        url(ApiKey, "change", api_key.pk),
        reverse("admin:index"),
    ):
        body = operator.get(page).content.decode()
        assert key not in body and hash_key(key) not in body, page


@pytest.mark.parametrize(
    "data,field",
    [
        ({"name": "Not a slug!", "admin_user_id": "alice"}, "name"),
        ({"name": "", "admin_user_id": "alice"}, "name"),
        ({"name": "default", "admin_user_id": "alice"}, "name"),  # exists already
        ({"name": "acme", "admin_user_id": "al ice"}, "admin_user_id"),
        ({"name": "acme", "admin_user_id": "x" * 65}, "admin_user_id"),
    ],
)
def test_a_bad_account_is_a_form_error_and_writes_nothing(operator, data, field):
    before = (Account.objects.count(), AccountUser.objects.count(), ApiKey.objects.count())
    response = operator.post(url(Account, "add"), data)
    assert response.status_code == 200 and field in response.context["adminform"].form.errors
    assert (Account.objects.count(), AccountUser.objects.count(), ApiKey.objects.count()) == before


@pytest.mark.parametrize(
    "user_id,role,field", [("default", "user", "__all__"), ("b c", "user", "user_id"), ("bob", "owner", "role")]
)
def test_a_bad_user_is_a_form_error_and_writes_nothing(operator, user_id, role, field):
    account = Account.objects.get(name="default")
    before = (AccountUser.objects.count(), ApiKey.objects.count())
    response = operator.post(url(AccountUser, "add"), {"account": account.pk, "user_id": user_id, "role": role})
    assert response.status_code == 200 and field in response.context["adminform"].form.errors
    assert (AccountUser.objects.count(), ApiKey.objects.count()) == before


def test_a_key_for_no_user_is_a_form_error(operator):
    response = operator.post(url(ApiKey, "add"), {"user": "999999"})
    assert response.status_code == 200 and "user" in response.context["adminform"].form.errors
    assert not ApiKey.objects.exists()


def test_accounts_users_and_keys_cannot_be_deleted_in_the_admin(operator):
    open_account(operator)
    for obj in (Account.objects.get(name="acme"), AccountUser.objects.get(user_id="alice"), ApiKey.objects.get()):
        assert operator.post(url(type(obj), "delete", obj.pk), {"post": "yes"}).status_code == 403
    assert ApiKey.objects.count() == 1


def test_a_users_id_and_account_are_read_only_once_saved(operator):
    user = AccountUser.objects.get(user_id="default")
    other = Account.objects.create(name="other")
    response = operator.post(
        url(AccountUser, "change", user.pk), {"account": other.pk, "user_id": "renamed", "role": "user"}
    )
    assert response.status_code == 302
    user.refresh_from_db()
    assert (user.account.name, user.user_id, user.role) == ("default", "default", "user")
