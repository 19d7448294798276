"""Writes to sessions: create, open (with auto-create), delete, append messages atomically on the turn clock."""

import json
import uuid
from dataclasses import dataclass, field

from django.db import IntegrityError, transaction

from core.auth import Caller
from core.errors import Conflict, InvalidArgument, PayloadTooLarge
from sessions_app.commit import commit_session
from sessions_app.models import Message, Session
from sessions_app.selectors import describe_session, require_session

MAX_MESSAGE_BYTES = 256 * 1024


@dataclass(frozen=True)
class NewMessage:
    role: str
    content: str
    parts: list = field(default_factory=list)
    peer_id: str = ""


def message_from(
    *, role: str, content: str | None = None, parts: list | None = None, peer_id: str | None = None
) -> NewMessage:
    """OpenViking's two message shapes: `parts` wins over `content`; its text parts, joined by newlines, become the
    stored content (what budgets, recall and commit read) and the parts are kept as sent."""
    if parts:
        text = "\n".join(part["text"] for part in parts if part.get("type") == "text")
        return NewMessage(role=role, content=text, parts=list(parts), peer_id=peer_id or "")
    return NewMessage(role=role, content=content or "", peer_id=peer_id or "")


def _has_nul(value) -> bool:
    """PostgreSQL stores neither NUL in text nor \\u0000 in jsonb: refuse it up front rather than fail on insert."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_nul(v) for v in value)
    return False


def _check(messages: list[NewMessage]) -> None:
    for index, message in enumerate(messages):
        size = len(message.content.encode()) + (len(json.dumps(message.parts).encode()) if message.parts else 0)
        if size > MAX_MESSAGE_BYTES:
            raise PayloadTooLarge(
                f"message {index} exceeds {MAX_MESSAGE_BYTES} bytes", {"index": index, "limit_bytes": MAX_MESSAGE_BYTES}
            )
        for name in ("content", "parts"):
            if _has_nul(getattr(message, name)):
                raise InvalidArgument("messages may not contain NUL characters", loc=[index, name])


def create_session(*, caller: Caller, session_id: str | None = None) -> dict:
    """Creates an empty session; without an id the server picks one. An id already in use is `409 CONFLICT`."""
    try:
        with transaction.atomic():
            session = Session.objects.create(
                account_id=caller.account_id, user=caller.user_id, session_id=session_id or uuid.uuid4().hex
            )
    except IntegrityError as exc:
        raise Conflict(f"session {session_id!r} already exists", {"resource": session_id, "type": "session"}) from exc
    return describe_session(session=session)


def _get_or_create_locked(caller: Caller, session_id: str) -> Session:
    """The caller's session, created if missing, locked for the rest of the transaction so that concurrent appends
    take consecutive indexes."""
    session, _ = Session.objects.select_for_update().get_or_create(
        account_id=caller.account_id, user=caller.user_id, session_id=session_id
    )
    return session


def open_session(*, caller: Caller, session_id: str, auto_create: bool) -> dict:
    """`GET /api/v1/sessions/{id}`: the session, created first when `auto_create` (the capture hook's read)."""
    if not auto_create:
        return describe_session(session=require_session(caller=caller, session_id=session_id))
    with transaction.atomic():
        return describe_session(session=_get_or_create_locked(caller, session_id))


def delete_session(*, caller: Caller, session_id: str) -> dict:
    """Deletes the session with its messages and ledger. A new session under the same id starts at turn 0."""
    require_session(caller=caller, session_id=session_id).delete()
    return {"session_id": session_id}


def add_messages(*, caller: Caller, session_id: str, messages: list[NewMessage]) -> dict:
    """Appends messages in order, creating the session if needed: all of them or none. Each message's index is the
    turn clock before it; the clock advances by the number added."""
    _check(messages)
    with transaction.atomic():
        session = _get_or_create_locked(caller, session_id)
        start = session.total_message_count
        Message.objects.bulk_create(
            [
                Message(
                    session=session,
                    index=start + offset,
                    role=m.role,
                    content=m.content,
                    parts=m.parts,
                    peer_id=m.peer_id,
                )
                for offset, m in enumerate(messages)
            ]
        )
        session.total_message_count = start + len(messages)
        session.save(update_fields=["total_message_count", "updated_at"])
    return {"session_id": session_id, "message_count": session.total_message_count, "added": len(messages)}


def remember(
    *, caller: Caller, session_id: str, messages: list[NewMessage], keep_recent_count: int = 0, actor_peer: str = ""
) -> dict:
    """Appends messages to a session (created if needed) and commits it: what the MCP `remember` tool does, as a
    client would with `POST .../messages/batch` then `POST .../commit`. Returns the commit's answer."""
    add_messages(caller=caller, session_id=session_id, messages=messages)
    return commit_session(
        caller=caller, session_id=session_id, keep_recent_count=keep_recent_count, event_tags=[], actor_peer=actor_peer
    )
