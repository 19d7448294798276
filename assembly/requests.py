"""The wire contract of `POST /api/v1/search/search` and its preset `/recall`: the request serializers that the REST
views and the MCP tools both validate with."""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from assembly.params import ASSEMBLY_FIELDS, BOOTSTRAP_FIELDS, BOOTSTRAP_IGNORED
from profiles.models import BUCKETS, TIERS, validate_quotas
from retrieval.requests import FindRequest
from retrieval.tokenizers import FAMILIES

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
