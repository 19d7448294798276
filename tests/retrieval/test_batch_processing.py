"""A batch's processing (retrieval/processing.py) embeds in chunks and writes each chunk's rows in one statement: the
rows it stores are those of one write per file, an embedder failing part-way fails the whole batch and stores none
of its vectors, and the statements it runs do not grow with its files."""

import numpy as np
from django.db import connection
from django.test.utils import CaptureQueriesContext

from retrieval.models import Context
from retrieval.processing import EMBED_CHUNK
from retrieval.services import retry_failed
from tests.conftest import hit_uris
from tests.retrieval.test_section_ingest import runbook

# More notes than one embedding chunk holds, so that a batch of them is embedded and written in several.
NOTES = {
    f"notes/n{i:02}.md": f"Note {i}: the {word} service restarts at {i % 12 + 1} o'clock on host-{i}."
    for i, word in enumerate(["billing", "search", "ledger", "queue", "mailer", "gateway"] * 12)
}
FILES = {**NOTES, "runbook.md": runbook()}
COMPARED = [
    "kind",
    "parent_uri",
    "abstract",
    "overview",
    "content",
    "abstract_tokens",
    "overview_tokens",
    "content_tokens",
    "content_hash",
    "state",
    "error",
    "embedding_model",
    "lexemes",
]


def _rows_below(root: str) -> dict[str, dict]:
    """The rows below `root` by their path under it, with the root's name taken out of their texts."""
    rows = {}
    for row in Context.objects.filter(uri__startswith=root + "/").values("uri", "embedding", *COMPARED):
        name = row.pop("uri")[len(root) + 1 :]
        row["parent_uri"] = row["parent_uri"][len(root) :]
        rows[name] = row
    return rows


def test_a_batch_stores_the_rows_of_one_write_per_file(api):
    assert len(NOTES) > EMBED_CHUNK
    status, body = api.post(
        "/api/v1/content/batch-write",
        {"operations": [{"uri": f"viking://resources/batch/{path}", "content": text} for path, text in FILES.items()]},
    )
    assert status == 200, body
    # Written one by one, the last first: a folder lists its newest first, and the batch's files (one write time)
    # by URI.
    for path in sorted(FILES, reverse=True):
        api.write(f"viking://resources/single/{path}", FILES[path])
    batch, single = _rows_below("viking://resources/batch"), _rows_below("viking://resources/single")
    assert batch.keys() == single.keys() and len(batch) > len(FILES)  # the runbook's sections too
    for name, row in batch.items():
        other = single[name]
        vectors = row.pop("embedding"), other.pop("embedding")
        assert row == other, name
        assert row["state"] == "ready" and vectors[0] is not None, name
        # The same text embedded among other texts: equal to float32 rounding.
        assert np.allclose(vectors[0], vectors[1], atol=1e-6), name


def test_folders_roll_up_every_file_of_every_batch(api):
    paths = sorted(NOTES)
    for start in range(0, len(paths), 25):
        status, body = api.post(
            "/api/v1/content/batch-write",
            {"operations": [{"uri": f"viking://resources/ops/{p}", "content": NOTES[p]} for p in paths[start:][:25]]},
        )
        assert status == 200, body
    folder = Context.objects.get(uri="viking://resources/ops/notes")
    assert folder.state == "ready" and f"notes ({len(NOTES)} entries)" in folder.abstract
    assert all(f"- {p.split('/')[1]}: Note " in folder.overview for p in paths)
    top = Context.objects.get(uri="viking://resources/ops")
    assert top.abstract.startswith("ops (1 entries) — notes/")
    assert hit_uris(api.find("ledger service restarts", target_uri="viking://resources/ops", limit=3))


def test_an_embedder_failing_part_way_fails_the_whole_batch_and_stores_no_vector(api, remote_embedder):
    remote_embedder.script.after = remote_embedder.answered + 1  # the first chunk is embedded, the next fail
    remote_embedder.script.mode = "error"
    files = {f"viking://resources/failing/{path}": text for path, text in NOTES.items()}
    status, body = api.post(
        "/api/v1/content/batch-write", {"operations": [{"uri": uri, "content": text} for uri, text in files.items()]}
    )
    assert status == 200, body
    rows = Context.objects.filter(uri__in=list(files))
    assert rows.count() == len(files)
    assert set(rows.values_list("state", flat=True)) == {"failed"}
    assert not rows.filter(embedding__isnull=False).exists()
    status, task = api.get(f"/api/v1/tasks/{body['result']['task_id']}")
    assert task["result"]["status"] == "failed"
    remote_embedder.script.mode = "ok"
    assert hit_uris(api.find("billing service restarts", score_threshold=0.0)) == []
    assert retry_failed() >= len(files)
    assert set(rows.values_list("state", flat=True)) == {"ready"}
    assert not rows.filter(embedding__isnull=True).exists()


def test_a_refused_operation_writes_none_of_the_batch(api):
    api.write("viking://resources/taken/notes/n00.md", "Already here.")
    operations = [
        {"uri": f"viking://resources/taken/{path}", "content": text, "mode": "create"} for path, text in NOTES.items()
    ]
    status, body = api.post("/api/v1/content/batch-write", {"operations": operations[::-1]})
    assert status == 409 and body["error"]["code"] == "CONFLICT", body
    assert list(
        Context.objects.filter(uri__startswith="viking://resources/taken/notes/").values_list("uri", flat=True)
    ) == ["viking://resources/taken/notes/n00.md"]


def _statements(api, root: str, files: dict[str, str]) -> int:
    """The statements a batch-write runs on the store's tables (the caller's and the settings' reads come from
    caches that expire on a clock)."""
    with CaptureQueriesContext(connection) as queries:
        status, body = api.post(
            "/api/v1/content/batch-write",
            {"operations": [{"uri": f"{root}/{path}", "content": text} for path, text in files.items()]},
        )
    assert status == 200, body
    return sum('"retrieval_' in query["sql"] for query in queries)


def test_a_batch_runs_as_many_statements_for_many_files_as_for_a_few(api):
    """Inserts, reads, folder roll-ups and token counts are done per batch, not per file; only the writes of the
    vectors are one statement per embedding chunk."""
    few = dict(list(NOTES.items())[:3])
    chunks = -(-len(NOTES) // EMBED_CHUNK)
    assert _statements(api, "viking://resources/many", NOTES) <= _statements(api, "viking://resources/few", few) + (
        chunks - 1
    )
