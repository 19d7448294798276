"""Memory extraction at session commit (docs/design.md §6): one LLM call over the archived messages, every item of its
answer validated, near-duplicates of existing memories dropped, the rest written through the normal write path."""

import hashlib
import json
import logging
import re
from dataclasses import dataclass, field
from datetime import date

from core.auth import Caller
from core.errors import InvalidUri, OvsiteError
from retrieval.embedders import EmbeddingError, get_embedder
from retrieval.llm import complete, llm_configured
from retrieval.search.find import ranked_hits
from retrieval.search.fusion import score_of
from retrieval.search.query import FindQuery
from retrieval.search.statements import SearchQuery
from retrieval.services import FileWrite, write_files
from retrieval.summaries import clip, file_abstract, prompt_messages
from retrieval.uris import MEMORY_CATEGORIES, SCHEME, parse_file_uri

log = logging.getLogger(__name__)
EXTRACTION_TIMEOUT_S = 60.0  # eager Celery runs the commit inside the request: one bounded attempt
MAX_MEMORIES = 20  # per commit; items past it are skipped and counted
TITLE_MAX_CHARS = 120
SLUG_MAX_CHARS = 60
CONTENT_MAX_CHARS = 2000
# Cosine similarity of abstracts above which an existing memory of the same category counts as the same memory:
# it is kept as it is and the new one is not written. With the packaged model a near-verbatim restatement scores
# ~0.95 and a looser paraphrase ~0.75-0.85, which is written (a newer statement may carry a new detail).
DUPLICATE_COSINE = 0.9


@dataclass(frozen=True)
class Memory:
    category: str
    uri: str
    content: str


@dataclass
class Extraction:
    status: str  # "ok" | "failed" | "off" (no LLM) | "skipped" (nothing archived)
    outcome: str = ""  # the LLM call's outcome, so the caller can tell an unreachable LLM from a bad answer
    uris: list[str] = field(default_factory=list)
    deduplicated: int = 0
    skipped: int = 0
    error: str = ""


def _items(text: str) -> list:
    value = json.loads(text)
    items = value.get("memories") if isinstance(value, dict) else None
    if not isinstance(items, list):
        raise ValueError('expected {"memories": [...]}')
    return items


def slugify(title: str) -> str:
    """A file name from a title: lower-case words (any script) joined by '-', or a hash when nothing is left."""
    slug = re.sub(r"[\W_]+", "-", title.lower()).strip("-")[:SLUG_MAX_CHARS].strip("-")
    return slug or "memory-" + hashlib.sha256(title.encode()).hexdigest()[:10]


def _day(value, default: date) -> date:
    try:
        return date.fromisoformat(value) if isinstance(value, str) else default
    except ValueError:
        return default


def memory_from(item, *, user_id: str, default_day: date) -> Memory | None:
    """One item of the LLM's answer as a memory file, or None when it is not a valid memory."""
    if not isinstance(item, dict) or item.get("category") not in MEMORY_CATEGORIES:
        return None
    title, content = item.get("title"), item.get("content")
    if not isinstance(title, str) or not isinstance(content, str):
        return None
    title, content = " ".join(title.split())[:TITLE_MAX_CHARS], content.strip()
    if not title or not content or "\x00" in title + content:
        return None
    category, slug = item["category"], slugify(title)
    if category == "events":
        path = f"events/{_day(item.get('date'), default_day):%Y/%m/%d}/{slug}.md"
        # The `# Summary` head is what the deterministic abstract and the planner's heads keep of an event.
        body = f"# Summary\n{clip(content, CONTENT_MAX_CHARS)}\n"
    else:
        path, body = f"{category}/{slug}.md", clip(content, CONTENT_MAX_CHARS) + "\n"
    try:
        uri = parse_file_uri(f"{SCHEME}user/{user_id}/memories/{path}", user_id=user_id).uri
    except InvalidUri:
        return None
    return Memory(category=category, uri=uri, content=body)


