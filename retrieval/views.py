"""HTTP views of the store and the retrieval primitive: parse, call one service, wrap in the envelope."""

from django.conf import settings
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.decorators import api_view, parser_classes
from rest_framework.parsers import MultiPartParser
from rest_framework.response import Response

from core.api import (
    QueryParamsSerializer,
    StrictSerializer,
    StringOrList,
    Timings,
    parse,
)
from core.envelope import ok
from core.errors import InvalidArgument
from core.openapi import (
    BOOLEAN,
    INTEGER,
    OBJECT,
    STRING,
    STRINGS,
    TIMESTAMP,
    array,
    obj,
    operation,
)
from retrieval import ingest, selectors, services
from retrieval.search.find import find
from retrieval.search.query import (
    CONTEXT_TYPES,
    FILTER_FIELDS,
    SEARCH_MODES,
    FindQuery,
    parse_time,
)
from retrieval.uris import parse_uri
from retrieval.waiting import queue_status, wait_for_tasks

TELEMETRY = serializers.JSONField(required=False)
ACTOR_PEER_HEADER = "X-OpenViking-Actor-Peer"
PEER_MAX_CHARS = 64  # Context.peer and Message.peer_id


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


def find_query_from(data: dict) -> FindQuery:
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


@operation(request=FindRequest, result=FIND_RESULT, errors=(400,))
@api_view(["POST"])
def find_view(request):
    timings = Timings()
    with timings.stage("parse"):
        spec = find_query_from(parse(FindRequest, request.data))
    with timings.stage("find"):
        result = find(caller=request.user, spec=spec)
    return ok(result, headers=timings.header())


# content -----------------------------------------------------------------------------------------------------

PROCESSING = obj({"pending_tasks": INTEGER, "done": BOOLEAN}, {"pending_nodes": INTEGER, "failed_nodes": INTEGER})
TASK_RESULT = obj({"task_id": STRING, "uris": STRINGS, "changed": STRINGS}, {"processing": PROCESSING})
_STATUS = {"type": "string", "enum": ["queued", "complete", "failed"]}
WRITE_RESULT = obj(
    {
        **TASK_RESULT["properties"],
        "uri": STRING,
        "root_uri": STRING,
        "context_type": {"type": "string", "enum": list(CONTEXT_TYPES)},
        "mode": STRING,
        "written_bytes": INTEGER,
        "content_updated": BOOLEAN,
        "semantic_status": _STATUS,
        "vector_status": _STATUS,
    },
    {"processing": PROCESSING},
)


class UriParams(QueryParamsSerializer):
    uri = serializers.CharField()


class ReadParams(UriParams):
    offset = serializers.IntegerField(min_value=0, default=0)
    limit = serializers.IntegerField(min_value=-1, default=-1)
    raw = serializers.BooleanField(default=False)


@operation(params=ReadParams, result=STRING, errors=(400, 404))
@api_view(["GET"])
def content_read(request):
    params = parse(ReadParams, request.query_params)
    return ok(
        selectors.read_content(caller=request.user, uri=params["uri"], offset=params["offset"], limit=params["limit"])
    )


@operation(params=UriParams, result=STRING, errors=(400, 404))
@api_view(["GET"])
def content_abstract(request):
    return ok(selectors.read_abstract(caller=request.user, uri=parse(UriParams, request.query_params)["uri"]))


@operation(params=UriParams, result=STRING, errors=(400, 404))
@api_view(["GET"])
def content_overview(request):
    return ok(selectors.read_overview(caller=request.user, uri=parse(UriParams, request.query_params)["uri"]))


class WriteOptionsMixin(serializers.Serializer):
    wait = serializers.BooleanField(default=False)
    telemetry = TELEMETRY
    timeout = serializers.FloatField(min_value=0, max_value=600, required=False)


