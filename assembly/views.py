"""`POST /api/v1/search/search` and its thin preset `POST /api/v1/search/recall`."""

import logging

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.decorators import api_view

from assembly import service
from assembly.params import ASSEMBLY_FIELDS, BOOTSTRAP_FIELDS, BOOTSTRAP_IGNORED
from core.api import parse
from core.envelope import ok
from core.openapi import OBJECT, STRING, array, obj, operation
from profiles.models import BUCKETS, TIERS, validate_quotas
from profiles.selectors import current_settings
from retrieval.tokenizers import FAMILIES
from retrieval.views import FIND_RESULT, FindRequest, find_query_from

log = logging.getLogger(__name__)
SEARCH_DESCRIPTION = """`mode`: `list` (ranked hits, the /find shape plus `query_plan`), `context` (an assembled,
token-budgeted block: `{entries, rendered, digest, stats}`) or `bootstrap` (the session-start block in the same
shape, from the declared slots instructions, identity, continuity, working_state and listing: no query; takes
`session_id`, `max_tokens`, `exclude_uris` and `tokenizer`; the fields that shape a retrieval are 422 when sent
with a value, and `limit`, `node_limit`, `level`, `time_field` and `query_expansion` are ignored and listed in
`stats.ignored`; `stats.slots` gives each slot's budget and `stats.instructions` the template's version and
`content_hash`)."""
DETAIL_VALUES = ("auto", *TIERS)


@extend_schema_field(
    {
        "oneOf": [
            {"type": "string", "enum": list(DETAIL_VALUES)},
            {
                "type": "object",
                "propertyNames": {"enum": list(BUCKETS)},
                "additionalProperties": {"type": "string", "enum": list(DETAIL_VALUES)},
            },
        ]
    }
)
class DetailField(serializers.Field):
    def to_internal_value(self, data):
        if isinstance(data, str) and data in DETAIL_VALUES:
            return data
        if isinstance(data, dict) and data and all(k in BUCKETS and v in DETAIL_VALUES for k, v in data.items()):
            return data
        raise serializers.ValidationError(
            f"detail is one of {', '.join(DETAIL_VALUES)} or a map of bucket ({', '.join(BUCKETS)}) to one of them"
        )


class QuotasField(serializers.DictField):
    def to_internal_value(self, data):
        try:
            validate_quotas(data)
        except Exception as exc:
            raise serializers.ValidationError(getattr(exc, "messages", [str(exc)])) from exc
        return data


@extend_schema_field({"oneOf": [{"type": "boolean"}, {"type": "string", "enum": ["compact"]}]})
class RenderField(serializers.Field):
    """Schema only: `service.recall_request` checks and translates /recall's `render` alias."""


@extend_schema_field({"oneOf": [{"type": "boolean"}, {"type": "string", "enum": ["auto"]}]})
class RewriteField(serializers.Field):
    def to_internal_value(self, data):
        if data in (True, False, "auto"):
            return data
        raise serializers.ValidationError('rewrite is true, false or "auto"')


