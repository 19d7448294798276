"""`POST /api/v1/search/search` and its thin preset `POST /api/v1/search/recall`: parse the headers, call
`assembly.service` (which validates the body with assembly/requests.py: /recall translates its aliases first), wrap
in the envelope."""

from rest_framework.decorators import api_view

from assembly.requests import RecallRequest, SearchRequest
from assembly.service import run_recall, run_search
from core.envelope import ok
from core.openapi import OBJECT, STRING, array, obj, operation
from profiles.models import TIERS
from retrieval.requests import FIND_RESULT

SEARCH_DESCRIPTION = """`mode`: `list` (ranked hits, the /find shape plus `query_plan`), `context` (an assembled,
token-budgeted block: `{entries, rendered, digest, stats}`) or `bootstrap` (the session-start block in the same
shape, from the declared slots instructions, identity, continuity, working_state and listing: no query; takes
`session_id`, `max_tokens`, `exclude_uris` and `tokenizer`; the fields that shape a retrieval are 422 when sent
with a value, and `limit`, `node_limit`, `level`, `time_field` and `query_expansion` are ignored and listed in
`stats.ignored`; `stats.slots` gives each slot's budget and `stats.instructions` the template's version and
`content_hash`)."""

ENTRY = obj(
    {
        "uri": STRING,
        "category": STRING,
        "score": {"type": "number"},
        "detail": {"type": "string", "enum": [*TIERS, "uri"]},
        "text": STRING,
    }
)
CONTEXT_RESULT = obj({"entries": array(ENTRY), "rendered": STRING, "digest": STRING, "stats": OBJECT})
LIST_RESULT = obj(FIND_RESULT["properties"], {"query_plan": obj({"queries": array(STRING), "query_expansion": STRING})})
SEARCH_RESULT = {"oneOf": [LIST_RESULT, CONTEXT_RESULT]}


def _actor_peer(request) -> str:
    return request.headers.get("X-OpenViking-Actor-Peer", "")


def _read_settings(request):
    """The settings row if this request has read it already (the per-key rate limit does), else None."""
    return getattr(request, "retrieval_settings", None)


@operation(request=SearchRequest, result=SEARCH_RESULT, errors=(400,), description=SEARCH_DESCRIPTION)
@api_view(["POST"])
def search_view(request):
    after = []  # the recall event is written once the answer is sent
    result, timings = run_search(
        caller=request.user,
        body=request.data,
        actor_peer=_actor_peer(request),
        after_response=after,
        settings_row=_read_settings(request),
    )
    return ok(result, headers=timings.header(), after=after)


@operation(
    request=RecallRequest,
    result=SEARCH_RESULT,
    errors=(400,),
    description='A preset of /search mode="context" (docs/design.md §4): purpose, score_threshold and, '
    "with a session_id, dedup_turns default to the operator's recall settings.",
)
@api_view(["POST"])
def recall_view(request):
    after = []
    result, timings, deprecated = run_recall(
        caller=request.user,
        body=request.data,
        actor_peer=_actor_peer(request),
        after_response=after,
        settings_row=_read_settings(request),
    )
    headers = timings.header()
    if deprecated:
        headers.update({"Deprecation": "true", "Link": '</api/v1/search/search>; rel="successor-version"'})
    return ok(result, headers=headers, after=after)
