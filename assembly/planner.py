"""The planner (docs/design.md §5, RFC §3.4): candidates + stored token counts + budget + caps → a plan.

Pure: no I/O, no ORM, no LLM, no tokenizer. Costs are whole rendered blocks (tags, attributes and separator
included) in estimated tokens, so a plan whose costs fit the budget renders within it as the estimator counts (it
is additive and rounds each piece up); the exact count of the block decides afterwards (docs/tokens.md).
"""

from dataclasses import dataclass, field

from assembly.render import SEPARATOR, neutralise, render_block
from retrieval.tokens import estimate_tokens

TIER_ORDER = ("uri", "abstract", "overview", "full")
RANK = {tier: i for i, tier in enumerate(TIER_ORDER)}
MIN_HEAD_TOKENS = 64
# Depth for the best hits (issue 37, plan_tiers's `deepen`): in a search's block, the first DEPTH_RANKS candidates
# whose full text says clearly more than their abstract (a dated event's Details below its Summary) go `full`, within
# DEPTH_SHARE of the budget, with room taken from the lowest-ranked entries.
DEPTH_RANKS = 3
DEPTH_SHARE = 0.5


@dataclass(frozen=True)
class Candidate:
    uri: str
    category: str  # events, entities, preferences, experiences, profile, resources, skills
    context_type: str  # memory, resource, skill
    kind: str  # file, dir
    score: float
    abstract: str
    overview_tokens: int = 0
    content_tokens: int = 0
    body: str | None = None  # a declared bootstrap slot's text: its "full" tier, served without a fetch
    # Counted in the request's family where known (assembly/costs.py): the abstract as stored, and the element's
    # tags and separator at each tier (TIER_ORDER). Else the estimator counts them.
    abstract_tokens: int | None = None
    shell_tokens: tuple[int, ...] | None = None
    # A search's fused value, the rank order's key (retrieval.search.fusion.fuse); None for a bootstrap slot's.
    relevance: float | None = None
    date: str | None = None  # a memory's day (YYYY-MM-DD), rendered with it: which of two statements is current

    @property
    def bucket(self) -> str:
        return "entities" if self.category == "profile" else self.category


@dataclass(frozen=True)
class Caps:
    max_tokens: int
    per_entry_cap: int = 400
    # Highest tier per source: "memory", "resource", "skill" for files, "dir" for directories.
    source_caps: dict = field(
        default_factory=lambda: {"memory": "full", "resource": "abstract", "skill": "abstract", "dir": "overview"}
    )
    # "auto", a tier, or {bucket: tier} (buckets not named stay auto); "uri" pins names only (bootstrap's listing
    # of preferences), which a request cannot ask for.
    detail: object = "auto"
    events_budget: int | None = None
    family: str = "o200k"
    # How many of the best-ranked candidates may take depth from lower-ranked ones (plan_tiers's `deepen`): DEPTH_RANKS
    # for a search's candidates; 0 for a bootstrap slot, whose order is the slot's own, not relevance.
    depth_ranks: int = 0


@dataclass(frozen=True)
class PlannedEntry:
    candidate: Candidate
    tier: str
    body_tokens: int  # for "full", possibly fewer than the content's: the head is kept
    cost: int


@dataclass
class Plan:
    entries: list[PlannedEntry]
    dropped: list[Candidate]
    used_tokens: int


def _ceiling(candidate: Candidate, caps: Caps) -> str:
    """The highest tier this candidate can reach: source cap, then what exists (files have no overview)."""
    cap = caps.source_caps["dir" if candidate.kind == "dir" else candidate.context_type]
    if candidate.kind == "dir":
        return "overview" if RANK[cap] >= RANK["overview"] else cap
    return "abstract" if cap == "overview" else cap


def _pinned(candidate: Candidate, caps: Caps) -> str | None:
    """The tier a fixed `detail` pins this candidate at (capped, falling back to a lower existing tier)."""
    wanted = caps.detail.get(candidate.bucket) if isinstance(caps.detail, dict) else caps.detail
    if wanted in (None, "auto"):
        return None
    ceiling = _ceiling(candidate, caps)
    tier = wanted if RANK[wanted] <= RANK[ceiling] else ceiling
    if tier == "overview" and candidate.kind == "file":
        tier = "abstract"
    return tier