class SearchRequest(FindRequest):
    session_id = serializers.CharField(required=False, allow_null=True, allow_blank=True, max_length=128)
    mode = serializers.ChoiceField(choices=["list", "context", "bootstrap"], default="list")
    query_expansion = serializers.ChoiceField(choices=["auto", "off"], default="auto")
    max_tokens = serializers.IntegerField(min_value=64, max_value=32000, required=False)
    quotas = QuotasField(required=False)
    purpose = serializers.SlugField(required=False, allow_null=True, max_length=32)
    detail = DetailField(required=False)
    dedup_turns = serializers.IntegerField(min_value=0, max_value=100, default=0)
    exclude_uris = serializers.ListField(child=serializers.CharField(max_length=1024), required=False, max_length=200)
    peer_scope = serializers.ChoiceField(choices=["all", "actor"], default="all")
    other_peer_penalty = serializers.FloatField(min_value=0.0, max_value=1.0, default=0.0)
    rewrite = RewriteField(required=False, default=False)
    rewrite_max_bullets = serializers.IntegerField(min_value=1, max_value=20, required=False)
    tokenizer = serializers.ChoiceField(
        choices=FAMILIES,
        required=False,
        error_messages={"invalid_choice": f'"{{input}}" is not a known tokenizer; one of {", ".join(FAMILIES)}'},
        help_text="The tokenizer family max_tokens is counted in, exactly (estimate: the estimator, for other "
        "models); default: the purpose's, else the operator's setting (o200k).",
    )

    def validate(self, data):
        if data["mode"] == "bootstrap":
            return self._validate_bootstrap(data)
        data = super().validate(data)
        given = set(self.initial_data)
        if data["mode"] == "list":
            misplaced = sorted(given & set(ASSEMBLY_FIELDS))
            if misplaced:
                raise serializers.ValidationError({name: ['only allowed with mode="context"'] for name in misplaced})
            return data
        if data["target_uri"]:
            raise serializers.ValidationError(
                {"target_uri": ['not supported with mode="context" (RFC D7); use filter, tags or since/until']}
            )
        if data["read_content"]:
            raise serializers.ValidationError({"read_content": ['not supported with mode="context"; use detail']})
        return data

    def _validate_bootstrap(self, data):
        """RFC §3.6: no query. A field that would shape a retrieval or its ranking is refused when sent with a
        value (null, "", [], {}, false and 0 count as not sent, as the SDK sends `target_uri: ""`); the
        BOOTSTRAP_IGNORED fields are accepted and listed in `stats.ignored`."""
        misplaced = sorted(
            name
            for name, value in self.initial_data.items()
            if name not in BOOTSTRAP_FIELDS + BOOTSTRAP_IGNORED and value not in (None, "", [], {}, False, 0)
        )
        if misplaced:
            raise serializers.ValidationError(
                {
                    name: [
                        'not allowed with mode="bootstrap" (it takes session_id, '
                        "max_tokens, exclude_uris and tokenizer)"
                    ]
                    for name in misplaced
                }
            )
        return data


class RecallRequest(SearchRequest):
    """/recall's body for the schema: the /search body in context mode plus the v1 aliases, which
    `service.recall_request` translates before the /search validation runs."""

    # The preset's mode, and its only one: its purpose and threshold defaults are context fields (422 in list mode).
    mode = serializers.ChoiceField(choices=["context"], default="context")
    max_chars = serializers.IntegerField(min_value=1, required=False, help_text="deprecated: max_tokens × 4")
    min_score = serializers.FloatField(
        min_value=0.0, max_value=1.0, required=False, help_text="deprecated: score_threshold"
    )
    render = RenderField(
        required=False, help_text='deprecated: true is detail "auto", false or "compact" is detail "abstract"'
    )


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


def run_search(
    *,
    caller,
    body,
    deprecated: tuple[str, ...] = (),
    actor_peer: str = "",
    endpoint: str = "search",
    mcp: bool = False,
    settings_row=None,
    after_response: list | None = None,
    preset: frozenset[str] = frozenset(),
):
    """A /search request body → (result, timings); the REST views and the MCP tools (`mcp`) both come through
    here. The REST views pass `after_response` (see service.search); /recall the fields its `preset` filled in."""
    data = parse(SearchRequest, body)
    return service.search(
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
    *, caller, body, actor_peer: str = "", mcp: bool = False, after_response: list | None = None, settings_row=None
):
    """A preset, not a second implementation: defaults and aliases are overlaid, then the same search runs."""
    settings_row = settings_row or current_settings()  # one read serves the preset's defaults and the search
    body, deprecated, preset = service.recall_request(body, settings_row)
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
    description='A preset of /search mode="context" (DESIGN.md §4): purpose, score_threshold and, '
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
