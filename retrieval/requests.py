"""The wire contract of the store and the retrieval primitive: the request serializers that the REST views and the
MCP tools both validate with, and the translations of a validated body into what the services take."""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from core.api import QueryParamsSerializer, StrictSerializer, StringOrList
from core.errors import InvalidArgument
from core.openapi import STRING, STRINGS, array, obj
from retrieval.search.query import CONTEXT_TYPES, FILTER_FIELDS, SEARCH_MODES, FindQuery, parse_time
from retrieval.services import WRITE_MODES, FileWrite

TELEMETRY = serializers.JSONField(required=False)
ACTOR_PEER_HEADER = "X-OpenViking-Actor-Peer"
PEER_MAX_CHARS = 64  # Context.peer and Message.peer_id


def actor_peer(request) -> str:
    """The actor peer a request writes as (`X-OpenViking-Actor-Peer`), stored on the memories it writes."""
    peer = request.headers.get(ACTOR_PEER_HEADER, "")
    if len(peer) > PEER_MAX_CHARS:
        raise InvalidArgument(f"{ACTOR_PEER_HEADER} is at most {PEER_MAX_CHARS} characters", loc=[ACTOR_PEER_HEADER])
    return peer


# The find result's schema: /find answers it, and list mode answers it plus its query plan.
HIT = obj(
    {
        "context_type": {"type": "string", "enum": list(CONTEXT_TYPES)},
        "uri": STRING,
        "level": {"type": "integer", "enum": [1, 2]},
        "score": {"type": "number", "minimum": 0, "maximum": 1},
        "abstract": STRING,
        "tags": STRINGS,
    },
    {"content": STRING},
)
FIND_RESULT = obj(
    {"memories": array(HIT), "resources": array(HIT), "skills": array(HIT), "total": {"type": "integer", "minimum": 0}}
)


# find --------------------------------------------------------------------------------------------------------


@extend_schema_field(
    {"oneOf": [{"type": "integer", "enum": [1, 2]}, {"type": "array", "items": {"type": "integer", "enum": [1, 2]}}]}
)
class LevelField(serializers.Field):
    def to_internal_value(self, data):
        values = data if isinstance(data, list) else [data]
        if not all(isinstance(v, int) and not isinstance(v, bool) and v in (1, 2) for v in values):
            raise serializers.ValidationError("level is 1 (directory), 2 (file) or a list of them")
        return values


_FILTER_VALUE = {
    "oneOf": [
        {"type": "string", "pattern": "^[^\\x00]*$"},
        {"type": "array", "minItems": 1, "items": {"type": "string", "pattern": "^[^\\x00]*$"}},
    ]
}


@extend_schema_field(
    {
        "type": "object",
        "nullable": True,
        "additionalProperties": False,
        "properties": {name: _FILTER_VALUE for name in FILTER_FIELDS},
    }
)
class FilterField(serializers.DictField):
    """Equality filters on node columns; `retrieval.search.query` checks the names and values."""