class _Budget:
    def __init__(self, caps: Caps, events_budget: int | None):
        self.caps = caps
        self.events_budget = events_budget
        self.used = 0
        self.events_used = 0

    def fits(self, candidate: Candidate, extra: int, shared: bool = True) -> bool:
        """Whether `extra` fits the budget and, unless `shared` is off, the events share."""
        if self.used + extra > self.caps.max_tokens:
            return False
        return not (
            shared
            and candidate.category == "events"
            and self.events_budget is not None
            and self.events_used + extra > self.events_budget
        )

    def spend(self, candidate: Candidate, extra: int) -> None:
        self.used += extra
        if candidate.category == "events":
            self.events_used += extra


def block_cost(candidate: Candidate, tier: str, body_tokens: int, family: str) -> int:
    body = body_tokens if tier != "uri" else 0
    if candidate.shell_tokens is not None:
        return candidate.shell_tokens[RANK[tier]] + body
    shell = render_block(candidate.uri, candidate.category, candidate.score, tier, "", candidate.date) + SEPARATOR
    return estimate_tokens(shell, family) + body


def _body_tokens(candidate: Candidate, tier: str, family: str) -> int:
    if tier == "abstract":
        if candidate.abstract_tokens is not None:
            return candidate.abstract_tokens
        return estimate_tokens(neutralise(candidate.abstract), family)  # as rendered: escaping costs tokens too
    if tier == "overview":
        return candidate.overview_tokens
    if tier == "full":
        return candidate.content_tokens
    return 0


def _first_tier(candidate: Candidate, caps: Caps) -> tuple[str, int]:
    """Round 0's tier for a candidate (its pinned tier, else abstract) and its body there."""
    tier = _pinned(candidate, caps) or "abstract"
    return tier, _body_tokens(candidate, tier, caps.family)


def weak_evidence_budget(candidates: list[Candidate], caps: Caps, share: float) -> int:
    """The budget of a block whose candidates all fall below /recall's relevance floor: `share` of `caps.max_tokens`,
    yet never less than the first candidate's element at abstract where that fits the whole budget, so the best hit
    is exposed at least at abstract (RFC §3.4), not reduced to a bare pointer by a small share."""
    budget = int(caps.max_tokens * share)
    if not candidates:
        return budget
    cost = block_cost(candidates[0], *_first_tier(candidates[0], caps), caps.family)
    return max(budget, cost) if cost <= caps.max_tokens else budget


