"""LLM-written abstracts and overviews on the write path (docs/design.md §6), and the deterministic fallback."""

import pytest

from profiles.models import LLMUsage
from retrieval import summaries

GUIDE = "viking://resources/guides/deploy.md"
GUIDE_TEXT = (
    "# Deploying billing\n" + "Build the image, push it, roll it out behind the canary, watch the "
    "error rate for ten minutes, then promote. " * 8
)
FILE_SUMMARY = "How to deploy billing: build, push, canary, watch errors, promote."
FOLDER_SUMMARY = "Guides for the billing service, starting with its deploy procedure."


@pytest.fixture(autouse=True)
def one_section_guide(settings):
    """The guide is one section of ~1,000 characters: a file node whose abstract the LLM writes. At the shipped
    450-character cap it would be a document of three parts, each served whole as its own abstract, with no call."""
    settings.OVSITE_SECTION_MAX_CHARS = 4000


def summary_answers(fake):
    fake.script.chat = lambda body: (
        FOLDER_SUMMARY if "entries of the folder" in body["messages"][1]["content"] else FILE_SUMMARY
    )


def stat(api, uri):
    status, body = api.get("/api/v1/fs/stat", uri=uri)
    assert status == 200, body
    return body["result"]


def test_an_llm_writes_the_abstract_of_a_file_and_condenses_its_folder(api, fake_llm):
    summary_answers(fake_llm)
    api.write(GUIDE, GUIDE_TEXT)
    node = stat(api, GUIDE)
    assert node["state"] == "ready" and node["abstract"] == FILE_SUMMARY
    folder = stat(api, "viking://resources/guides")
    assert folder["abstract"] == FOLDER_SUMMARY
    overview = api.get("/api/v1/content/overview", uri="viking://resources/guides")[1]["result"]
    assert overview == f"# guides\n\n{FOLDER_SUMMARY}\n\n- deploy.md: {FILE_SUMMARY}"
    # The structural `viking://resources` root is listed without a call: one call per node that is a hit.
    assert list(LLMUsage.objects.values_list("kind", "outcome")) == [("summary", "ok")] * 2
    file_call = fake_llm.script.chat_requests()[0]
    assert (
        "Build the image" in file_call["messages"][1]["content"]
        and "450 characters" in file_call["messages"][1]["content"]
    )
    # The abstract is what is embedded and found.
    hits = api.find("how do I roll out billing?", target_uri="viking://resources/guides")["resources"]
    assert hits[0]["uri"] == GUIDE and hits[0]["abstract"] == FILE_SUMMARY


def test_an_overlong_llm_abstract_is_clipped(api, fake_llm):
    fake_llm.script.chat = "word " * 400
    api.write(GUIDE, GUIDE_TEXT)
    abstract = stat(api, GUIDE)["abstract"]
    assert len(abstract) <= summaries.ABSTRACT_MAX_CHARS and abstract.endswith("…")


def test_short_texts_memory_folders_and_authored_descriptions_need_no_call(api, fake_llm):
    summary_answers(fake_llm)
    api.write("viking://~/memories/preferences/tea.md", "Prefers green tea.")
    api.write(
        "viking://agent/bot/skills/pdf/SKILL.md",
        "---\nname: pdf\ndescription: Read PDF files.\n---\n\n" + "Run pdftotext on the file. " * 40,
    )
    assert stat(api, "viking://~/memories/preferences/tea.md")["abstract"] == "Prefers green tea."
    assert stat(api, "viking://agent/bot/skills/pdf/SKILL.md")["abstract"] == "pdf: Read PDF files."
    assert LLMUsage.objects.count() == 0 and fake_llm.script.chat_requests() == []


@pytest.mark.parametrize("failure", ["error", "garbage", "empty"])
def test_an_llm_failure_falls_back_to_the_deterministic_abstract(api, fake_llm, failure):
    if failure == "empty":
        fake_llm.script.chat = "   "
    else:
        fake_llm.script.mode = failure
    result = api.write(GUIDE, GUIDE_TEXT, wait=True)
    assert result["semantic_status"] == "complete"
    node = stat(api, GUIDE)
    assert node["state"] == "ready" and node["error"] == ""
    assert node["abstract"] == summaries.file_abstract(GUIDE_TEXT)
    folder = stat(api, "viking://resources/guides")
    assert folder["state"] == "ready" and folder["abstract"].startswith("guides (1 entries) — deploy.md: ")
    # One failed call, then the rest of the task went deterministic: the folder did not wait for a second one.
    assert list(LLMUsage.objects.values_list("kind", "outcome")) == [
        ("summary", "invalid" if failure == "empty" else "error")
    ]


def test_a_hanging_llm_costs_one_bounded_wait(api, fake_llm, monkeypatch):
    monkeypatch.setattr(summaries, "SUMMARY_TIMEOUT_S", 0.5)
    fake_llm.script.delay_s = 3
    api.write(GUIDE, GUIDE_TEXT)
    node = stat(api, GUIDE)
    assert node["state"] == "ready" and node["abstract"] == summaries.file_abstract(GUIDE_TEXT)
    assert list(LLMUsage.objects.values_list("outcome", flat=True)) == ["timeout"]


def test_a_task_makes_a_bounded_number_of_calls(api, fake_llm, monkeypatch):
    monkeypatch.setattr(summaries, "SUMMARY_MAX_CALLS", 2)
    summary_answers(fake_llm)
    operations = [{"uri": f"viking://resources/many/{i}.md", "content": GUIDE_TEXT + str(i)} for i in range(4)]
    status, body = api.post("/api/v1/content/batch-write", {"operations": operations})
    assert status == 200, body
    abstracts = [stat(api, op["uri"])["abstract"] for op in operations]
    assert abstracts.count(FILE_SUMMARY) == 2 and LLMUsage.objects.count() == 2
    assert all(a == FILE_SUMMARY or a == summaries.file_abstract(GUIDE_TEXT + str(i)) for i, a in enumerate(abstracts))