class FindRequest(StrictSerializer):
    query = serializers.CharField(allow_blank=True, max_length=8000, trim_whitespace=False, default="")
    image_url = serializers.CharField(required=False, allow_null=True, allow_blank=True)
    target_uri = StringOrList(required=False, default=list)
    context_type = StringOrList(required=False, default=list)
    limit = serializers.IntegerField(min_value=1, max_value=1000, default=10)
    node_limit = serializers.IntegerField(min_value=1, max_value=1000, required=False, allow_null=True)
    score_threshold = serializers.FloatField(min_value=0.0, max_value=1.0, required=False, allow_null=True)
    filter = FilterField(required=False, allow_null=True)
    tags = serializers.ListField(child=serializers.CharField(max_length=64), required=False, max_length=32)
    since = serializers.CharField(required=False, allow_null=True, max_length=64)
    until = serializers.CharField(required=False, allow_null=True, max_length=64)
    time_field = serializers.ChoiceField(choices=["updated_at", "created_at"], default="updated_at")
    level = LevelField(required=False, allow_null=True)
    read_content = serializers.BooleanField(default=False)
    search_mode = serializers.ChoiceField(
        choices=SEARCH_MODES,
        required=False,
        allow_null=True,
        help_text="hybrid (cosine and lexical coverage fused), vector or lexical; "
        "default: the operator's setting (hybrid)",
    )
    telemetry = TELEMETRY

    def validate_context_type(self, value):
        unknown = [v for v in value if v not in CONTEXT_TYPES]
        if unknown:
            raise serializers.ValidationError(f"unknown context_type {unknown}; use {', '.join(CONTEXT_TYPES)}")
        return value

    def validate(self, data):
        if data.get("image_url"):
            raise serializers.ValidationError(
                {"image_url": ["image queries need an image embedder; none is configured"]}
            )
        if not data["query"].strip():
            raise serializers.ValidationError({"query": ["a non-empty query is required"]})
        return data


def find_query_from(data: dict) -> FindQuery:
    """A validated /find body (or the /find part of a /search body) as the search primitive's query."""
    return FindQuery(
        query=data["query"],
        target_uris=data["target_uri"],
        context_types=data["context_type"],
        limit=data.get("node_limit") or data["limit"],
        score_threshold=data.get("score_threshold"),
        filter=data.get("filter") or {},
        tags=data.get("tags") or [],
        since=parse_time(data["since"], "since") if data.get("since") else None,
        until=parse_time(data["until"], "until") if data.get("until") else None,
        time_field=data["time_field"],
        levels=data.get("level") or [],
        read_content=data["read_content"],
        search_mode=data.get("search_mode"),
    )


# content -----------------------------------------------------------------------------------------------------


class UriParams(QueryParamsSerializer):
    uri = serializers.CharField()


class ReadParams(UriParams):
    offset = serializers.IntegerField(min_value=0, default=0)
    limit = serializers.IntegerField(min_value=-1, default=-1)
    raw = serializers.BooleanField(default=False)


class WriteOptionsMixin(serializers.Serializer):
    wait = serializers.BooleanField(default=False)
    telemetry = TELEMETRY
    timeout = serializers.FloatField(min_value=0, max_value=600, required=False)


class WriteRequest(WriteOptionsMixin, StrictSerializer):
    accepted_ignored = ("edit_source", "processing_mode", "acl")
    uri = serializers.CharField()
    content = serializers.CharField(allow_blank=True, trim_whitespace=False)
    mode = serializers.ChoiceField(choices=WRITE_MODES, default="replace")
    tags = serializers.ListField(child=serializers.CharField(max_length=64), required=False, max_length=32)
    tag_mode = serializers.ChoiceField(choices=["replace", "append", "clear"], required=False)


class BatchOperation(StrictSerializer):
    uri = serializers.CharField()
    content = serializers.CharField(allow_blank=True, trim_whitespace=False)
    mode = serializers.ChoiceField(choices=WRITE_MODES, default="replace")
    tags = serializers.ListField(child=serializers.CharField(max_length=64), required=False, max_length=32)


class BatchWriteRequest(WriteOptionsMixin, StrictSerializer):
    accepted_ignored = ("edit_source", "processing_mode", "skip_conflicts", "defer_processing")
    root_uri = serializers.CharField(required=False, allow_blank=True)
    operations = BatchOperation(many=True, allow_empty=False, max_length=1000)
    wait = serializers.BooleanField(default=True)


def file_write_from(data: dict, *, peer: str) -> FileWrite:
    """A validated /content/write body as a write; `tag_mode` clear empties the tags, no tags keeps the stored."""
    if data.get("tag_mode") == "clear":
        tags = ()
    else:
        tags = tuple(data["tags"]) if "tags" in data else None
    return FileWrite(data["uri"], data["content"], data["mode"], tags, peer=peer)


