"""The wire contract of the root's account API (`/api/v1/admin/...`): its request serializers."""

from rest_framework import serializers

from core import accounts
from core.api import QueryParamsSerializer, StrictSerializer

ID_FIELD = dict(max_length=accounts.ID_MAX_LENGTH, regex=accounts.ID_PATTERN)


class CreateAccountRequest(StrictSerializer):
    accepted_ignored = ("user_config", "seed")
    account_id = serializers.RegexField(**ID_FIELD)
    admin_user_id = serializers.RegexField(**ID_FIELD)


class ListAccountsParams(QueryParamsSerializer):
    accepted_ignored = ("name", "limit", "page", "query")


class AddUserRequest(StrictSerializer):
    accepted_ignored = ("user_config", "seed")
    user_id = serializers.RegexField(**ID_FIELD)
    role = serializers.ChoiceField(choices=["admin", "user"], default="user")


class RotateKeyRequest(StrictSerializer):
    accepted_ignored = ("seed",)


class MemberPath(StrictSerializer):
    """The account (and user) named in an admin route's path: ids as they are created, or 422."""

    account = serializers.RegexField(**ID_FIELD)
    user = serializers.RegexField(**ID_FIELD, required=False)
