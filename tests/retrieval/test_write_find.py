"""Write → process → find round trips against the real PostgreSQL and the packaged multilingual embedder."""

from tests.conftest import hit_uris

COFFEE = "viking://~/memories/preferences/coffee.md"
COFFEE_FULL = "viking://user/default/memories/preferences/coffee.md"


def test_write_then_find_in_english(api):
    api.write(COFFEE, "# Summary\nThe user drinks black coffee without sugar every morning.\n\n# Details\nSince 2019.")
    api.write("viking://~/memories/entities/dog.md", "The user's dog is a border collie named Pixel.")
    result = api.find("What coffee does the user like?")
    assert hit_uris(result)[0] == COFFEE_FULL
    top = result["memories"][0]
    assert top["abstract"] == "The user drinks black coffee without sugar every morning."
    assert top["level"] == 2 and top["context_type"] == "memory" and 0 < top["score"] <= 1


def test_chinese_query_finds_english_memory_and_back(api):
    """The embedder's own cross-lingual reach (vector mode). In hybrid mode a three-memory store is no place to
    weigh words: "user", in two of the three, still counts as informative there; the bilingual harness
    (bench/quality.py --suite recall) measures hybrid's cross-lingual questions."""
    api.write(COFFEE, "The user drinks black coffee without sugar every morning.")
    api.write("viking://~/memories/entities/car.md", "用户开一辆红色的特斯拉 Model 3，去年买的。")
    api.write("viking://~/memories/entities/dog.md", "The user's dog is a border collie named Pixel.")
    assert (
        hit_uris(api.find("用户喜欢喝什么咖啡？", context_type="memory", level=2, search_mode="vector"))[0]
        == COFFEE_FULL
    )
    assert hit_uris(api.find("What car does the user drive?", level=2, search_mode="vector"))[0].endswith(
        "/entities/car.md"
    )


def test_directory_overview_lists_children_and_follows_changes(api):
    api.write("viking://resources/ops/runbook.md", "# Summary\nHow to restart the workers safely.")
    api.write("viking://resources/ops/oncall.md", "The on-call rota changes every Monday at 09:00.")
    status, body = api.get("/api/v1/content/overview", uri="viking://resources/ops")
    assert status == 200
    assert "runbook.md: How to restart the workers safely." in body["result"]
    assert "oncall.md: The on-call rota" in body["result"]
    status, _ = api.delete("/api/v1/fs", uri="viking://resources/ops/oncall.md")
    assert status == 200
    overview = api.get("/api/v1/content/overview", uri="viking://resources/ops")[1]["result"]
    assert "oncall.md" not in overview and "runbook.md" in overview
    abstract = api.get("/api/v1/content/abstract", uri="viking://resources/ops")[1]["result"]
    assert abstract.startswith("ops (1 entries)")


def test_find_reads_no_content_unless_asked(api):
    api.write(COFFEE, "Black coffee, no sugar.")
    hit = api.find("coffee", level=2)["memories"][0]
    assert "content" not in hit
    hit = api.find("coffee", level=2, read_content=True)["memories"][0]
    assert hit["content"] == "Black coffee, no sugar."


def test_filters_are_pushed_into_the_query(api):
    api.write("viking://resources/a/one.md", "Deploy notes for the payments service.", tags=["ops", "payments"])
    api.write("viking://resources/b/two.md", "Deploy notes for the search service.", tags=["ops"])
    api.write(COFFEE, "Deploy coffee to the team every Friday.")
    assert set(hit_uris(api.find("deploy notes", target_uri="viking://resources/a"))) == {
        "viking://resources/a",
        "viking://resources/a/one.md",
    }
    assert hit_uris(api.find("deploy", tags=["payments"])) == ["viking://resources/a/one.md"]
    assert {h["context_type"] for h in api.find("deploy", context_type="memory")["memories"]} == {"memory"}
    assert api.find("deploy", context_type="memory")["resources"] == []
    assert all(h["level"] == 2 for h in api.find("deploy", level=2)["resources"])
    assert api.find("deploy", since="2000-01-01")["total"] > 0
    assert api.find("deploy", until="2000-01-01")["total"] == 0
    assert api.find("deploy", filter={"category": "preferences"})["total"] == 1
    assert api.find("deploy", score_threshold=0.99)["total"] == 0
    assert api.find("deploy", limit=1)["total"] == 1


def test_filtered_query_still_fills_the_limit(api):
    """Iterative index scans: a selective filter must not starve the HNSW result."""
    for i in range(30):
        api.write(f"viking://resources/noise/n{i}.md", f"Noise document number {i} about gardening.")
    for i in range(5):
        api.write(f"viking://resources/rare/r{i}.md", f"Rare document {i} about gardening.", tags=["rare"])
    assert api.find("gardening", tags=["rare"], limit=5)["total"] == 5


def test_replace_is_atomic_and_unchanged_write_is_a_no_op(api):
    first = api.write(COFFEE, "Black coffee.")
    again = api.write(COFFEE, "Black coffee.")
    assert first["changed"] == [COFFEE_FULL] and again["changed"] == []
    api.write(COFFEE, "Green tea instead of coffee.")
    status, body = api.get("/api/v1/content/read", uri=COFFEE)
    assert body["result"] == "Green tea instead of coffee."
    assert api.find("green tea", level=2)["memories"][0]["abstract"] == "Green tea instead of coffee."


def test_embedding_stays_in_the_row_and_long_content_leaves_first(api):
    """A search computes each hit's distance from the row: an embedding in the TOAST table costs a hit two more
    lookups (migration retrieval.0009). A row over PostgreSQL's 2 KB threshold keeps it inline; a content too long
    for the page is what moves out."""
    import random

    from django.db import connection

    vocabulary = "coffee morning sugar milk deploy worker queue retry shard index page".split()
    words = random.Random(9).choices(vocabulary, k=5000)
    words = [f"{word}{random.Random(i).randrange(1000)}" for i, word in enumerate(words)]  # so pglz cannot shrink it
    api.write(COFFEE, "The user drinks black coffee without sugar. " + " ".join(words[:60]))
    api.write("viking://resources/guide.md", " ".join(words))
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT uri, pg_column_size(embedding), pg_column_toast_chunk_id(embedding), "
            "pg_column_toast_chunk_id(content), octet_length(abstract) + octet_length(overview) "
            "+ pg_column_size(content) FROM retrieval_context WHERE uri IN (%s, %s)",
            [COFFEE_FULL, "viking://resources/guide.md"],
        )
        rows = {uri: rest for uri, *rest in cursor.fetchall()}
    coffee_size, coffee_chunk, _, coffee_texts = rows[COFFEE_FULL]
    assert coffee_size + coffee_texts > 2100  # over the toast threshold, where the embedding used to move out
    assert coffee_chunk is None
    _, guide_chunk, guide_content_chunk, _ = rows["viking://resources/guide.md"]
    assert guide_chunk is None and guide_content_chunk is not None
