from django.db import connection
from django.http import HttpResponse
from rest_framework import serializers
from rest_framework.decorators import api_view, authentication_classes, permission_classes
from rest_framework.permissions import AllowAny
from rest_framework.response import Response

from ovsite import accounts
from ovsite.api import QueryParamsSerializer, StrictSerializer, parse
from ovsite.auth import IsRoot
from ovsite.envelope import error_body, ok
from ovsite.metrics import scrape

# "." and ".." are not ids: `viking://user/..` does not parse, so such a user could never reach its own space.
ID_FIELD = dict(max_length=64, regex=r"^(?!\.\.?$)[A-Za-z0-9_.@-]+$")


@api_view(["GET"])
@authentication_classes([])
@permission_classes([AllowAny])
def health(request):
    return Response({"status": "ok", "healthy": True})


def metrics(request):
    """Prometheus' scrape (text exposition format), outside DRF: no key, no envelope; see ovsite/metrics.py."""
    body, content_type = scrape()
    return HttpResponse(body, content_type=content_type)


@api_view(["GET"])
@authentication_classes([])
@permission_classes([AllowAny])
def ready(request):
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception:
        return Response(error_body("UNAVAILABLE", "database unavailable", {"service": "database"}), status=503)
    return ok({"ready": True})


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


@api_view(["GET", "POST"])
@permission_classes([IsRoot])
def admin_accounts(request):
    if request.method == "GET":
        parse(ListAccountsParams, request.query_params)
        return ok(accounts.list_accounts())
    data = parse(CreateAccountRequest, request.data)
    return ok(accounts.create_account(name=data["account_id"], admin_user_id=data["admin_user_id"]))


@api_view(["POST"])
@permission_classes([IsRoot])
def admin_users(request, account):
    data = parse(AddUserRequest, request.data)
    return ok(accounts.add_user(account_name=account, user_id=data["user_id"], role=data["role"]))


@api_view(["POST"])
@permission_classes([IsRoot])
def admin_user_key(request, account, user):
    parse(RotateKeyRequest, request.data or {})
    return ok(accounts.rotate_key(account_name=account, user_id=user))