def file_writes_from(data: dict, *, peer: str) -> list[FileWrite]:
    """A validated /content/batch-write body's operations as writes."""
    return [
        FileWrite(op["uri"], op["content"], op["mode"], tuple(op["tags"]) if "tags" in op else None, peer=peer)
        for op in data["operations"]
    ]


# fs ----------------------------------------------------------------------------------------------------------

LS_DISPLAY_OPTIONS = (
    "simple",
    "output",
    "show_all_hidden",
    "sort_by",
    "sort_order",
    "extra_fields",
    "include_tags",
    "include_abstract",
    "include_overview",
    "overview_limit",
    "profile",
)


class LsParams(UriParams):
    accepted_ignored = LS_DISPLAY_OPTIONS
    recursive = serializers.BooleanField(default=False)
    node_limit = serializers.IntegerField(min_value=1, max_value=10000, default=1000)
    limit = serializers.IntegerField(min_value=1, max_value=10000, required=False)
    offset = serializers.IntegerField(min_value=0, default=0)
    abs_limit = serializers.IntegerField(min_value=-1, default=256)
    tags = serializers.ListField(child=serializers.CharField(), required=False)

    def validate(self, data):
        # OpenViking's `limit` is node_limit under another name; given, it wins.
        data["node_limit"] = data.pop("limit", None) or data["node_limit"]
        return data


class TreeParams(LsParams):
    accepted_ignored = LS_DISPLAY_OPTIONS + ("directories_only",)
    level_limit = serializers.IntegerField(min_value=1, max_value=32, default=3)
    abs_limit = serializers.IntegerField(min_value=-1, default=128)


class MkdirRequest(StrictSerializer):
    accepted_ignored = ("acl",)
    uri = serializers.CharField()
    description = serializers.CharField(required=False, allow_blank=True)


class RemoveParams(UriParams):
    recursive = serializers.BooleanField(default=False)
    wait = serializers.BooleanField(default=False)


# resources and skills ----------------------------------------------------------------------------------------


class AddResourceRequest(WriteOptionsMixin, StrictSerializer):
    accepted_ignored = (
        "reason",
        "instruction",
        "create_parent",
        "strict",
        "ignore_dirs",
        "include",
        "exclude",
        "directly_upload_media",
        "preserve_structure",
        "watch_interval",
        "args",
        "processing_mode",
        "add_type",
        "acl",
        "tag_mode",
    )
    temp_file_id = serializers.CharField(required=False)
    path = serializers.CharField(required=False)
    source_name = serializers.CharField(required=False, max_length=255)
    to = serializers.CharField(required=False, allow_null=True)
    parent = serializers.CharField(required=False, allow_null=True)
    tags = serializers.ListField(child=serializers.CharField(max_length=64), required=False, max_length=32)

    def validate(self, data):
        if "temp_file_id" not in data:
            raise serializers.ValidationError(
                {
                    "temp_file_id": [
                        "upload the file with POST /api/v1/resources/temp_upload first; server-side paths and URLs are "
                        "not read"
                    ]
                }
            )
        if data.get("to") and data.get("parent"):
            raise serializers.ValidationError({"to": ["give either to or parent, not both"]})
        return data


class AddSkillRequest(WriteOptionsMixin, StrictSerializer):
    data = serializers.JSONField(required=False)
    temp_file_id = serializers.CharField(required=False)
    target_uri = serializers.CharField(required=False, allow_null=True)

    def validate(self, data):
        if ("data" in data) == ("temp_file_id" in data):
            raise serializers.ValidationError({"data": ["give exactly one of data or temp_file_id"]})
        return data


class ListSkillsParams(QueryParamsSerializer):
    node_limit = serializers.IntegerField(min_value=1, max_value=10000, default=1000)
    target_uri = serializers.CharField(required=False)


# system ------------------------------------------------------------------------------------------------------


class WaitRequest(StrictSerializer):
    timeout = serializers.FloatField(min_value=0, max_value=600, required=False, allow_null=True)
