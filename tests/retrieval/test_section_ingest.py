"""Documents on ingest become a document node with one child per section (issue 10): every path, every format,
re-adds, refusals, skills and assembly."""

import io
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command

from retrieval.models import Context
from tests.conftest import hit_uris
from tests.retrieval.test_documents import _pdf

TOPICS = [
    ("Overview", "The billing workers consume invoices from the queue and write ledger rows."),
    ("Install the agent", "Install the collector agent with apt install billing-agent on every host."),
    ("Configure the queue", "The queue lives on rabbit-3 and each worker takes a prefetch of twenty messages."),
    ("Deploy a release", "Releases are cut from main every Tuesday and rolled out by the deploy pipeline."),
    ("Restart the workers", "Restart the workers with systemctl restart billing-worker@* and watch the logs."),
    ("Rotate the credentials", "Database passwords rotate every ninety days through the vault rotation job."),
]


def _section(title: str, lead: str, level: str = "##") -> str:
    filler = f"{lead} " + " ".join(
        f"Step {n} of {title.lower()} is logged in the operations journal." for n in range(1, 5)
    )
    return f"{level} {title}\n\n{filler}\n"


def runbook(topics=TOPICS) -> str:
    return "# Billing runbook\n\n" + "\n".join(_section(title, lead) for title, lead in topics)


def upload(api, name: str, data: bytes, **options):
    response = api.client.post(
        "/api/v1/resources/temp_upload", {"file": SimpleUploadedFile(name, data)}, format="multipart"
    )
    if response.status_code != 200:
        return response.status_code, response.json()
    temp_id = response.json()["result"]["temp_file_id"]
    return api.post("/api/v1/resources", {"temp_file_id": temp_id, "wait": True, **options})


def rows_below(uri: str) -> list[Context]:
    return list(Context.objects.filter(uri__startswith=uri + "/").order_by("uri"))


def test_uploaded_runbook_becomes_a_document_with_one_node_per_section(api):
    text = runbook()
    status, body = upload(api, "runbook.md", text.encode())
    assert status == 200, body
    doc = "viking://resources/runbook.md"
    sections = rows_below(doc)
    assert [row.uri.rsplit("/", 1)[1] for row in sections] == [
        "01-billing-runbook",
        "02-install-the-agent",
        "03-configure-the-queue",
        "04-deploy-a-release",
        "05-restart-the-workers",
        "06-rotate-the-credentials",
    ]
    assert all(
        row.state == "ready"
        and row.embedding is not None
        and row.abstract_tokens > 0
        and row.content_tokens > 0
        and row.kind == "file"
        for row in sections
    )
    assert sections[4].abstract.startswith("## Restart the workers Restart the workers with systemctl")
    node = Context.objects.get(uri=doc)
    assert node.kind == "dir" and node.embedding is not None and node.content_hash
    # Reading the document reads the whole document, as written.
    status, read = api.get("/api/v1/content/read", uri=doc)
    assert status == 200 and read["result"] == text
    overview = api.get("/api/v1/content/overview", uri=doc)[1]["result"]
    lines = overview.splitlines()
    assert lines[0] == "# runbook.md" and lines[2].startswith("- 01-billing-runbook: Billing runbook")
    assert lines[6].startswith("- 05-restart-the-workers: Restart the workers Restart the workers with systemctl")
    assert api.get("/api/v1/content/abstract", uri=doc)[1]["result"].startswith("# Billing runbook")
    top = api.find("How do I restart the billing workers?", level=2)["resources"][0]
    assert top["uri"] == f"{doc}/05-restart-the-workers"


