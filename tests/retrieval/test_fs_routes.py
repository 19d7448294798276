"""The rules of the fs and batch-write routes that live below their views (retrieval's services and selectors): a
batch's `root_uri`, ls's `limit` alias, tree's level cut and `rel_path`, and `wait` on a remove."""

import pytest

DOCS = "viking://resources/docs"
BATCH = "/api/v1/content/batch-write"


@pytest.fixture
def docs(api):
    api.write_all(
        {
            f"{DOCS}/a.md": "Alpha.",
            f"{DOCS}/b.md": "Beta.",
            f"{DOCS}/ops/c.md": "Gamma.",
            f"{DOCS}/ops/deep/d.md": "Delta.",
        }
    )
    return api


def test_batch_write_below_its_root_uri(api):
    operations = [{"uri": f"{DOCS}/in.md", "content": "In."}, {"uri": f"{DOCS}/sub/in.md", "content": "Sub."}]
    status, body = api.post(BATCH, {"root_uri": DOCS, "operations": operations})
    assert status == 200, body
    assert body["result"]["uris"] == [f"{DOCS}/in.md", f"{DOCS}/sub/in.md"]


def test_batch_write_refuses_an_operation_outside_its_root_uri_and_writes_none(api):
    operations = [
        {"uri": f"{DOCS}/in.md", "content": "In."},
        {"uri": "viking://resources/docs-other/out.md", "content": "Out."},  # a sibling sharing the root's prefix
    ]
    status, body = api.post(BATCH, {"root_uri": DOCS, "operations": operations})
    assert status == 422, body
    assert body["error"]["code"] == "INVALID_ARGUMENT"
    assert body["error"]["details"]["validation_errors"][0]["loc"] == ["operations"]
    assert "viking://resources/docs-other/out.md" in body["error"]["message"]
    status, _ = api.get("/api/v1/fs/stat", uri=f"{DOCS}/in.md")
    assert status == 404


def test_ls_limit_is_node_limit_under_another_name_and_wins(docs):
    status, body = docs.get("/api/v1/fs/ls", uri=DOCS, node_limit=5, limit=1)
    assert status == 200, body
    assert [e["name"] for e in body["result"]] == ["a.md"] and body["has_more"] is True
    status, body = docs.get("/api/v1/fs/ls", uri=DOCS, node_limit=2)
    assert [e["name"] for e in body["result"]] == ["a.md", "b.md"] and body["has_more"] is True
    status, body = docs.get("/api/v1/fs/ls", uri=DOCS)
    assert [e["name"] for e in body["result"]] == ["a.md", "b.md", "ops"] and body["has_more"] is False


def test_tree_cuts_at_its_level_limit_with_paths_below_the_listed_directory(docs):
    status, body = docs.get("/api/v1/fs/tree", uri=DOCS, level_limit=2)
    assert status == 200, body
    assert [(e["rel_path"], e["depth"]) for e in body["result"]] == [
        ("a.md", 1),
        ("b.md", 1),
        ("ops/", 1),
        ("ops/c.md", 2),
        ("ops/deep/", 2),
    ]
    status, body = docs.get("/api/v1/fs/tree", uri=DOCS)  # level_limit 3 by default
    assert body["result"][-1]["rel_path"] == "ops/deep/d.md" and body["result"][-1]["depth"] == 3


def test_remove_waits_for_its_processing_only_when_asked(docs):
    status, body = docs.delete("/api/v1/fs", uri=f"{DOCS}/a.md")
    assert status == 200, body
    assert "processing" not in body["result"]
    status, body = docs.delete("/api/v1/fs", uri=f"{DOCS}/b.md", wait="true")
    assert status == 200, body
    assert body["result"]["processing"] == {"pending_tasks": 0, "done": True}
