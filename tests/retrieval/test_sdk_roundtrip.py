"""The real `openviking-sdk` client against a live ovsite server: the wire contract, end to end
(docs/design.md §4, §7)."""

import pytest
from django.test import override_settings
from openviking_sdk.errors import (
    ConflictError,
    InvalidArgumentError,
    InvalidURIError,
    NotFoundError,
    PermissionDeniedError,
    UnauthenticatedError,
)

DEPLOY_MD = (
    "# Summary\nHow to deploy the billing service to production.\n\n# Steps\n1. Build the image.\n2. Roll it out.\n"
)
SKILL_MD = (
    "---\nname: pdf-tools\ndescription: Extract text and tables from PDF files.\n---\n\n"
    "# PDF tools\nRun `pdftotext -layout file.pdf -` and read the output.\n"
)


@pytest.fixture
def client(sdk_connect):
    """Dev mode: no root key, so a loopback caller without a key is account `default`, user `default`."""
    return sdk_connect()


@pytest.fixture
def handbook(tmp_path):
    folder = tmp_path / "handbook"
    (folder / "ops").mkdir(parents=True)
    (folder / "intro.md").write_text("Welcome to the team handbook: how we plan, ship and support.\n")
    (folder / "ops" / "oncall.md").write_text("# Summary\nThe on-call rota changes every Monday at 09:00.\n")
    return folder


def test_add_resource_uploads_a_markdown_file_that_find_and_read_return(client, tmp_path):
    path = tmp_path / "deploy.md"
    path.write_text(DEPLOY_MD)
    added = client.add_resource(str(path), wait=True)
    assert added["status"] == "success" and added["errors"] == []
    assert added["root_uri"] == "viking://resources/deploy.md" and added["source_path"] == "deploy.md"

    top = client.find("How do I deploy the billing service?")["resources"][0]
    assert top["uri"] == "viking://resources/deploy.md"
    assert top["abstract"] == "How to deploy the billing service to production."
    assert top["level"] == 2 and 0 < top["score"] <= 1
    assert client.read("viking://resources/deploy.md") == DEPLOY_MD
    info = client.stat("viking://resources/deploy.md")
    assert info["isDir"] is False and info["state"] == "ready" and info["size"] == len(DEPLOY_MD)


def test_add_resource_zips_a_directory_into_a_tree(client, handbook):
    added = client.add_resource(str(handbook))
    assert added["root_uri"] == "viking://resources/handbook" and added["files"] == 2
    assert client.wait_processed()["done"] is True

    entries = client.ls("viking://resources/handbook")
    assert [(e["name"], e["isDir"]) for e in entries] == [("intro.md", False), ("ops", True)]
    tree = client.tree("viking://resources/handbook")
    assert {e["rel_path"] for e in tree} == {"intro.md", "ops/", "ops/oncall.md"}
    assert client.read("viking://resources/handbook/ops/oncall.md").startswith("# Summary\nThe on-call rota")
    assert client.abstract("viking://resources/handbook/ops/oncall.md") == (
        "The on-call rota changes every Monday at 09:00."
    )
    overview = client.overview("viking://resources/handbook")
    assert "- intro.md: Welcome to the team handbook" in overview and "- ops/" in overview
    assert client.stat("viking://resources/handbook")["isDir"] is True

    hits = client.find(
        "When does the on-call rota change?", target_uri="viking://resources/handbook", options={"level": 2}
    )["resources"]
    assert hits[0]["uri"] == "viking://resources/handbook/ops/oncall.md"
    assert hits[0]["abstract"] == "The on-call rota changes every Monday at 09:00."


def test_write_answers_in_openviking_shape_and_replace_with_wait_serves_the_new_text(client):
    uri = "viking://resources/notes/cluster.md"
    first = client.write(uri, "The staging cluster runs Kubernetes 1.29.")
    assert {k: first[k] for k in ("uri", "root_uri", "context_type", "mode", "written_bytes", "content_updated")} == {
        "uri": uri,
        "root_uri": "viking://resources/notes",
        "context_type": "resource",
        "mode": "replace",
        "written_bytes": 41,
        "content_updated": True,
    }
    assert client.wait_processed()["done"] is True

    second = client.write(uri, "The staging cluster was moved to Nomad in May.", mode="replace", wait=True)
    assert second["semantic_status"] == "complete" and second["vector_status"] == "complete"
    assert second["content_updated"] is True
    assert client.read(uri) == "The staging cluster was moved to Nomad in May."
    assert client.abstract(uri) == "The staging cluster was moved to Nomad in May."
    hit = client.find("Which scheduler does staging use?", options={"level": 2})["resources"][0]
    assert (hit["uri"], hit["abstract"]) == (uri, "The staging cluster was moved to Nomad in May.")


