"""Context-mode parameters: a request's explicit values over the purpose profile over the operator settings."""

from dataclasses import dataclass

from django.conf import settings

from retrieval.search.query import FindQuery

ASSEMBLY_FIELDS = (
    "max_tokens",
    "quotas",
    "purpose",
    "detail",
    "dedup_turns",
    "exclude_uris",
    "peer_scope",
    "other_peer_penalty",
    "rewrite",
    "rewrite_max_bullets",
    "tokenizer",
)


@dataclass(frozen=True)
class ContextParams:
    find: FindQuery
    session_id: str | None
    max_tokens: int
    purpose: str | None
    quotas: dict | None  # None: quota-free score order with `limit`
    pool: dict | int  # what the candidate search draws: per bucket (quotas grown to the budget), or `limit`
    pool_size: int | None  # a purpose's budget-sized pool, its quotas shares of it; None: explicit counts
    events_budget_ratio: float | None
    detail: object
    dedup_turns: int
    exclude_uris: tuple[str, ...]
    peer_scope: str
    other_peer_penalty: float
    rewrite: object
    rewrite_max_bullets: int
    query_expansion: str
    tokenizer: str  # the family max_tokens is counted in (retrieval/tokenizers.py)
    threshold_source: str = "request"  # request | recall_preset | purpose | settings
    relevance_floor: float | None = None  # /recall's defaults only (retrieval.search.fusion.relevance_cut)
    ignored: tuple[str, ...] = ()
    deprecated: tuple[str, ...] = ()
    actor_peer: str = ""


# A budget-sized pool (docs/retrieval.md, "The candidate pool"): about one candidate per POOL_TOKENS_PER_CANDIDATE
# of max_tokens. An entry at abstract costs 40-80 tokens with its element, so the pool holds about twice what the
# budget can serve and the planner picks from it; POOL_MAX bounds the scans.
POOL_TOKENS_PER_CANDIDATE = 32
POOL_MAX = 200


def pool_size(max_tokens: int) -> int:
    return min(POOL_MAX, -(-max_tokens // POOL_TOKENS_PER_CANDIDATE))


def scaled_quotas(quotas: dict[str, int], pool: int) -> dict[str, int]:
    """A profile's quotas grown in proportion until they add up to the pool; never below themselves."""
    total = sum(quotas.values())
    if not total or total >= pool:
        return dict(quotas)
    return {bucket: -(-count * pool // total) for bucket, count in quotas.items()}


def resolve_context_params(
    data: dict,
    *,
    find: FindQuery,
    given: set[str],
    settings_row,
    profile,
    deprecated: tuple[str, ...] = (),
    actor_peer: str = "",
    preset: frozenset[str] = frozenset(),
) -> ContextParams:
    """`data` is the validated request; `given` the fields the client actually sent; `profile` the purpose's row;
    `preset` the fields /recall's preset filled in (`assembly.service.recall_request`).
    Without an explicit `limit` (score order) or explicit quotas (a purpose), the candidate pool is sized to the
    budget: an explicit value is served exactly."""
    max_tokens = (
        data.get("max_tokens")
        or (profile.max_tokens if profile and profile.max_tokens else None)
        or settings_row.default_max_tokens
    )
    pool = pool_size(max_tokens)
    quotas = counts = None
    if profile is not None or data.get("quotas"):
        quotas = {**(profile.quotas if profile else {}), **(data.get("quotas") or {})}
        counts = {**scaled_quotas(profile.quotas if profile else {}, pool), **(data.get("quotas") or {})}
    elif "limit" not in given and "node_limit" not in given:
        find.limit = pool
    threshold_source, relevance_floor = "request", None
    if "score_threshold" in preset:
        threshold_source = "recall_preset"
        if settings_row.relevance_floor_model == settings.EMBEDDING_MODEL:
            relevance_floor = settings_row.recall_relevance_floor
    elif "score_threshold" not in given:
        if profile and profile.score_threshold is not None:
            find.score_threshold, threshold_source = profile.score_threshold, "purpose"
        else:
            find.score_threshold, threshold_source = settings_row.context_score_threshold, "settings"
    find.levels = []  # RFC §3.2: in context mode the detail ladder owns the tier, so `level` filters nothing
    ignored = [name for name in ("level",) if name in given]
    if quotas is not None and "limit" in given:
        ignored.append("limit")
    return ContextParams(
        find=find,
        session_id=data.get("session_id") or None,
        max_tokens=max_tokens,
        purpose=profile.name if profile else None,
        quotas=quotas,
        pool=counts if counts is not None else find.limit,
        pool_size=pool if counts is not None and not data.get("quotas") else None,
        events_budget_ratio=profile.events_budget_ratio if profile else None,
        detail=data.get("detail") or (profile.detail if profile and profile.detail else "auto"),
        dedup_turns=data.get("dedup_turns", 0),
        exclude_uris=tuple(data.get("exclude_uris") or ()),
        peer_scope=data.get("peer_scope", "all"),
        other_peer_penalty=data.get("other_peer_penalty", 0.0),
        rewrite=data.get("rewrite", False),
        rewrite_max_bullets=data.get("rewrite_max_bullets") or settings_row.rewrite_max_bullets,
        query_expansion=data.get("query_expansion", "auto"),
        tokenizer=(
            data.get("tokenizer") or (profile.tokenizer_family if profile else "") or settings_row.tokenizer_family
        ),
        threshold_source=threshold_source,
        relevance_floor=relevance_floor,
        ignored=tuple(ignored),
        deprecated=deprecated,
        actor_peer=actor_peer,
    )


# RFC §3.6: a bootstrap has no query, so every field that shapes a retrieval is refused (422 naming it) rather
# than silently doing nothing; fields generic clients always send with harmless values are ignored and listed in
# `stats.ignored`.
BOOTSTRAP_FIELDS = ("mode", "session_id", "max_tokens", "exclude_uris", "tokenizer", "telemetry")
BOOTSTRAP_IGNORED = ("limit", "node_limit", "level", "time_field", "query_expansion")


@dataclass(frozen=True)
class BootstrapParams:
    session_id: str | None
    max_tokens: int
    exclude_uris: tuple[str, ...]
    tokenizer: str
    ignored: tuple[str, ...] = ()
    actor_peer: str = ""


def resolve_bootstrap_params(data: dict, *, given: set[str], settings_row, actor_peer: str = "") -> BootstrapParams:
    return BootstrapParams(
        session_id=data.get("session_id") or None,
        max_tokens=data.get("max_tokens") or settings_row.default_max_tokens,
        exclude_uris=tuple(data.get("exclude_uris") or ()),
        tokenizer=data.get("tokenizer") or settings_row.tokenizer_family,
        ignored=tuple(name for name in BOOTSTRAP_IGNORED if name in given),
        actor_peer=actor_peer,
    )
