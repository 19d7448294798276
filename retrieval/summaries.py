"""L0/L1 text of the write path (docs/design.md §6): deterministic (the `# Summary` section or the head of a file; the
children for a dir), or LLM-written when an LLM is configured, with the deterministic text as the fallback."""

import logging
import re

from retrieval.llm import Completion, complete, llm_configured, load_prompt

log = logging.getLogger(__name__)
ABSTRACT_MAX_CHARS = 450
OVERVIEW_MAX_CHILDREN = 200
CHILD_SNIPPET_CHARS = 100
OUTLINE_SNIPPET_CHARS = 200
_SUMMARY_HEADING = re.compile(r"^#{1,6}\s*summary\s*$", re.IGNORECASE | re.MULTILINE)
_NEXT_HEADING = re.compile(r"^#{1,6}\s", re.MULTILINE)
_FRONT_MATTER = re.compile(r"\A---\n.*?\n---\n", re.DOTALL)
_HEADING_MARKS = re.compile(r"^#{1,6}\s+")
_FRONT_MATTER_FIELD = re.compile(r"^(name|description):[ \t]*(\S.*)$", re.MULTILINE)


def clip(text: str, limit: int = ABSTRACT_MAX_CHARS) -> str:
    """Cuts at a word boundary and marks the cut, so a reader knows there is more."""
    text = text.strip()
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    if space > limit * 0.6:
        cut = cut[:space]
    return cut.rstrip() + "…"


def _front_matter_line(front: str) -> str:
    """`name: description` of a SKILL.md-style front matter, or ""."""
    # [ \t]* and \S meet nowhere: linear on any line (a lazy `.+?` before `\s*$` backtracked quadratically).
    fields = {key: value.rstrip() for key, value in _FRONT_MATTER_FIELD.findall(front)}
    if "description" not in fields:
        return ""
    return f"{fields['name']}: {fields['description']}" if "name" in fields else fields["description"]


def file_abstract(content: str) -> str:
    front = _FRONT_MATTER.match(content)
    if front and (line := _front_matter_line(front.group(0))):
        return clip(line)
    body = content[front.end() :] if front else content
    heading = _SUMMARY_HEADING.search(body)
    if heading:
        rest = body[heading.end() :]
        following = _NEXT_HEADING.search(rest)
        section = rest[: following.start()] if following else rest
        if section.strip():
            return clip(" ".join(section.split()))
    return clip(" ".join(body.split()))


def directory_texts(name: str, children: list[dict], summary: str = "") -> tuple[str, str]:
    """(abstract, overview) of a directory from its children (`name`, `kind`, `abstract`), newest first; with an
    LLM's `summary` of them, that is the abstract and heads the overview's listing."""
    if not children:
        return f"{name}: empty directory", f"# {name}\n\n(empty)"
    shown = children[:OVERVIEW_MAX_CHILDREN]
    lines = [f"# {name}", ""] + ([summary, ""] if summary else [])
    for child in shown:
        label = child["name"] + ("/" if child["kind"] == "dir" else "")
        lines.append(f"- {label}: {child['abstract']}" if child["abstract"] else f"- {label}")
    if len(children) > len(shown):
        lines.append(f"- … and {len(children) - len(shown)} more entries (list them with fs/ls)")
    # Sub-directories contribute their name only: their own abstracts would nest summaries of summaries.
    listing = "; ".join(
        f"{c['name']}: {clip(c['abstract'], CHILD_SNIPPET_CHARS)}"
        if c["kind"] == "file" and c["abstract"]
        else c["name"] + ("/" if c["kind"] == "dir" else "")
        for c in children[:12]
    )
    abstract = clip(summary or f"{name} ({len(children)} entries) — {listing}")
    return abstract, "\n".join(lines)


def document_outline(name: str, sections: list[tuple[str, str]]) -> str:
    """A document's L1: its sections in document order, each with the head of its abstract."""
    lines = [f"# {name}", ""]
    for section, abstract in sections:
        head = clip(_HEADING_MARKS.sub("", abstract), OUTLINE_SNIPPET_CHARS)
        lines.append(f"- {section}: {head}" if head else f"- {section}")
    return "\n".join(lines)


# LLM summaries ------------------------------------------------------------------------------------------------

