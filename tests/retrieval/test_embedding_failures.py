"""A failed embedding leaves the node `failed` with its error, never served, and a retry completes it."""

from retrieval.services import retry_failed
from tests.conftest import hit_uris

NOTE = "viking://resources/notes/kafka.md"


def test_openai_compatible_embedder_round_trip(api, remote_embedder):
    api.write(NOTE, "Kafka consumer lag alerts fire above 10k messages.")
    assert hit_uris(api.find("kafka lag alert", level=2)) == [NOTE]
    status, stat = api.get("/api/v1/fs/stat", uri=NOTE)
    assert stat["result"]["embedding_model"] == "fake-embedding"
    assert any(r["path"].endswith("/embeddings") for r in remote_embedder.script.requests)


def test_failed_embedding_marks_node_failed_and_hides_it(api, remote_embedder):
    remote_embedder.script.mode = "error"
    result = api.write(NOTE, "Kafka consumer lag alerts fire above 10k messages.")
    status, stat = api.get("/api/v1/fs/stat", uri=NOTE)
    assert stat["result"]["state"] == "failed"
    assert "InternalServerError" in stat["result"]["error"] and stat["result"]["attempts"] == 1
    status, task = api.get(f"/api/v1/tasks/{result['task_id']}")
    assert task["result"]["status"] == "failed"
    remote_embedder.script.mode = "ok"
    assert NOTE not in hit_uris(api.find("kafka lag alert"))


def test_retry_completes_a_failed_node(api, remote_embedder):
    remote_embedder.script.mode = "error"
    api.write(NOTE, "Kafka consumer lag alerts fire above 10k messages.")
    remote_embedder.script.mode = "ok"
    assert retry_failed() >= 1
    status, stat = api.get("/api/v1/fs/stat", uri=NOTE)
    assert stat["result"]["state"] == "ready" and stat["result"]["error"] == ""
    assert hit_uris(api.find("kafka lag alert", level=2)) == [NOTE]


def test_embedder_timeout_is_a_failure_not_a_hang(api, remote_embedder):
    remote_embedder.script.delay_s = 3.0  # above the 2 s client timeout of the fixture
    api.write(NOTE, "Kafka consumer lag alerts fire above 10k messages.")
    status, stat = api.get("/api/v1/fs/stat", uri=NOTE)
    assert stat["result"]["state"] == "failed" and "Timeout" in stat["result"]["error"]


def test_wrong_dimension_is_reported(api, remote_embedder):
    remote_embedder.script.mode = "wrong_dim"
    api.write(NOTE, "Kafka consumer lag alerts.")
    status, stat = api.get("/api/v1/fs/stat", uri=NOTE)
    assert stat["result"]["state"] == "failed" and "EMBEDDING_DIM" in stat["result"]["error"]


def test_query_embedding_failure_is_503(api, remote_embedder):
    api.write(NOTE, "Kafka consumer lag alerts.")
    remote_embedder.script.mode = "error"
    status, body = api.post("/api/v1/search/find", {"query": "kafka"})
    assert status == 503 and body["error"]["code"] == "UNAVAILABLE"


def test_failed_re_embedding_never_serves_new_content_under_the_old_vector(api, remote_embedder):
    """A replace whose embedding fails leaves the node failed: it leaves search (its stored vector is the old
    text's) until a retry embeds the new content."""
    api.write(NOTE, "Kafka consumer lag alerts fire above 10k messages.")
    assert hit_uris(api.find("kafka lag alert", level=2)) == [NOTE]
    remote_embedder.script.mode = "error"
    api.write(NOTE, "Zookeeper quorum needs three voting nodes.")
    remote_embedder.script.mode = "ok"
    assert NOTE not in hit_uris(api.find("kafka lag alert")) + hit_uris(api.find("zookeeper quorum"))
    status, body = api.post(
        "/api/v1/search/search",
        {"query": "kafka lag alert zookeeper quorum", "mode": "context", "score_threshold": 0.0},
    )
    assert status == 200 and NOTE not in str(body["result"]), body
    assert retry_failed() >= 1
    assert hit_uris(api.find("zookeeper quorum", level=2)) == [NOTE]
    assert NOTE not in hit_uris(api.find("kafka lag alert", score_threshold=0.75))


def test_batch_write_with_failed_embedding_serves_none_of_its_files(api, remote_embedder):
    remote_embedder.script.mode = "error"
    status, body = api.post(
        "/api/v1/content/batch-write",
        {
            "operations": [
                {"uri": NOTE, "content": "Kafka consumer lag alerts."},
                {"uri": "viking://resources/notes/redis.md", "content": "Redis eviction policy is allkeys-lru."},
            ]
        },
    )
    assert status == 200, body
    remote_embedder.script.mode = "ok"
    for uri in (NOTE, "viking://resources/notes/redis.md"):
        assert api.get("/api/v1/fs/stat", uri=uri)[1]["result"]["state"] == "failed"
    assert hit_uris(api.find("kafka lag redis eviction", score_threshold=0.0)) == []
