"""Hybrid retrieval, scores on OpenViking's scale, thresholds and the budget-sized pool (docs/retrieval.md)."""

import io

import pytest
from django.core.management import call_command
from django.db import connection

from profiles.models import RetrievalSettings
from retrieval.search.fusion import (
    CROSS_SCRIPT_CHANCE,
    Ranking,
    above_threshold,
    fuse,
    lexical_reach,
    relevance_cut,
    score_of,
)
from tests.conftest import hit_uris

SEARCH, RECALL, FIND = "/api/v1/search/search", "/api/v1/search/recall", "/api/v1/search/find"
EVENTS = "viking://~/memories/events/2026/11"


def lexical(text: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT ovsite_lexical(%s)", [text])
        return cursor.fetchone()[0]


def lexemes(text: str) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT tsvector_to_array(to_tsvector('english', ovsite_lexical(%s)))", [text])
        return cursor.fetchone()[0]


def row(uri, distance, coverage=None, lexical_rank=None, query=0, bucket="all", abstract=""):
    return {
        "uri": uri,
        "distance": distance,
        "coverage": coverage,
        "lexical_rank": lexical_rank,
        "query": query,
        "bucket": bucket,
        "abstract": abstract,
    }


# CJK tokenisation --------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_chinese_runs_become_overlapping_character_pairs():
    assert set(lexemes("用户喜欢黑咖啡")) == {"用户", "户喜", "喜欢", "欢黑", "黑咖", "咖啡"}


@pytest.mark.django_db
def test_japanese_and_korean_runs_are_paired_and_latin_words_are_stemmed_beside_them():
    assert {"こん", "んに", "にち", "ちは", "안녕", "녕하", "deploy", "server"} <= set(
        lexemes("こんにちは 안녕하 deployed the servers")
    )


@pytest.mark.django_db
def test_a_lone_cjk_character_stays_a_term_and_text_without_cjk_is_unchanged():
    assert "猫" in lexemes("a 猫 and a dog")
    assert lexical("plain English text").strip() == "plain English text"


def test_a_chinese_question_finds_the_chinese_memory_that_shares_its_words(api):
    api.write("viking://~/memories/entities/billing.md", "计费团队的频道是 #billing-oncall，负责发票和退款。")
    api.write("viking://~/memories/entities/search.md", "搜索组负责索引和排序，每周二开会。")
    result = api.find("计费团队在哪个频道？", search_mode="lexical")
    assert hit_uris(result)[0].endswith("/billing.md")


def test_a_cross_script_memory_is_not_pushed_out_by_same_script_word_matches(api):
    """Issue 37, shape 2, on the real embedder: the Chinese memory that answers an English question shares no word
    with it, while ten English memories share one each ("editor", "coding", "use"). Before coverage counted only
    where words can be shared, its fused value was half its cosine (0.20) and the ten pushed it out of the five
    best; ranked by its vector where lexical coverage cannot reach, it is first, as in vector mode."""
    others = [
        "The newsletter editor retired in May after ten years.",
        "The coding dojo meets on Fridays at the library.",
        "We use Terraform for the office network.",
        "Which bakery sells rye bread on Sundays?",
        "The video editor crashed twice while exporting the wedding film.",
        "Coding bootcamps raised their prices again.",
        "I use a standing desk in the afternoons.",
        "The magazine's editor-in-chief wrote about city parks.",
        "For the trip we use the blue suitcase.",
        "Coding standards for the data team were published on the wiki.",
    ]
    api.write_all(
        {
            "viking://~/memories/preferences/editor.md": (
                "用户写代码时一直用同一个编辑器：深色主题，开启自动保存，快捷键按自己的习惯改过。"
            ),
            **{f"viking://~/memories/entities/other-{n:02}.md": text for n, text in enumerate(others)},
        }
    )
    for mode in ("vector", "hybrid"):
        found = api.find("Which editor do I use for coding?", search_mode=mode, limit=5)
        assert hit_uris(found)[0].endswith("/editor.md"), mode
    relevances = [hit["relevance"] for hit in found["memories"]]
    assert relevances == sorted(relevances, reverse=True)


# the lexical side and the modes ------------------------------------------------------------------------------


@pytest.fixture
def names(api):
    api.write_all(
        {
            f"{EVENTS}/01/a.md": "[2026-11-01] Caroline: I finally adopted a beagle from the Riverside shelter.",
            f"{EVENTS}/02/b.md": "[2026-11-02] Melanie: The weather was lovely, we walked by the lake all day.",
            f"{EVENTS}/03/c.md": "[2026-11-03] Melanie: Work has been busy with the quarterly planning.",
            f"{EVENTS}/04/d.md": "[2026-11-04] Caroline: My booking code for the flight is QX7R2P.",
        }
    )
    return api


def test_an_exact_code_is_found_first_in_hybrid_and_lexical_mode(names):
    for mode in ("hybrid", "lexical"):
        assert hit_uris(names.find("what was the booking code QX7R2P?", search_mode=mode))[0].endswith("/d.md")


def test_lexical_mode_returns_only_nodes_that_share_a_term(names):
    assert [uri.rsplit("/", 1)[1] for uri in hit_uris(names.find("beagle shelter", search_mode="lexical"))] == ["a.md"]


def test_vector_mode_equals_the_nearest_by_cosine(names):
    found = names.find("a walk by the water", search_mode="vector", limit=4)
    scores = [hit["score"] for hit in found["memories"]]
    assert scores == sorted(scores, reverse=True) and len(scores) == 4


def test_the_operator_default_mode_applies_and_context_stats_say_which_ran(names):
    status, body = names.post(SEARCH, {"query": "beagle", "mode": "context"})
    assert body["result"]["stats"]["search_mode"] == "hybrid"
    RetrievalSettings.objects.update_or_create(pk=1, defaults={"search_mode": "lexical"})
    status, body = names.post(SEARCH, {"query": "beagle", "mode": "context"})
    assert status == 200 and body["result"]["stats"]["search_mode"] == "lexical"
    status, body = names.post(SEARCH, {"query": "beagle", "mode": "context", "search_mode": "vector"})
    assert body["result"]["stats"]["search_mode"] == "vector"


@pytest.mark.parametrize("path, extra", [(FIND, {}), (SEARCH, {"mode": "context"}), (RECALL, {})])
def test_an_unknown_search_mode_is_a_422_naming_the_field(api, path, extra):
    status, body = api.post(path, {"query": "x", "search_mode": "semantic", **extra})
    assert status == 422 and body["error"]["code"] == "INVALID_ARGUMENT"
    assert body["error"]["details"]["validation_errors"][0]["loc"][-1] == "search_mode"


def test_search_mode_is_refused_in_bootstrap_mode(api):
    status, body = api.post(SEARCH, {"mode": "bootstrap", "search_mode": "hybrid"})
    assert status == 422 and "search_mode" in str(body["error"]["details"])


# scores ------------------------------------------------------------------------------------------------------


def test_scores_are_one_plus_cosine_over_two(api):
    import numpy as np

    from retrieval.embedders import embed_query
    from retrieval.models import Context

    api.write("viking://~/memories/preferences/coffee.md", "Black coffee, no sugar.")
    [hit] = api.find("what does the user drink?", search_mode="vector", limit=1)["memories"]
    stored = Context.objects.get(uri=hit["uri"]).embedding
    cosine = float(np.dot(np.asarray(stored, dtype=np.float32), embed_query("what does the user drink?")))
    assert hit["score"] == pytest.approx((1 + cosine) / 2, abs=1e-5)


def test_score_of_clamps_to_the_unit_interval():
    assert (score_of(0.0), score_of(1.0), score_of(2.0), score_of(2.5)) == (1.0, 0.5, 0.0, 0.0)


def test_a_threshold_is_strict_as_in_openviking():
    rows = [{"score": 0.6, "coverage": 0.0}, {"score": 0.7, "coverage": 0.0}]
    assert above_threshold(rows, 0.6, Ranking("hybrid", 0.5)) == ([rows[1]], 1)


def test_a_rescue_coverage_lets_a_strong_lexical_match_pass_a_threshold():
    rows = [{"score": 0.52, "coverage": 0.8}, {"score": 0.52, "coverage": 0.2}]
    assert above_threshold(rows, 0.6, Ranking("hybrid", 0.5, rescue_coverage=0.5)) == ([rows[0]], 1)


# the fusion (pure) -------------------------------------------------------------------------------------------


def test_hybrid_fusion_weighs_cosine_and_coverage():
    rows = [row("a", 0.6, coverage=0.0), row("b", 0.9, coverage=0.9, lexical_rank=3.0)]
    # a: 0.5 × 0.4 = 0.20; b: 0.5 × 0.1 + 0.5 × 0.9 = 0.50
    assert [r["uri"] for r in fuse(rows, Ranking("hybrid", 0.5), grouped=False)] == ["b", "a"]
    assert [r["uri"] for r in fuse(rows, Ranking("hybrid", 0.0), grouped=False)] == ["a", "b"]


def test_a_weak_common_word_match_does_not_outrank_a_better_vector_match():
    """Reciprocal rank fusion would lift b (it is in the lexical list) over a; the weighted sum does not."""
    rows = [row("a", 0.55, coverage=0.0), row("b", 0.7, coverage=0.05), row("b", 0.7, coverage=0.05, lexical_rank=0.4)]
    assert [r["uri"] for r in fuse(rows, Ranking("hybrid", 0.5), grouped=False)] == ["a", "b"]


def test_a_node_found_by_both_sides_and_several_queries_is_one_row_at_its_best():
    rows = [
        row("a", 0.8, coverage=0.2),
        row("a", 0.8, coverage=0.2, lexical_rank=1.0),
        row("a", 0.4, coverage=0.5, query=1),
    ]
    [fused] = fuse(rows, Ranking("hybrid", 0.5), grouped=False)
    assert fused["score"] == score_of(0.4) and fused["coverage"] == 0.5 and fused["lexical_rank"] == 1.0
    assert fused["fused"] == pytest.approx(0.5 * 0.6 + 0.5 * 0.5)


def test_lexical_mode_orders_by_bm25_and_vector_mode_by_cosine():
    rows = [row("a", 0.2, coverage=0.1, lexical_rank=1.0), row("b", 0.8, coverage=0.9, lexical_rank=5.0)]
    assert [r["uri"] for r in fuse(rows, Ranking("lexical", 0.5), grouped=False)] == ["b", "a"]
    assert [r["uri"] for r in fuse(rows, Ranking("vector", 0.5), grouped=False)] == ["a", "b"]


def test_grouped_fusion_keeps_a_node_per_bucket():
    rows = [row("a", 0.2, bucket="events"), row("b", 0.3, bucket="entities")]
    assert {r["bucket"] for r in fuse(rows, Ranking("vector", 0.0), grouped=True)} == {"events", "entities"}


def test_lexical_reach_is_how_far_a_query_and_a_node_can_share_words():
    assert lexical_reach("Which editor do I use?", "The user edits in Neovim with LazyVim.") == 1.0
    assert lexical_reach("Which editor do I use?", "用户平时用 Neovim 写代码，配置放在 dotfiles 仓库。") < 0.3
    assert lexical_reach("Which editor do I use?", "用户平时写代码用的编辑器是它。") == 0.0
    assert lexical_reach("我用什么编辑器？", "The user edits in Neovim.") == 0.0
    assert 0.3 < lexical_reach("部署 staging 用哪个 namespace？", "部署到预发环境的步骤。") < 0.7
    assert lexical_reach("2026-03-02?", "用户的生日。") == 1.0  # no words to judge by: coverage counts as ever


def test_a_cross_script_node_is_ranked_by_its_vector_not_pushed_down_by_same_script_word_matches():
    """Issue 37, shape 2: an English question, the Chinese memory that answers it (cosine 0.62, no shared word)
    and an English node sharing two words with the question (cosine 0.45, coverage 0.5). Coverage that cannot be
    there counts as the cosine: the memory ranks first, as vector mode ranks it."""
    rows = [
        row("zh", 0.38, coverage=0.0, abstract="用户平时写代码用的编辑器是它，快捷键自己配过。"),
        row("en", 0.55, coverage=0.5, lexical_rank=2.0, abstract="The editor team's quarterly offsite notes."),
    ]
    hybrid = fuse(rows, Ranking("hybrid", 0.5), grouped=False, texts=("Which editor do I use?",))
    assert [r["uri"] for r in hybrid] == ["zh", "en"]
    assert hybrid[0]["fused"] == pytest.approx(0.62)
    assert hybrid[0]["floor_scale"] == pytest.approx(2.0 * CROSS_SCRIPT_CHANCE)
    assert hybrid[1]["fused"] == pytest.approx(0.5 * 0.45 + 0.5 * 0.5) and hybrid[1]["floor_scale"] == 1.0
    # Without the query's text (a caller that passes none) coverage counts everywhere, as before.
    assert [r["uri"] for r in fuse(rows, Ranking("hybrid", 0.5), grouped=False)] == ["en", "zh"]


def test_a_cross_script_row_is_evidence_from_the_chance_level_of_cross_script_pairs():
    """Random pairs in two scripts score lower under the packaged embedder than pairs in one: an English question's
    Chinese answer at cosine 0.36 (the Chinese conversations' English questions: 0.32–0.39 where context answered
    them and /recall judged them below the floor) is evidence; at 0.30, where the suites' unanswerable questions'
    best cross-script rows sit, it is not."""
    query = ("When did Jianing start her new job in Chengdu?",)
    for cosine, strong in ((0.36, True), (0.30, False)):
        rows = fuse(
            [row("zh", 1.0 - cosine, coverage=0.0, abstract="佳宁说她下周一去成都的新公司报到。")],
            Ranking("hybrid", 0.5),
            grouped=False,
            texts=query,
        )
        assert rows[0]["fused"] == pytest.approx(cosine) and relevance_cut(rows, 0.2)[1] is strong


def test_the_floor_scales_with_what_chance_gives_a_row():
    """A cross-script row's fused value is its cosine: chance meets it at the floor's cosine (floor / (1 − w)),
    not at the floor itself."""
    unrelated = {"fused": 0.35, "score": 0.675, "uri": "zh", "floor_scale": 2.0}
    assert relevance_cut([unrelated], 0.2) == ([unrelated], False)
    related = {**unrelated, "fused": 0.45}
    assert relevance_cut([related], 0.2) == ([related], True)


def test_below_the_relevance_floor_only_the_best_by_fusion_and_by_score_are_served():
    rows = [
        {"fused": 0.15, "score": 0.6, "uri": "a"},
        {"fused": 0.12, "score": 0.7, "uri": "b"},
        {"fused": 0.1, "score": 0.65, "uri": "c"},
    ]
    assert relevance_cut(rows, 0.2) == (rows[:2], False)
    assert relevance_cut([rows[0], rows[2]], 0.2) == ([rows[0], rows[2]], False)
    assert relevance_cut([rows[0]], 0.2) == ([rows[0]], False)
    assert relevance_cut(rows, 0.12) == (rows, True)
    assert relevance_cut(rows, None) == (rows, None)


# thresholds in responses -------------------------------------------------------------------------------------


def test_stats_say_which_threshold_applied_and_where_it_came_from(names):
    def threshold(path, **body):
        status, answer = names.post(path, {"query": "beagle shelter", "max_tokens": 400, **body})
        assert status == 200, answer
        return answer["result"]["stats"]["threshold"]

    context = threshold(SEARCH, mode="context")
    assert {k: context[k] for k in ("score_threshold", "source", "relevance_floor", "strong")} == {
        "score_threshold": 0.55,
        "source": "settings",
        "relevance_floor": None,
        "strong": None,
    }
    assert threshold(SEARCH, mode="context", score_threshold=0.99)["source"] == "request"
    assert threshold(SEARCH, mode="context", score_threshold=0.99)["below"] >= 1
    recall = threshold(RECALL)
    assert recall["source"] == "recall_preset" and recall["relevance_floor"] == 0.2
    assert threshold(RECALL, score_threshold=0.5)["relevance_floor"] is None
    assert threshold(SEARCH, mode="context", purpose="coding")["source"] == "settings"


def test_below_the_relevance_floor_recall_serves_only_its_best_candidates(names):
    query = {"query": "Caroline and Melanie", "max_tokens": 1600}
    RetrievalSettings.objects.update_or_create(pk=1, defaults={"recall_relevance_floor": 0.99})
    stats = names.post(RECALL, query)[1]["result"]["stats"]
    assert stats["threshold"]["strong"] is False and stats["returned"] in (1, 2), stats
    # A short share, in which the one or two kept may still read past their abstracts (an answer in Details).
    assert stats["used_tokens"] <= 1600 * 0.25
    RetrievalSettings.objects.update_or_create(pk=1, defaults={"recall_relevance_floor": 0.01})
    stats = names.post(RECALL, query)[1]["result"]["stats"]
    assert stats["threshold"]["strong"] is True and stats["returned"] == 4, stats


def test_below_the_relevance_floor_a_small_budget_still_shows_the_best_hit_at_abstract(names):
    # A quarter of 100 tokens holds no abstract: the best hit was served as a bare pointer (issue 37, RFC §3.4).
    RetrievalSettings.objects.update_or_create(pk=1, defaults={"recall_relevance_floor": 0.99})
    status, answer = names.post(RECALL, {"query": "Caroline and Melanie", "max_tokens": 100})
    stats, entries = answer["result"]["stats"], answer["result"]["entries"]
    assert status == 200 and stats["threshold"]["strong"] is False, stats
    assert entries[0]["detail"] in ("abstract", "full") and stats["used_tokens"] <= 100, answer["result"]


def test_the_floor_of_another_embedder_is_not_applied(names):
    RetrievalSettings.objects.update_or_create(pk=1, defaults={"relevance_floor_model": "another-model"})
    RetrievalSettings.objects.filter(pk=1).update(recall_relevance_floor=0.99)
    stats = names.post(RECALL, {"query": "Caroline and Melanie", "max_tokens": 1600})[1]["result"]["stats"]
    assert stats["threshold"]["relevance_floor"] is None and stats["returned"] == 4


def test_calibrate_scores_derives_and_saves_a_floor_for_the_embedder_in_use(names):
    RetrievalSettings.objects.update_or_create(
        pk=1, defaults={"relevance_floor_model": "another-model", "recall_relevance_floor": None}
    )
    out = io.StringIO()
    call_command("calibrate_scores", "--sample", "10", stdout=out)
    row = RetrievalSettings.objects.get(pk=1)
    assert row.relevance_floor_model == "usem3" and 0 < row.recall_relevance_floor < 1
    assert row.relevance_calibrated_at is not None and f"relevance floor {row.recall_relevance_floor}" in out.getvalue()


def test_calibrate_scores_refuses_lexical_mode(names):
    from django.core.management.base import CommandError

    RetrievalSettings.objects.update_or_create(pk=1, defaults={"search_mode": "lexical"})
    with pytest.raises(CommandError, match="no chance level"):
        call_command("calibrate_scores", stdout=io.StringIO())


def test_calibrate_scores_refuses_an_empty_store(db):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="nothing to calibrate"):
        call_command("calibrate_scores", stdout=io.StringIO())


