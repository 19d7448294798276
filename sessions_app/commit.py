"""Session commit (docs/design.md §6): the older messages are archived into `archive_overview`; with an LLM, memories
are extracted from them and the overview is condensed. It runs as a Celery task and never fails the request:
every LLM step degrades, and the archive happens first, in its own transaction, whatever follows."""

import logging
import uuid

from django.db import transaction
from django.db.models import Count, Max, Min
from django.db.models.functions import Left
from django.utils import timezone

from core.auth import Caller
from retrieval.llm import llm_configured
from retrieval.models import ProcessingTask
from retrieval.summaries import clip, llm_summary
from sessions_app.extraction import extract_memories
from sessions_app.models import Commit, Message, Session
from sessions_app.selectors import require_session

log = logging.getLogger(__name__)
ARCHIVE_MAX_CHARS = 6000  # the overview is read whole by session context and query expansion
READ_MAX_CHARS = 12_000  # archived text read, newest first: for the digest, the LLM overview and extraction
MESSAGE_READ_CHARS = 2000
DIGEST_LINE_CHARS = 300
ARCHIVE_SUMMARY_TIMEOUT_S = 30.0
ARCHIVE_INSTRUCTION = (
    "Below are the summary of a conversation so far (if any) and the messages archived from it "
    "now. Write the updated summary of the whole conversation: its topics, decisions, facts "
    "about the user and open questions, oldest first, in short plain-text lines."
)
_CUT = "[… {} earlier characters of this archive were cut]\n"


def bounded_archive(text: str, limit: int = ARCHIVE_MAX_CHARS) -> str:
    """The newest `limit` characters of an archive overview, cut at a line start, with the cut stated on top."""
    if len(text) <= limit:
        return text
    tail = text[len(text) - (limit - len(_CUT.format(len(text)))) :]
    newline = tail.find("\n")
    if 0 <= newline < len(tail) - 1:
        tail = tail[newline + 1 :]
    return _CUT.format(len(text) - len(tail)) + tail


def archive_digest(rows: list[dict], *, count: int, first: int, last: int) -> str:
    """The deterministic archive of `count` messages (indexes first..last), of which `rows` were read."""
    lines = [f"## Messages {first}–{last}, archived {timezone.now():%Y-%m-%d}"]
    if count > len(rows):
        lines.append(f"({count - len(rows)} of them not shown: the oldest, or without text)")
    lines += [f"- {row['role']}: {clip(row['text'], DIGEST_LINE_CHARS)}" for row in rows]
    return "\n".join(lines)


def _read_newest(messages) -> list[dict]:
    """The newest messages' text (each cut in SQL), up to READ_MAX_CHARS in all, in chronological order."""
    rows, used = [], 0
    for row in (
        messages.order_by("-index")
        .annotate(head=Left("content", MESSAGE_READ_CHARS))
        .values("index", "role", "peer_id", "head", "created_at")
        .iterator(chunk_size=100)
    ):
        text = " ".join(row.pop("head").split())
        if not text:
            continue
        if rows and used + len(text) > READ_MAX_CHARS:
            break
        rows.append({**row, "text": text})
        used += len(text)
    rows.reverse()
    return rows


def _archive(commit: Commit) -> tuple[str, str, list[dict]]:
    """One transaction: the digest of the archived messages is appended to the overview and the messages are
    deleted; the turn clock (`total_message_count`) is left alone. Returns the overview before and after, and
    the messages read."""
    with transaction.atomic():
        session = Session.objects.select_for_update().get(pk=commit.session_id)
        previous = session.archive_overview
        archived = Message.objects.filter(session=session, index__lt=commit.archive_before)
        span = archived.aggregate(count=Count("id"), first=Min("index"), last=Max("index"))
        rows = _read_newest(archived) if span["count"] else []
        if span["count"]:
            digest = archive_digest(rows, **span)
            session.archive_overview = bounded_archive(f"{previous}\n\n{digest}" if previous else digest)
            session.save(update_fields=["archive_overview", "updated_at"])
            archived.delete()
        Commit.objects.filter(id=commit.id).update(archived_messages=span["count"], archived_at=timezone.now())
    return previous, session.archive_overview, rows


def memory_peer(rows: list[dict], actor_peer: str) -> str:
    """The peer of the memories extracted from `rows` (docs/retrieval.md, "Peers"): the one peer their messages
    name (the user's own messages name none), else the commit request's actor peer, else none."""
    named = {row["peer_id"] for row in rows} - {""}
    return named.pop() if len(named) == 1 else actor_peer