def test_content_write_readding_an_unchanged_document_is_a_no_op(api):
    doc = "viking://resources/ops/runbook.md"
    first = api.write(doc, runbook(), wait=True)
    assert first["changed"] == [doc]
    before = {row.uri: (row.id, row.updated_at) for row in Context.objects.filter(uri__startswith=doc)}
    again = api.write(doc, runbook(), wait=True)
    assert again["changed"] == [] and again["content_updated"] is False
    assert {row.uri: (row.id, row.updated_at) for row in Context.objects.filter(uri__startswith=doc)} == before
    assert len(before) == 7


def test_re_uploading_a_document_keeps_its_uris_and_an_unchanged_one_is_a_no_op(api):
    doc = "viking://resources/runbook.md"
    assert upload(api, "runbook.md", runbook().encode())[0] == 200
    first = {row.uri: (row.id, row.updated_at) for row in rows_below(doc)}
    status, again = upload(api, "runbook.md", runbook().encode())
    assert status == 200 and again["result"]["changed"] == 0
    assert {row.uri: (row.id, row.updated_at) for row in rows_below(doc)} == first
    api.delete("/api/v1/fs", uri=doc)
    assert upload(api, "runbook.md", runbook().encode())[0] == 200
    assert [row.uri for row in rows_below(doc)] == sorted(first)  # the same readable URIs after a fresh ingest


def test_a_changed_document_replaces_only_its_changed_sections(api):
    doc = "viking://resources/runbook.md"
    api.write(doc, runbook(), wait=True)
    old = {row.content_hash: row for row in rows_below(doc)}
    edited = list(TOPICS)
    edited[3] = ("Deploy a release", "Releases are now cut every Thursday and need two approvals.")
    edited.insert(1, ("Read this first", "Page the on-call engineer before you touch production billing."))
    del edited[5]  # Restart the workers
    api.write(doc, runbook(edited), wait=True)
    new = rows_below(doc)
    names = [row.uri.rsplit("/", 1)[1] for row in new]
    assert names == [
        "01-billing-runbook",
        "02-read-this-first",
        "03-install-the-agent",
        "04-configure-the-queue",
        "05-deploy-a-release",
        "06-rotate-the-credentials",
    ]
    kept = [row for row in new if row.content_hash in old]
    # Install, Configure and Rotate are unchanged: same rows and vectors, under their renumbered URIs.
    assert sorted(row.uri.rsplit("/", 1)[1] for row in kept) == [
        "01-billing-runbook",
        "03-install-the-agent",
        "04-configure-the-queue",
        "06-rotate-the-credentials",
    ]
    for row in kept:
        assert row.id == old[row.content_hash].id and list(row.embedding) == list(old[row.content_hash].embedding)
    assert {row.id for row in new if row.content_hash not in old}.isdisjoint(r.id for r in old.values())
    assert not Context.objects.filter(uri__endswith="restart-the-workers").exists()
    assert all(row.state == "ready" and row.embedding is not None for row in new)
    assert "02-read-this-first: Read this first" in Context.objects.get(uri=doc).overview


def test_each_format_in_a_zip_becomes_sections_and_other_binaries_are_reported(api):
    page = (
        "<html><head><title>Guide</title></head><body>"
        + "".join(f"<h2>{title}</h2><p>{lead} {lead} {lead}</p>" for title, lead in TOPICS[:3])
        + "</body></html>"
    )
    source = "".join(
        f'def step_{n}(queue):\n    """Handles step {n} of the billing pipeline."""\n    return {n}\n\n\n'
        for n in range(3)
    )
    pdf = _pdf([f"{lead} {lead} {lead}" for _, lead in TOPICS[:2]])
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("docs/runbook.md", runbook())
        archive.writestr("docs/guide.html", page)
        archive.writestr("src/pipeline.py", source)
        archive.writestr("manual.pdf", pdf)
        archive.writestr("logo.png", b"\x89PNG\r\n\x1a\n\x00\x00binary")
    status, body = upload(api, "handbook.zip", buffer.getvalue())
    assert status == 200, body
    assert body["result"]["skipped"] == [
        {"path": "logo.png", "reason": "not UTF-8 text (Markdown, plain text, HTML, source code) or PDF"}
    ]
    root = "viking://resources/handbook"

    def names(uri):
        return [row.uri.rsplit("/", 1)[1] for row in Context.objects.filter(parent_uri=uri).order_by("uri")]

    assert len(names(f"{root}/docs/runbook.md")) == 6
    assert names(f"{root}/docs/guide.html") == ["01-overview", "02-install-the-agent", "03-configure-the-queue"]
    assert names(f"{root}/src/pipeline.py") == ["01-step_0", "02-step_1", "03-step_2"]
    assert names(f"{root}/manual.pdf") == ["01-page-1", "02-page-2"]
    skeleton = Context.objects.get(uri=f"{root}/src/pipeline.py/02-step_1").abstract
    assert skeleton.startswith('def step_1(queue): """Handles step 1 of the billing pipeline."""')
    status, read = api.get("/api/v1/content/read", uri=f"{root}/manual.pdf")
    assert read["result"].startswith("## Page 1\n\nThe billing workers consume invoices")


