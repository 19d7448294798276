"""`manage.py accounts create|list|rotate-key|disable`: the operator's side of the admin API, through the same
services (core/accounts.py). A new key is printed once, on the last line of the output; only its digest is kept."""

import re

from django.core.management.base import BaseCommand, CommandError

from core import accounts
from core.errors import OvsiteError

KEY_NOTE = "API key (shown once; only its digest is stored, so it cannot be shown again):"


def _id(value: str) -> str:
    """An account or user id as the admin API accepts it."""
    if len(value) > accounts.ID_MAX_LENGTH or not re.match(accounts.ID_PATTERN, value):
        raise CommandError(
            f"{value!r} is not an id: up to {accounts.ID_MAX_LENGTH} letters, digits and _ . @ -, and not . or .."
        )
    return value


class Command(BaseCommand):
    help = (
        "Accounts, users and API keys: create an account with its admin user and key, list them, rotate a "
        "user's key, disable an account or a user (every active key revoked)."
    )

    def add_arguments(self, parser):
        actions = parser.add_subparsers(dest="action", required=True, metavar="{create,list,rotate-key,disable}")
        create = actions.add_parser("create", help="an account, its first user (an admin) and that user's key")
        create.add_argument("account")
        create.add_argument("--admin-user", default="admin", help="the first user's id (default: admin)")
        actions.add_parser("list", help="accounts, their users, roles and active keys")
        rotate = actions.add_parser("rotate-key", help="revoke a user's keys and issue a new one")
        rotate.add_argument("account")
        rotate.add_argument("user")
        disable = actions.add_parser("disable", help="revoke every active key of an account, or of one user in it")
        disable.add_argument("account")
        disable.add_argument("user", nargs="?")

    def handle(self, *args, action, **options):
        run = {
            "create": self.create_account,
            "list": self.list_accounts,
            "rotate-key": self.rotate_key,
            "disable": self.disable,
        }[action]
        try:
            run(**options)
        except OvsiteError as exc:
            raise CommandError(exc.message) from exc

    def _show_key(self, account: str, user: str, key: str) -> None:
        self.stdout.write(f"{KEY_NOTE}\n  user {account}/{user}\n{key}")

    def create_account(self, *, account, admin_user, **_):
        made = accounts.create_account(name=_id(account), admin_user_id=_id(admin_user))
        self.stdout.write(f"Account {made['account_id']!r} created with its admin user {made['admin_user_id']!r}.")
        self._show_key(made["account_id"], made["admin_user_id"], made["user_key"])

    def list_accounts(self, **_):
        members = accounts.list_members()
        names = [row["account_id"] for row in accounts.list_accounts()]
        if not names:
            self.stdout.write("No accounts.")
            return
        rows = [("ACCOUNT", "USER", "ROLE", "ACTIVE KEYS", "CREATED")]
        for name in names:
            users = [m for m in members if m["account_id"] == name]
            rows += [
                (name, m["user_id"], m["role"], str(m["active_keys"]), m["created_at"][:19].replace("T", " "))
                for m in users
            ]
            rows += [] if users else [(name, "-", "-", "0", "")]
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        for row in rows:
            self.stdout.write("  ".join(value.ljust(width) for value, width in zip(row, widths, strict=True)).rstrip())

    def rotate_key(self, *, account, user, **_):
        rotated = accounts.rotate_key(account_name=_id(account), user_id=_id(user))
        self.stdout.write(f"Every earlier key of {account}/{user} is revoked.")
        self._show_key(rotated["account_id"], rotated["user_id"], rotated["user_key"])

    def disable(self, *, account, user, **_):
        done = accounts.disable(account_name=_id(account), user_id=_id(user) if user else None)
        whom = f"user {account}/{user}" if user else f"account {account!r} (every user)"
        self.stdout.write(
            f"Revoked {done['revoked_keys']} active key(s) of {whom}: requests with them are refused "
            f"from now on. Nothing is deleted; `manage.py accounts rotate-key {account} USER` issues a "
            "user a key again."
        )
