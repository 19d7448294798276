"""HTTP views of the store and the retrieval primitive: parse (retrieval/requests.py), call one service, wrap in
the envelope."""

from django.conf import settings
from rest_framework.decorators import api_view, parser_classes
from rest_framework.parsers import MultiPartParser
from rest_framework.response import Response

from core.api import Timings, parse
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
from retrieval import ingest, selectors, services, uploads
from retrieval.requests import (
    FIND_RESULT,
    AddResourceRequest,
    AddSkillRequest,
    BatchWriteRequest,
    FindRequest,
    ListSkillsParams,
    LsParams,
    MkdirRequest,
    ReadParams,
    RemoveParams,
    TreeParams,
    UriParams,
    WaitRequest,
    WriteRequest,
    actor_peer,
    file_write_from,
    file_writes_from,
    find_query_from,
)
from retrieval.search.find import find
from retrieval.search.query import CONTEXT_TYPES
from retrieval.waiting import queue_status, wait_for_tasks


@operation(request=FindRequest, result=FIND_RESULT, errors=(400,))
@api_view(["POST"])
def find_view(request):
    timings = Timings()
    with timings.stage("parse"):
        spec = find_query_from(parse(FindRequest, request.data))
    with timings.stage("find"):
        # The settings row the rate limit read for this request, if it did (profiles/throttling.py).
        result = find(caller=request.user, spec=spec, settings_row=getattr(request, "retrieval_settings", None))
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


@operation(request=WriteRequest, result=WRITE_RESULT, errors=(400, 409))
@api_view(["POST"])
def content_write(request):
    data = parse(WriteRequest, request.data)
    write = file_write_from(data, peer=actor_peer(request))
    return ok(services.write_file(caller=request.user, write=write, wait=data["wait"], timeout_s=data.get("timeout")))


@operation(request=BatchWriteRequest, result=TASK_RESULT, errors=(400, 409))
@api_view(["POST"])
def content_batch_write(request):
    data = parse(BatchWriteRequest, request.data)
    writes = file_writes_from(data, peer=actor_peer(request))
    return ok(
        services.write_batch(
            caller=request.user,
            writes=writes,
            root_uri=data.get("root_uri"),
            wait=data["wait"],
            timeout_s=data.get("timeout"),
        )
    )


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
        node_limit=params["node_limit"],
        offset=params["offset"],
        abs_limit=params["abs_limit"],
    )
    return _page(entries, more)


@operation(params=TreeParams, response=TREE_PAGE, errors=(400, 404))
@api_view(["GET"])
def fs_tree(request):
    params = parse(TreeParams, request.query_params)
    entries, more = selectors.tree(
        caller=request.user,
        uri=params["uri"],
        level_limit=params["level_limit"],
        node_limit=params["node_limit"],
        offset=params["offset"],
        abs_limit=params["abs_limit"],
    )
    return _page(entries, more)


@operation(params=UriParams, result=STAT, errors=(400, 404))
@api_view(["GET"])
def fs_stat(request):
    return ok(selectors.stat(caller=request.user, uri=parse(UriParams, request.query_params)["uri"]))


@operation(request=MkdirRequest, result=obj({"uri": STRING, "task_id": STRING}), errors=(400, 409))
@api_view(["POST"])
def fs_mkdir(request):
    data = parse(MkdirRequest, request.data)
    return ok(services.make_directory(caller=request.user, uri=data["uri"]))


@operation(params=RemoveParams, result=REMOVE_RESULT, errors=(400, 404, 409))
@api_view(["DELETE"])
def fs_remove(request):
    params = parse(RemoveParams, request.query_params)
    return ok(
        services.remove(caller=request.user, uri=params["uri"], recursive=params["recursive"], wait=params["wait"])
    )


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


@operation(
    request=AddResourceRequest,
    result=obj({"root_uri": STRING, "task_id": STRING}, closed=False),
    errors=(400, 404, 409),
)
@api_view(["POST"])
def resources_add(request):
    data = parse(AddResourceRequest, request.data)
    return ok(
        uploads.add_resource(
            caller=request.user,
            temp_file_id=data["temp_file_id"],
            to=data.get("to"),
            parent=data.get("parent"),
            source_name=data.get("source_name"),
            tags=data.get("tags"),
            wait=data["wait"],
            timeout_s=data.get("timeout"),
        )
    )


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
    return ok(
        uploads.add_skill(
            caller=request.user,
            data=data.get("data"),
            temp_file_id=data.get("temp_file_id"),
            target_uri=data.get("target_uri"),
            wait=data["wait"],
            timeout_s=data.get("timeout"),
        )
    )


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
