"""Reads of sessions and messages, always scoped to the caller's account and user."""

from core.auth import Caller
from core.errors import NotFound
from profiles.selectors import current_settings
from retrieval.tokenizers import profile_of
from retrieval.tokens import estimate_tokens
from sessions_app.models import Message, Session


def find_session(*, caller: Caller, session_id: str) -> Session | None:
    """The caller's session with this id, or None when it is absent or belongs to another user or account."""
    return Session.objects.filter(account_id=caller.account_id, user=caller.user_id, session_id=session_id).first()


def require_session(*, caller: Caller, session_id: str) -> Session:
    """Like `find_session`, but an absent (or foreign) session is `404 NOT_FOUND`."""
    session = find_session(caller=caller, session_id=session_id)
    if session is None:
        raise NotFound(session_id, "session")
    return session


def describe_session(*, session: Session) -> dict:
    """The session as `GET /api/v1/sessions/{id}` returns it; `message_count` is what is stored now, which a
    commit may shrink, while `total_message_count` (the turn clock) only grows."""
    return {
        "session_id": session.session_id,
        "user": session.user,
        "total_message_count": session.total_message_count,
        "message_count": session.messages.count(),
        "archive_overview": session.archive_overview,
        "created_at": session.created_at.isoformat(),
        "updated_at": session.updated_at.isoformat(),
    }


def list_sessions(*, caller: Caller, limit: int) -> list[dict]:
    """The caller's sessions, most recently active first."""
    rows = (
        Session.objects.filter(account_id=caller.account_id, user=caller.user_id)
        .order_by("-updated_at", "-id")
        .values("session_id", "user", "total_message_count", "created_at", "updated_at")[:limit]
    )
    return [
        {**row, "created_at": row["created_at"].isoformat(), "updated_at": row["updated_at"].isoformat()}
        for row in rows
    ]


def recent_messages(*, session: Session, limit: int = 20) -> list[dict]:
    """The session's last `limit` messages as `{role, content, index}`, in chronological order."""
    rows = list(Message.objects.filter(session=session).order_by("-index").values("role", "content", "index")[:limit])
    rows.reverse()
    return rows


def session_context(*, caller: Caller, session_id: str, token_budget: int) -> dict:
    """The most recent messages that fit `token_budget` (estimated tokens), oldest dropped first, in chronological
    order; then the archive overview if it fits what is left (as OpenViking does: live messages come first).

    Messages are read newest first and the scan stops at the first one that does not fit, so a long session
    costs only the messages returned (plus one).
    """
    session = require_session(caller=caller, session_id=session_id)
    profile = profile_of(current_settings().tokenizer_family)
    kept, used = [], 0
    rows = (
        Message.objects.filter(session=session)
        .order_by("-index")
        .values("index", "role", "content", "parts", "peer_id", "created_at")
    )
    for row in rows.iterator(chunk_size=200):
        tokens = estimate_tokens(row["content"], profile)
        if used + tokens > token_budget:
            break
        used += tokens
        kept.append({**row, "created_at": row["created_at"].isoformat(), "estimated_tokens": tokens})
    kept.reverse()
    overview_tokens = estimate_tokens(session.archive_overview, profile)
    include_overview = bool(session.archive_overview) and used + overview_tokens <= token_budget
    return {
        "archive_overview": session.archive_overview if include_overview else "",
        "messages": kept,
        "estimated_tokens": used + (overview_tokens if include_overview else 0),
        "total_message_count": session.total_message_count,
    }