def _condense(commit: Commit, *, account_id: int, previous: str, digested: str, rows: list[dict]) -> str:
    """Replaces the digest by an LLM-condensed overview; on failure the digest stays. Returns the step status."""
    if not llm_configured():
        return "off"
    if not rows:
        return "skipped"
    text = (
        (f"Summary so far:\n{previous}\n\n" if previous else "")
        + "Messages archived now:\n"
        + "\n".join(f"{row['role']}: {row['text']}" for row in rows)
    )
    answer = llm_summary(
        instruction=ARCHIVE_INSTRUCTION,
        text=text,
        max_chars=ARCHIVE_MAX_CHARS,
        account_id=account_id,
        timeout_s=ARCHIVE_SUMMARY_TIMEOUT_S,
    )
    if not answer.ok:
        log.warning("archive overview of commit %s: LLM %s, the digest is kept", commit.id, answer.outcome)
        return "failed"
    # Only over this commit's own digest: a later commit may have appended to it meanwhile.
    updated = Session.objects.filter(pk=commit.session_id, archive_overview=digested).update(
        archive_overview=clip(answer.value, ARCHIVE_MAX_CHARS)
    )
    return "ok" if updated else "failed"


def run_commit(*, commit_id: str) -> str:
    """The commit task: archive, then extraction, then the LLM overview. Records the outcome on the Commit row and
    its ProcessingTask (`uris` = the memory files written; `failed` when extraction failed or the task broke)."""
    commit = Commit.objects.select_related("session__account").filter(id=commit_id).first()
    if commit is None:  # the session was deleted before the task ran: its task must not stay pending forever
        ProcessingTask.objects.filter(id=commit_id, status__in=("pending", "running")).update(
            status="failed", error="the session was deleted", finished_at=timezone.now()
        )
        return "gone"
    if commit.finished_at is not None:  # a redelivered task (acks_late)
        return "gone"
    ProcessingTask.objects.filter(id=commit.id).update(status="running")
    session = commit.session
    caller = Caller(session.account_id, session.account.name, session.user, "user")
    fields = {"archive_summary": "failed", "extraction": "failed"}
    uris: list[str] = []
    try:
        previous, digested, rows = _archive(commit)
        extraction = extract_memories(
            caller=caller, rows=rows, event_tags=commit.event_tags, peer=memory_peer(rows, commit.actor_peer)
        )
        uris = extraction.uris
        fields.update(
            extraction=extraction.status,
            memories_extracted=len(uris),
            memories_deduplicated=extraction.deduplicated,
            memories_skipped=extraction.skipped,
            error=extraction.error,
        )
        # An LLM that just timed out or refused the connection would only do it again: one wait per commit.
        if extraction.outcome not in ("timeout", "error"):
            fields["archive_summary"] = _condense(
                commit, account_id=session.account_id, previous=previous, digested=digested, rows=rows
            )
    except Exception as exc:  # the archive may stand; whatever broke after it is the task's error
        log.exception("commit %s failed", commit_id)
        fields["error"] = f"{type(exc).__name__}: {exc}"
    now = timezone.now()
    Commit.objects.filter(id=commit.id).update(finished_at=now, **fields)
    failed = fields["extraction"] == "failed"
    ProcessingTask.objects.filter(id=commit.id).update(
        status="failed" if failed else "done", uris=uris, error=fields.get("error", ""), finished_at=now
    )
    return "failed" if failed else "done"


def describe_commit(*, commit: Commit) -> dict:
    """OpenViking's commit answer (`task_id`, `status: "accepted"`, `archived`) plus what the commit did so far:
    with eager Celery, everything; with a worker, poll `GET /api/v1/tasks/{task_id}`."""
    session = commit.session
    return {
        "session_id": session.session_id,
        "task_id": str(commit.id),
        "status": "accepted",
        "archived": commit.archived_at is not None,
        "archived_messages": commit.archived_messages,
        "message_count": session.messages.count(),
        "total_message_count": session.total_message_count,
        "archive_summary": commit.archive_summary,
        "extraction": commit.extraction,
        "memories_extracted": commit.memories_extracted,
        "memories_deduplicated": commit.memories_deduplicated,
        "memories_skipped": commit.memories_skipped,
        "memory_uris": ProcessingTask.objects.filter(id=commit.id).values_list("uris", flat=True).first() or [],
        "error": commit.error,
    }


def commit_session(
    *, caller: Caller, session_id: str, keep_recent_count: int, event_tags: list[str], actor_peer: str = ""
) -> dict:
    """`POST /api/v1/sessions/{id}/commit`: commits every message but the newest `keep_recent_count` (counted on
    the turn clock now, so messages added meanwhile are kept too). `actor_peer` is kept for the task, which runs
    after the request."""
    from sessions_app.tasks import commit_task

    session = require_session(caller=caller, session_id=session_id)
    commit_id = uuid.uuid4()
    with transaction.atomic():
        ProcessingTask.objects.create(
            id=commit_id, account_id=caller.account_id, kind="commit", uris=[], owner=caller.user_id
        )
        Commit.objects.create(
            id=commit_id,
            session=session,
            event_tags=list(event_tags),
            actor_peer=actor_peer,
            archive_before=max(0, session.total_message_count - keep_recent_count),
        )
        transaction.on_commit(lambda: commit_task.delay(str(commit_id)))
    return describe_commit(commit=Commit.objects.select_related("session").get(id=commit_id))
