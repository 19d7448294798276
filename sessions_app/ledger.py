"""The recall ledger (DESIGN.md §5 "Dedup"): which URI was served to a session, at which tier, on which turn.

A turn is the session's `total_message_count`, so the window "the last N turns" is `msg_index > count - N`.
"""
import logging

from django.db import DatabaseError, transaction

from sessions_app.models import RecallLedgerEntry, Session

log = logging.getLogger("ovsite")

# The widest dedup window a request may ask for (`dedup_turns` ≤ 100); older rows can never cool anything.
KEPT_TURNS = 100


def cooled_uris(*, session: Session, turns: int) -> dict[str, str]:
    """URI → the detail it was last served at, over the entries served in the last `turns` turns. One query.

    `turns=0` (dedup off) is `{}` without touching the database.
    """
    if turns <= 0:
        return {}
    rows = (RecallLedgerEntry.objects
            .filter(session=session, msg_index__gt=session.total_message_count - turns)
            .order_by("msg_index", "id")
            .values_list("uri", "detail"))
    return dict(rows)  # ascending order: the last time a URI was served overwrites the earlier ones


def record_served(*, session: Session, served: list[tuple[str, str]]) -> None:
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
                [RecallLedgerEntry(session=session, uri=uri, detail=detail, msg_index=turn) for uri, detail in served])
            RecallLedgerEntry.objects.filter(session=session, msg_index__lt=turn - KEPT_TURNS).delete()
    except DatabaseError:
        log.warning("recall ledger: could not record %d entries for session %s", len(served), session.session_id,
                    exc_info=True)