def test_import_dir_parses_documents_and_reports_what_it_skips(api, tmp_path, capsys):
    (tmp_path / "runbook.md").write_text(runbook())
    (tmp_path / "broken.pdf").write_bytes(b"%PDF-1.4\nnot really a pdf")
    call_command("import_dir", str(tmp_path), "--to", "viking://resources/imported")
    out = capsys.readouterr().out
    assert "imported 1 files" in out and "skipped broken.pdf: the PDF cannot be read" in out
    assert len(rows_below("viking://resources/imported/runbook.md")) == 6


@pytest.mark.parametrize(
    "name,data,code,status",
    [
        ("logo.png", b"\x89PNG\r\n\x1a\n\x00\x00binary", "INVALID_ARGUMENT", 422),
        ("scan.pdf", _pdf([""]), "INVALID_ARGUMENT", 422),
        ("broken.zip", b"PK\x03\x04 not a zip at all", "INVALID_ARGUMENT", 422),
    ],
)
def test_bad_uploads_are_refused_and_nothing_is_written(api, name, data, code, status):
    got, body = upload(api, name, data)
    assert got == status and body["status"] == "error" and body["error"]["code"] == code
    assert body["error"]["details"]["validation_errors"][0]["loc"] == ["temp_file_id"]
    assert not Context.objects.filter(uri__startswith="viking://resources/").exists()


