"""Quota assembly through the whole-index pool (assembly/candidates.py): a bucket the pool leaves short is still
filled from its own index, and the answer is the one the per-bucket scans give."""
import pytest

from assembly import candidates

SEARCH = "/api/v1/search/search"
QUOTAS = {"events": 3, "entities": 1, "preferences": 1, "experiences": 1, "resources": 2, "skills": 1}


@pytest.fixture
def corpus(api):
    for i in range(12):
        api.write(f"viking://~/memories/events/2026/11/{i + 1:02d}/deploy-{i}.md",
                  f"Deploy number {i} of ovsite to production went fine after the canary stage.")
    api.write("viking://~/memories/preferences/reports.md", "Prefers deploy reports that lead with the conclusion.")
    api.write("viking://~/memories/entities/caddy.md", "Caddy fronts the RTMP ingest on port 1935.")
    api.write("viking://~/memories/experiences/migrations.md",
              "Learned: run migrations before switching deploy traffic, never after.")
    api.write("viking://resources/runbooks/restart.md", "# Restart the workers\nsystemctl restart ovsite-worker")
    return api


def _context(api, query, threshold):
    status, body = api.post(SEARCH, {"mode": "context", "query": query, "quotas": QUOTAS,
                                     "score_threshold": threshold, "max_tokens": 4000})
    assert status == 200, body
    result = body["result"]
    return [(e["uri"], e["score"]) for e in result["entries"]], result["stats"]["searched"]


@pytest.mark.parametrize("threshold", [0.05, 0.2, 0.3, 0.45])
@pytest.mark.parametrize("query", ["how did the production deploy go?", "which port does the ingest use?",
                                   "what should I do before switching traffic"])
def test_pooled_answer_equals_the_per_bucket_scans(corpus, settings, query, threshold):
    settings.QUOTA_POOL_MIN_THRESHOLD = 0.01
    settings.QUOTA_POOL_SIZE = 0
    per_bucket = _context(corpus, query, threshold)
    for size in (3, 200):  # 3: the events crowd the pool and the other buckets come from their own scans
        settings.QUOTA_POOL_SIZE = size
        assert _context(corpus, query, threshold) == per_bucket, size


def test_a_bucket_crowded_out_of_the_pool_is_filled_from_its_own_index(corpus, settings):
    settings.QUOTA_POOL_MIN_THRESHOLD = 0.01
    settings.QUOTA_POOL_SIZE = 3
    entries, searched = _context(corpus, "how did the production deploy go?", 0.05)
    assert searched["events"] == 3
    assert searched["preferences"] == searched["experiences"] == 1
    assert any(uri.endswith("/preferences/reports.md") for uri, _ in entries)


@pytest.mark.parametrize("size, minimum, threshold, pooled", [
    (200, 0.3, 0.35, True), (200, 0.3, 0.3, True), (200, 0.3, 0.1, False), (200, 0.3, None, False),
    (200, 0.3, 0.0, False), (0, 0.3, 0.35, False)])
def test_the_pool_is_used_only_with_a_selective_threshold(settings, size, minimum, threshold, pooled):
    settings.QUOTA_POOL_SIZE, settings.QUOTA_POOL_MIN_THRESHOLD = size, minimum
    assert candidates._pooled(threshold) is pooled