# the candidate pool ------------------------------------------------------------------------------------------


@pytest.fixture
def many_events(api):
    api.write_all(
        {
            f"{EVENTS}/{day:02d}/standup-{day}.md": f"[2026-11-{day:02d}] Stand-up {day}: the deploy of "
            f"service {day} went fine, tests green."
            for day in range(1, 29)
        }
    )
    return api


def test_without_a_limit_the_context_pool_grows_with_the_budget(many_events):
    def returned(**body):
        status, answer = many_events.post(SEARCH, {"query": "stand-up deploy", "mode": "context", **body})
        return answer["result"]["stats"]

    assert returned(max_tokens=1600)["pool"] == 50 and returned(max_tokens=1600)["returned"] > 10
    assert returned(max_tokens=1600, limit=10)["returned"] <= 10 and returned(max_tokens=1600, limit=10)["pool"] == 10


def test_a_purpose_fills_its_pool_from_the_buckets_that_have_candidates(many_events):
    status, answer = many_events.post(
        SEARCH, {"query": "stand-up deploy", "mode": "context", "purpose": "coding", "max_tokens": 3200}
    )
    stats = answer["result"]["stats"]
    assert stats["pool"]["events"] < stats["searched"]["events"] == 28
    explicit = many_events.post(
        SEARCH, {"query": "stand-up deploy", "mode": "context", "max_tokens": 3200, "quotas": {"events": 4}}
    )[1]["result"]["stats"]
    assert explicit["searched"] == {"events": 4}


