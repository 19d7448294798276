"""The bootstrap's reads (mode="bootstrap", docs/assembly.md): no query, only the caller's ready files newest first,
each read capped in SQL so it walks an index in update order and stops there, and the profile's text. Which slot
takes which rows, and how many, is `assembly.bootstrap`'s."""

from collections.abc import Collection
from dataclasses import dataclass, fields
from datetime import datetime

from core.auth import Caller
from retrieval.selectors import visible_nodes


@dataclass(frozen=True)
class FileRow:
    uri: str
    kind: str
    context_type: str
    category: str
    peer: str
    abstract: str
    overview_tokens: int
    content_tokens: int


COLUMNS = tuple(column.name for column in fields(FileRow))


def _ready_files(caller: Caller):
    return visible_nodes(caller).filter(state="ready", kind="file")


def _newest(rows, limit: int, *extra: str):
    """The newest `limit` of `rows` (ties by URI), still a query."""
    return rows.order_by("-updated_at", "uri").values(*COLUMNS, *extra)[:limit]


def ready_file_content(caller: Caller, uri: str) -> str | None:
    """The text of a ready file the caller sees, None when there is none."""
    return _ready_files(caller).filter(uri=uri).values_list("content", flat=True).first()


def newest_events(caller: Caller, *, since: datetime, limit: int, peers: Collection[str] = ()) -> list[FileRow]:
    """Event memories updated since `since`, newest first (ties by URI): the newest `limit` of them, or with
    `peers`, the newest `limit` of each of those peers ("" is the user's own), all in one round trip."""
    events = _ready_files(caller).filter(context_type="memory", category="events", updated_at__gte=since)
    if not peers:
        return [FileRow(**row) for row in _newest(events, limit)]
    # The time is read only to merge the peers' lists: the slots need none.
    each = [_newest(events.filter(peer=peer), limit, "updated_at") for peer in peers]
    rows = sorted(each[0].union(*each[1:], all=True), key=lambda row: row["uri"])
    rows.sort(key=lambda row: row["updated_at"], reverse=True)  # stable: equal times stay in URI order
    return [FileRow(**{column: row[column] for column in COLUMNS}) for row in rows]


def newest_files(caller: Caller, *, skip: Collection[str], limit: int) -> list[FileRow]:
    """The newest `limit` ready files (ties by URI) but profile memories and the URIs in `skip`."""
    rows = _ready_files(caller).exclude(context_type="memory", category="profile").exclude(uri__in=skip)
    return [FileRow(**row) for row in _newest(rows, limit)]