def _skill_zip(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return buffer.getvalue()


@pytest.mark.parametrize(
    "name,data,message",
    [
        ("SKILL.md", b"# No front matter\n\nJust a body.", "SKILL.md needs front matter with a name"),
        ("SKILL.md", b"---\nname: [unclosed\n---\nbody", "SKILL.md front matter is not valid YAML"),
        ("SKILL.md", b"---\nname: ../escape\n---\nbody", "a skill name is 1-64 letters"),
        ("logo.png", b"\x89PNG\r\n\x1a\n\x00\x00binary", "logo.png is not a UTF-8 SKILL.md"),
        ("skill.zip", _skill_zip({"notes.md": b"# Notes"}), "the skill archive has no SKILL.md"),
    ],
)
def test_bad_skill_uploads_are_refused_and_nothing_is_written(api, name, data, message):
    response = api.client.post(
        "/api/v1/resources/temp_upload", {"file": SimpleUploadedFile(name, data)}, format="multipart"
    )
    temp_id = response.json()["result"]["temp_file_id"]
    status, body = api.post("/api/v1/skills", {"temp_file_id": temp_id, "wait": True})
    assert status == 422 and body["status"] == "error" and body["error"]["code"] == "INVALID_ARGUMENT"
    assert body["error"]["message"].startswith(message)
    assert not Context.objects.exists()


def test_unknown_binary_names_the_supported_types(api):
    _, body = upload(api, "logo.png", b"\x89PNG\r\n\x1a\n\x00\x00binary")
    assert body["error"]["message"] == (
        "logo.png: this binary type is not supported; send UTF-8 text (Markdown, "
        "plain text, HTML, source code) or PDF, or a zip of them"
    )
    assert body["error"]["details"]["validation_errors"][0]["type"] == "unsupported_media"


def test_upload_limits_are_reported_and_nothing_is_written(api, settings):
    settings.OVSITE_MAX_UPLOAD_FILES = 2
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for n in range(3):
            archive.writestr(f"doc{n}.md", runbook())
    status, body = upload(api, "many.zip", buffer.getvalue())
    assert status == 413 and body["error"]["code"] == "RESOURCE_EXHAUSTED"
    assert body["error"]["message"] == "the archive holds 3 files; the limit is 2"
    assert body["error"]["details"] == {"limit_files": 2}
    settings.OVSITE_MAX_UPLOAD_FILES = 10
    settings.OVSITE_MAX_CONTENT_BYTES = 2000  # one member too large: the whole archive is refused
    with zipfile.ZipFile(buffer := io.BytesIO(), "w") as archive:
        archive.writestr("small.md", "A short note.")
        archive.writestr("big.md", runbook())
    status, body = upload(api, "mixed.zip", buffer.getvalue())
    assert status == 413 and body["error"]["details"]["limit_bytes"] == 2000
    settings.OVSITE_MAX_UPLOAD_BYTES = 100
    status, body = upload(api, "runbook.md", runbook().encode())
    assert status == 413 and body["error"]["details"] == {"limit_bytes": 100}
    assert not Context.objects.exists()


def test_sections_are_written_through_their_document_only(api):
    doc = "viking://resources/runbook.md"
    api.write(doc, runbook(), wait=True)
    status, body = api.post("/api/v1/content/write", {"uri": f"{doc}/03-configure-the-queue", "content": "x"})
    assert status == 409 and body["error"]["details"] == {"uri": doc}
    status, body = api.post("/api/v1/content/write", {"uri": f"{doc}/99-new", "content": "x"})
    assert status == 409


def test_a_document_shrunk_to_one_section_is_one_file_again_and_rm_takes_its_sections(api):
    doc = "viking://resources/runbook.md"
    api.write(doc, runbook(), wait=True)
    api.write(doc, "Just one line now.", wait=True)
    row = Context.objects.get(uri=doc)
    assert row.kind == "file" and row.abstract == "Just one line now." and not rows_below(doc)
    api.write(doc, runbook(), wait=True)
    status, body = api.delete("/api/v1/fs", uri=doc)
    assert status == 200 and body["result"]["estimated_deleted_count"] == 7
    assert not Context.objects.filter(uri__startswith=doc).exists()


def test_appending_to_a_document_adds_a_section(api):
    doc = "viking://resources/runbook.md"
    api.write(doc, runbook(TOPICS[:3]), wait=True)
    api.write(doc, "\n" + _section(*TOPICS[4]), mode="append", wait=True)
    assert [row.uri.rsplit("/", 1)[1] for row in rows_below(doc)][-1] == "04-restart-the-workers"
    assert api.get("/api/v1/content/read", uri=doc)[1]["result"] == runbook(TOPICS[:3]) + "\n" + _section(*TOPICS[4])


def test_chinese_document_gets_readable_section_names(api):
    body = "".join(
        f"## {title}\n\n" + (sentence * 12) + "\n\n"
        for title, sentence in [
            ("安装代理", "在每台主机上用软件包管理器安装采集代理。"),
            ("重启工作进程", "用系统服务命令重启所有计费工作进程并查看日志。"),
        ]
    )
    doc = "viking://resources/运维手册.md"
    api.write(doc, body, wait=True)
    assert [row.uri.rsplit("/", 1)[1] for row in rows_below(doc)] == ["01-安装代理", "02-重启工作进程"]
    assert hit_uris(api.find("怎么重启计费工作进程", level=2, limit=1)) == [f"{doc}/02-重启工作进程"]


SKILL = (
    "---\nname: billing-ops\ndescription: Operate the billing workers (restarts, deploys, credentials).\n---\n\n"
    + "\n".join(_section(title, lead) for title, lead in TOPICS[3:])
)


def test_skill_front_matter_is_the_abstract_and_its_body_the_sections(api):
    status, body = api.post("/api/v1/skills", {"data": SKILL, "target_uri": "viking://agent/bot/skills", "wait": True})
    assert status == 200, body
    skill_md = "viking://agent/bot/skills/billing-ops/SKILL.md"
    node = Context.objects.get(uri=skill_md)
    assert node.abstract == "billing-ops: Operate the billing workers (restarts, deploys, credentials)."
    assert node.embedding is not None and node.context_type == "skill"
    assert [row.uri.rsplit("/", 1)[1] for row in rows_below(skill_md)] == [
        "01-deploy-a-release",
        "02-restart-the-workers",
        "03-rotate-the-credentials",
    ]
    assert api.get("/api/v1/content/read", uri=skill_md)[1]["result"] == SKILL
    listed = api.get("/api/v1/skills")[1]["result"]["skills"]
    assert [(s["name"], s["skill_md_uri"]) for s in listed] == [("billing-ops", skill_md)]
    hits = api.find("rotate database passwords", context_type="skill", level=2)["skills"]
    assert hits[0]["uri"] == f"{skill_md}/03-rotate-the-credentials"


def _context(api, query: str, max_tokens: int) -> dict:
    status, body = api.post("/api/v1/search/search", {"query": query, "mode": "context", "max_tokens": max_tokens})
    assert status == 200, body
    return body["result"]


@pytest.mark.parametrize("trees", [True, False])
def test_an_answer_in_the_fifth_section_reaches_rendered_only_with_section_trees(api, settings, trees):
    settings.OVSITE_SECTION_TREES = trees
    api.write("viking://resources/runbook.md", runbook(), wait=True)
    api.write(
        "viking://resources/faq.md",
        runbook([(f"Question {n}", f"Answer number {n} is in the FAQ.") for n in range(6)]),
        wait=True,
    )
    result = _context(api, "How do I restart the billing workers?", 1600)
    answer = "systemctl restart billing-worker@*"
    assert (answer in result["rendered"]) is trees
    if trees:
        # The runbook's sections served together are one entry (issue 10 §4), the best of them among them.
        first = result["entries"][0]
        assert "viking://resources/runbook.md/05-restart-the-workers" in first.get("sections", [first["uri"]])
        assert first["detail"] == "abstract"  # resources stay capped at abstract (RFC §3.4)
    else:
        assert Context.objects.get(uri="viking://resources/runbook.md").kind == "file"
        assert not rows_below("viking://resources/runbook.md")


def test_a_200_kb_document_is_stored_whole_and_in_bounded_sections(api, settings):
    # At the shipped 450-character cap this manual is 540 sections, whose embedding takes a minute or more on the
    # test machine (bench/quality.py times it); the cap is a setting, and the bound is what is tested here.
    settings.OVSITE_SECTION_MAX_CHARS = 4000
    text = "".join(
        f"## Part {n}\n\n" + (f"Paragraph {n:02d} of the operations manual goes on. " * 24 + "\n\n") * 3
        for n in range(60)
    )
    assert len(text) > 200_000
    doc = "viking://resources/manual.md"
    api.write(doc, text, wait=True)
    sections = rows_below(doc)
    assert len(sections) == 60 and all(len(row.content) <= 4000 for row in sections)
    assert all(row.state == "ready" and row.embedding is not None for row in sections)
    assert sections[0].uri == f"{doc}/01-part-0" and api.get("/api/v1/content/read", uri=doc)[1]["result"] == text
