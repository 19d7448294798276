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
