"""The write path (docs/design.md §6): store content now, summarise/count/embed in a task, refresh the ancestors."""

import datetime as dt
import hashlib
import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from django.conf import settings
from django.db import OperationalError, connection, transaction
from django.db.models import Q
from django.utils import timezone
from psycopg.errors import DeadlockDetected

from core.auth import Caller
from core.errors import Conflict, InvalidArgument, NotFound, PayloadTooLarge, PermissionDenied
from retrieval.documents import Section, box, documents_sections
from retrieval.models import Context, ProcessingTask
from retrieval.recount import write_counter
from retrieval.uris import SCHEME, VikingUri, parse_file_uri, parse_uri
from retrieval.waiting import wait_for_tasks

WRITE_MODES = ("replace", "append", "create")
WRITE_ATTEMPTS = 5  # a write that loses a deadlock to a processing task runs again (write_files)


@dataclass(frozen=True)
class FileWrite:
    uri: str
    content: str
    mode: str = "replace"
    tags: tuple[str, ...] | None = None
    peer: str = ""  # the actor peer that states it; kept on memories only (docs/retrieval.md, "Peers")


def content_hash(content: str) -> str:
    return hashlib.sha256(content.encode()).hexdigest()


def check_writable(caller: Caller, parsed: VikingUri) -> None:
    if parsed.owner and parsed.owner != caller.user_id and not caller.is_root:
        raise PermissionDenied(f"{parsed.uri} belongs to another user")


def _dir_node(caller: Caller, uri: str, now) -> Context:
    parsed = parse_uri(uri, user_id=caller.user_id)
    return Context(
        account_id=caller.account_id,
        uri=parsed.uri,
        parent_uri=parsed.parent or "",
        kind="dir",
        context_type=parsed.context_type,
        category=parsed.category,
        owner=parsed.owner,
        created_at=now,
        updated_at=now,
        state="pending",
    )


def is_document(row) -> bool:
    """A document parsed into sections: a directory that keeps the document's whole text and its hash."""
    return row.kind == "dir" and bool(row.content_hash)


# Beyond this many URI locks a transaction takes its account's lock alone: each advisory lock holds a slot of
# PostgreSQL's shared lock table (max_locks_per_transaction × connections), which a few batches of 1,000 writes
# would fill ("out of shared memory").
URI_LOCKS_MAX = 128


def _lock_key(*parts) -> int:
    """A signed 64-bit advisory lock key (the one-bigint key space: profiles' roll-up lock is a small constant)."""
    digest = hashlib.blake2b("\x00".join(map(str, parts)).encode(), digest_size=8, person=b"ovsite-write").digest()
    return int.from_bytes(digest, "big", signed=True)


def _lock_uris(caller: Caller, *, written: Iterable[str] = (), below: Iterable[str] = ()) -> None:
    """Serialises the writers of the same nodes until the transaction ends (docs/api.md, "content/write"): an
    exclusive advisory lock per node `written` (FOR UPDATE cannot lock a row that does not exist yet, and two first
    writes of one URI would both insert it) and a shared one per directory that must exist `below` them (a file
    written where another writer puts a directory). Every writer takes its account's lock first (shared; exclusive
    for a transaction of more than URI_LOCKS_MAX nodes, instead of theirs), then the URIs' in key order, in one
    statement: no two writers wait for each other in a cycle."""
    account = caller.account_id
    keys = {_lock_key(account, uri): False for uri in below}
    keys.update({_lock_key(account, uri): True for uri in written})
    locks = [(_lock_key(account), len(keys) > URI_LOCKS_MAX)]
    if len(keys) <= URI_LOCKS_MAX:
        locks += sorted(keys.items())
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT CASE WHEN x THEN pg_advisory_xact_lock(k) ELSE pg_advisory_xact_lock_shared(k) END::text"
            " FROM unnest(%s::bigint[], %s::boolean[]) AS t(k, x)",
            [[key for key, _ in locks], [exclusive for _, exclusive in locks]],
        )


def _ensure_directories(caller: Caller, uris: set[str], now, *, written: set[str] = frozenset()) -> list[str]:
    """Creates missing directories; a file standing where a directory must be is a conflict, and so is a
    document: its sections are rewritten from the document, never one by one. Returns the documents among the
    nodes about to be `written`, read in the same statement (write_files locks their sections)."""
    if not uris and not written:
        return []
    found = list(
        Context.objects.filter(account_id=caller.account_id, uri__in=uris | written)
        .filter(Q(kind="file") | ~Q(content_hash=""))
        .order_by("id")
        .values_list("uri", "kind")
    )
    clash = next(((uri, kind) for uri, kind in found if uri in uris), None)
    if clash and clash[1] == "file":
        raise Conflict(f"{clash[0]} is a file, so it cannot hold other nodes", {"uri": clash[0]})
    if clash:
        raise Conflict(f"{clash[0]} is a document; write the whole document to change its sections", {"uri": clash[0]})
    Context.objects.bulk_create([_dir_node(caller, uri, now) for uri in sorted(uris)], ignore_conflicts=True)
    return [uri for uri, kind in found if uri in written and kind == "dir"]


