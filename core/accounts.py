"""Account services for the admin API, the admin console and `manage.py accounts`: create accounts and users,
issue, rotate and revoke keys. A key's plain text is returned once, to be shown once; only its digest is stored."""

from django.db import IntegrityError, transaction
from django.db.models import Count, Q
from django.utils import timezone

from core.errors import Conflict, NotFound
from core.models import Account, AccountUser, ApiKey, hash_key, new_key

# Account and user ids. "." and ".." are not ids: `viking://user/..` does not parse, so such a user could never reach
# its own space.
ID_PATTERN = r"^(?!\.\.?$)[A-Za-z0-9_.@-]+$"
ID_MAX_LENGTH = 64


def issue_key(*, key: ApiKey) -> str:
    """Saves the new `key` (its user set) with the digest of a fresh key; returns the plain key, which exists
    nowhere else."""
    plain = new_key()
    key.key_hash = hash_key(plain)
    key.save()
    return plain


def open_account(*, account: Account, admin_user_id: str) -> tuple[AccountUser, str]:
    """Saves the new `account` with its first user, an admin, and that user's key: (the user, the plain key)."""
    try:
        with transaction.atomic():
            account.save()
            user = AccountUser.objects.create(account=account, user_id=admin_user_id, role="admin")
            key = issue_key(key=ApiKey(user=user))
    except IntegrityError as exc:
        raise Conflict(
            f"account {account.name!r} already exists", {"resource": account.name, "type": "account"}
        ) from exc
    return user, key


def enrol_user(*, user: AccountUser) -> str:
    """Saves the new `user` (account, user_id and role set) with a key of its own; returns the plain key."""
    try:
        with transaction.atomic():
            user.save()
            key = issue_key(key=ApiKey(user=user))
    except IntegrityError as exc:
        raise Conflict(
            f"user {user.user_id!r} already exists in {user.account.name!r}", {"resource": user.user_id, "type": "user"}
        ) from exc
    return key


def revoke_keys(*, keys) -> int:
    """Revokes the active keys of the queryset `keys` at once (the next request with one is 401); returns how many."""
    return keys.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())


def create_account(*, name: str, admin_user_id: str) -> dict:
    _, key = open_account(account=Account(name=name), admin_user_id=admin_user_id)
    return {"account_id": name, "admin_user_id": admin_user_id, "user_key": key}


def list_accounts() -> list[dict]:
    return [
        {"account_id": row["name"], "created_at": row["created_at"].isoformat()}
        for row in Account.objects.order_by("name").values("name", "created_at")
    ]


def list_members() -> list[dict]:
    """Every account's users, with their role and how many active keys they hold, by account then user."""
    rows = (
        AccountUser.objects.order_by("account__name", "user_id")
        .annotate(active_keys=Count("keys", filter=Q(keys__revoked_at__isnull=True)))
        .values("account__name", "user_id", "role", "active_keys", "created_at")
    )
    return [
        {
            "account_id": row["account__name"],
            "user_id": row["user_id"],
            "role": row["role"],
            "active_keys": row["active_keys"],
            "created_at": row["created_at"].isoformat(),
        }
        for row in rows
    ]


def _account(name: str) -> Account:
    account = Account.objects.filter(name=name).first()
    if account is None:
        raise NotFound(name, "account")
    return account


def add_user(*, account_name: str, user_id: str, role: str) -> dict:
    key = enrol_user(user=AccountUser(account=_account(account_name), user_id=user_id, role=role))
    return {"account_id": account_name, "user_id": user_id, "role": role, "user_key": key}


def rotate_key(*, account_name: str, user_id: str) -> dict:
    """Revokes every key the user has and issues a new one."""
    user = AccountUser.objects.filter(account=_account(account_name), user_id=user_id).first()
    if user is None:
        raise NotFound(user_id, "user")
    with transaction.atomic():
        revoke_keys(keys=ApiKey.objects.filter(user=user))
        key = issue_key(key=ApiKey(user=user))
    return {"account_id": account_name, "user_id": user_id, "user_key": key}


def disable(*, account_name: str, user_id: str | None = None) -> dict:
    """Revokes every active key of the user, or of every user of the account: their requests are refused from the
    next one. Nothing is deleted; `rotate_key` issues a user a key again."""
    keys = ApiKey.objects.filter(user__account=_account(account_name))
    if user_id is not None:
        if not AccountUser.objects.filter(account__name=account_name, user_id=user_id).exists():
            raise NotFound(user_id, "user")
        keys = keys.filter(user__user_id=user_id)
    return {"account_id": account_name, "user_id": user_id, "revoked_keys": revoke_keys(keys=keys)}