class WriteRequest(WriteOptionsMixin, StrictSerializer):
    accepted_ignored = ("edit_source", "processing_mode", "acl")
    uri = serializers.CharField()
    content = serializers.CharField(allow_blank=True, trim_whitespace=False)
    mode = serializers.ChoiceField(choices=services.WRITE_MODES, default="replace")
    tags = serializers.ListField(child=serializers.CharField(max_length=64), required=False, max_length=32)
    tag_mode = serializers.ChoiceField(choices=["replace", "append", "clear"], required=False)


class BatchOperation(StrictSerializer):
    uri = serializers.CharField()
    content = serializers.CharField(allow_blank=True, trim_whitespace=False)
    mode = serializers.ChoiceField(choices=services.WRITE_MODES, default="replace")
    tags = serializers.ListField(child=serializers.CharField(max_length=64), required=False, max_length=32)


class BatchWriteRequest(WriteOptionsMixin, StrictSerializer):
    accepted_ignored = ("edit_source", "processing_mode", "skip_conflicts", "defer_processing")
    root_uri = serializers.CharField(required=False, allow_blank=True)
    operations = BatchOperation(many=True, allow_empty=False, max_length=1000)
    wait = serializers.BooleanField(default=True)


def actor_peer(request) -> str:
    """The actor peer a request writes as (`X-OpenViking-Actor-Peer`), stored on the memories it writes."""
    peer = request.headers.get(ACTOR_PEER_HEADER, "")
    if len(peer) > PEER_MAX_CHARS:
        raise InvalidArgument(f"{ACTOR_PEER_HEADER} is at most {PEER_MAX_CHARS} characters", loc=[ACTOR_PEER_HEADER])
    return peer


def _tags_for(data: dict) -> tuple[str, ...] | None:
    if data.get("tag_mode") == "clear":
        return ()
    return tuple(data["tags"]) if "tags" in data else None


def _finish(request_data: dict, caller, result: dict) -> dict:
    if request_data.get("wait"):
        result["processing"] = wait_for_tasks(
            caller=caller, task_ids=[result["task_id"]], timeout_s=request_data.get("timeout")
        )
    return result


@operation(request=WriteRequest, result=WRITE_RESULT, errors=(400, 409))
@api_view(["POST"])
def content_write(request):
    data = parse(WriteRequest, request.data)
    write = services.FileWrite(data["uri"], data["content"], data["mode"], _tags_for(data), peer=actor_peer(request))
    return ok(services.write_file(caller=request.user, write=write, wait=data["wait"], timeout_s=data.get("timeout")))


@operation(request=BatchWriteRequest, result=TASK_RESULT, errors=(400, 409))
@api_view(["POST"])
def content_batch_write(request):
    data = parse(BatchWriteRequest, request.data)
    peer = actor_peer(request)
    writes = [
        services.FileWrite(op["uri"], op["content"], op["mode"], tuple(op["tags"]) if "tags" in op else None, peer=peer)
        for op in data["operations"]
    ]
    if data.get("root_uri"):
        root = parse_uri(data["root_uri"], user_id=request.user.user_id).uri
        outside = [
            w.uri for w in writes if not parse_uri(w.uri, user_id=request.user.user_id).uri.startswith(root + "/")
        ]
        if outside:
            raise InvalidArgument(f"operations outside root_uri {root}: {outside[:3]}", loc=["operations"])
    return ok(_finish(data, request.user, services.write_files(caller=request.user, writes=writes, kind="batch_write")))


# fs ----------------------------------------------------------------------------------------------------------

NODE_STATE = {"type": "string", "enum": ["pending", "ready", "failed"]}
ENTRY = {
    "uri": STRING,
    "name": STRING,
    "isDir": BOOLEAN,
    "size": INTEGER,
    "modTime": {**TIMESTAMP, "nullable": True},
    "context_type": STRING,
    "category": STRING,
    "abstract": STRING,
    "tags": STRINGS,
    "state": NODE_STATE,
}
PAGE = obj({"status": {"type": "string", "enum": ["ok"]}, "result": array(obj(ENTRY)), "has_more": BOOLEAN})
TREE_PAGE = obj(
    {
        **PAGE["properties"],
        "result": array(obj({**ENTRY, "depth": {"type": "integer", "minimum": 1}, "rel_path": STRING})),
    }
)
STAT = obj(
    {
        **ENTRY,
        "error": STRING,
        "created_at": TIMESTAMP,
        "content_hash": STRING,
        "embedding_model": STRING,
        "attempts": INTEGER,
        "tokens": obj({"abstract": INTEGER, "overview": INTEGER, "content": INTEGER}),
    }
)
REMOVE_RESULT = obj({"uri": STRING, "estimated_deleted_count": INTEGER, "task_id": STRING}, {"processing": PROCESSING})

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


