"""The assembly pipeline (docs/design.md §5), one stage per module; this file reads as the list of steps:

request → [expansion] → candidates → dedup/exclude → plan (pure) → fetch (one query) → render
→ merge sections → [rewrite] → ledger → stats

mode="bootstrap" runs the same kernel with the slot manifest as its provider (`assemble_bootstrap`).
"""

from dataclasses import dataclass, replace

from assembly import bootstrap
from assembly import candidates as providers
from assembly.costs import with_exact_costs
from assembly.dedup import drop_served, exclusion
from assembly.executor import fetch_bodies
from assembly.expansion import SessionContext, embed_queries, plan_queries
from assembly.merge import merge_sections, parent_uri
from assembly.params import BootstrapParams, ContextParams
from assembly.planner import DEPTH_RANKS, MIN_HEAD_TOKENS, Caps, Plan, plan_tiers, weak_evidence_budget
from assembly.render import render_block, render_blocks
from assembly.rewrite import Digest, rewrite_digest
from core.api import Timings
from core.auth import Caller
from retrieval.search.query import scope_predicate, search_partitions
from retrieval.search.ranking import ranking_for
from retrieval.search.statements import SearchQuery
from retrieval.tokenizers import Counter, counter_for
from sessions_app import ledger
from sessions_app.selectors import find_session

DEGRADE = {"full": "abstract", "overview": "abstract", "abstract": "uri"}
# The planner aims this far under max_tokens: its estimates err by a few per cent either way, and the exact count
# of the block is then over less often (assembly/planner.py plans in estimated tokens).
PLAN_MARGIN = 0.03
# A plan whose exact count fills less than this share of its target, where the budget bound it, is made again
# (_rescaled), at most REPLANS times.
FILL = 0.93
REPLANS = 2
# What joining or cutting a body may add to a block's count beyond the body's own: BPE regroups at the seams.
SEAM_TOKENS = 2
# The share of max_tokens a /recall below its relevance floor may use: the store most likely does not hold the
# answer, and an auto-recall injects this block on every turn (docs/retrieval.md, "Thresholds").
WEAK_EVIDENCE_SHARE = 0.25


def _source_caps(settings_row) -> dict:
    return {
        "memory": settings_row.memory_detail_cap,
        "resource": settings_row.resource_detail_cap,
        "skill": settings_row.skill_detail_cap,
        "dir": settings_row.directory_detail_cap,
    }


def _caps(params: ContextParams, settings_row, counter: Counter) -> Caps:
    margin = 1 - PLAN_MARGIN if counter.exact else 1
    events_budget = (
        int(params.max_tokens * params.events_budget_ratio * margin)
        if params.events_budget_ratio is not None and params.events_budget_ratio < 1
        else None
    )
    return Caps(
        max_tokens=int(params.max_tokens * margin),
        per_entry_cap=settings_row.per_entry_cap_tokens,
        source_caps=_source_caps(settings_row),
        detail=params.detail,
        events_budget=events_budget,
        family=counter.profile,
        depth_ranks=DEPTH_RANKS,
    )


def _fit(
    entries: list[dict], rendered: str, used: int, max_tokens: int, counter: Counter
) -> tuple[list[dict], str, int]:
    """The budget promise on the final text, counted by the family's counter (`used` is `rendered`'s count):
    while it is over, the last-ranked entry gives up what is over — a long body is cut by that much, else it
    degrades (deeper tier → abstract → uri → gone)."""
    entries = list(entries)
    while used > max_tokens and entries:
        victim = entries[-1]
        keep = counter.count(victim["text"]) - (used - max_tokens) - SEAM_TOKENS
        tier = DEGRADE.get(victim["detail"])
        if victim["detail"] in ("full", "overview") and keep >= MIN_HEAD_TOKENS:
            victim["text"] = counter.truncate(victim["text"], keep)
        elif tier is None:
            entries.remove(victim)
        else:
            victim["detail"] = tier
            victim["text"] = victim["abstract"] if tier == "abstract" else ""
        if victim in entries:
            victim["block"] = render_block(
                victim["uri"], victim["category"], victim["score"], victim["detail"], victim["text"], victim["date"]
            )
        rendered = render_blocks([e["block"] for e in entries])
        used = counter.count(rendered)
    return entries, rendered, used


def _counted(entries: list[dict], counter: Counter) -> tuple[str, int]:
    rendered = render_blocks([e["block"] for e in entries])
    return rendered, counter.count(rendered)


@dataclass
class _Rendering:
    plan: Plan
    documents: set[str]
    entries: list[dict]
    rendered: str
    used: int  # `rendered` as the family's counter counts it


