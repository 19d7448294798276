"""`POST /api/v1/search/search` and its thin preset `POST /api/v1/search/recall`."""
import logging

from rest_framework import serializers
from rest_framework.decorators import api_view

from assembly import service
from assembly.params import ASSEMBLY_FIELDS
from ovsite.api import parse
from ovsite.envelope import ok
from profiles.models import BUCKETS, TIERS, validate_quotas
from retrieval.views import FindRequest, find_query_from

log = logging.getLogger(__name__)
DETAIL_VALUES = ("auto", *TIERS)


class DetailField(serializers.Field):
    def to_internal_value(self, data):
        if isinstance(data, str) and data in DETAIL_VALUES:
            return data
        if isinstance(data, dict) and data and all(k in BUCKETS and v in DETAIL_VALUES for k, v in data.items()):
            return data
        raise serializers.ValidationError(f"detail is one of {', '.join(DETAIL_VALUES)} or a map of bucket "
                                          f"({', '.join(BUCKETS)}) to one of them")


class QuotasField(serializers.DictField):
    def to_internal_value(self, data):
        try:
            validate_quotas(data)
        except Exception as exc:
            raise serializers.ValidationError(getattr(exc, "messages", [str(exc)])) from exc
        return data


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
    exclude_uris = serializers.ListField(child=serializers.CharField(max_length=1024), required=False,
                                         max_length=200)
    peer_scope = serializers.ChoiceField(choices=["all", "actor"], default="all")
    other_peer_penalty = serializers.FloatField(min_value=0.0, max_value=1.0, default=0.0)
    rewrite = RewriteField(required=False, default=False)
    rewrite_max_bullets = serializers.IntegerField(min_value=1, max_value=20, required=False)

    def validate(self, data):
        data = super().validate(data)
        given = set(self.initial_data)
        if data["mode"] == "bootstrap":
            raise serializers.ValidationError({"mode": ['mode "bootstrap" is not available yet; use "context"']})
        if data["mode"] == "list":
            misplaced = sorted(given & set(ASSEMBLY_FIELDS))
            if misplaced:
                raise serializers.ValidationError({name: ['only allowed with mode="context"'] for name in misplaced})
            return data
        if data["target_uri"]:
            raise serializers.ValidationError({"target_uri": ['not supported with mode="context" (RFC D7); '
                                                              'use filter, tags or since/until']})
        if data["read_content"]:
            raise serializers.ValidationError({"read_content": ['not supported with mode="context"; use detail']})
        return data


def _run(request, body: dict, deprecated: tuple[str, ...] = (), endpoint: str = "search"):
    data = parse(SearchRequest, body)
    result, timings = service.search(caller=request.user, data=data, find_query=find_query_from(data),
                                     given=set(body), deprecated=deprecated,
                                     actor_peer=request.headers.get("X-OpenViking-Actor-Peer", ""),
                                     endpoint=endpoint)
    return result, timings.header()


@api_view(["POST"])
def search_view(request):
    result, headers = _run(request, request.data)
    return ok(result, headers=headers)


@api_view(["POST"])
def recall_view(request):
    """A preset, not a second implementation: defaults and aliases are overlaid, then the same search runs."""
    body, deprecated = service.recall_request(request.data)
    result, headers = _run(request, body, deprecated, endpoint="recall")
    if deprecated:
        log.warning("deprecated /recall fields used: %s", ", ".join(deprecated))
        headers.update({"Deprecation": "true", "Link": '</api/v1/search/search>; rel="successor-version"'})
    return ok(result, headers=headers)
