"""Account services for the admin API: create accounts and users, issue and rotate keys (shown once)."""
from django.db import IntegrityError, transaction
from django.utils import timezone

from ovsite.errors import Conflict, NotFound
from ovsite.models import Account, AccountUser, ApiKey, hash_key, new_key


def _issue_key(user: AccountUser) -> str:
    key = new_key()
    ApiKey.objects.create(user=user, key_hash=hash_key(key))
    return key


def create_account(*, name: str, admin_user_id: str) -> dict:
    try:
        with transaction.atomic():
            account = Account.objects.create(name=name)
            user = AccountUser.objects.create(account=account, user_id=admin_user_id, role="admin")
            key = _issue_key(user)
    except IntegrityError as exc:
        raise Conflict(f"account {name!r} already exists", {"resource": name, "type": "account"}) from exc
    return {"account_id": name, "admin_user_id": admin_user_id, "user_key": key}


def list_accounts() -> list[dict]:
    return [{"account_id": row["name"], "created_at": row["created_at"].isoformat()}
            for row in Account.objects.order_by("name").values("name", "created_at")]


def _account(name: str) -> Account:
    account = Account.objects.filter(name=name).first()
    if account is None:
        raise NotFound(name, "account")
    return account


def add_user(*, account_name: str, user_id: str, role: str) -> dict:
    account = _account(account_name)
    try:
        with transaction.atomic():
            user = AccountUser.objects.create(account=account, user_id=user_id, role=role)
            key = _issue_key(user)
    except IntegrityError as exc:
        raise Conflict(f"user {user_id!r} already exists in {account_name!r}",
                       {"resource": user_id, "type": "user"}) from exc
    return {"account_id": account_name, "user_id": user_id, "role": role, "user_key": key}


def rotate_key(*, account_name: str, user_id: str) -> dict:
    """Revokes every key the user has and issues a new one."""
    user = AccountUser.objects.filter(account=_account(account_name), user_id=user_id).first()
    if user is None:
        raise NotFound(user_id, "user")
    with transaction.atomic():
        ApiKey.objects.filter(user=user, revoked_at__isnull=True).update(revoked_at=timezone.now())
        key = _issue_key(user)
    return {"account_id": account_name, "user_id": user_id, "user_key": key}
