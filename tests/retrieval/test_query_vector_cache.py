"""Repeated queries skip the embedder; the cache is per embedder and can be turned off."""

import pytest

from retrieval.embedders import QueryVectorCache, get_embedder


def _embedding_calls(server) -> int:
    return sum(r["path"].endswith("/embeddings") for r in server.script.requests)


def _find(api, query):
    status, body = api.post("/api/v1/search/find", {"query": query})
    assert status == 200, body
    return body["result"]


def test_repeated_query_is_embedded_once(api, remote_embedder):
    first = _find(api, "how do I restart the workers")
    calls = _embedding_calls(remote_embedder)
    assert _find(api, "how do I restart the workers") == first
    assert _embedding_calls(remote_embedder) == calls
    _find(api, "a different question")
    assert _embedding_calls(remote_embedder) == calls + 1


def test_cache_off_embeds_every_time(api, remote_embedder, settings):
    settings.OVSITE_QUERY_VECTOR_CACHE = 0
    get_embedder.cache_clear()
    _find(api, "same words")
    calls = _embedding_calls(remote_embedder)
    _find(api, "same words")
    assert _embedding_calls(remote_embedder) == calls + 1


def test_least_recently_used_goes_first():
    cache = QueryVectorCache(2)
    cache.put("a", [1.0])
    cache.put("b", [2.0])
    assert cache.get("a") == [1.0]  # "a" is now the most recent
    cache.put("c", [3.0])
    assert cache.get("b") is None
    assert cache.get("a") == [1.0] and cache.get("c") == [3.0]


@pytest.mark.parametrize("size", [0, -1])
def test_non_positive_size_keeps_nothing(size):
    cache = QueryVectorCache(size)
    cache.put("a", [1.0])
    assert cache.get("a") is None