def _has_near_duplicate(caller: Caller, memory: Memory, vector) -> bool:
    category_root = f"{SCHEME}user/{caller.user_id}/memories/{memory.category}"
    spec = FindQuery(
        query="",
        target_uris=[category_root],
        context_types=["memory"],
        levels=[2],
        limit=1,
        score_threshold=score_of(1.0 - DUPLICATE_COSINE),
        search_mode="vector",
    )
    return bool(ranked_hits(caller, spec, [SearchQuery("", vector.tolist())]))


def deduplicate(caller: Caller, memories: list[Memory]) -> tuple[list[Memory], int]:
    """Drops memories that repeat an earlier one of the batch or a stored memory of their category (by the
    similarity of their abstracts, as the write path will embed them). Without vectors nothing is dropped: the
    writes then go through, and the write path retries their embeddings."""
    try:
        vectors = get_embedder().embed([file_abstract(m.content) for m in memories])
    except EmbeddingError as exc:
        log.warning("memory dedup skipped, the embedder failed: %s", exc)
        return memories, 0
    kept, kept_vectors = [], []
    for memory, vector in zip(memories, vectors, strict=True):
        if any(float(vector @ other) >= DUPLICATE_COSINE for other in kept_vectors) or _has_near_duplicate(
            caller, memory, vector
        ):
            continue
        kept.append(memory)
        kept_vectors.append(vector)
    return kept, len(memories) - len(kept)


def _conversation(rows: list[dict]) -> str:
    return "\n".join(f"[{row['index']}] {row['role']}: {row['text']}" for row in rows)


def extract_memories(*, caller: Caller, rows: list[dict], event_tags: list[str], peer: str = "") -> Extraction:
    """Memories from the archived messages `rows` ({index, role, text, created_at}, chronological, bounded by the
    caller), written into the caller's memory tree in one batch under `peer`. A failed call or write is the
    status, not an exception."""
    if not llm_configured():
        return Extraction(status="off")
    if not rows:
        return Extraction(status="skipped")
    today = rows[-1]["created_at"].date()
    answer = complete(
        kind="extraction",
        timeout_s=EXTRACTION_TIMEOUT_S,
        account_id=caller.account_id,
        messages=prompt_messages(
            "extraction", max_memories=str(MAX_MEMORIES), today=today.isoformat(), messages=_conversation(rows)
        ),
        max_tokens=MAX_MEMORIES * 150,
        json_mode=True,
        parse=_items,
    )
    if not answer.ok:
        return Extraction(
            status="failed",
            outcome=answer.outcome,
            error=f"memory extraction failed ({answer.outcome}): {answer.error}"[:2000],
        )
    memories, skipped, same_name = [], max(0, len(answer.value) - MAX_MEMORIES), 0
    for item in answer.value[:MAX_MEMORIES]:
        memory = memory_from(item, user_id=caller.user_id, default_day=today)
        if memory is None:
            skipped += 1
        elif any(m.uri == memory.uri for m in memories):  # one answer, two items under one name: keep the first
            same_name += 1
        else:
            memories.append(memory)
    kept, similar = deduplicate(caller, memories)
    deduplicated = same_name + similar
    if not kept:
        return Extraction(status="ok", outcome="ok", deduplicated=deduplicated, skipped=skipped)
    # A memory under an existing name that is not a near-duplicate is a newer statement of it (a changed
    # preference, a corrected fact): it replaces the stored one.
    writes = [
        FileWrite(uri=m.uri, content=m.content, tags=tuple(event_tags) if m.category == "events" else None, peer=peer)
        for m in kept
    ]
    try:
        written = write_files(caller=caller, writes=writes)
    except OvsiteError as exc:
        return Extraction(
            status="failed",
            outcome="ok",
            deduplicated=deduplicated,
            skipped=skipped,
            error=f"memory write failed: {exc.message}"[:2000],
        )
    unchanged = len(kept) - len(written["changed"])  # same name, same text: written before
    return Extraction(
        status="ok", outcome="ok", uris=written["changed"], deduplicated=deduplicated + unchanged, skipped=skipped
    )