@pytest.mark.django_db(transaction=True)
def test_migrated_thresholds_keep_their_meaning_and_recall_moves_to_context_s():
    """profiles.0012: a stored cosine floor t becomes (1 + t) / 2; 0013: /recall's converted default becomes
    context's, where an operator had not changed it."""
    from django.db.migrations.executor import MigrationExecutor

    def migrate(target):
        executor = MigrationExecutor(connection)
        executor.migrate([("profiles", target)])
        return executor.loader.project_state([("profiles", target)]).apps

    def thresholds():
        with connection.cursor() as cursor:
            cursor.execute("SELECT context_score_threshold, recall_score_threshold FROM profiles_retrievalsettings")
            row = cursor.fetchone()
            cursor.execute("SELECT score_threshold FROM profiles_purposeprofile WHERE name = 'coding'")
            return (*row, cursor.fetchone()[0])

    try:
        apps = migrate("0011_hybrid_search")
        apps.get_model("profiles", "RetrievalSettings").objects.update_or_create(
            pk=1, defaults={"context_score_threshold": 0.1, "recall_score_threshold": 0.35}
        )
        apps.get_model("profiles", "PurposeProfile").objects.update_or_create(
            name="coding", defaults={"quotas": {"events": 4}, "score_threshold": 0.3}
        )
        migrate("0012_scores_on_openviking_scale")
        assert thresholds() == (0.55, 0.675, 0.65)
        migrate("0013_recall_relevance_floor")
        assert thresholds() == (0.55, 0.55, 0.65)
        migrate("0011_hybrid_search")
        assert thresholds() == (0.1, 0.35, 0.3)
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.mark.django_db
def test_a_files_content_is_indexed_and_a_directorys_whole_document_text_is_not():
    """A directory's content is a parsed document's text, which its sections index already."""
    from django.utils import timezone

    from core.models import Account
    from retrieval.models import Context

    account, now = Account.objects.create(name="lexemes"), timezone.now()
    for kind in ("file", "dir"):
        Context.objects.create(
            account=account,
            uri=f"viking://resources/{kind}",
            parent_uri="viking://resources",
            kind=kind,
            context_type="resource",
            content="zephyrine installer",
            overview="an outline",
            created_at=now,
            updated_at=now,
        )
    rows = dict(Context.objects.filter(account=account).values_list("kind", "lexemes"))
    assert "zephyrin" in rows["file"] and "zephyrin" not in rows["dir"] and "outlin" in rows["dir"]