class TreeParams(LsParams):
    accepted_ignored = LS_DISPLAY_OPTIONS + ("directories_only",)
    level_limit = serializers.IntegerField(min_value=1, max_value=32, default=3)
    abs_limit = serializers.IntegerField(min_value=-1, default=128)


def _page(entries: list, has_more: bool) -> Response:
    return Response({"status": "ok", "result": entries, "has_more": has_more})


@operation(params=LsParams, response=PAGE, errors=(400, 404))
@api_view(["GET"])
def fs_ls(request):
    params = parse(LsParams, request.query_params)
    entries, more = selectors.list_children(
        caller=request.user,
        uri=params["uri"],
        recursive=params["recursive"],
        node_limit=params.get("limit") or params["node_limit"],
        offset=params["offset"],
        abs_limit=params["abs_limit"],
    )
    return _page(entries, more)


@operation(params=TreeParams, response=TREE_PAGE, errors=(400, 404))
@api_view(["GET"])
def fs_tree(request):
    params = parse(TreeParams, request.query_params)
    entries, more = selectors.list_children(
        caller=request.user,
        uri=params["uri"],
        recursive=True,
        node_limit=params.get("limit") or params["node_limit"],
        offset=params["offset"],
        abs_limit=params["abs_limit"],
    )
    base = parse_uri(params["uri"], user_id=request.user.user_id).uri
    prefix = base if base.endswith("/") else base + "/"  # only the bare `viking://` ends with "/"
    for entry in entries:
        below = entry["uri"][len(prefix) :]
        entry["depth"] = below.count("/") + 1
        # OpenViking's path below the listed directory; directories end with "/".
        entry["rel_path"] = below + ("/" if entry["isDir"] else "")
    return _page([e for e in entries if e["depth"] <= params["level_limit"]], more)


@operation(params=UriParams, result=STAT, errors=(400, 404))
@api_view(["GET"])
def fs_stat(request):
    return ok(selectors.stat(caller=request.user, uri=parse(UriParams, request.query_params)["uri"]))


class MkdirRequest(StrictSerializer):
    accepted_ignored = ("acl",)
    uri = serializers.CharField()
    description = serializers.CharField(required=False, allow_blank=True)


class RemoveParams(UriParams):
    recursive = serializers.BooleanField(default=False)
    wait = serializers.BooleanField(default=False)


@operation(request=MkdirRequest, result=obj({"uri": STRING, "task_id": STRING}), errors=(400, 409))
@api_view(["POST"])
def fs_mkdir(request):
    data = parse(MkdirRequest, request.data)
    return ok(services.make_directory(caller=request.user, uri=data["uri"]))


@operation(params=RemoveParams, result=REMOVE_RESULT, errors=(400, 404, 409))
@api_view(["DELETE"])
def fs_remove(request):
    params = parse(RemoveParams, request.query_params)
    result = services.remove(caller=request.user, uri=params["uri"], recursive=params["recursive"])
    return ok(_finish(params, request.user, result))


# resources and skills ----------------------------------------------------------------------------------------

UPLOAD_FORM = {
    "multipart/form-data": {
        "type": "object",
        "required": ["file"],
        "properties": {"file": {"type": "string", "format": "binary"}},
    }
}


@operation(request=UPLOAD_FORM, result=obj({"temp_file_id": STRING, "size": INTEGER}), errors=(400,))
@api_view(["POST"])
@parser_classes([MultiPartParser])
def resources_temp_upload(request):
    upload = request.FILES.get("file")
    if upload is None:
        raise InvalidArgument("send the file as multipart form field 'file'", loc=["file"])
    return ok(ingest.save_temp_upload(caller=request.user, name=upload.name, chunks=upload.chunks()))


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


