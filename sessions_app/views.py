"""HTTP views of sessions (OpenViking's `/api/v1/sessions` routes): parse, call one service, wrap in the envelope."""

from rest_framework import serializers
from rest_framework.decorators import api_view

from core.api import QueryParamsSerializer, StrictSerializer, parse
from core.envelope import ok
from core.openapi import INTEGER, OBJECT, STRING, STRINGS, TIMESTAMP, array, obj, operation, path_parameter
from retrieval.views import actor_peer
from sessions_app import commit, selectors, services
from sessions_app.models import Commit, Message

# Dot-only ids are refused: HTTP clients collapse `.` and `..` path segments, so such a session is unreachable.
SESSION_ID_PATTERN = r"\A(?!\.+\Z)[A-Za-z0-9_.:-]{1,128}\Z"
SESSION_ID_MESSAGE = "1–128 characters of A–Z, a–z, 0–9, _ . : -"
SESSION_ID = path_parameter("session_id", r"^(?!\.+$)[A-Za-z0-9_.:-]{1,128}$", 128, SESSION_ID_MESSAGE)


def session_id_field(**kwargs) -> serializers.RegexField:
    # No trimming: "a\t" must be refused, not taken for the session "a".
    return serializers.RegexField(
        SESSION_ID_PATTERN, error_messages={"invalid": SESSION_ID_MESSAGE}, trim_whitespace=False, **kwargs
    )


class SessionPath(StrictSerializer):
    session_id = session_id_field()


def _session_id(session_id: str) -> str:
    return parse(SessionPath, {"session_id": session_id})["session_id"]


class CreateSessionRequest(StrictSerializer):
    accepted_ignored = ("memory_policy", "auto_commit_policy", "memory_extraction_config", "telemetry")
    session_id = session_id_field(required=False, allow_null=True, allow_blank=True)


class ListSessionsParams(QueryParamsSerializer):
    limit = serializers.IntegerField(min_value=1, max_value=1000, default=100)


_SESSION_ROW = {
    "session_id": STRING,
    "user": STRING,
    "total_message_count": INTEGER,
    "created_at": TIMESTAMP,
    "updated_at": TIMESTAMP,
}
SESSION = obj({**_SESSION_ROW, "message_count": INTEGER, "archive_overview": STRING})


@operation(methods=["GET"], params=ListSessionsParams, result=array(obj(_SESSION_ROW)))
@operation(methods=["POST"], request=CreateSessionRequest, result=SESSION, errors=(409,))
@api_view(["GET", "POST"])
def sessions(request):
    if request.method == "GET":
        params = parse(ListSessionsParams, request.query_params)
        return ok(selectors.list_sessions(caller=request.user, limit=params["limit"]))
    data = parse(CreateSessionRequest, request.data or {})
    return ok(services.create_session(caller=request.user, session_id=data.get("session_id")))


class OpenSessionParams(QueryParamsSerializer):
    auto_create = serializers.BooleanField(default=False)


@operation(methods=["GET"], params=OpenSessionParams, result=SESSION, errors=(404,), path_params=(SESSION_ID,))
@operation(methods=["DELETE"], result=obj({"session_id": STRING}), errors=(404,), path_params=(SESSION_ID,))
@api_view(["GET", "DELETE"])
def session_detail(request, session_id):
    session_id = _session_id(session_id)
    if request.method == "DELETE":
        return ok(services.delete_session(caller=request.user, session_id=session_id))
    params = parse(OpenSessionParams, request.query_params)
    return ok(services.open_session(caller=request.user, session_id=session_id, auto_create=params["auto_create"]))


class MessageRequest(StrictSerializer):
    """One message as OpenViking clients send it: `content`, or typed `parts` (which win when both are given)."""

    # Per-message metadata the SDK may send; ovsite orders messages by arrival and keeps none of these.
    accepted_ignored = (
        "created_at",
        "turn_id",
        "message_kind",
        "source_message_ids",
        "role_id",
        "telemetry",
        "options",
    )
    role = serializers.ChoiceField(choices=[choice for choice, _ in Message.ROLE_CHOICES])
    content = serializers.CharField(required=False, allow_null=True, allow_blank=True, trim_whitespace=False)
    parts = serializers.ListField(child=serializers.DictField(), required=False, allow_null=True, max_length=1000)
    peer_id = serializers.CharField(required=False, allow_null=True, allow_blank=True, max_length=64)

    def validate_parts(self, parts):
        for index, part in enumerate(parts or []):
            if not isinstance(part.get("type"), str):
                raise serializers.ValidationError(f"part {index} needs a string 'type'")
            if part["type"] == "text" and not isinstance(part.get("text"), str):
                raise serializers.ValidationError(f"text part {index} needs a string 'text'")
        return parts

    def validate(self, data):
        if data.get("content") is None and not data.get("parts"):
            raise serializers.ValidationError({"content": ["give content or a non-empty parts list"]})
        return data