def _new_task(caller: Caller, kind: str, uris: list[str], *, touching: list[str] | None = None) -> ProcessingTask:
    """A task that `touching` (default: `uris`) a node of the caller's private space is the caller's; one that only
    touches shared spaces is the account's. Status and wait count only the tasks the caller may see."""
    private = any(parse_uri(uri, user_id=caller.user_id).owner for uri in (uris if touching is None else touching))
    return ProcessingTask.objects.create(
        id=uuid.uuid4(), account_id=caller.account_id, kind=kind, uris=uris, owner=caller.user_id if private else ""
    )


def _schedule(task: ProcessingTask) -> None:
    from retrieval.tasks import process_task

    transaction.on_commit(lambda: process_task.delay(str(task.id)))


def _sectionable(target: VikingUri) -> bool:
    """A resource document or a SKILL.md is parsed into sections; a memory or a skill's auxiliary file is not."""
    if not settings.OVSITE_SECTION_TREES:
        return False
    return target.context_type == "resource" or (target.context_type == "skill" and target.name == "SKILL.md")


def _parse_documents(documents: list[tuple[VikingUri, str]]) -> dict[str, list[tuple[str, Section]]]:
    """Each document's sections by URI, parsed in one box (retrieval/documents/box.py: no parser runs unbounded in
    the web process); [] for a document of a single section (a directory of one child would hold its text twice)."""
    if not documents:
        return {}
    texts = [(target.uri, content) for target, content in documents]
    parsed = box.run(documents_sections, texts, settings.OVSITE_SECTION_MAX_CHARS, what=texts[0][0])
    return {uri: sections if len(sections) > 1 else [] for (uri, _), sections in zip(texts, parsed, strict=True)}


def _sectioned(target: VikingUri, content: str, parsed: dict[str, list]) -> list[tuple[str, Section]]:
    """A write's sections: parsed before its transaction, or now for an append (its text is known only under the
    lock)."""
    if not _sectionable(target):
        return []
    return (parsed if target.uri in parsed else _parse_documents([(target, content)]))[target.uri]


def _replace_sections(
    caller: Caller, document: Context, sections: list[tuple[str, Section]], now, counter
) -> list[str]:
    """Rewrites the section nodes of a changed document; returns the URIs that need processing. A section whose
    text is unchanged keeps its row (id, abstract, embedding), even when an edit above it renumbered its URI;
    only new or changed text is summarised and embedded again."""
    old = list(Context.objects.select_for_update().filter(account_id=caller.account_id, parent_uri=document.uri))
    wanted = [(f"{document.uri}/{name}", section.text, content_hash(section.text)) for name, section in sections]
    by_uri = {row.uri: row for row in old}
    kept = {
        uri
        for uri, _, digest in wanted
        if uri in by_uri
        and by_uri[uri].content_hash == digest
        and by_uri[uri].state == "ready"
        and by_uri[uri].tags == document.tags
    }
    spare: dict[str, list[Context]] = {}
    for row in old:
        if row.uri not in kept and row.state == "ready" and row.kind == "file":
            spare.setdefault(row.content_hash, []).append(row)
    rows, fresh = [], []
    for uri, text, digest in wanted:
        if uri in kept:
            continue
        if spare.get(digest):
            row = spare[digest].pop()
            row.uri, row.tags = uri, document.tags
        else:
            row = Context(
                account_id=caller.account_id,
                uri=uri,
                parent_uri=document.uri,
                kind="file",
                context_type=document.context_type,
                category=document.category,
                owner=document.owner,
                content=text,
                content_hash=digest,
                tags=document.tags,
                content_tokens=counter.count(text),
                created_at=now,
                updated_at=now,
            )
            fresh.append(uri)
        rows.append(row)
    # A renumbered section leaves and comes back under its new URI with the same id: the unique (account, uri)
    # constraint would trip over a rename chain (03 → 04 while 04 → 05) updated in place.
    Context.objects.filter(id__in=[row.id for row in old if row.uri not in kept]).delete()
    Context.objects.bulk_create(rows)
    return fresh


