"""The /search and /recall service functions: one orchestration behind both entry points (RFC §3.1)."""
from assembly.params import resolve_context_params
from assembly.pipeline import assemble_context
from ovsite.api import Timings
from ovsite.auth import Caller
from ovsite.errors import InvalidArgument
from profiles.selectors import current_settings, purpose_profile
from retrieval.find import find

V1_QUOTA_KEYS = {"events", "entities", "preferences", "experiences"}


def search(*, caller: Caller, data: dict, find_query, given: set[str], deprecated: tuple[str, ...] = (),
           actor_peer: str = "") -> tuple[dict, Timings]:
    if data["mode"] == "list":
        timings = Timings()
        with timings.stage("find"):
            result = find(caller=caller, spec=find_query)
        if data.get("session_id"):
            # Query expansion is the LLM layer's; until it is configured the plan is the query itself.
            result["query_plan"] = {"queries": [find_query.query], "query_expansion": "off"}
        return result, timings
    settings_row = current_settings()
    profile = None
    if data.get("purpose"):
        profile = purpose_profile(data["purpose"])
        if profile is None:
            raise InvalidArgument(f"purpose {data['purpose']!r} is not an enabled purpose profile", loc=["purpose"])
    params = resolve_context_params(data, find=find_query, given=given, settings_row=settings_row, profile=profile,
                                    deprecated=deprecated, actor_peer=actor_peer)
    return assemble_context(caller=caller, params=params, settings_row=settings_row)


def recall_request(raw: dict) -> tuple[dict, tuple[str, ...]]:
    """/recall's whole difference from context mode: its four defaults and the v1 aliases (RFC §3.1)."""
    if not isinstance(raw, dict):
        return raw, ()  # the request validation answers 422 for a non-object body
    body = dict(raw)
    settings_row = current_settings()
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
    body.setdefault("mode", "context")
    body.setdefault("purpose", settings_row.recall_purpose)
    body.setdefault("score_threshold", settings_row.recall_score_threshold)
    if body.get("session_id"):
        body.setdefault("dedup_turns", settings_row.recall_dedup_turns)
    return body, tuple(deprecated)