def test_a_small_store_has_no_stop_words_whatever_the_statistics_say(api):
    """Statistics that call the query's only term common (three of four nodes hold it, ANALYZE just ran) drop no
    term in an account under STOP_WORDS_FROM nodes: the lexical search still finds its holders."""
    api.write_all(
        {f"viking://~/memories/entities/proxy-{i}.md": f"Caddy fronts ingest number {i}." for i in range(3)}
        | {"viking://~/memories/entities/db.md": "Postgres keeps the orders."}
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE retrieval_context")
        cursor.execute(
            "SELECT freq FROM pg_stats, unnest(most_common_elems::text::text[], most_common_elem_freqs) "
            "AS common(elem, freq) WHERE tablename = 'retrieval_context' AND attname = 'lexemes' "
            "AND elem = 'caddi'"
        )
        assert cursor.fetchone()[0] > 0.2  # a stop word by the share alone
    hits = hit_uris(api.find("caddy", search_mode="lexical"))
    assert sorted(hits) == [f"viking://user/default/memories/entities/proxy-{i}.md" for i in range(3)]


@pytest.mark.django_db(transaction=True)
def test_a_hybrid_search_ranks_only_the_holders_of_narrow_terms_and_still_weighs_broad_ones(settings):
    """A term more nodes hold than OVSITE_LEXICAL_TERM_MATCHES_MAX (by the statistics) is left out of the matches
    a hybrid search ranks, which at a million nodes were every holder of every term (385 ms a /find); its idf still
    counts in each candidate's coverage. Lexical mode, which has no other side, still ranks every holder."""
    import json

    import numpy as np
    from django.utils import timezone

    from core.auth import Caller
    from core.models import Account
    from retrieval.models import Context
    from retrieval.search import query as search_query
    from retrieval.search.query import FindQuery, account_size, scope_predicate
    from retrieval.search.statements import EVERYTHING, HIT_COLUMNS, SearchQuery, search_statement, statement_sql

    settings.LEXICAL_TERM_MATCHES_MAX = 50
    account, now, rng = Account.objects.create(name="broad"), timezone.now(), np.random.default_rng(3)
    vectors = rng.standard_normal((1200, settings.EMBEDDING_DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    texts = [
        f"Runbook page {i} on the caddy proxy." if i < 200 else f"Runbook page {i} on queues." for i in range(1200)
    ]
    texts[:3] = [f"The caddy proxy fronts the zephyr cluster, part {i}." for i in range(3)]
    Context.objects.bulk_create(
        Context(
            account=account,
            uri=f"viking://resources/runbook/page-{i}.md",
            parent_uri="viking://resources/runbook",
            kind="file",
            context_type="resource",
            category="resources",
            abstract=text,
            content=text,
            embedding=vector,
            state="ready",
            created_at=now,
            updated_at=now,
        )
        for i, (text, vector) in enumerate(zip(texts, vectors, strict=True))
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE retrieval_context")
    search_query._term_shares_read[0] = float("-inf")  # the statistics just made, not a minute-old read
    caller = Caller(account.id, "default", "default", "admin")
    scope, size = scope_predicate(caller, FindQuery(query="")), account_size(account.id)
    assert size == 1200

    def explained(nearest: bool) -> dict:
        query = SearchQuery("caddy zephyr", vectors[0])
        statement = search_statement(
            scope, [query], HIT_COLUMNS, [(EVERYTHING, 30)] if nearest else [], [(EVERYTHING, 30)], scope_size=size
        )
        sql, params = statement_sql(statement, 30 if nearest else None)
        with connection.cursor() as cursor:
            cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params)
            plan = cursor.fetchone()[0]
            cursor.execute(sql, params)
            columns = [column.name for column in cursor.description]
            rows = [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]
        nodes, stack = {}, [(plan if isinstance(plan, list) else json.loads(plan))[0]["Plan"]]
        while stack:
            node = stack.pop()
            nodes[node.get("Subplan Name") or id(node)] = node
            stack += node.get("Plans", [])
        return {"matched": nodes["CTE matched_0"]["Actual Rows"], "rows": rows}

    hybrid, lexical = explained(nearest=True), explained(nearest=False)
    assert lexical["matched"] == 200  # every holder of either term
    assert hybrid["matched"] == 3  # the zephyr holders alone: caddi is broad (≈ 200 of 1,200 > 50)
    # A caddy-only page the vector side brought still has its share of the query's information.
    caddy_only = [
        row
        for row in hybrid["rows"]
        if row["lexical_rank"] is None and "caddy" in row["abstract"] and "zephyr" not in row["abstract"]
    ]
    queues = [row for row in hybrid["rows"] if row["lexical_rank"] is None and "queues" in row["abstract"]]
    assert caddy_only and queues
    assert all(0 < row["coverage"] < 1 for row in caddy_only) and all(row["coverage"] == 0 for row in queues)
    zephyr = [row for row in hybrid["rows"] if row["lexical_rank"] is not None]
    assert len(zephyr) == 3 and all(row["coverage"] == pytest.approx(1) for row in zephyr)