_EVENT_DAY = re.compile(r"/memories/events/(\d{4})/(\d{2})/(\d{2})/")


def event_time(uri: str) -> dt.datetime | None:
    """The day an event memory is filed under (`memories/events/YYYY/MM/DD/…`), midnight UTC: when what it tells
    happened, which its write time is not (a conversation imported in one go, a note written a week late). None for
    another URI or an impossible date."""
    day = _EVENT_DAY.search(uri)
    try:
        return dt.datetime(*map(int, day.groups()), tzinfo=dt.UTC) if day else None
    except ValueError:
        return None


def _store_pending(
    caller: Caller,
    row,
    target,
    kind: str,
    content: str,
    digest: str,
    tags: list[str],
    now,
    counter,
    peer: str = "",
    *,
    inserts: list[Context] | None = None,
) -> Context:
    """The node at `target` (new when `row` is None) with its new text, saved `pending` for processing; a new node
    goes to `inserts` instead, when given, for its caller to insert with the others in one statement."""
    if row is None:
        row = Context(
            account_id=caller.account_id,
            uri=target.uri,
            parent_uri=target.parent,
            kind=kind,
            context_type=target.context_type,
            category=target.category,
            owner=target.owner,
            created_at=now,
        )
    row.content, row.content_hash, row.tags, row.peer = content, digest, tags, peer
    row.event_time = event_time(target.uri) if kind == "file" else None
    row.content_tokens = counter.count(content)
    row.updated_at, row.state, row.error, row.attempts = now, "pending", "", 0
    if inserts is not None and row._state.adding:
        inserts.append(row)
    else:
        row.save()
    return row


def _write_document(
    caller: Caller,
    target: VikingUri,
    row: Context | None,
    content: str,
    digest: str,
    tags: list[str],
    sections: list[tuple[str, Section]],
    now,
    counter,
) -> list[str]:
    """The document node (a directory holding the whole text, so `content/read` still returns it) and its
    sections. Returns the URIs to process: the document itself and its new or changed sections."""
    if row is not None and row.kind == "file":
        row.delete()  # a note that grew a second section becomes a document under the same URI
        row = None
    row = _store_pending(caller, row, target, "dir", content, digest, tags, now, counter)
    return [target.uri, *_replace_sections(caller, row, sections, now, counter)]


def write_files(*, caller: Caller, writes: list[FileWrite], kind: str = "write") -> dict:
    """Creates or replaces files atomically: every write lands, or none does. Returns the task to poll."""
    if not writes:
        raise InvalidArgument("nothing to write", loc=["operations"])
    parsed = []
    for index, write in enumerate(writes):
        if write.mode not in WRITE_MODES:
            raise InvalidArgument(f"mode must be one of {', '.join(WRITE_MODES)}", loc=[index, "mode"])
        if len(write.content.encode()) > settings.OVSITE_MAX_CONTENT_BYTES:
            raise PayloadTooLarge(
                f"{write.uri}: content exceeds {settings.OVSITE_MAX_CONTENT_BYTES} bytes",
                {"uri": write.uri, "limit_bytes": settings.OVSITE_MAX_CONTENT_BYTES},
            )
        if "\x00" in write.content:
            raise InvalidArgument("content may not contain NUL characters", loc=[index, "content"])
        target = parse_file_uri(write.uri, user_id=caller.user_id)
        check_writable(caller, target)
        parsed.append(target)
    uris = [p.uri for p in parsed]
    if len(set(uris)) != len(uris):
        raise InvalidArgument("the same URI is written twice in one request", loc=["operations"])
    now = timezone.now()
    ancestors = {a for p in parsed for a in p.ancestors()}
    nested = sorted(ancestors & set(uris))
    if nested:
        raise Conflict(f"{nested[0]} is written as a file and would also hold other nodes", {"uri": nested[0]})
    counter = write_counter()
    # Parsed before any lock is taken; an append's text, known only under the lock, is parsed there.
    presectioned = _parse_documents(
        [
            (target, write.content)
            for target, write in zip(parsed, writes, strict=True)
            if write.mode != "append" and _sectionable(target)
        ]
    )
    attempt = 1
    while True:
        try:
            return _write_locked(caller, parsed, writes, ancestors, kind, now, counter, presectioned)
        except OperationalError as exc:
            # A deadlock with a processing task (it updates the rows this transaction locks, in an order of its
            # own): PostgreSQL rolled the transaction back, so it runs again, unless it was part of an outer one.
            deadlock = isinstance(exc.__cause__, DeadlockDetected)
            if not deadlock or attempt == WRITE_ATTEMPTS or connection.in_atomic_block:
                raise
            attempt += 1


