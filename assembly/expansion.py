"""L1 bounded query expansion (RFC §3.2, §3.7): one LLM call with the session's context, at most
`max_expansion_queries` queries (the original first), a hard timeout, and the original query alone on any failure.

The session context is read here once and reused by the L3 rewrite (RFC: the rewrite's slice costs no extra I/O).
"""

import json
import re
from dataclasses import dataclass
from functools import cached_property

from retrieval.embedders import embed_queries  # noqa: F401 — the pipeline embeds the planned queries with it
from retrieval.llm import complete, llm_configured, load_prompt, planner_model
from sessions_app.selectors import recent_messages

MAX_MESSAGES = 20  # what OpenViking's IntentAnalyzer was given (RFC appendix: session.py)
MESSAGE_CHARS = 1000
OVERVIEW_CHARS = 3000
CONTEXT_CHARS = 8000
MAX_QUERY_CHARS = 512  # longer is not a search query: the answer is invalid
EXPANSION_MAX_TOKENS = 400  # bounds the decode; a JSON list of two search queries needs far less
_PLACEHOLDER = re.compile(r"\{(\w+)\}")


def fill(template: str, **values: str) -> str:
    """Substitutes `{name}` placeholders in one pass, so text inside a value (a message saying "{query}") stays."""
    return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), template)


def clip(text: str, chars: int) -> str:
    text = text.strip()
    return text if len(text) <= chars else text[: chars - 1].rstrip() + "…"


class SessionContext:
    """The session's archive overview and its last `message_limit` messages, read on first use only: a request
    whose LLM steps are all off costs no extra query."""

    def __init__(self, session, message_limit: int = MAX_MESSAGES):
        self.session = session
        self.message_limit = message_limit

    @property
    def overview(self) -> str:
        return self.session.archive_overview.strip() if self.session is not None else ""

    @cached_property
    def messages(self) -> list[dict]:
        if self.session is None or self.message_limit < 1:
            return []
        return recent_messages(session=self.session, limit=self.message_limit)

    def has_context(self) -> bool:
        return bool(self.overview) or any(m["content"].strip() for m in self.messages)

    def text(self, *, chars: int, overview_chars: int, message_chars: int, roles: tuple[str, ...] = ()) -> str:
        """At most `chars` characters: the archive overview first (clipped to `overview_chars`), then the most
        recent messages that fit, in chronological order (the newest kept when the cap bites), each clipped to
        `message_chars`; `roles` restricts which messages count."""
        overview_head, messages_head, separator = "Archive overview:\n", "Recent messages:\n", "\n\n"
        overview = ""
        if self.overview and chars > len(overview_head) + 1:
            overview = overview_head + clip(self.overview, min(overview_chars, chars - len(overview_head)))
        left = chars - len(overview) - (len(separator) if overview else 0) - len(messages_head)
        lines = []
        for message in reversed(self.messages):
            if (roles and message["role"] not in roles) or not message["content"].strip():
                continue
            line = f"[{message['role']}] {clip(message['content'], message_chars)}"
            if len(line) + (1 if lines else 0) > left:
                break
            left -= len(line) + (1 if lines else 0)
            lines.append(line)
        parts = [overview] if overview else []
        if lines:
            parts.append(messages_head + "\n".join(reversed(lines)))
        return separator.join(parts)


@dataclass(frozen=True)
class QueryPlan:
    queries: list[str]
    query_expansion: str  # "off" | "used" | "failed"

    def as_dict(self) -> dict:
        return {"queries": list(self.queries), "query_expansion": self.query_expansion}


def parse_queries(text: str) -> list[str]:
    """`{"queries": [str, …]}`, each a non-empty string of at most MAX_QUERY_CHARS; whitespace collapsed."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("queries"), list):
        raise ValueError('expected {"queries": [strings]}')
    queries = []
    for item in data["queries"]:
        if not isinstance(item, str) or not item.strip():
            raise ValueError("every query must be a non-empty string")
        if len(item) > MAX_QUERY_CHARS:
            raise ValueError(f"a query is longer than {MAX_QUERY_CHARS} characters")
        queries.append(" ".join(item.split()))
    return queries


def _plan(original: str, rewrites: list[str], max_queries: int) -> list[str]:
    """The original first, then the distinct rewrites in the model's order, `max_queries` in all (more are cut)."""
    planned, seen = [original], {" ".join(original.split()).casefold()}
    for query in rewrites:
        if len(planned) >= max_queries:
            break
        if query.casefold() not in seen:
            seen.add(query.casefold())
            planned.append(query)
    return planned


def plan_queries(*, query: str, mode: str, context: SessionContext, settings_row, account_id: int | None) -> QueryPlan:
    max_queries = min(3, settings_row.max_expansion_queries)  # RFC: ≤3, whatever the row says
    if mode != "auto" or max_queries < 2 or not llm_configured() or not context.has_context():
        return QueryPlan([query], "off")
    prompt = load_prompt("expansion")
    session_text = context.text(chars=CONTEXT_CHARS, overview_chars=OVERVIEW_CHARS, message_chars=MESSAGE_CHARS)
    values = {"max_rewrites": str(max_queries - 1), "context": session_text, "query": query}
    completion = complete(
        kind="expansion",
        model=planner_model(),
        timeout_s=settings_row.recall_intent_timeout_s,
        account_id=account_id,
        max_tokens=EXPANSION_MAX_TOKENS,
        json_mode=True,
        parse=parse_queries,
        messages=[
            {"role": "system", "content": fill(prompt.system, **values)},
            {"role": "user", "content": fill(prompt.user, **values)},
        ],
    )
    if not completion.ok:
        return QueryPlan([query], "failed")
    return QueryPlan(_plan(query, completion.value, max_queries), "used")
