"""The /search and /recall service functions: one orchestration behind both entry points (RFC §3.1)."""

import logging
import time
from functools import partial

from assembly.expansion import SessionContext, embed_queries, plan_queries
from assembly.params import resolve_bootstrap_params, resolve_context_params
from assembly.pipeline import assemble_bootstrap, assemble_context
from assembly.requests import SearchRequest
from core.api import Timings, parse
from core.auth import Caller
from core.errors import InvalidArgument
from profiles.selectors import current_settings, purpose_profile
from profiles.services import event_request, record_recall_event
from retrieval.requests import find_query_from
from retrieval.search.find import find, group_hits, ranked_hits
from retrieval.search.query import FindQuery, scope_predicate
from retrieval.search.statements import SearchQuery
from sessions_app.selectors import find_session

V1_QUOTA_KEYS = {"events", "entities", "preferences", "experiences"}

log = logging.getLogger("ovsite")


def run_search(
    *,
    caller: Caller,
    body,
    deprecated: tuple[str, ...] = (),
    actor_peer: str = "",
    endpoint: str = "search",
    mcp: bool = False,
    settings_row=None,
    after_response: list | None = None,
    preset: frozenset[str] = frozenset(),
) -> tuple[dict, Timings]:
    """A /search request body → (result, timings); the REST views and the MCP tools (`mcp`) both come through
    here. The REST views pass `after_response` (see `search`); /recall the fields its `preset` filled in."""
    data = parse(SearchRequest, body)
    return search(
        caller=caller,
        data=data,
        find_query=find_query_from(data),
        given=set(body),
        deprecated=deprecated,
        actor_peer=actor_peer,
        endpoint=endpoint,
        mcp=mcp,
        settings_row=settings_row,
        after_response=after_response,
        preset=preset,
    )


def run_recall(
    *,
    caller: Caller,
    body,
    actor_peer: str = "",
    mcp: bool = False,
    after_response: list | None = None,
    settings_row=None,
) -> tuple[dict, Timings, tuple[str, ...]]:
    """A preset, not a second implementation: defaults and aliases are overlaid, then the same search runs.
    Returns the result, the timings and the deprecated v1 aliases the body used."""
    settings_row = settings_row or current_settings()  # one read serves the preset's defaults and the search
    body, deprecated, preset = recall_request(body, settings_row)
    result, timings = run_search(
        caller=caller,
        body=body,
        deprecated=deprecated,
        actor_peer=actor_peer,
        endpoint="recall",
        mcp=mcp,
        settings_row=settings_row,
        after_response=after_response,
        preset=preset,
    )
    if deprecated:  # RFC §3.1: a server-side warning, whichever transport brought the aliases
        log.warning("deprecated /recall fields used: %s", ", ".join(deprecated))
    return result, timings, deprecated


def search(
    *,
    caller: Caller,
    data: dict,
    find_query,
    given: set[str],
    deprecated: tuple[str, ...] = (),
    actor_peer: str = "",
    endpoint: str = "search",
    mcp: bool = False,
    settings_row=None,
    after_response: list | None = None,
    preset: frozenset[str] = frozenset(),
) -> tuple[dict, Timings]:
    """`endpoint` (`search` or `recall`) names the entry point in the recall event an assembly records: the mode
    for a bootstrap, prefixed `mcp:` for an MCP tool call. Given `after_response`, the recording is appended to it
    as a job for once the response is sent; otherwise (MCP) it is recorded here."""
    if data["mode"] == "list":
        return _list(
            caller=caller,
            spec=find_query,
            session_id=data.get("session_id"),
            query_expansion=data["query_expansion"],
            settings_row=settings_row,
        )
    started = time.perf_counter()
    settings_row = settings_row or current_settings()  # /recall has read it already for its defaults
    if data["mode"] == "bootstrap":
        params = resolve_bootstrap_params(data, given=given, settings_row=settings_row, actor_peer=actor_peer)
        result, timings = assemble_bootstrap(caller=caller, params=params, settings_row=settings_row)
        _record(
            caller=caller,
            result=result,
            timings=timings,
            endpoint=f"{'mcp:' if mcp else ''}bootstrap",
            started=started,
            settings_row=settings_row,
            after_response=after_response,
            request=(data, given - preset, actor_peer),
        )
        return result, timings
    profile, warnings = None, []
    if data.get("purpose"):
        profile = purpose_profile(data["purpose"])
        if profile is None and "purpose" in preset:
            # The operator's preset names it, not the client: every auto-recall would fail, so it is served in
            # score order and says why (docs/retrieval.md, "Choosing a purpose").
            warnings.append(
                f"recall_purpose {data['purpose']!r} is not an enabled purpose profile; served without a purpose"
            )
            log.warning("/recall: %s", warnings[-1])
        elif profile is None:
            raise InvalidArgument(f"purpose {data['purpose']!r} is not an enabled purpose profile", loc=["purpose"])
    params = resolve_context_params(
        data,
        find=find_query,
        given=given,
        settings_row=settings_row,
        profile=profile,
        deprecated=deprecated,
        actor_peer=actor_peer,
        preset=preset,
    )
    result, timings = assemble_context(caller=caller, params=params, settings_row=settings_row)
    if warnings:
        result["stats"]["warnings"] = warnings
    _record(
        caller=caller,
        result=result,
        timings=timings,
        endpoint=f"{'mcp:' if mcp else ''}{endpoint}",
        started=started,
        settings_row=settings_row,
        after_response=after_response,
        request=(data, given - preset, actor_peer),
    )
    return result, timings


