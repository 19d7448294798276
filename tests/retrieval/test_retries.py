"""Transient failures of the LLM and of the embedding endpoint (no connection, 429, 5xx) are retried after a jittered,
growing pause, every attempt and pause within the call's one timeout (retrieval/retries.py); against the real HTTP
fake of the OpenAI API and the real `openai` client."""

import time

import pytest

from profiles.models import LLMUsage
from retrieval import llm, retries
from tests.conftest import hit_uris

TRANSIENT = {
    "503": {"mode": "error", "status": 503},
    "429": {"mode": "error", "status": 429},
    "no connection": {"mode": "drop"},
}
NOTE = "viking://resources/notes/kafka.md"


def ask(timeout_s: float = 10.0):
    return llm.complete(kind="rewrite", messages=[{"role": "user", "content": "hi"}], timeout_s=timeout_s)


def script(fake, **fields):
    for name, value in fields.items():
        setattr(fake.script, name, value)


def arrivals(fake, path: str) -> list[float]:
    return [r["at"] for r in fake.script.requests if r["path"].endswith(path)]


@pytest.mark.parametrize("failure", TRANSIENT.values(), ids=TRANSIENT.keys())
def test_an_llm_call_failing_twice_transiently_succeeds_on_the_third_attempt(db, fake_llm, settings, failure):
    settings.LLM_MAX_RETRIES = 2
    script(fake_llm, times=2, **failure)
    result = ask()
    assert result.ok and result.text == "ok"
    assert len(fake_llm.script.chat_requests()) == 3
    assert list(LLMUsage.objects.values_list("outcome", flat=True)) == ["ok"]  # one row per call, not per attempt


def test_the_pauses_between_attempts_grow(db, fake_llm, settings):
    settings.LLM_MAX_RETRIES = 3
    script(fake_llm, mode="error", status=500, times=3)
    assert ask().ok
    first, second, third, fourth = arrivals(fake_llm, "/chat/completions")
    # Each pause is its backoff step times a jitter in [0.5, 1]: at least half the step.
    assert second - first >= retries.FIRST_PAUSE_S / 2
    assert third - second >= retries.FIRST_PAUSE_S
    assert fourth - third >= retries.FIRST_PAUSE_S * 2


def test_the_pause_is_jittered_within_its_step():
    pauses = {retries._pause_s(1, RuntimeError()) for _ in range(50)}
    step = retries.FIRST_PAUSE_S * 2
    assert all(step / 2 <= pause <= step for pause in pauses) and len(pauses) > 1


def test_a_retry_after_header_sets_the_pause(db, fake_llm, settings):
    settings.LLM_MAX_RETRIES = 1
    script(fake_llm, mode="error", status=429, retry_after=1.5, times=1)
    assert ask().ok
    first, second = arrivals(fake_llm, "/chat/completions")
    assert second - first >= 1.5


def test_a_retry_after_beyond_the_timeout_is_not_waited_for(db, fake_llm, settings):
    settings.LLM_MAX_RETRIES = 2
    script(fake_llm, mode="error", status=429, retry_after=30)
    started = time.monotonic()
    assert ask(timeout_s=5.0).outcome == "error"
    assert time.monotonic() - started < 5.0 and len(fake_llm.script.chat_requests()) == 1


def test_zero_retries_is_one_attempt(db, fake_llm, settings):
    settings.LLM_MAX_RETRIES = 0
    script(fake_llm, mode="error", status=503, times=1)
    assert ask().outcome == "error" and len(fake_llm.script.chat_requests()) == 1


def test_a_client_error_is_not_retried(db, fake_llm, settings):
    settings.LLM_MAX_RETRIES = 2
    script(fake_llm, mode="error", status=400)
    assert ask().outcome == "error" and len(fake_llm.script.chat_requests()) == 1


def test_retries_end_with_the_timeout_however_many_are_allowed(db, fake_llm, settings):
    """Slow failures, many retries allowed: the call still ends at its timeout, which the client's own retries (a
    whole timeout per attempt) would pass several times over."""
    settings.LLM_MAX_RETRIES = 50
    script(fake_llm, mode="error", status=503, delay_s=0.4)
    started = time.monotonic()
    result = ask(timeout_s=2.0)
    elapsed = time.monotonic() - started
    assert result.outcome in ("error", "timeout") and len(fake_llm.script.chat_requests()) >= 2
    assert elapsed < 2.0 + 0.5, elapsed  # the deadline, and the little it takes to record the failure


@pytest.mark.parametrize("failure", TRANSIENT.values(), ids=TRANSIENT.keys())
def test_an_embedding_request_failing_transiently_is_retried(api, remote_embedder, settings, failure):
    settings.EMBEDDING_MAX_RETRIES = 2  # read when the embedder is built, on its first use below
    script(remote_embedder, times=2, **failure)
    api.write(NOTE, "Kafka consumer lag alerts fire above 10k messages.")
    status, stat = api.get("/api/v1/fs/stat", uri=NOTE)
    assert (stat["result"]["state"], stat["result"]["error"]) == ("ready", "")  # its first two attempts failed
    assert hit_uris(api.find("kafka lag alert", level=2)) == [NOTE]


def test_without_retries_a_transient_embedding_failure_fails_the_node(api, remote_embedder, settings):
    settings.EMBEDDING_MAX_RETRIES = 0
    script(remote_embedder, mode="error", status=503, times=1)
    api.write(NOTE, "Kafka consumer lag alerts fire above 10k messages.")
    status, stat = api.get("/api/v1/fs/stat", uri=NOTE)
    assert stat["result"]["state"] == "failed" and "InternalServerError" in stat["result"]["error"]


def test_embedding_retries_end_with_the_timeout(api, remote_embedder, settings):
    settings.EMBEDDING_MAX_RETRIES, settings.EMBEDDING_TIMEOUT_S = 50, 1.5
    script(remote_embedder, mode="drop")
    started = time.monotonic()
    status, body = api.post("/api/v1/search/find", {"query": "kafka"})
    elapsed = time.monotonic() - started
    assert status == 503 and body["error"]["details"]["service"] == "embedder", body
    assert len(arrivals(remote_embedder, "/embeddings")) >= 2
    assert elapsed < 1.5 + 0.5, elapsed
