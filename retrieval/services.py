"""The write path (docs/design.md §6): store content now, summarise/count/embed in a task, refresh the ancestors."""

import hashlib
import uuid
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from core.auth import Caller
from core.errors import Conflict, InvalidArgument, NotFound, PayloadTooLarge, PermissionDenied
from retrieval.documents import Section, named_sections
from retrieval.models import Context, ProcessingTask
from retrieval.recount import write_counter
from retrieval.uris import SCHEME, VikingUri, parse_file_uri, parse_uri
from retrieval.waiting import wait_for_tasks

WRITE_MODES = ("replace", "append", "create")


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


def _ensure_directories(caller: Caller, uris: set[str], now) -> None:
    """Creates missing directories; a file standing where a directory must be is a conflict, and so is a
    document: its sections are rewritten from the document, never one by one."""
    if not uris:
        return
    clash = (
        Context.objects.filter(account_id=caller.account_id, uri__in=uris)
        .filter(Q(kind="file") | ~Q(content_hash=""))
        .values_list("uri", "kind")
        .first()
    )
    if clash and clash[1] == "file":
        raise Conflict(f"{clash[0]} is a file, so it cannot hold other nodes", {"uri": clash[0]})
    if clash:
        raise Conflict(f"{clash[0]} is a document; write the whole document to change its sections", {"uri": clash[0]})
    Context.objects.bulk_create([_dir_node(caller, uri, now) for uri in sorted(uris)], ignore_conflicts=True)


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


def _sectioned(target: VikingUri, content: str) -> list[tuple[str, Section]]:
    """The sections of a resource document or a SKILL.md; [] when it stays one file node (a memory, a skill's
    auxiliary file, a document of a single section: a directory of one child would hold the same text twice)."""
    if not settings.OVSITE_SECTION_TREES:
        return []
    if target.context_type != "resource" and not (target.context_type == "skill" and target.name == "SKILL.md"):
        return []
    sections = named_sections(target.name, content, settings.OVSITE_SECTION_MAX_CHARS)
    return sections if len(sections) > 1 else []


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


def _store_pending(
    caller: Caller, row, target, kind: str, content: str, digest: str, tags: list[str], now, counter, peer: str = ""
) -> Context:
    """The node at `target` (new when `row` is None) with its new text, saved `pending` for processing."""
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
    row.content_tokens = counter.count(content)
    row.updated_at, row.state, row.error, row.attempts = now, "pending", "", 0
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
    changed: list[str] = []
    processing: list[str] = []
    counter = write_counter()
    with transaction.atomic():
        _ensure_directories(caller, ancestors, now)
        existing = {
            row.uri: row
            for row in Context.objects.select_for_update().filter(account_id=caller.account_id, uri__in=uris)
        }
        for target, write in zip(parsed, writes, strict=True):
            row = existing.get(target.uri)
            if row is not None and row.kind == "dir" and not is_document(row):
                raise Conflict(f"{target.uri} is a directory", {"uri": target.uri})
            if row is not None and write.mode == "create":
                raise Conflict(f"{target.uri} already exists", {"uri": target.uri})
            content = row.content + write.content if row is not None and write.mode == "append" else write.content
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
            sections = _sectioned(target, content)
            if sections:
                processing += _write_document(caller, target, row, content, digest, tags, sections, now, counter)
                continue
            if row is not None and is_document(row):
                # A document shrunk to one section is one file again.
                Context.objects.filter(account_id=caller.account_id, parent_uri=row.uri).delete()
                row.delete()
                row = None
            _store_pending(caller, row, target, "file", content, digest, tags, now, counter, peer)
            processing.append(target.uri)
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
    with transaction.atomic():
        _ensure_directories(caller, set(target.ancestors()) | {target.uri}, now)
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
