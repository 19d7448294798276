"""Accounts, their users and API keys. Keys are stored as SHA-256 digests, never in clear."""

import hashlib
import secrets

from django.db import models

from core.config_cache import ConfigQuerySet

DEFAULT_ACCOUNT = "default"
DEFAULT_USER = "default"


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def new_key() -> str:
    return "ovk_" + secrets.token_urlsafe(32)


class Account(models.Model):
    name = models.SlugField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = ConfigQuerySet.as_manager()  # authentication caches what it reads of these rows (core/auth.py)

    def __str__(self):
        return self.name


class AccountUser(models.Model):
    ROLE_CHOICES = [("admin", "admin"), ("user", "user")]
    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="users")
    user_id = models.SlugField(max_length=64)
    role = models.CharField(max_length=16, choices=ROLE_CHOICES, default="user")
    created_at = models.DateTimeField(auto_now_add=True)

    objects = ConfigQuerySet.as_manager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["account", "user_id"], name="account_user_unique")]

    def __str__(self):
        return f"{self.account.name}/{self.user_id}"


class ApiKey(models.Model):
    user = models.ForeignKey(AccountUser, on_delete=models.CASCADE, related_name="keys")
    key_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = ConfigQuerySet.as_manager()

    def __str__(self):
        return f"key of {self.user} ({'revoked' if self.revoked_at else 'active'})"
