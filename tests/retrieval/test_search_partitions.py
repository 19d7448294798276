"""In a large store, searches in score order walk one partial HNSW index per search partition and merge
(retrieval.search.query.score_order_scans): every searchable node is in exactly one partition, target URIs rule
partitions out without losing a hit, and the merged hits are the nearest of them all, best first. A small store's
walk the whole table's graph."""

import numpy as np
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from core.auth import Caller
from retrieval.embedders import embed_query
from retrieval.models import SEARCH_PARTITIONS, Context
from retrieval.search.query import FindQuery, _target_partitions, partition_predicate, search_partitions
from retrieval.uris import parse_uri
from tests.conftest import hit_uris

CORPUS = {
    "viking://user/default/memories/events/deploy.md": "We deployed the billing service on Friday.",
    "viking://user/default/memories/entities/alice.md": "Alice leads the billing team.",
    "viking://user/default/memories/profile.md": "# Profile\nName: Ada. Works on the billing service.\n",
    "viking://user/default/memories/preferences/editor.md": "Prefers vim with a dark theme for billing code.",
    "viking://user/default/memories/experiences/rollback.md": "A rollback of billing took ten minutes.",
    "viking://agent/bot/memories/experiences/retries.md": "Billing retries need an idempotency key.",
    "viking://resources/handbook/billing.md": "# Billing\nInvoices go out on the first of the month.\n",
    "viking://resources/handbook/deploys.md": "# Deploys\nDeploy the billing service behind a flag.\n",
    "viking://user/default/notes/billing.md": "Ask Alice before changing billing rates.",
    "viking://agent/bot/skills/billing-ops/SKILL.md": (
        "---\nname: billing-ops\ndescription: Run billing operations safely.\n---\nCheck the invoices first.\n"
    ),
}
QUERY = "billing service deploy"
CALLER = Caller(0, "default", "default", "admin")


@pytest.fixture(autouse=True)
def large_store(settings):
    """Whatever the table's size, searches in score order walk the partitions."""
    settings.PARTITIONED_SEARCH_FROM = 0


@pytest.fixture
def corpus(api):
    for uri, text in CORPUS.items():
        api.write(uri, text)


def _partitions_of_each_node() -> dict[str, list[str]]:
    matches = ", ".join(f"({partition_predicate(name).sql}) AS {name}" for name in SEARCH_PARTITIONS)
    with connection.cursor() as cursor:
        cursor.execute(
            f'SELECT "retrieval_context"."uri", {matches} FROM "retrieval_context" '
            'WHERE "retrieval_context"."embedding" IS NOT NULL'
        )
        return {
            uri: [name for name, hit in zip(SEARCH_PARTITIONS, hits, strict=True) if hit]
            for uri, *hits in cursor.fetchall()
        }


def test_every_searchable_node_is_in_one_bucket_the_uri_rules_predict(corpus):
    found = _partitions_of_each_node()
    assert set(CORPUS) <= set(found)  # the documents' sections are searchable too
    for uri, names in found.items():
        assert len(names) == 1 and names[0] != "other", (uri, names)
        # What makes ruling partitions out by target URI safe: the node's own URI predicts its partition.
        assert names[0] in _target_partitions(parse_uri(uri, user_id="default")), (uri, names)


def test_a_node_outside_every_bucket_is_still_found(api, corpus):
    misfiled = "viking://user/default/memories/events/deploy.md"
    Context.objects.filter(uri=misfiled).update(category="misfiled")  # as an edit by hand could leave it
    assert _partitions_of_each_node()[misfiled] == ["other"]
    assert misfiled in hit_uris(api.find(QUERY, limit=20))
    status, answer = api.post("/api/v1/search/search", {"query": QUERY, "mode": "context", "score_threshold": 0})
    assert status == 200, answer
    assert misfiled in [entry["uri"] for entry in answer["result"]["entries"]]


@pytest.mark.parametrize(
    "targets, expected",
    [
        ([], tuple(SEARCH_PARTITIONS)),
        (["viking://"], tuple(SEARCH_PARTITIONS)),
        (["viking://user/default"], tuple(SEARCH_PARTITIONS)),
        (["viking://resources"], ("resources", "other")),
        (["viking://resources/handbook/billing.md"], ("resources", "other")),
        (["viking://user/default/notes"], ("resources", "other")),
        (["viking://~/memories"], ("events", "entities", "preferences", "experiences", "other")),
        (["viking://~/memories/profile.md"], ("entities", "other")),
        (["viking://user/default/memories/events/2026"], ("events", "other")),
        (["viking://agent/bot/skills"], ("skills", "other")),
        (["viking://agent/bot/skills", "viking://~/memories/preferences"], ("preferences", "skills", "other")),
    ],
)
def test_target_uris_rule_partitions_out(targets, expected):
    assert search_partitions(CALLER, FindQuery(query="q", target_uris=targets)) == expected


@pytest.mark.parametrize(
    "target",
    [
        "viking://resources",
        "viking://resources/handbook",
        "viking://user/default",
        "viking://~/memories",
        "viking://~/memories/profile.md",
        "viking://user/default/memories/experiences",
        "viking://agent/bot",
        "viking://agent/bot/skills",
        "viking://user/default/notes",
    ],
)
def test_a_search_under_a_target_finds_what_the_whole_search_finds_there(api, corpus, target):
    everything = hit_uris(api.find(QUERY, limit=100))
    prefix = parse_uri(target, user_id="default").uri
    under = [uri for uri in everything if uri == prefix or uri.startswith(prefix + "/")]
    assert under
    assert sorted(hit_uris(api.find(QUERY, target_uri=target, limit=100))) == sorted(under)


def test_the_merged_hits_are_the_nearest_of_all_partitions_best_first(api, corpus):
    rows = list(Context.objects.filter(embedding__isnull=False).values_list("uri", "embedding"))
    query = np.asarray(embed_query(QUERY), dtype=np.float32)
    exact = sorted(rows, key=lambda row: (-float(np.dot(query, np.asarray(row[1], dtype=np.float32))), row[0]))
    result = api.find(QUERY, limit=4, search_mode="vector")
    hits = sorted(
        (hit for key in ("memories", "resources", "skills") for hit in result[key]), key=lambda hit: -hit["score"]
    )
    assert [hit["uri"] for hit in hits] == [uri for uri, _ in exact[:4]]
    assert len({Context.objects.get(uri=hit["uri"]).context_type for hit in hits}) > 1  # drawn from several


@pytest.mark.parametrize(
    "path, body",
    [
        ("/api/v1/search/find", {"query": QUERY}),
        ("/api/v1/search/search", {"query": QUERY, "mode": "list"}),
        ("/api/v1/search/search", {"query": QUERY, "mode": "context", "score_threshold": 0}),
    ],
)
@pytest.mark.parametrize("partitioned_from, scans", [(0, len(SEARCH_PARTITIONS)), (10**9, 1)])
def test_a_store_below_the_threshold_walks_the_whole_table_graph(
    api, corpus, settings, path, body, partitioned_from, scans
):
    settings.PARTITIONED_SEARCH_FROM = partitioned_from
    with CaptureQueriesContext(connection) as queries:
        status, answer = api.post(path, body)
    assert status == 200, answer
    # The search statement orders by distance; a block's newer-first check compares stored vectors, no query's.
    [statement] = [q["sql"] for q in queries.captured_queries if "ORDER BY distance" in q["sql"]]
    assert statement.count("ORDER BY distance LIMIT") == scans
    assert "viking://user/default/memories/events/deploy.md" in str(answer["result"])
