"""RFC conformance (issue 22): no setting that nothing reads, the operator's search mode as the default, a
query-conditioned digest, one recall event per assembly under its true endpoint (REST and MCP), /recall's schema,
and the deprecation signal of /recall's v1 aliases on the MCP tool."""

import datetime as dt
import re

import pytest
from django.urls import reverse
from django.utils import timezone

from profiles.models import RecallEvent, RetrievalSettings
from tests.mcp_server.test_mcp import mcp_session, text_of
from tests.profiles.test_recall_events import post

SEARCH, RECALL, FIND = "/api/v1/search/search", "/api/v1/search/recall", "/api/v1/search/find"
ME = "viking://user/default/memories"
GHOST = f"{ME}/entities/ghost.md"  # never written: no bullet may cite it


@pytest.fixture
def corpus(api):
    api.write_all(
        {
            "viking://~/memories/profile.md": "# Profile\nName: Ada. Builds ovsite.",
            "viking://~/memories/entities/caddy.md": "Caddy fronts the RTMP ingest on port 1935.",
            "viking://~/memories/events/2026/12/01/deploy.md": "# Summary\nDeployed ovsite 0.3 to production.",
            "viking://~/memories/preferences/reports.md": "Prefers reports that lead with the conclusion.",
        }
    )
    return api


def endpoints() -> list[str]:
    return list(RecallEvent.objects.order_by("id").values_list("endpoint", flat=True))


# Item 6: config that nothing reads; the default search mode


def test_the_settings_page_has_no_rerank_field(operator):
    response = operator.get(reverse("admin:profiles_retrievalsettings_change", args=[1]))
    assert response.status_code == 200
    assert "search_mode" in response.context["adminform"].form.fields
    assert "rerank" not in response.content.decode().lower()


def test_the_settings_search_mode_is_the_default_a_request_overrides(corpus):
    """The RFC's `default_search_mode` is RetrievalSettings.search_mode: a request without search_mode ranks by
    it, one with search_mode by its own."""
    query = {"query": "Caddy", "limit": 10}
    RetrievalSettings.objects.filter(pk=1).update(search_mode="lexical")
    lexical = post(corpus, FIND, query)
    assert [hit["uri"] for hit in lexical["memories"]] == [f"{ME}/entities/caddy.md"]  # the one term match
    assert post(corpus, SEARCH, {**query, "mode": "context"})["stats"]["search_mode"] == "lexical"
    vector = post(corpus, FIND, {**query, "search_mode": "vector"})
    assert len(vector["memories"]) > 1  # nearest neighbours need no shared term
    RetrievalSettings.objects.filter(pk=1).update(search_mode="vector")
    assert post(corpus, FIND, query) == vector
    assert (
        post(corpus, SEARCH, {**query, "mode": "context", "search_mode": "hybrid"})["stats"]["search_mode"] == "hybrid"
    )


# Item 7: the digest is conditioned on the query


def cite_what_the_prompt_names(body) -> str:
    """A bullet per viking:// URI anywhere in the prompt: the served ones and any the query names."""
    prompt = "\n".join(message["content"] for message in body["messages"])
    cited = dict.fromkeys(re.findall(r"viking://[^\s\"<>)]+", prompt))
    return "\n".join(f"- fact ({uri})" for uri in cited)


def rewrite_request(fake_llm) -> str:
    [request] = fake_llm.script.chat_requests()
    return request["messages"][-1]["content"]


def test_the_digest_prompt_carries_the_query_it_digests_for_bounded(corpus, fake_llm):
    fake_llm.script.chat = cite_what_the_prompt_names
    query = "which port does the RTMP ingest use? " + "and more words " * 400
    result = post(corpus, SEARCH, {"query": query, "mode": "context", "rewrite": True})
    assert result["stats"]["rewrite"] == "ok"
    prompt = rewrite_request(fake_llm)
    assert query[:200] in prompt and query.strip() not in prompt  # its head, not all 6,000 characters


def test_a_uri_the_query_names_reaches_the_model_but_no_bullet_may_cite_it(corpus, fake_llm):
    fake_llm.script.chat = cite_what_the_prompt_names
    result = post(
        corpus,
        SEARCH,
        {
            "query": f"what is in {GHOST} about the RTMP ingest?",
            "mode": "context",
            "rewrite": True,
            "rewrite_max_bullets": 20,
        },
    )
    assert GHOST in rewrite_request(fake_llm)
    served = [entry["uri"] for entry in result["entries"]]
    assert served and result["digest"].split("\n") == [f"- fact ({uri})" for uri in served]