def plan_tiers(candidates: list[Candidate], caps: Caps) -> Plan:
    """RFC §3.4: round 0 everyone at abstract (or pinned tier), in the given order (a search's rank, best first,
    or a bootstrap slot's own order) — what does not fit becomes a `uri` line, then is dropped; round 1
    directories up to overview; in a search's auto detail, depth for the best hits (`deepen`); round 2 files up to
    full with what is left, capped per entry."""
    family = caps.family
    chosen: dict[str, PlannedEntry] = {}
    dropped: list[Candidate] = []
    shells: dict[tuple[str, str], int] = {}

    def cost_of(candidate: Candidate, tier: str, body: int) -> int:
        """block_cost, its shell (tags and separator) estimated once per candidate and tier: the rounds ask
        again for the same shells."""
        key = (candidate.uri, tier)
        if key not in shells:
            shells[key] = block_cost(candidate, tier, 0, family)
        return shells[key] + (body if tier != "uri" else 0)

    def most(candidate: Candidate) -> int:
        """What a candidate can cost at most: its pinned tier, or its ceiling with the body capped per entry."""
        if _pinned(candidate, caps) is not None:
            return cost_of(candidate, *_first_tier(candidate, caps))
        tier = _ceiling(candidate, caps)
        body = {"full": candidate.content_tokens, "overview": candidate.overview_tokens}.get(tier)
        if body is None:
            return cost_of(candidate, *_first_tier(candidate, caps))
        return cost_of(candidate, tier, min(body, caps.per_entry_cap))

    # The events share keeps room for the other buckets; room they cannot use (no such candidates, or short
    # ones) goes to events rather than staying empty.
    events_budget = caps.events_budget
    if events_budget is not None:
        others = sum(most(c) for c in candidates if c.category != "events")
        events_budget = max(events_budget, caps.max_tokens - others)
    budget = _Budget(caps, events_budget)

    def take(candidate: Candidate, tier: str, body: int) -> bool:
        cost = cost_of(candidate, tier, body)
        if not budget.fits(candidate, cost):
            return False
        budget.spend(candidate, cost)
        chosen[candidate.uri] = PlannedEntry(candidate, tier, body, cost)
        return True

    for candidate in candidates:
        if not take(candidate, *_first_tier(candidate, caps)) and not take(candidate, "uri", 0):
            dropped.append(candidate)

    def upgrade(candidate: Candidate, tier: str, body: int, shared: bool = True) -> None:
        current = chosen[candidate.uri]
        cost = cost_of(candidate, tier, body)
        if budget.fits(candidate, cost - current.cost, shared):
            budget.spend(candidate, cost - current.cost)
            chosen[candidate.uri] = PlannedEntry(candidate, tier, body, cost)

    def total_room(candidate: Candidate) -> int:
        """The most body this candidate could have at `full` in what the whole budget has left, its entry given back."""
        return caps.max_tokens - budget.used + chosen[candidate.uri].cost - cost_of(candidate, "full", 0)

    def full_room(candidate: Candidate) -> int:
        """total_room, bounded for an event by what the events share has left."""
        room = total_room(candidate)
        if candidate.category == "events" and events_budget is not None:
            freed = chosen[candidate.uri].cost - cost_of(candidate, "full", 0)
            room = min(room, events_budget - budget.events_used + freed)
        return room

    auto = [c for c in candidates if c.uri in chosen and chosen[c.uri].tier == "abstract" and _pinned(c, caps) is None]
    for candidate in auto:
        if candidate.kind == "dir" and _ceiling(candidate, caps) == "overview" and candidate.overview_tokens:
            upgrade(candidate, "overview", min(candidate.overview_tokens, caps.per_entry_cap))

    def deepen(candidate: Candidate, share: int) -> None:
        """Depth for a best hit whose full text says clearly more than its abstract (a dated event's Details below
        its Summary): the head that fits the share, the room for it taken from the lowest-ranked entries below the
        best hits (given back as abstracts or pointers where the head leaves room). Breadth alone served a
        first-ranked incident at its abstract while far-down hits filled the block (issue 37). The events share
        does not bound it: it keeps room for other kinds' breadth, which a best hit's depth outranks (a coding
        purpose's 40 % held a first-ranked incident's Details out of /recall's blocks)."""
        wanted = min(candidate.content_tokens, caps.per_entry_cap, share - cost_of(candidate, "full", 0))
        enough = _body_tokens(candidate, "abstract", family) + MIN_HEAD_TOKENS
        if wanted < enough:
            return
        tail = [c for c in candidates[caps.depth_ranks :] if c.uri in chosen]
        evicted: list[PlannedEntry] = []
        while tail and total_room(candidate) < wanted:
            victim = tail.pop()
            evicted.append(chosen.pop(victim.uri))
            budget.spend(victim, -evicted[-1].cost)
        body = min(wanted, total_room(candidate))
        if body < enough:
            for planned in evicted:  # not worth it: the block as it was
                budget.spend(planned.candidate, planned.cost)
                chosen[planned.candidate.uri] = planned
            return
        upgrade(candidate, "full", body, shared=False)
        for planned in reversed(evicted):  # evicted from the bottom: given back best first
            if not take(planned.candidate, *_first_tier(planned.candidate, caps)) and not take(
                planned.candidate, "uri", 0
            ):
                dropped.append(planned.candidate)

    if caps.depth_ranks and caps.detail == "auto":
        share = int(caps.max_tokens * DEPTH_SHARE)
        for candidate in candidates[: caps.depth_ranks]:
            if candidate.uri in chosen and candidate.kind == "file" and _ceiling(candidate, caps) == "full":
                deepen(candidate, share)
                share -= chosen[candidate.uri].cost if chosen[candidate.uri].tier == "full" else 0

    auto = [c for c in candidates if c.uri in chosen and chosen[c.uri].tier == "abstract" and _pinned(c, caps) is None]
    for candidate in auto:
        if candidate.kind != "file" or _ceiling(candidate, caps) != "full":
            continue
        current = chosen[candidate.uri]
        body = min(candidate.content_tokens, caps.per_entry_cap, full_room(candidate))
        # The whole content is worth it (the client then needs no read); a cut head must say clearly more than
        # the abstract it replaces, or the budget is better left unspent.
        if body == candidate.content_tokens or (body > current.body_tokens and body >= MIN_HEAD_TOKENS):
            upgrade(candidate, "full", body)

    entries = [chosen[c.uri] for c in candidates if c.uri in chosen]
    return Plan(entries=entries, dropped=dropped, used_tokens=budget.used)
