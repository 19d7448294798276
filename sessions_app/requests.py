"""The wire contract of the session routes (OpenViking's `/api/v1/sessions`): the request serializers that the REST
views and the MCP tools both validate with."""

from rest_framework import serializers

from core.api import QueryParamsSerializer, StrictSerializer, parse
from sessions_app.models import Message

# Dot-only ids are refused: HTTP clients collapse `.` and `..` path segments, so such a session is unreachable.
SESSION_ID_PATTERN = r"\A(?!\.+\Z)[A-Za-z0-9_.:-]{1,128}\Z"
SESSION_ID_MESSAGE = "1–128 characters of A–Z, a–z, 0–9, _ . : -"


def session_id_field(**kwargs) -> serializers.RegexField:
    # No trimming: "a\t" must be refused, not taken for the session "a".
    return serializers.RegexField(
        SESSION_ID_PATTERN, error_messages={"invalid": SESSION_ID_MESSAGE}, trim_whitespace=False, **kwargs
    )


class SessionPath(StrictSerializer):
    session_id = session_id_field()


def parse_session_id(session_id: str) -> str:
    """A session id as a route's path (or a tool's argument) names it, or 422."""
    return parse(SessionPath, {"session_id": session_id})["session_id"]


class CreateSessionRequest(StrictSerializer):
    accepted_ignored = ("memory_policy", "auto_commit_policy", "memory_extraction_config", "telemetry")
    session_id = session_id_field(required=False, allow_null=True, allow_blank=True)


class ListSessionsParams(QueryParamsSerializer):
    limit = serializers.IntegerField(min_value=1, max_value=1000, default=100)


class OpenSessionParams(QueryParamsSerializer):
    auto_create = serializers.BooleanField(default=False)


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


class ContextParams(QueryParamsSerializer):
    token_budget = serializers.IntegerField(min_value=0, max_value=10_000_000, default=128_000)


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


def event_tags(data: dict) -> list[str]:
    """A validated commit body's tags for the event memories it extracts."""
    return data.get("extraction_metadata", {}).get("event", {}).get("tags", [])
