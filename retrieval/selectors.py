"""Reads of the tree. Every query starts from `visible_nodes`: the caller's account and visible owner spaces."""

from django.db.models import Q, QuerySet
from django.db.models.functions import Length

from core.auth import Caller
from core.errors import InvalidArgument, NotFound
from retrieval.models import Context, ProcessingTask
from retrieval.uris import SCHEME, SPACES, parse_uri

NODE_FIELDS = (
    "uri",
    "kind",
    "context_type",
    "category",
    "abstract",
    "tags",
    "state",
    "error",
    "content_tokens",
    "abstract_tokens",
    "overview_tokens",
    "updated_at",
    "created_at",
)
MAX_OFFSET = 10**9


def visible_nodes(caller: Caller) -> QuerySet:
    return Context.objects.filter(account_id=caller.account_id, owner__in=("", caller.user_id))


def visible_tasks(caller: Caller) -> QuerySet:
    """The account's tasks in the owner spaces the caller sees, as `visible_nodes`: another user's tasks are not
    found, waited for or counted (a count would tell a user when a colleague writes)."""
    return ProcessingTask.objects.filter(account_id=caller.account_id, owner__in=("", caller.user_id))


def _with_size(rows: QuerySet) -> QuerySet:
    return rows.annotate(size=Length("content")).values(*NODE_FIELDS, "size")


def _node(caller: Caller, uri: str, *fields) -> dict:
    parsed = parse_uri(uri, user_id=caller.user_id)
    row = visible_nodes(caller).filter(uri=parsed.uri).values(*fields).first()
    if row is None:
        raise NotFound(parsed.uri, "node")
    return row


def read_content(*, caller: Caller, uri: str, offset: int = 0, limit: int = -1) -> str:
    row = _node(caller, uri, "kind", "content", "uri", "content_hash")
    # A document parsed into sections is a directory that keeps its whole text: reading it reads the document.
    if row["kind"] == "dir" and not row["content_hash"]:
        raise InvalidArgument(f"{row['uri']} is a directory; read its overview instead", loc=["uri"])
    lines = row["content"].splitlines(keepends=True)
    end = None if limit is None or limit < 0 else offset + limit
    return "".join(lines[offset:end]) if offset or end is not None else row["content"]


def read_abstract(*, caller: Caller, uri: str) -> str:
    return _node(caller, uri, "abstract")["abstract"]


def read_overview(*, caller: Caller, uri: str) -> str:
    """A directory's L1; a file has no L1 of its own, so it falls back to its abstract (RFC §3.4)."""
    row = _node(caller, uri, "kind", "overview", "abstract")
    return row["overview"] if row["kind"] == "dir" else row["abstract"]


def _entry(row: dict, abs_limit: int | None) -> dict:
    abstract = row["abstract"]
    if abs_limit is not None and abs_limit >= 0 and len(abstract) > abs_limit:
        abstract = abstract[:abs_limit] + "…"
    return {
        "uri": row["uri"],
        "name": row["uri"].rsplit("/", 1)[-1],
        "isDir": row["kind"] == "dir",
        "size": row["size"],
        "modTime": row["updated_at"].isoformat(),
        "context_type": row["context_type"],
        "category": row["category"],
        "abstract": abstract,
        "tags": row["tags"],
        "state": row["state"],
    }


def _virtual_roots(caller: Caller, parsed_segments: tuple[str, ...]) -> list[dict] | None:
    """`viking://` and `viking://user|agent` are not stored nodes; they list what the caller may see below."""
    if not parsed_segments:
        return [
            {
                "uri": SCHEME + space,
                "name": space,
                "isDir": True,
                "size": 0,
                "modTime": None,
                "context_type": "",
                "category": "",
                "abstract": "",
                "tags": [],
                "state": "ready",
            }
            for space in SPACES
        ]
    if parsed_segments in (("user",), ("agent",)):
        prefix = SCHEME + parsed_segments[0] + "/"
        rows = _with_size(visible_nodes(caller).filter(parent_uri=prefix[:-1]))
        return [_entry(row, None) for row in rows.order_by("uri")]
    return None


