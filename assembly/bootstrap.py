"""The bootstrap provider (RFC §3.6, docs/design.md §5): mode="bootstrap" takes its candidates from a declared slot
manifest instead of retrieval hits — no query, no embedding, no LLM. Each slot yields candidates in its own order
for its share of the budget; the pipeline plans, fetches and renders them with the context-mode kernel.

Slots, in manifest (and render) order: `instructions` (a static server template with a content hash),
`identity` (the user's profile.md, size-gated), `continuity` (the session's archive overview and its recent
messages' abstracts), `working_state` (recent events, newest kept, rendered oldest first; with an actor peer,
its events and the user's about 8:2) and `listing` (every
other file, newest first, abstracts only; preferences by name only — their bodies never go into a bootstrap).
"""

import hashlib
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path

from django.utils import timezone

from assembly.expansion import SessionContext
from assembly.planner import Candidate, block_cost
from core.auth import Caller
from profiles.models import BUCKETS
from retrieval.search.bootstrap import FileRow, newest_events, newest_files, ready_file_content
from retrieval.tokens import estimate_tokens, truncate_to_tokens

SLOTS = ("instructions", "identity", "continuity", "working_state", "listing")
INSTRUCTIONS_TEMPLATE = Path(__file__).resolve().parent / "templates" / "bootstrap_instructions.md"
INSTRUCTIONS_URI = "viking://server/instructions"
SESSION_URI = "viking://session/{}"
SLOT_SCORE = 1.0  # declared, not retrieved: every entry ranks the same and a slot's own order decides
MESSAGE_ABSTRACT_CHARS = 300
CUT_POINTER = "\n… [cut at this slot's share; the whole text: {}]"
LISTING_DETAIL = {**{bucket: "abstract" for bucket in BUCKETS}, "preferences": "uri"}


@dataclass(frozen=True)
class Instructions:
    version: str
    text: str
    content_hash: str  # of the whole template file: a client that has this hash has this text

    def as_dict(self) -> dict:
        return {"uri": INSTRUCTIONS_URI, "version": self.version, "content_hash": self.content_hash}


def load_instructions() -> Instructions:
    """`version: …`, a blank line, then the text. Read per call (one small file), so an edited template is
    served with its new hash without a restart."""
    raw = INSTRUCTIONS_TEMPLATE.read_text()
    header, _, text = raw.partition("\n\n")
    version = header.split(":", 1)[1].strip() if header.startswith("version:") else ""
    return Instructions(version=version, text=text.strip(), content_hash=hashlib.sha256(raw.encode()).hexdigest())


@dataclass(frozen=True)
class Slot:
    name: str
    candidates: list[Candidate]
    detail: object  # the planner's `detail` for this slot
    declared: bool = False  # its text comes with the candidate (no source caps: it is served whole or cut)
    chronological: bool = False  # planned newest first (the oldest are cut), rendered oldest first


def slot_budgets(settings_row, max_tokens: int) -> dict[str, int]:
    """Each slot's share of `max_tokens` (shares summing past 1 are scaled down to 1): its floor; what a slot
    leaves unspent passes to the next one (the pipeline), so `listing` takes what the others did not need."""
    shares = {name: getattr(settings_row, f"bootstrap_{name}_share") for name in SLOTS}
    total = sum(shares.values())
    scale = 1.0 / total if total > 1 else 1.0
    return {name: int(max_tokens * share * scale) for name, share in shares.items()}


def declared_text(
    *, uri: str, category: str, context_type: str, text: str, budget: int, family: str
) -> tuple[Candidate, str]:
    """A declared text as one `full` candidate within `budget`, the block's tags included: whole when it fits,
    else its head with a pointer to the whole (RFC §3.6 size gate: a hard cap, head kept). When not even the
    pointer fits, the name alone (`uri`). Returns the candidate and its pinned tier."""
    shell = Candidate(uri=uri, category=category, context_type=context_type, kind="file", score=SLOT_SCORE, abstract="")
    room = budget - block_cost(shell, "full", 0, family)
    body = truncate_to_tokens(text, room, family, marker=CUT_POINTER.format(uri)) if room > 0 and text else ""
    if not body:
        return shell, "uri"
    return replace(shell, body=body, content_tokens=estimate_tokens(body, family)), "full"


def _candidate(row: FileRow) -> Candidate:
    return Candidate(
        uri=row.uri,
        category=row.category,
        context_type=row.context_type,
        kind=row.kind,
        score=SLOT_SCORE,
        abstract=row.abstract,
        overview_tokens=row.overview_tokens,
        content_tokens=row.content_tokens,
    )


