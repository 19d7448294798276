"""HTTP views of sessions (OpenViking's `/api/v1/sessions` routes): parse (sessions_app/requests.py), call one
service, wrap in the envelope."""

from rest_framework.decorators import api_view

from core.api import parse
from core.envelope import ok
from core.openapi import INTEGER, OBJECT, STRING, STRINGS, TIMESTAMP, array, obj, operation, path_parameter
from retrieval.requests import actor_peer
from sessions_app import commit, selectors, services
from sessions_app.models import Commit
from sessions_app.requests import (
    SESSION_ID_MESSAGE,
    BatchMessagesRequest,
    CommitRequest,
    ContextParams,
    CreateSessionRequest,
    ListSessionsParams,
    MessageRequest,
    OpenSessionParams,
    event_tags,
    parse_session_id,
)

SESSION_ID = path_parameter("session_id", r"^(?!\.+$)[A-Za-z0-9_.:-]{1,128}$", 128, SESSION_ID_MESSAGE)

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


@operation(methods=["GET"], params=OpenSessionParams, result=SESSION, errors=(404,), path_params=(SESSION_ID,))
@operation(methods=["DELETE"], result=obj({"session_id": STRING}), errors=(404,), path_params=(SESSION_ID,))
@api_view(["GET", "DELETE"])
def session_detail(request, session_id):
    session_id = parse_session_id(session_id)
    if request.method == "DELETE":
        return ok(services.delete_session(caller=request.user, session_id=session_id))
    params = parse(OpenSessionParams, request.query_params)
    return ok(services.open_session(caller=request.user, session_id=session_id, auto_create=params["auto_create"]))


ADDED = obj({"session_id": STRING, "message_count": INTEGER, "added": INTEGER})


@operation(request=MessageRequest, result=ADDED, errors=(404,), path_params=(SESSION_ID,))
@api_view(["POST"])
def add_message(request, session_id):
    session_id = parse_session_id(session_id)
    message = services.message_from(**parse(MessageRequest, request.data))
    return ok(services.add_messages(caller=request.user, session_id=session_id, messages=[message]))


@operation(request=BatchMessagesRequest, result=ADDED, errors=(404,), path_params=(SESSION_ID,))
@api_view(["POST"])
def add_messages_batch(request, session_id):
    session_id = parse_session_id(session_id)
    messages = [services.message_from(**m) for m in parse(BatchMessagesRequest, request.data)["messages"]]
    return ok(services.add_messages(caller=request.user, session_id=session_id, messages=messages))


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
    session_id = parse_session_id(session_id)
    params = parse(ContextParams, request.query_params)
    return ok(
        selectors.session_context(caller=request.user, session_id=session_id, token_budget=params["token_budget"])
    )


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
    session_id = parse_session_id(session_id)
    data = parse(CommitRequest, request.data or {})
    return ok(
        commit.commit_session(
            caller=request.user,
            session_id=session_id,
            keep_recent_count=data["keep_recent_count"],
            event_tags=event_tags(data),
            actor_peer=actor_peer(request),
        )
    )