def _rendering(caller: Caller, plan: Plan, caps: Caps, counter: Counter) -> _Rendering:
    """The plan fetched (one query), rendered and counted."""
    bodies, documents = fetch_bodies(caller=caller, plan=plan, family=caps.family, parents=_shared_parents(plan))
    entries = _rendered_entries(plan, bodies)
    return _Rendering(plan, documents, entries, *_counted(entries, counter))


def _rescaled(caps: Caps, done: _Rendering, target: int, max_tokens: int, counter: Counter) -> Caps | None:
    """Caps for another plan when the count of the block strays from the plan's enough to matter: over
    `max_tokens`, or under FILL of the `target` while the budget, not the candidates, bounded the plan. The budget is
    rescaled by the plan's error on this very block, so the next plan lands about where the first aimed. The
    estimator strays too, though additive: a cut head ends on a line or word boundary, short of its planned size."""
    plan = done.plan
    if not plan.used_tokens or not done.used:
        return None
    bounded = plan.dropped or plan.used_tokens >= FILL * caps.max_tokens
    if done.used <= max_tokens and (done.used >= FILL * target or not bounded):
        return None
    scale = plan.used_tokens / done.used
    return replace(
        caps,
        max_tokens=int(target * scale),
        events_budget=int(caps.events_budget * scale) if caps.events_budget is not None else None,
    )


def _fuller(best: _Rendering, other: _Rendering, max_tokens: int) -> _Rendering:
    """The better of two renderings: within max_tokens and fuller, else the one less over."""
    if (other.used <= max_tokens) != (best.used <= max_tokens):
        return other if other.used <= max_tokens else best
    return other if (other.used > best.used) == (other.used <= max_tokens) else best


def _replanned(
    caller: Caller, kept: list, caps: Caps, first: _Rendering, max_tokens: int, counter: Counter
) -> tuple[_Rendering, int]:
    """Up to REPLANS more plans, each rescaled by the last one's exact count; the best rendering and how many
    plans were made again."""
    best, done, current, replans = first, first, caps, 0
    while replans < REPLANS:
        rescaled = _rescaled(current, done, caps.max_tokens, max_tokens, counter)
        if rescaled is None:
            break
        plan = plan_tiers(kept, rescaled)
        if _shape(plan) == _shape(done.plan):
            break
        current, replans = rescaled, replans + 1
        done = _rendering(caller, plan, rescaled, counter)
        best = _fuller(best, done, max_tokens)
    return best, replans


def _shape(plan: Plan) -> list[tuple[str, str, int]]:
    return [(e.candidate.uri, e.tier, e.body_tokens) for e in plan.entries]


def _shared_parents(plan: Plan) -> set[str]:
    """Parents of two or more planned entries: only there can sections of one document be merged."""
    seen, shared = set(), set()
    for planned in plan.entries:
        if planned.tier != "uri":
            parent = parent_uri(planned.candidate.uri)
            (shared if parent in seen else seen).add(parent)
    return shared


def _merged(
    entries: list[dict], documents: set[str], rendered: str, used: int, counter: Counter
) -> tuple[list[dict], str, int, dict]:
    """Sections of one document merged into one entry where that saves tokens, as the counter counts them."""
    merged = {"entries": 0, "sections": 0, "saved_tokens": 0}
    if not documents:
        return entries, rendered, used, merged
    out = merge_sections(entries, documents, counter.profile)
    if len(out) == len(entries):
        return entries, rendered, used, merged
    merged_text, after = _counted(out, counter)
    if after >= used:
        return entries, rendered, used, merged
    groups = [e for e in out if "sections" in e]
    merged.update(entries=len(groups), sections=sum(len(e["sections"]) for e in groups), saved_tokens=used - after)
    return out, merged_text, after, merged


def _served(entries: list[dict]) -> list[tuple[str, str]]:
    """(uri, detail) of what was served: a merged entry served each of its sections."""
    return [(uri, e["detail"]) for e in entries for uri in e.get("sections", [e["uri"]])]


def _rendered_entries(plan: Plan, bodies: dict[str, str]) -> list[dict]:
    out = []
    for planned in plan.entries:
        c = planned.candidate
        text = bodies.get(c.uri, "") if planned.tier != "uri" else ""
        entry = {
            "uri": c.uri,
            "category": c.category,
            "score": c.score,
            "detail": planned.tier,
            "text": text,
            "abstract": c.abstract,
            "date": c.date,
            "block": render_block(c.uri, c.category, c.score, planned.tier, text, c.date),
        }
        if c.relevance is not None:
            entry["relevance"] = c.relevance
        out.append(entry)
    return out


