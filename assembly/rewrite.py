"""L3 digest rewrite (RFC §3.2, §3.3, §3.7): one LLM call over the rendered block, the query it was assembled for
and a bounded slice of the session's context, turned into at most `rewrite_max_bullets` bullets that each cite
served URIs.

Digest format: the kept bullets joined by "\\n", each one line `- <text> (viking://…)` as the model wrote it,
its marker normalised to "- ". A bullet is dropped when it cites no `viking://` URI, cites one that is not an
entry of this response, or is longer than BULLET_CHARS. `rendered` is never touched: a failed rewrite is
`digest=""`.
"""

import re
from dataclasses import dataclass, field
from html import unescape

from django.conf import settings

from assembly.expansion import SessionContext, clip, fill
from retrieval.llm import complete, llm_configured, load_prompt, planner_model

QUERY_CHARS = 1000  # a query is a line or a few; the rest of a long one would crowd the memories it digests
SESSION_CHARS = 2000  # the slice is a hint of what matters now, not a second context block
SESSION_OVERVIEW_CHARS = 1200
SESSION_MESSAGE_CHARS = 400
BULLET_CHARS = 600  # with the bullets cap, the digest's only bound (it has no token budget of its own)
TOKENS_PER_BULLET = 100  # RFC §3.7: 6 bullets ≈ 300–500 tokens; the rest is room for the citations
_URI = re.compile(r"viking://[^\s<>\"'`]+")
_MARKER = re.compile(r"^\s*(?:[-*•]|\d{1,2}[.)])\s*")
_TRAILING = ").,;:!?]}*"
STATUS = {"ok": "ok", "timeout": "timeout", "error": "failed", "invalid": "failed", "off": "off"}


@dataclass(frozen=True)
class Digest:
    digest: str = ""
    status: str = "off"  # "off" | "ok" | "failed" | "timeout" | "empty"
    usage: dict = field(default_factory=lambda: {"prompt_tokens": 0, "completion_tokens": 0})


def wanted(rewrite) -> bool:
    """`true`, or `"auto"` when a query-planner model is configured (RFC §3.2: the cheap model does it)."""
    return rewrite is True or (rewrite == "auto" and bool(settings.QUERY_PLANNER_MODEL))


def _cited(token: str, served: set[str]) -> str | None:
    """The served URI this token cites, trying it without trailing punctuation ("(viking://a/b.md)." ends a
    sentence) and with HTML entities undone (rendered escapes attributes); None when it cites none."""
    token = unescape(token)
    while token:
        if token in served:
            return token
        if token[-1] not in _TRAILING:
            return None
        token = token[:-1]
    return None


def keep_bullets(text: str, served: set[str], max_bullets: int) -> list[str]:
    bullets = []
    for line in text.splitlines():
        body = _MARKER.sub("", line).strip()
        tokens = _URI.findall(body)
        if not body or len(body) > BULLET_CHARS or not tokens:
            continue
        if all(_cited(token, served) for token in tokens):
            bullets.append(f"- {body}")
            if len(bullets) == max_bullets:
                break
    return bullets


def rewrite_digest(
    *,
    rewrite,
    query: str,
    rendered: str,
    entries: list[dict],
    context: SessionContext,
    max_bullets: int,
    settings_row,
    account_id: int | None,
) -> Digest:
    if not wanted(rewrite) or not llm_configured():
        return Digest()
    if not entries:
        return Digest(status="empty")  # nothing was served, so no bullet could cite anything: no call
    # A merged entry cites as its document and as each of its sections.
    served = {uri for entry in entries for uri in (entry["uri"], *entry.get("sections", ()))}
    prompt = load_prompt("rewrite")
    session_text = context.text(
        chars=SESSION_CHARS, overview_chars=SESSION_OVERVIEW_CHARS, message_chars=SESSION_MESSAGE_CHARS, roles=("user",)
    )
    values = {
        "max_bullets": str(max_bullets),
        "query": clip(query, QUERY_CHARS),
        "session": session_text or "(none)",
        "rendered": rendered,
    }
    completion = complete(
        kind="rewrite",
        model=planner_model(),
        timeout_s=settings_row.recall_rewrite_timeout_s,
        account_id=account_id,
        max_tokens=TOKENS_PER_BULLET * max_bullets + 50,
        parse=lambda text: keep_bullets(text, served, max_bullets),
        messages=[
            {"role": "system", "content": fill(prompt.system, **values)},
            {"role": "user", "content": fill(prompt.user, **values)},
        ],
    )
    usage = {"prompt_tokens": completion.prompt_tokens, "completion_tokens": completion.completion_tokens}
    if not completion.ok:
        return Digest(status=STATUS[completion.outcome], usage=usage)
    if not completion.value:
        return Digest(status="empty", usage=usage)
    return Digest(digest="\n".join(completion.value), status="ok", usage=usage)
