"""The composition root's HTTP views: the unauthenticated probes, the metrics scrape and the root's account API
(parse with ovsite/requests.py, call one service, wrap in the envelope)."""

from django.http import HttpResponse
from rest_framework.decorators import api_view, authentication_classes, permission_classes
from rest_framework.permissions import AllowAny
from rest_framework.response import Response

from core import accounts
from core.api import parse
from core.auth import IsRoot
from core.envelope import error_body, ok
from core.openapi import BOOLEAN, STRING, TIMESTAMP, array, obj, operation, path_parameter
from ovsite import readiness
from ovsite.exposition import scrape
from ovsite.requests import (
    ID_FIELD,
    AddUserRequest,
    CreateAccountRequest,
    ListAccountsParams,
    MemberPath,
    RotateKeyRequest,
)

ACCOUNT = path_parameter("account", ID_FIELD["regex"], ID_FIELD["max_length"], "the account's id")
USER = path_parameter("user", ID_FIELD["regex"], ID_FIELD["max_length"], "the user's id in the account")


@operation(response=obj({"status": {"type": "string", "enum": ["ok"]}, "healthy": BOOLEAN}), common=())
@api_view(["GET"])
@authentication_classes([])
@permission_classes([AllowAny])
def health(request):
    return Response({"status": "ok", "healthy": True})


def metrics(request):
    """Prometheus' scrape (text exposition format), outside DRF: no key, no envelope; see ovsite/exposition.py."""
    body, content_type = scrape()
    return HttpResponse(body, content_type=content_type)


CHECK = obj(
    {
        "status": {
            "type": "string",
            "enum": [readiness.OK, readiness.FAILED, readiness.SKIPPED, readiness.NOT_CONFIGURED],
        },
        "detail": STRING,
    }
)
CHECKS = {
    "type": "object",
    "additionalProperties": CHECK,
    "description": "by name: database, migrations, embedder, stored_vectors, broker, workers",
}


@operation(result=obj({"ready": BOOLEAN, "checks": CHECKS}), errors=(503,), common=())
@api_view(["GET"])
@authentication_classes([])
@permission_classes([AllowAny])
def ready(request):
    """Readiness (ovsite/readiness.py, the same checks as `manage.py doctor`): 503 naming the failed checks."""
    checks = readiness.run_checks()
    report = {check.name: {"status": check.status, "detail": check.detail} for check in checks}
    failed = readiness.failed(checks)
    if failed:
        message = "not ready: " + "; ".join(f"{check.name}: {check.detail}" for check in failed)
        return Response(
            error_body(
                "UNAVAILABLE",
                message,
                {"service": failed[0].name, "failed": [check.name for check in failed], "checks": report},
            ),
            status=503,
        )
    return ok({"ready": True, "checks": report})


KEY_ISSUED = {"account_id": STRING, "user_key": STRING}


@operation(
    methods=["GET"], params=ListAccountsParams, result=array(obj({"account_id": STRING, "created_at": TIMESTAMP}))
)
@operation(
    methods=["POST"], request=CreateAccountRequest, result=obj({**KEY_ISSUED, "admin_user_id": STRING}), errors=(409,)
)
@api_view(["GET", "POST"])
@permission_classes([IsRoot])
def admin_accounts(request):
    if request.method == "GET":
        parse(ListAccountsParams, request.query_params)
        return ok(accounts.list_accounts())
    data = parse(CreateAccountRequest, request.data)
    return ok(accounts.create_account(name=data["account_id"], admin_user_id=data["admin_user_id"]))


@operation(
    request=AddUserRequest,
    result=obj({**KEY_ISSUED, "user_id": STRING, "role": STRING}),
    errors=(404, 409),
    path_params=(ACCOUNT,),
)
@api_view(["POST"])
@permission_classes([IsRoot])
def admin_users(request, account):
    path = parse(MemberPath, {"account": account})
    data = parse(AddUserRequest, request.data)
    return ok(accounts.add_user(account_name=path["account"], user_id=data["user_id"], role=data["role"]))


@operation(
    request=RotateKeyRequest, result=obj({**KEY_ISSUED, "user_id": STRING}), errors=(404,), path_params=(ACCOUNT, USER)
)
@api_view(["POST"])
@permission_classes([IsRoot])
def admin_user_key(request, account, user):
    path = parse(MemberPath, {"account": account, "user": user})
    parse(RotateKeyRequest, request.data or {})
    return ok(accounts.rotate_key(account_name=path["account"], user_id=path["user"]))