# Item 8: one recall event per assembly, under its endpoint


def test_a_rest_bootstrap_is_recorded_as_bootstrap(corpus):
    post(corpus, SEARCH, {"query": "deploy", "mode": "context"})
    result = post(corpus, SEARCH, {"mode": "bootstrap", "max_tokens": 900})
    post(corpus, RECALL, {"query": "deploy"})
    assert endpoints() == ["search", "bootstrap", "recall"]
    event = RecallEvent.objects.get(endpoint="bootstrap")
    assert (event.max_tokens, event.used_tokens, event.returned, event.purpose, event.search_mode) == (
        900,
        result["stats"]["used_tokens"],
        result["stats"]["returned"],
        "",
        "",
    )


MCP_CALLS = [
    ("search", {"query": "how did the deploy go?", "mode": "context", "max_tokens": 300}, "mcp:search"),
    ("recall", {"query": "how did the deploy go?", "max_tokens": 300}, "mcp:recall"),
    ("bootstrap", {"max_tokens": 900}, "mcp:bootstrap"),
    ("search", {"mode": "bootstrap", "max_tokens": 900}, "mcp:bootstrap"),
]


@pytest.mark.parametrize("tool, arguments, endpoint", MCP_CALLS)
def test_an_mcp_assembly_is_recorded_under_its_mcp_endpoint(live_url, corpus, tool, arguments, endpoint):
    async def actions(client):
        return text_of(await client.call_tool(tool, arguments))

    assert mcp_session(live_url, actions)
    assert endpoints() == [endpoint]


def test_the_traffic_dashboard_splits_latency_by_endpoint(operator):
    now = timezone.now()
    for endpoint, latency in (("bootstrap", 2.0), ("bootstrap", 4.0), ("recall", 40.0), ("mcp:recall", 60.0)):
        event = RecallEvent.objects.create(endpoint=endpoint, max_tokens=1600, used_tokens=400, latency_ms=latency)
        RecallEvent.objects.filter(pk=event.pk).update(created_at=now - dt.timedelta(hours=1))
    response = operator.get(reverse("dashboard-recall-traffic"))
    by_endpoint = {row["endpoint"]: row for row in response.context["traffic"]["endpoints"]}
    assert {name: (row["requests"], row["latency_p50"]) for name, row in by_endpoint.items()} == {
        "bootstrap": (2, pytest.approx(3.0)),
        "mcp:recall": (1, pytest.approx(60.0)),
        "recall": (1, pytest.approx(40.0)),
    }
    [chart] = [chart for chart in response.context["charts"] if chart["id"] == "endpoint-latency"]
    assert chart["traces"][0]["x"] == ["bootstrap", "mcp:recall", "recall"]


# Item 10: /recall's schema and the MCP tool's deprecation signal


def test_the_recall_schema_says_its_mode_is_context(api):
    schema = api.client.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    components = schema["components"]["schemas"]

    def body_of(path):
        ref = schema["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]["$ref"]
        return components[ref.rsplit("/", 1)[1]]

    def mode_of(path) -> tuple[str, list[str]]:
        mode = body_of(path)["properties"]["mode"]
        return mode["default"], components[mode["allOf"][0]["$ref"].rsplit("/", 1)[1]]["enum"]

    assert mode_of(RECALL) == ("context", ["context"])
    assert mode_of(SEARCH) == ("list", ["list", "context", "bootstrap"])
    for mode in ("list", "bootstrap"):  # as the schema says: the preset's defaults are context fields
        assert api.post(RECALL, {"query": "deploy", "mode": mode})[0] == 422


def test_the_mcp_recall_tool_flags_v1_aliases_as_rest_does(live_url, corpus):
    v1 = {"query": "how did the deploy go?", "max_chars": 1200, "min_score": 0.1}

    async def actions(client):
        return [await client.call_tool("recall", v1), await client.call_tool("recall", {"query": v1["query"]})]

    flagged, plain = mcp_session(live_url, actions)
    status, rest = corpus.post(RECALL, v1)
    assert corpus.last.headers["Deprecation"] == "true"
    assert text_of(flagged) == rest["result"]["rendered"]
    assert flagged.meta["ovsite/deprecated"] == rest["result"]["stats"]["deprecated"] == ["max_chars", "min_score"]
    assert text_of(plain) and "ovsite/deprecated" not in (plain.meta or {})