def _lock_rows(caller: Caller, uris: set[str], documents: list[str]) -> list[Context]:
    """The nodes at `uris` and the sections of the `documents` among them, locked FOR UPDATE in the order a
    processing task updates them (files, then directories; each by id): a write waiting for the task's rows holds
    none the task waits for (locked the other way round, a document's node before its sections, the two deadlocked).
    `documents` is a list, not a subquery: a subquery under the OR would keep this statement off the indexes."""
    nodes = Q(uri__in=uris) | Q(parent_uri__in=documents) if documents else Q(uri__in=uris)
    return list(
        Context.objects.select_for_update()
        .filter(nodes, account_id=caller.account_id)
        .order_by("-kind", "id")  # "file" before "dir"
    )


def _write_locked(
    caller: Caller,
    parsed: list[VikingUri],
    writes: list[FileWrite],
    ancestors: set[str],
    kind: str,
    now,
    counter,
    presectioned: dict[str, list],
) -> dict:
    """write_files' transaction. Its writers of the same URIs run one after the other (`_lock_uris`), so the first
    write of a new URI has exactly one winner: the next one finds the row (`create`: a conflict; `replace`: the last
    writer wins; `append`: appends to the text the winner left)."""
    uris = [p.uri for p in parsed]
    targets = set(uris)
    changed: list[str] = []
    processing: list[str] = []
    inserts: list[Context] = []
    with transaction.atomic():
        # Taken before anything is read: every read below sees the last committed writer's rows.
        _lock_uris(caller, written=targets, below=ancestors)
        documents = _ensure_directories(caller, ancestors, now, written=targets)
        existing = {row.uri: row for row in _lock_rows(caller, targets, documents) if row.uri in targets}
        for target, write in zip(parsed, writes, strict=True):
            row = existing.get(target.uri)
            if row is not None and row.kind == "dir" and not is_document(row):
                raise Conflict(f"{target.uri} is a directory", {"uri": target.uri})
            if row is not None and write.mode == "create":
                raise Conflict(f"{target.uri} already exists", {"uri": target.uri})
            content = row.content + write.content if row is not None and write.mode == "append" else write.content
            size = len(content.encode())
            if size > settings.OVSITE_MAX_CONTENT_BYTES:  # an append: the request's part alone was checked above
                raise PayloadTooLarge(
                    f"{write.uri}: appending makes the content {size} bytes, "
                    f"above the limit of {settings.OVSITE_MAX_CONTENT_BYTES} bytes",
                    {"uri": write.uri, "size_bytes": size, "limit_bytes": settings.OVSITE_MAX_CONTENT_BYTES},
                )
            digest = content_hash(content)
            tags = list(write.tags) if write.tags is not None else (row.tags if row else [])
            # A memory is its last writer's statement; resources and skills are shared, nobody's in particular.
            peer = write.peer if target.context_type == "memory" else ""
            if (
                row is not None
                and row.content_hash == digest
                and row.state == "ready"
                and row.tags == tags
                and row.peer == peer
            ):
                continue  # unchanged: nothing to redo
            changed.append(target.uri)
            sections = _sectioned(target, content, presectioned)
            if sections:
                processing += _write_document(caller, target, row, content, digest, tags, sections, now, counter)
                continue
            if row is not None and is_document(row):
                # A document shrunk to one section is one file again.
                Context.objects.filter(account_id=caller.account_id, parent_uri=row.uri).delete()
                row.delete()
                row = None
            _store_pending(caller, row, target, "file", content, digest, tags, now, counter, peer, inserts=inserts)
            processing.append(target.uri)
        Context.objects.bulk_create(inserts)
        task = _new_task(caller, kind, processing, touching=uris)
        _schedule(task)
    return {"task_id": str(task.id), "uris": uris, "changed": changed}


# A task's state as OpenViking's `semantic_status`/`vector_status` (both happen in the same ovsite task).
_PROCESSING_STATUS = {"done": "complete", "failed": "failed"}


def write_root(target: VikingUri) -> str:
    """OpenViking's `root_uri` of a write: the resource, memory category or skill directory the file belongs to."""
    depth = 2 if target.space == "resources" else 4  # resources/{name}; user|agent/{id}/{memories|skills|…}/{name}
    return SCHEME + "/".join(target.segments[:depth]) if len(target.segments) > depth else target.parent


def with_processing(*, caller: Caller, result: dict, wait: bool, timeout_s: float | None = None) -> dict:
    """A write's result; when the client waits (`wait=true`), with `processing` once its task is done or the
    timeout has passed."""
    if wait:
        result["processing"] = wait_for_tasks(caller=caller, task_ids=[result["task_id"]], timeout_s=timeout_s)
    return result