def list_children(
    *,
    caller: Caller,
    uri: str,
    recursive: bool = False,
    node_limit: int = 1000,
    offset: int = 0,
    abs_limit: int | None = 256,
) -> tuple[list[dict], bool]:
    if not 0 <= offset <= MAX_OFFSET:  # SQL OFFSET is a bigint: a huge one is a client error, not a 500
        raise InvalidArgument(f"offset must be between 0 and {MAX_OFFSET}", loc=["offset"], type_="out_of_range")
    parsed = parse_uri(uri, user_id=caller.user_id)
    virtual = _virtual_roots(caller, parsed.segments)
    if virtual is not None:
        page = virtual[offset : offset + node_limit]
        return page, len(virtual) > offset + node_limit
    node = visible_nodes(caller).filter(uri=parsed.uri).values("kind").first()
    if node is None:
        raise NotFound(parsed.uri, "node")
    if node["kind"] != "dir":
        raise InvalidArgument(f"{parsed.uri} is a file, not a directory", loc=["uri"])
    scope = Q(uri__startswith=parsed.uri + "/") if recursive else Q(parent_uri=parsed.uri)
    rows = list(_with_size(visible_nodes(caller).filter(scope).order_by("uri"))[offset : offset + node_limit + 1])
    return [_entry(row, abs_limit) for row in rows[:node_limit]], len(rows) > node_limit


def tree(
    *, caller: Caller, uri: str, level_limit: int, node_limit: int = 1000, offset: int = 0, abs_limit: int | None = 128
) -> tuple[list[dict], bool]:
    """The nodes below `uri` down to `level_limit` levels, each with its `depth` and OpenViking's `rel_path` (the
    path below `uri`, a directory's ending with "/"). `node_limit` and `offset` page the nodes before the level cut,
    as `has_more` does."""
    entries, more = list_children(
        caller=caller, uri=uri, recursive=True, node_limit=node_limit, offset=offset, abs_limit=abs_limit
    )
    base = parse_uri(uri, user_id=caller.user_id).uri
    prefix = base if base.endswith("/") else base + "/"  # only the bare `viking://` ends with "/"
    for entry in entries:
        below = entry["uri"][len(prefix) :]
        entry["depth"] = below.count("/") + 1
        entry["rel_path"] = below + ("/" if entry["isDir"] else "")
    return [entry for entry in entries if entry["depth"] <= level_limit], more


def stat(*, caller: Caller, uri: str) -> dict:
    parsed = parse_uri(uri, user_id=caller.user_id)
    row = (
        visible_nodes(caller)
        .filter(uri=parsed.uri)
        .annotate(size=Length("content"))
        .values(*NODE_FIELDS, "size", "content_hash", "embedding_model", "attempts")
        .first()
    )
    if row is None:
        raise NotFound(parsed.uri, "node")
    entry = _entry(row, None)
    entry.update(
        error=row["error"],
        created_at=row["created_at"].isoformat(),
        content_hash=row["content_hash"],
        embedding_model=row["embedding_model"],
        attempts=row["attempts"],
        tokens={
            "abstract": row["abstract_tokens"],
            "overview": row["overview_tokens"],
            "content": row["content_tokens"],
        },
    )
    return entry


def task_detail(*, caller: Caller, task_id) -> dict:
    """A processing task the caller may see (`visible_tasks`): another user's is not found, like their nodes."""
    task = (
        visible_tasks(caller)
        .filter(id=task_id)
        .values("id", "kind", "status", "uris", "error", "created_at", "finished_at")
        .first()
    )
    if task is None:
        raise NotFound(str(task_id), "task")
    task["task_id"] = str(task.pop("id"))
    task["created_at"] = task["created_at"].isoformat()
    task["finished_at"] = task["finished_at"].isoformat() if task["finished_at"] else None
    return task