def test_mkdir_then_rm_of_a_file_and_recursive_rm_of_a_directory(client):
    client.mkdir("viking://resources/scratch")
    assert client.stat("viking://resources/scratch")["isDir"] is True
    assert client.ls("viking://resources/scratch") == []
    client.write("viking://resources/scratch/a.md", "Draft A.", wait=True)
    client.write("viking://resources/scratch/deep/b.md", "Draft B.", wait=True)

    client.rm("viking://resources/scratch/a.md", wait=True)
    with pytest.raises(NotFoundError):
        client.read("viking://resources/scratch/a.md")
    assert [e["name"] for e in client.ls("viking://resources/scratch")] == ["deep"]

    with pytest.raises(ConflictError):
        client.rm("viking://resources/scratch")  # not empty, not recursive
    client.rm("viking://resources/scratch", recursive=True)
    for uri in ("viking://resources/scratch", "viking://resources/scratch/deep/b.md"):
        with pytest.raises(NotFoundError):
            client.stat(uri)


def test_add_skill_from_skill_md_text_is_listed_and_found(client):
    added = client.add_skill(SKILL_MD, wait=True)
    assert added["name"] == "pdf-tools" and added["root_uri"] == "viking://user/default/skills/pdf-tools"

    listed = client.list_skills()
    assert listed["total"] == 1 and listed["root_uris"][0] == "viking://user/default/skills"
    skill = listed["skills"][0]
    assert (skill["name"], skill["description"], skill["uri"], skill["skill_md_uri"]) == (
        "pdf-tools",
        "Extract text and tables from PDF files.",
        "viking://user/default/skills/pdf-tools",
        "viking://user/default/skills/pdf-tools/SKILL.md",
    )
    assert client.read(skill["skill_md_uri"]) == SKILL_MD
    hit = client.find("extract tables from a PDF", options={"context_type": "skill", "level": 2})["skills"][0]
    assert hit["uri"] == "viking://user/default/skills/pdf-tools/SKILL.md"


def test_reading_a_missing_uri_raises_not_found(client):
    with pytest.raises(NotFoundError) as caught:
        client.read("viking://resources/nowhere.md")
    assert caught.value.code == "NOT_FOUND"
    assert caught.value.details["resource"] == "viking://resources/nowhere.md"


@pytest.mark.parametrize("uri", ["viking://nowhere/x.md", "viking://resources/../etc/passwd"])
def test_a_bad_uri_raises_invalid_uri(client, uri):
    with pytest.raises(InvalidURIError) as caught:
        client.read(uri)
    assert caught.value.code == "INVALID_URI" and caught.value.details["uri"] == uri


def test_with_a_root_key_an_account_created_through_the_sdk_works_with_its_own_key(sdk_connect):
    with override_settings(OVSITE_ROOT_API_KEY="root-test-key"):
        with pytest.raises(UnauthenticatedError):
            sdk_connect().ls("viking://resources")  # no dev mode once a root key is set
        root = sdk_connect("root-test-key")
        created = root.admin_create_account("acme", "alice")
        assert (created["account_id"], created["admin_user_id"]) == ("acme", "alice")
        with pytest.raises(InvalidArgumentError):  # on a data route the root key names its account and user
            root.write("viking://resources/default-only.md", "In no account: refused.", wait=True)
        root_as_default = sdk_connect("root-test-key", account="default", user="default")
        root_as_default.write("viking://resources/default-only.md", "Visible in the default account only.", wait=True)

        alice = sdk_connect(created["user_key"])
        written = alice.write("viking://~/memories/preferences/tea.md", "Alice drinks green tea.", wait=True)
        assert written["uri"] == "viking://user/alice/memories/preferences/tea.md"
        assert written["root_uri"] == "viking://user/alice/memories/preferences"
        assert alice.read("viking://user/alice/memories/preferences/tea.md") == "Alice drinks green tea."
        assert alice.find("What does Alice drink?")["memories"][0]["uri"] == written["uri"]
        with pytest.raises(NotFoundError):
            alice.read("viking://resources/default-only.md")  # accounts do not share a tree
        with pytest.raises(PermissionDeniedError):
            alice.admin_create_account("other", "bob")
        with pytest.raises(UnauthenticatedError):
            sdk_connect("ovk_not-a-real-key").ls("viking://resources")


def test_sdk_search_context_gets_the_assembled_block(seeded, client):
    """`search_context()` always sends target_uri "" and limit 10; both must be accepted in context mode."""
    client.write("viking://user/default/memories/preferences/editor.md", "Uses dark mode in every editor.", wait=True)
    session = client.create_session("sdk-context")
    client.session(session["session_id"]).add_message("user", "which editor theme do I like?")
    result = client.search_context(
        "editor theme preference",
        session_id="sdk-context",
        options={"max_tokens": 600, "purpose": "coding", "dedup_turns": 5},
    )
    assert set(result) >= {"entries", "rendered", "digest", "stats"}
    assert result["entries"][0]["uri"] == "viking://user/default/memories/preferences/editor.md"
    assert 'detail="full"' in result["rendered"] and result["stats"]["purpose"] == "coding"
    assert result["stats"]["dedup"]["turns"] == 5
    again = client.search_context(
        "editor theme preference",
        session_id="sdk-context",
        options={"max_tokens": 600, "purpose": "coding", "dedup_turns": 5},
    )
    assert again["stats"]["dedup"]["cooled"] == 1 and again["entries"] == []