def assemble_context(*, caller: Caller, params: ContextParams, settings_row) -> tuple[dict, Timings]:
    timings = Timings()
    # Compiled once for every bucket; a bad filter or exclude URI is refused here, before an LLM call or an
    # embedding is paid for.
    scope = scope_predicate(caller, params.find)
    exclude = exclusion(params.exclude_uris, user_id=caller.user_id)
    if params.session_id and params.dedup_turns:
        # The ledger lives in the session: created on first use, as a message creates it (docs/assembly.md).
        session = ledger.ledger_session(caller=caller, session_id=params.session_id)
    else:
        session = find_session(caller=caller, session_id=params.session_id) if params.session_id else None
    context = SessionContext(session)
    with timings.stage("expansion"):
        query_plan = plan_queries(
            query=params.find.query,
            mode=params.query_expansion,
            context=context,
            settings_row=settings_row,
            account_id=caller.account_id,
        )
    with timings.stage("embed"):
        queries = [
            SearchQuery(text, vector)
            for text, vector in zip(query_plan.queries, embed_queries(query_plan.queries), strict=True)
        ]
    peers = providers.PeerPolicy(
        actor=params.actor_peer, scope=params.peer_scope, other_peer_penalty=params.other_peer_penalty
    )
    ranking = ranking_for(params.find, settings_row, relevance_floor=params.relevance_floor)
    with timings.stage("candidates"):
        if params.quotas is not None:
            found = providers.quota_candidates(
                caller=caller,
                scope=scope,
                spec=params.find,
                queries=queries,
                quotas=params.pool,
                peers=peers,
                partitions=search_partitions(caller, params.find),
                ranking=ranking,
                pool=params.pool_size,
            )
        else:
            found = providers.score_candidates(
                caller=caller,
                scope=scope,
                spec=params.find,
                queries=queries,
                limit=params.find.limit,
                peers=peers,
                ranking=ranking,
            )
    with timings.stage("dedup"):
        turns = params.dedup_turns if session is not None else 0
        cooled = (
            ledger.cooled_uris(session=session, turns=turns, turn_seconds=settings_row.dedup_turn_seconds)
            if turns
            else {}
        )
        filtered = drop_served(found.items, exclude=exclude, cooled=cooled)
    counter = counter_for(params.tokenizer)
    caps = _caps(params, settings_row, counter)
    with timings.stage("plan"):
        kept = with_exact_costs(filtered.kept, counter, settings_row.tokenizer_family)
        if found.strong is False:  # below /recall's relevance floor: the one or two candidates kept, in a short share
            weak = weak_evidence_budget(kept, caps, WEAK_EVIDENCE_SHARE)
            caps = replace(caps, max_tokens=weak, events_budget=None)
        plan = plan_tiers(kept, caps)
    with timings.stage("fetch"):
        first = _rendering(caller, plan, caps, counter)
    with timings.stage("fit"):
        done, replans = _replanned(caller, kept, caps, first, params.max_tokens, counter)
        entries, rendered, used = _fit(done.entries, done.rendered, done.used, params.max_tokens, counter)
    with timings.stage("merge"):
        entries, rendered, used, merged = _merged(entries, done.documents, rendered, used, counter)
    with timings.stage("rewrite"):
        digest = rewrite_digest(
            rewrite=params.rewrite,
            query=params.find.query,
            rendered=rendered,
            entries=entries,
            context=context,
            max_bullets=params.rewrite_max_bullets,
            settings_row=settings_row,
            account_id=caller.account_id,
        )
    if turns and entries:
        with timings.stage("ledger"):
            ledger.record_served(session=session, served=_served(entries), turn_seconds=settings_row.dedup_turn_seconds)
    stats = _stats(
        entries,
        candidates=len(found.items),
        searched=found.searched,
        excluded=filtered.excluded,
        deduped=filtered.cooled,
        kept=len(filtered.kept),
        used=used,
        max_tokens=params.max_tokens,
        counter=counter,
    )
    stats["replans"] = replans
    stats.update(
        {
            "search_mode": ranking.mode,
            "threshold": {
                "score_threshold": params.find.score_threshold,
                "source": params.threshold_source,
                "below": found.below_threshold,
                "relevance_floor": params.relevance_floor,
                "strong": found.strong,
            },
            "purpose": params.purpose,
            "quotas": params.quotas,
            "pool": params.pool,
            "query_expansion": query_plan.query_expansion,
            "planned_queries": list(query_plan.queries),
            "rewrite": digest.status,
            "rewrite_usage": digest.usage,
            "dedup": {
                "turns": turns,
                "cooled": filtered.cooled,
                "turn": session.total_message_count if session is not None else 0,
                "clock": ledger.clock(session) if turns else None,
            },
            "ignored": list(params.ignored),
            "merged": merged,
        }
    )
    if params.deprecated:
        stats["deprecated"] = list(params.deprecated)
    return _result(entries, rendered, digest, stats), timings