class BatchMessagesRequest(StrictSerializer):
    accepted_ignored = ("telemetry",)
    messages = MessageRequest(many=True, allow_empty=False, max_length=1000)


ADDED = obj({"session_id": STRING, "message_count": INTEGER, "added": INTEGER})


@operation(request=MessageRequest, result=ADDED, errors=(404,), path_params=(SESSION_ID,))
@api_view(["POST"])
def add_message(request, session_id):
    session_id = _session_id(session_id)
    message = services.message_from(**parse(MessageRequest, request.data))
    return ok(services.add_messages(caller=request.user, session_id=session_id, messages=[message]))


@operation(request=BatchMessagesRequest, result=ADDED, errors=(404,), path_params=(SESSION_ID,))
@api_view(["POST"])
def add_messages_batch(request, session_id):
    session_id = _session_id(session_id)
    messages = [services.message_from(**m) for m in parse(BatchMessagesRequest, request.data)["messages"]]
    return ok(services.add_messages(caller=request.user, session_id=session_id, messages=messages))


class ContextParams(QueryParamsSerializer):
    token_budget = serializers.IntegerField(min_value=0, max_value=10_000_000, default=128_000)


CONTEXT_MESSAGE = obj(
    {
        "index": INTEGER,
        "role": STRING,
        "content": STRING,
        "parts": array(OBJECT),
        "peer_id": STRING,
        "created_at": TIMESTAMP,
        "estimated_tokens": INTEGER,
    }
)
SESSION_CONTEXT = obj(
    {
        "archive_overview": STRING,
        "messages": array(CONTEXT_MESSAGE),
        "estimated_tokens": INTEGER,
        "total_message_count": INTEGER,
    }
)


@operation(params=ContextParams, result=SESSION_CONTEXT, errors=(404,), path_params=(SESSION_ID,))
@api_view(["GET"])
def session_context(request, session_id):
    session_id = _session_id(session_id)
    params = parse(ContextParams, request.query_params)
    return ok(
        selectors.session_context(caller=request.user, session_id=session_id, token_budget=params["token_budget"])
    )


class EventMetadata(StrictSerializer):
    tags = serializers.ListField(child=serializers.CharField(max_length=64), max_length=32)


class ExtractionMetadata(StrictSerializer):
    """What the SDK's `event_tags` option sends: `{"event": {"tags": [...]}}`, the tags of the event memories."""

    event = EventMetadata(required=False)


class CommitRequest(StrictSerializer):
    # OpenViking's working memory has no ovsite counterpart. Its turn-budget retention fields are refused as
    # unknown (422) rather than ignored: ignoring them would archive what the client asked to keep.
    accepted_ignored = ("enable_working_memory", "telemetry")
    keep_recent_count = serializers.IntegerField(min_value=0, max_value=1_000_000, default=0)
    extraction_metadata = ExtractionMetadata(required=False)


_STEP = {"type": "string", "enum": [choice for choice, _ in Commit.STEP_CHOICES]}
COMMITTED = obj(
    {
        "session_id": STRING,
        "task_id": STRING,
        "status": {"type": "string", "enum": ["accepted"]},
        "archived": {"type": "boolean"},
        "archived_messages": INTEGER,
        "message_count": INTEGER,
        "total_message_count": INTEGER,
        "archive_summary": _STEP,
        "extraction": _STEP,
        "memories_extracted": INTEGER,
        "memories_deduplicated": INTEGER,
        "memories_skipped": INTEGER,
        "memory_uris": STRINGS,
        "error": STRING,
    }
)


@operation(request=CommitRequest, result=COMMITTED, errors=(404,), path_params=(SESSION_ID,))
@api_view(["POST"])
def commit_session(request, session_id):
    session_id = _session_id(session_id)
    data = parse(CommitRequest, request.data or {})
    tags = data.get("extraction_metadata", {}).get("event", {}).get("tags", [])
    return ok(
        commit.commit_session(
            caller=request.user,
            session_id=session_id,
            keep_recent_count=data["keep_recent_count"],
            event_tags=tags,
            actor_peer=actor_peer(request),
        )
    )
