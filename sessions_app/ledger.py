"""The recall ledger (docs/assembly.md "Cross-turn dedup"): which URI was served to a session, at which tier, on
which turn.

RFC §3.2: a served URI's distance is the messages in the session now minus the messages when it was served, the
timestamp as the fallback. A session with messages counts turns by its `total_message_count`, so the window "the
last N turns" is `msg_index > count - N`; a session with none (a client that recalls but never posts messages)
counts them by time, one turn every `turn_seconds` (docs/assembly.md).
"""

import datetime as dt
import logging
import re

from django.db import DatabaseError, transaction
from django.db.models import Q
from django.utils import timezone

from core.auth import Caller
from core.errors import InvalidArgument
from sessions_app.models import RecallLedgerEntry, Session
from sessions_app.requests import SESSION_ID_MESSAGE, SESSION_ID_PATTERN

log = logging.getLogger("ovsite")

# The widest dedup window a request may ask for (`dedup_turns` ≤ 100); older rows can never cool anything.
KEPT_TURNS = 100
# One turn of the time clock when the caller names none: the shipped RetrievalSettings.dedup_turn_seconds.
TURN_SECONDS = 120


def ledger_session(*, caller: Caller, session_id: str) -> Session:
    """The caller's session that a dedup request keeps its ledger in, created on first use as adding a message
    creates it (`POST /sessions/{id}/messages`). An id the sessions routes could not reach is a 422."""
    if not re.fullmatch(SESSION_ID_PATTERN, session_id):
        raise InvalidArgument(f"session_id: {SESSION_ID_MESSAGE}", loc=["session_id"])
    session, _ = Session.objects.get_or_create(account_id=caller.account_id, user=caller.user_id, session_id=session_id)
    return session


def clock(session: Session) -> str:
    """What the session's turns are counted by: `messages`, or `time` while it has none."""
    return "messages" if session.total_message_count else "time"


def _served_within(session: Session, turns: int, turn_seconds: int) -> Q:
    if session.total_message_count:
        return Q(msg_index__gt=session.total_message_count - turns)
    return Q(created_at__gt=timezone.now() - dt.timedelta(seconds=turns * turn_seconds))


def _out_of_reach(session: Session, turn_seconds: int) -> Q:
    """Rows that no window of at most KEPT_TURNS turns can cool."""
    if session.total_message_count:
        return Q(msg_index__lt=session.total_message_count - KEPT_TURNS)
    return Q(created_at__lt=timezone.now() - dt.timedelta(seconds=KEPT_TURNS * turn_seconds))


def cooled_uris(*, session: Session, turns: int, turn_seconds: int = TURN_SECONDS) -> dict[str, str]:
    """URI → the detail it was last served at, over the entries served in the last `turns` turns. One query.

    `turns=0` (dedup off) is `{}` without touching the database.
    """
    if turns <= 0:
        return {}
    rows = (
        RecallLedgerEntry.objects.filter(_served_within(session, turns, turn_seconds), session=session)
        .order_by("msg_index", "id")
        .values_list("uri", "detail")
    )
    return dict(rows)  # ascending order: the last time a URI was served overwrites the earlier ones


def record_served(*, session: Session, served: list[tuple[str, str]], turn_seconds: int = TURN_SECONDS) -> None:
    """Records `(uri, detail)` pairs as served on the session's current turn, and prunes rows too old to matter.

    One bulk insert and one delete, in a transaction (a savepoint when the caller is already in one). The ledger
    never fails a request: a database error is logged and swallowed, at the cost of one turn's dedup.
    """
    if not served:
        return
    turn = session.total_message_count
    try:
        with transaction.atomic():
            RecallLedgerEntry.objects.bulk_create(
                [RecallLedgerEntry(session=session, uri=uri, detail=detail, msg_index=turn) for uri, detail in served]
            )
            RecallLedgerEntry.objects.filter(_out_of_reach(session, turn_seconds), session=session).delete()
    except DatabaseError:
        log.warning(
            "recall ledger: could not record %d entries for session %s", len(served), session.session_id, exc_info=True
        )