def _stats(
    entries: list[dict],
    *,
    candidates: int,
    searched: dict,
    excluded: int,
    kept: int,
    used: int,
    max_tokens: int,
    counter: Counter,
    deduped: int = 0,
) -> dict:
    tier_counts = {tier: 0 for tier in ("full", "overview", "abstract", "uri")}
    for entry in entries:
        tier_counts[entry["detail"]] += 1
    return {
        "candidates": candidates,
        "searched": searched,
        "excluded": excluded,
        "deduped": deduped,
        "returned": len(entries),
        "dropped": kept - len(_served(entries)),
        "max_tokens": max_tokens,
        "used_tokens": used,
        "tier_counts": tier_counts,
        "tokenizer": counter.family,
        "token_counter": counter.name,
        "exact_tokens": counter.exact,
    }


def _result(entries: list[dict], rendered: str, digest: Digest, stats: dict) -> dict:
    return {
        "entries": [
            {
                k: e[k]
                for k in ("uri", "category", "score", "relevance", "date", "detail", "text", "sections")
                if e.get(k) is not None
            }
            for e in entries
        ],
        "rendered": rendered,
        "digest": digest.digest,
        "stats": stats,
    }


def _slot_caps(slot: bootstrap.Slot, budget: int, settings_row, family: str) -> Caps:
    # A declared slot's text is already size-gated to this budget: it is served as declared, whatever its source.
    source_caps = (
        _source_caps(settings_row)
        if not slot.declared
        else {"memory": "full", "resource": "full", "skill": "full", "dir": "overview"}
    )
    return Caps(
        max_tokens=budget,
        per_entry_cap=settings_row.per_entry_cap_tokens,
        source_caps=source_caps,
        detail=slot.detail,
        family=family,
    )


def assemble_bootstrap(*, caller: Caller, params: BootstrapParams, settings_row) -> tuple[dict, Timings]:
    """RFC §3.6: the slots in manifest order, each planned within its share plus what earlier slots left, then
    one fetch and one render for all; no query, no embedding, no LLM, no ledger."""
    timings = Timings()
    counter = counter_for(params.tokenizer)
    family = counter.profile
    session = find_session(caller=caller, session_id=params.session_id) if params.session_id else None
    instructions = bootstrap.load_instructions()
    budgets = bootstrap.slot_budgets(settings_row, params.max_tokens)
    exclude = exclusion(params.exclude_uris, user_id=caller.user_id)
    planned, taken, slots = [], set(), {}
    candidates = excluded = kept = carry = 0
    with timings.stage("slots"):
        for name in bootstrap.SLOTS:
            budget = budgets[name] + carry
            slot = bootstrap.provide_slot(
                name,
                caller=caller,
                session=session,
                settings_row=settings_row,
                instructions=instructions,
                budget=budget,
                family=family,
                taken=taken,
                actor_peer=params.actor_peer,
            )
            taken.update(c.uri for c in slot.candidates)
            filtered = drop_served(slot.candidates, exclude=exclude, cooled={})
            plan = plan_tiers(filtered.kept, _slot_caps(slot, budget, settings_row, family))
            carry = budget - plan.used_tokens
            planned.extend(reversed(plan.entries) if slot.chronological else plan.entries)
            candidates += len(slot.candidates)
            excluded += filtered.excluded
            kept += len(filtered.kept)
            slots[name] = {
                "budget": budget,
                "planned_tokens": plan.used_tokens,
                "candidates": len(slot.candidates),
                "returned": len(plan.entries),
            }
    plan = Plan(entries=planned, dropped=[], used_tokens=sum(e.cost for e in planned))
    with timings.stage("fetch"):
        bodies, _ = fetch_bodies(caller=caller, plan=plan, family=family)
    with timings.stage("render"):
        entries = _rendered_entries(plan, bodies)
        rendered, used = _counted(entries, counter)
    with timings.stage("fit"):
        entries, rendered, used = _fit(entries, rendered, used, params.max_tokens, counter)
    stats = _stats(
        entries,
        candidates=candidates,
        searched={name: s["candidates"] for name, s in slots.items()},
        excluded=excluded,
        kept=kept,
        used=used,
        max_tokens=params.max_tokens,
        counter=counter,
    )
    stats.update(
        {
            "mode": "bootstrap",
            "purpose": None,
            "quotas": None,
            "query_expansion": "off",
            "planned_queries": [],
            "rewrite": "off",
            "rewrite_usage": Digest().usage,
            "dedup": {
                "turns": 0,
                "cooled": 0,
                "turn": session.total_message_count if session is not None else 0,
                "clock": None,
            },
            "ignored": list(params.ignored),
            "slots": slots,
            "instructions": instructions.as_dict(),
        }
    )
    return _result(entries, rendered, Digest(), stats), timings