def instructions_slot(*, instructions: Instructions, budget: int, family: str, **_) -> Slot:
    candidate, tier = declared_text(
        uri=INSTRUCTIONS_URI,
        category="instructions",
        context_type="resource",
        text=instructions.text,
        budget=budget,
        family=family,
    )
    return Slot("instructions", [candidate], tier, declared=True)


def identity_slot(*, caller: Caller, budget: int, family: str, **_) -> Slot:
    uri = f"viking://user/{caller.user_id}/memories/profile.md"
    content = ready_file_content(caller, uri)
    if content is None:
        return Slot("identity", [], "full", declared=True)
    candidate, tier = declared_text(
        uri=uri, category="profile", context_type="memory", text=content, budget=budget, family=family
    )
    return Slot("identity", [candidate], tier, declared=True)


def continuity_text(context: SessionContext, budget_tokens: int, family: str) -> str:
    """The archive overview, then the newest messages' abstracts, in about `budget_tokens`: characters per token
    differ by script, so the character cap is narrowed from a generous guess until the estimate fits."""
    chars = max(1, budget_tokens) * 4
    for _ in range(6):
        text = context.text(
            chars=chars,
            overview_chars=chars * 2 // 3 if context.messages else chars,
            message_chars=MESSAGE_ABSTRACT_CHARS,
        )
        used = estimate_tokens(text, family)
        if used <= budget_tokens:
            return text
        chars = int(chars * budget_tokens / used * 0.95)
    return text  # still over: the size gate cuts its head


def continuity_slot(*, session, settings_row, budget: int, family: str, **_) -> Slot:
    if session is None:
        return Slot("continuity", [], "full", declared=True)
    context = SessionContext(session, message_limit=settings_row.bootstrap_continuity_max)
    if not context.has_context():
        return Slot("continuity", [], "full", declared=True)
    uri = SESSION_URI.format(session.session_id)
    shell_cost = block_cost(
        Candidate(uri=uri, category="session", context_type="resource", kind="file", score=SLOT_SCORE, abstract=""),
        "full",
        0,
        family,
    )
    text = continuity_text(context, budget - shell_cost, family)
    candidate, tier = declared_text(
        uri=uri, category="session", context_type="resource", text=text, budget=budget, family=family
    )
    return Slot("continuity", [candidate], tier, declared=True)


def peer_places(cap: int, share: float, peer_found: int, user_found: int) -> tuple[int, int]:
    """RFC §3.6: with a peer, its events and the user's share the working state about 8:2. Each side's places
    are `cap` split by `share`; places a side cannot fill pass to the other, so the cap stays filled."""
    peer = round(cap * share)
    peer_taken = min(peer_found, peer + max(0, (cap - peer) - user_found))
    return peer_taken, min(user_found, cap - peer_taken)


def working_state_slot(*, caller: Caller, settings_row, actor_peer: str = "", **_) -> Slot:
    """The newest events of the last N days. With an actor peer, that peer's events and the user's own (no peer)
    split the places by `bootstrap_working_state_peer_share`; other peers' events are another peer's state."""
    cap = settings_row.bootstrap_working_state_max
    since = timezone.now() - timedelta(days=settings_row.bootstrap_working_state_days)
    if not actor_peer:
        rows = newest_events(caller, since=since, limit=cap)
    else:
        # each side's newest `cap` (one round trip), then the split
        newest_first = newest_events(caller, since=since, limit=cap, peers=(actor_peer, ""))
        peer_rows = [row for row in newest_first if row.peer == actor_peer]
        user_rows = [row for row in newest_first if row.peer == ""]
        peer_taken, user_taken = peer_places(
            cap, settings_row.bootstrap_working_state_peer_share, len(peer_rows), len(user_rows)
        )
        kept = {row.uri for row in peer_rows[:peer_taken] + user_rows[:user_taken]}
        rows = [row for row in newest_first if row.uri in kept]
    return Slot("working_state", [_candidate(row) for row in rows], "auto", chronological=True)


def listing_slot(*, caller: Caller, settings_row, taken: set[str], **_) -> Slot:
    """Ordered by last update, newest first: an alphabetical cut would leave a random prefix (RFC §3.6)."""
    rows = newest_files(caller, skip=taken, limit=settings_row.bootstrap_listing_max)
    return Slot("listing", [_candidate(row) for row in rows], LISTING_DETAIL)


PROVIDERS = {
    "instructions": instructions_slot,
    "identity": identity_slot,
    "continuity": continuity_slot,
    "working_state": working_state_slot,
    "listing": listing_slot,
}


def provide_slot(name: str, **context) -> Slot:
    """One slot's candidates; `context` holds caller, session, settings_row, instructions, budget, family,
    `taken` (the URIs earlier slots already hold) and actor_peer."""
    return PROVIDERS[name](**context)