def _record(
    *,
    caller: Caller,
    result: dict,
    timings: Timings,
    endpoint: str,
    started: float,
    settings_row,
    after_response: list | None,
    request: tuple[dict, set[str], str],
) -> None:
    """The assembly's recall event, now or (REST) once the response is sent; `request` is the validated body, the
    fields the client sent and the actor peer."""
    if not settings_row.record_recall_events:
        return
    data, sent, actor_peer = request
    record = partial(
        record_recall_event,
        endpoint=endpoint,
        account_id=caller.account_id,
        stats=result["stats"],
        latency_ms=(time.perf_counter() - started) * 1000,
        request=event_request(caller=caller, data=data, sent=sent, actor_peer=actor_peer, settings_row=settings_row),
        entries=result["entries"],
    )
    if after_response is None:
        with timings.stage("record"):
            record()
    else:
        after_response.append(record)


def _list(
    *, caller: Caller, spec: FindQuery, session_id: str | None, query_expansion: str, settings_row=None
) -> tuple[dict, Timings]:
    """The /find result, or with a session one search of all the expanded queries (each hit at its best), plus
    `query_plan`; `settings_row` when the request has read it (the rate limit), else it is read once here.
    Without a session_id it is /find itself, byte for byte (docs/design.md §4)."""
    timings = Timings()
    if not session_id:
        with timings.stage("find"):
            return find(caller=caller, spec=spec, settings_row=settings_row), timings
    scope = scope_predicate(caller, spec)  # a bad filter is refused before the LLM call is paid for
    settings_row = settings_row or current_settings()
    with timings.stage("expansion"):
        plan = plan_queries(
            query=spec.query,
            mode=query_expansion,
            context=SessionContext(find_session(caller=caller, session_id=session_id)),
            settings_row=settings_row,
            account_id=caller.account_id,
        )
    with timings.stage("find"):
        if len(plan.queries) == 1:
            result = find(caller=caller, spec=spec, settings_row=settings_row)
        else:
            queries = [
                SearchQuery(text, vector)
                for text, vector in zip(plan.queries, embed_queries(plan.queries), strict=True)
            ]
            result = group_hits(ranked_hits(caller, spec, queries, scope, settings_row))
    result["query_plan"] = plan.as_dict()
    return result, timings


def recall_request(raw: dict, settings_row) -> tuple[dict, tuple[str, ...], frozenset[str]]:
    """/recall's whole difference from context mode: its four defaults and the v1 aliases (RFC §3.1). Returns the
    body, the aliases used, and the fields the preset filled in (a preset threshold brings the relevance floor)."""
    if not isinstance(raw, dict):
        return raw, (), frozenset()  # the request validation answers 422 for a non-object body
    body = dict(raw)
    deprecated = []
    if "max_chars" in body:
        deprecated.append("max_chars")
        max_chars = body.pop("max_chars")
        if not isinstance(max_chars, int) or isinstance(max_chars, bool) or max_chars < 1:
            raise InvalidArgument("max_chars must be a positive integer", loc=["max_chars"])
        body.setdefault("max_tokens", min(32000, max(64, max_chars // 4)))
    if "min_score" in body:
        deprecated.append("min_score")
        body.setdefault("score_threshold", body.pop("min_score"))
    if "render" in body:
        deprecated.append("render")
        render = body.pop("render")
        if render not in (True, False, "compact"):
            raise InvalidArgument('render must be true, false or "compact"', loc=["render"])
        body.setdefault("detail", "auto" if render is True else "abstract")
    quotas = body.get("quotas")
    if isinstance(quotas, dict) and quotas and set(quotas) <= V1_QUOTA_KEYS:
        # v1 quotas named memory buckets only: recall stayed in the memory domain.
        deprecated.append("quotas(v1)")
        body["quotas"] = {"resources": 0, "skills": 0, **quotas}
    defaults = {
        "mode": "context",
        "purpose": settings_row.recall_purpose,
        "score_threshold": settings_row.recall_score_threshold,
    }
    if body.get("session_id"):
        defaults["dedup_turns"] = settings_row.recall_dedup_turns
    preset = frozenset(name for name in defaults if name not in body)
    return {**defaults, **body}, tuple(deprecated), preset