def write_file(*, caller: Caller, write: FileWrite, wait: bool = False, timeout_s: float | None = None) -> dict:
    """`POST /content/write`: one file, answered in OpenViking's shape plus ovsite's task id and change list."""
    result = with_processing(
        caller=caller, result=write_files(caller=caller, writes=[write]), wait=wait, timeout_s=timeout_s
    )
    target = parse_file_uri(write.uri, user_id=caller.user_id)
    task_status = ProcessingTask.objects.filter(id=result["task_id"]).values_list("status", flat=True).first()
    status = _PROCESSING_STATUS.get(task_status, "queued")
    result.update(
        uri=target.uri,
        root_uri=write_root(target),
        context_type=target.context_type,
        mode=write.mode,
        written_bytes=len(write.content.encode()),
        content_updated=bool(result["changed"]),
        semantic_status=status,
        vector_status=status,
    )
    return result


def write_batch(
    *,
    caller: Caller,
    writes: list[FileWrite],
    root_uri: str | None = None,
    wait: bool = False,
    timeout_s: float | None = None,
) -> dict:
    """`POST /content/batch-write`: the writes, every one of them below `root_uri` when one is given."""
    if root_uri:
        root = parse_uri(root_uri, user_id=caller.user_id).uri
        outside = [w.uri for w in writes if not parse_uri(w.uri, user_id=caller.user_id).uri.startswith(root + "/")]
        if outside:
            raise InvalidArgument(f"operations outside root_uri {root}: {outside[:3]}", loc=["operations"])
    result = write_files(caller=caller, writes=writes, kind="batch_write")
    return with_processing(caller=caller, result=result, wait=wait, timeout_s=timeout_s)


def make_directory(*, caller: Caller, uri: str) -> dict:
    target = parse_file_uri(uri, user_id=caller.user_id)
    check_writable(caller, target)
    now = timezone.now()
    directories = set(target.ancestors()) | {target.uri}
    with transaction.atomic():
        _lock_uris(caller, below=directories)
        _ensure_directories(caller, directories, now)
        task = _new_task(caller, "mkdir", [target.uri])
        _schedule(task)
    return {"uri": target.uri, "task_id": str(task.id)}


def remove(*, caller: Caller, uri: str, recursive: bool, wait: bool = False) -> dict:
    target = parse_file_uri(uri, user_id=caller.user_id)
    check_writable(caller, target)
    scope = Context.objects.filter(account_id=caller.account_id)
    below = Q(uri__startswith=target.uri + "/")
    with transaction.atomic():
        node = scope.filter(uri=target.uri).values("kind", "content_hash").first()
        if node is None:
            raise NotFound(target.uri, "node")
        # A document goes with its sections, like the file it was written as.
        if node["kind"] == "dir" and not node["content_hash"] and not recursive and scope.filter(below).exists():
            raise Conflict(f"{target.uri} is not empty; pass recursive=true", {"uri": target.uri})
        removed, _ = scope.filter(Q(uri=target.uri) | below).delete()
        task = _new_task(caller, "rm", [target.parent], touching=[target.uri])
        _schedule(task)
    # OpenViking's field name; ovsite's count is exact, not an estimate.
    result = {"uri": target.uri, "estimated_deleted_count": removed, "task_id": str(task.id)}
    return with_processing(caller=caller, result=result, wait=wait)


def requeue(nodes: list[tuple[int, str, str]], *, kind: str) -> list[ProcessingTask]:
    """Processes these (account_id, owner, uri) nodes again as a write does (summary, token counts, vector): each
    is set `pending` and one task per owner space is queued once committed. Returns the tasks."""
    by_space: dict[tuple[int, str], list[str]] = {}
    for account_id, owner, uri in nodes:
        by_space.setdefault((account_id, owner), []).append(uri)
    tasks = []
    with transaction.atomic():
        for (account_id, owner), uris in by_space.items():
            Context.objects.filter(account_id=account_id, uri__in=uris).update(state="pending")
            task = ProcessingTask.objects.create(
                id=uuid.uuid4(), account_id=account_id, kind=kind, uris=uris, owner=owner
            )
            _schedule(task)
            tasks.append(task)
    return tasks


def retry_failed(*, max_attempts: int = 5, limit: int = 500) -> int:
    """Re-queues failed nodes that have attempts left (run periodically, or by `manage.py retry_failed`)."""
    rows = list(
        Context.objects.filter(state="failed", attempts__lt=max_attempts).values_list("account_id", "owner", "uri")[
            :limit
        ]
    )
    requeue(rows, kind="retry")
    return len(rows)