SUMMARY_TIMEOUT_S = 20.0  # eager Celery runs this inside the write request: one bounded attempt, then the fallback
SUMMARY_MAX_CALLS = 32  # per task, so a large batch costs a bounded number of calls; the rest is deterministic
SUMMARY_INPUT_MAX_CHARS = 12_000
DIR_INPUT_MAX_CHILDREN = 40  # × DIR_INPUT_CHILD_CHARS: a folder's input stays within SUMMARY_INPUT_MAX_CHARS
DIR_INPUT_CHILD_CHARS = 300
_PLACEHOLDER = re.compile(r"\{(\w+)\}")


def prompt_messages(name: str, **fields: str) -> list[dict]:
    """The chat messages of `retrieval/prompts/{name}.md` with its `{field}` placeholders filled in one pass (so
    braces inside a filled-in text are left alone)."""
    prompt = load_prompt(name)

    def fill(text: str) -> str:
        return _PLACEHOLDER.sub(lambda m: fields.get(m.group(1), m.group(0)), text)

    return [{"role": "system", "content": fill(prompt.system)}, {"role": "user", "content": fill(prompt.user)}]


def _non_empty(text: str) -> str:
    text = text.strip()
    if not text:
        raise ValueError("empty summary")
    return text


def llm_summary(*, instruction: str, text: str, max_chars: int, account_id: int | None, timeout_s: float) -> Completion:
    """One `summary` call on `text` (bounded by the caller); `value` is the stripped, non-empty answer."""
    messages = prompt_messages("summary", instruction=instruction, max_chars=str(max_chars), text=text)
    # ~3 characters a token leaves room for a summary that overshoots a little; clip() then enforces the limit.
    return complete(
        kind="summary",
        messages=messages,
        timeout_s=timeout_s,
        account_id=account_id,
        max_tokens=max_chars // 3 + 50,
        parse=_non_empty,
    )


def _authored_abstract(content: str) -> bool:
    front = _FRONT_MATTER.match(content)
    return bool(front and _front_matter_line(front.group(0)))


class Summarizer:
    """Abstracts and overviews for one processing task: LLM-written when an LLM is configured, deterministic
    otherwise or on any failure. One attempt per node and no retries; the first failed call turns the LLM off for
    the rest of the task, so an outage costs one timeout per task, not one per node. A fallback is logged, and the
    failed call is an LLMUsage row with its outcome."""

    def __init__(self, *, account_id: int | None):
        self.account_id = account_id
        self.calls_left = SUMMARY_MAX_CALLS if llm_configured() else 0

    def _ask(self, uri: str, instruction: str, text: str) -> str:
        if self.calls_left <= 0:
            return ""
        self.calls_left -= 1
        answer = llm_summary(
            instruction=instruction,
            text=text,
            max_chars=ABSTRACT_MAX_CHARS,
            account_id=self.account_id,
            timeout_s=SUMMARY_TIMEOUT_S,
        )
        if answer.ok:
            return " ".join(answer.value.split())
        self.calls_left = 0
        log.warning(
            "LLM summary of %s failed (%s: %s); the deterministic text is used", uri, answer.outcome, answer.error
        )
        return ""

    def file_abstract(self, uri: str, content: str) -> str:
        # A text that fits in an abstract is its own best abstract, and a front-matter description is the
        # author's: neither is worth a call.
        if len(content) <= ABSTRACT_MAX_CHARS or _authored_abstract(content):
            return file_abstract(content)
        summary = self._ask(uri, "Summarise this document in one short paragraph.", content[:SUMMARY_INPUT_MAX_CHARS])
        return clip(summary) if summary else file_abstract(content)

    def directory_texts(self, uri: str, name: str, children: list[dict]) -> tuple[str, str]:
        if not children:
            return directory_texts(name, children)
        listing = "\n".join(
            f"- {c['name']}{'/' if c['kind'] == 'dir' else ''}: {clip(c['abstract'], DIR_INPUT_CHILD_CHARS)}"
            for c in children[:DIR_INPUT_MAX_CHILDREN]
        )
        if len(children) > DIR_INPUT_MAX_CHILDREN:
            listing += f"\n- … and {len(children) - DIR_INPUT_MAX_CHILDREN} more entries"
        summary = self._ask(
            uri,
            f"These are the entries of the folder “{name}”, each with its summary. Summarise "
            "what the folder holds in one short paragraph.",
            listing,
        )
        return directory_texts(name, children, summary=summary)