@operation(
    request=AddResourceRequest,
    result=obj({"root_uri": STRING, "task_id": STRING}, closed=False),
    errors=(400, 404, 409),
)
@api_view(["POST"])
def resources_add(request):
    data = parse(AddResourceRequest, request.data)
    result = ingest.add_resource(
        caller=request.user,
        temp_file_id=data["temp_file_id"],
        to=data.get("to"),
        parent=data.get("parent"),
        source_name=data.get("source_name"),
        tags=data.get("tags"),
    )
    return ok(_finish(data, request.user, result))


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


SKILL_ADDED = obj(
    {
        "status": {"type": "string", "enum": ["success"]},
        "name": STRING,
        "uri": STRING,
        "root_uri": STRING,
        "auxiliary_files": INTEGER,
        "task_id": STRING,
        "skipped": array(OBJECT),
    },
    {"processing": PROCESSING},
)
SKILL = obj(
    {
        "type": {"type": "string", "enum": ["skill"]},
        "name": STRING,
        "uri": STRING,
        "root_uri": STRING,
        "skill_md_uri": STRING,
        "description": {},
        "tags": {},
        "allowed_tools": {},
        "abstract": STRING,
        "state": NODE_STATE,
    }
)
SKILLS = obj({"skills": array(SKILL), "total": INTEGER}, {"root_uri": STRING, "root_uris": STRINGS})


@operation(methods=["GET"], params=ListSkillsParams, result=SKILLS, errors=(400,))
@operation(methods=["POST"], request=AddSkillRequest, result=SKILL_ADDED, errors=(400, 404, 409))
@api_view(["GET", "POST"])
def skills(request):
    if request.method == "GET":
        params = parse(ListSkillsParams, request.query_params)
        return ok(
            ingest.list_skills(
                caller=request.user, node_limit=params["node_limit"], target_uri=params.get("target_uri")
            )
        )
    data = parse(AddSkillRequest, request.data)
    result = ingest.add_skill(
        caller=request.user,
        data=data.get("data"),
        temp_file_id=data.get("temp_file_id"),
        target_uri=data.get("target_uri"),
    )
    return ok(_finish(data, request.user, result))


# system ------------------------------------------------------------------------------------------------------

WAIT_RESULT = obj({"pending_tasks": INTEGER, "pending_nodes": INTEGER, "failed_nodes": INTEGER, "done": BOOLEAN})
TASK = obj(
    {
        "task_id": STRING,
        "kind": STRING,
        "status": STRING,
        "uris": STRINGS,
        "error": STRING,
        "created_at": TIMESTAMP,
        "finished_at": {**TIMESTAMP, "nullable": True},
    }
)


class WaitRequest(StrictSerializer):
    timeout = serializers.FloatField(min_value=0, max_value=600, required=False, allow_null=True)


@operation(request=WaitRequest, result=WAIT_RESULT)
@api_view(["POST"])
def system_wait(request):
    data = parse(WaitRequest, request.data or {})
    return ok(wait_for_tasks(caller=request.user, task_ids=None, timeout_s=data.get("timeout")))


@operation(
    result=obj(
        {
            "pending_tasks": INTEGER,
            "pending_nodes": INTEGER,
            "failed_nodes": INTEGER,
            "embedding_model": STRING,
            "embedding_dim": INTEGER,
            "llm": {"type": "string", "enum": ["on", "off"]},
        }
    )
)
@api_view(["GET"])
def system_status(request):
    status = queue_status(caller=request.user)
    status.update(
        embedding_model=settings.EMBEDDING_MODEL,
        embedding_dim=settings.EMBEDDING_DIM,
        llm="on" if settings.LLM_URL else "off",
    )
    return ok(status)


@operation(result=TASK, errors=(404,))
@api_view(["GET"])
def task_detail(request, task_id):
    return ok(selectors.task_detail(caller=request.user, task_id=task_id))
