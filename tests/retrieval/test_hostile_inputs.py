"""Hostile documents against a live server (issue 38): every crafted file (tests/hostile_files.py) is answered with a
4xx naming the file and the reason, or stored as the text it is, within its deadline; `/health` answers throughout,
and the server process's memory stays within MEMORY_GROWTH_MAX_MB of what it held before the first of them.

The server is `make run`'s (uvicorn, Celery eager, dev mode) with tight parse limits, so that a limit that trips
does so in seconds; docs/operations.md, "Limits on what a document may cost", gives the defaults."""

import threading
import time

import httpx
import pytest

from tests import hostile_files as hostile
from tests.live import child_env, database_env, start_asgi

PARSE_LIMITS = {
    "OVSITE_PARSE_CPU_SECONDS": 3,
    "OVSITE_PARSE_TIMEOUT_S": 8,
    "OVSITE_PARSE_MEMORY_MB": 256,
    "OVSITE_PDF_MAX_PAGES": 500,
}
# A refusal comes within the parse deadline, plus the upload's own transfer and a loaded CI machine's slack.
ANSWER_WITHIN_S = PARSE_LIMITS["OVSITE_PARSE_TIMEOUT_S"] + 12
HEALTH_EVERY_S = 0.25
HEALTH_WITHIN_S = 3.0
# What the web process may grow by over the whole module: parses run in boxes, whose memory is their own; this is
# the uploads passing through (20 MB at most each) and the allocator's slack.
MEMORY_GROWTH_MAX_MB = 150


class HealthWatch:
    """Polls /health from its own thread while the hostile requests run; records every miss."""

    def __init__(self, url: str):
        self.url, self.misses, self.slowest = url, [], 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self):
        with httpx.Client(timeout=HEALTH_WITHIN_S) as client:
            while not self._stop.wait(HEALTH_EVERY_S):
                started = time.monotonic()
                try:
                    status = client.get(self.url + "/health").status_code
                except httpx.TransportError as exc:
                    status = repr(exc)
                self.slowest = max(self.slowest, time.monotonic() - started)
                if status != 200:
                    self.misses.append(status)

    def stop(self):
        self._stop.set()
        self._thread.join()


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        line = next(line for line in status if line.startswith("VmRSS:"))
    return int(line.split()[1]) / 1024


@pytest.fixture(scope="module")
def server(django_db_setup, tmp_path_factory):
    env = child_env(**database_env(), OVSITE_ROOT_API_KEY="", **PARSE_LIMITS)
    process, url = start_asgi(tmp_path_factory.mktemp("hostile"), env)
    try:
        # The first upload warms what a normal one loads (the embedder's first batch, the tokenizers' tables).
        assert upload(url, "warm.md", b"# Warm\n\nA first note, so the server has loaded what it uses.")[0] == 200
        baseline = rss_mb(process.popen.pid)
        watch = HealthWatch(url)
        yield url
        watch.stop()
        grown = rss_mb(process.popen.pid) - baseline
        print(f"\nhostile inputs: the web process grew {grown:.0f} MB; slowest /health {watch.slowest:.2f} s")
        assert not watch.misses, f"/health failed {len(watch.misses)} times: {watch.misses[:5]}"
        assert watch.slowest < HEALTH_WITHIN_S
        assert grown < MEMORY_GROWTH_MAX_MB, f"the server grew by {grown:.0f} MB:\n{process.tail()}"
    finally:
        process.stop()


@pytest.fixture
def url(server, transactional_db):
    return server


def upload(url: str, name: str, data: bytes, route: str = "/api/v1/resources") -> tuple[int, dict, float]:
    started = time.monotonic()
    with httpx.Client(base_url=url, timeout=ANSWER_WITHIN_S) as client:
        response = client.post("/api/v1/resources/temp_upload", files={"file": (name, data)})
        if response.status_code == 200:
            temp_id = response.json()["result"]["temp_file_id"]
            response = client.post(route, json={"temp_file_id": temp_id, "wait": True})
    return response.status_code, response.json(), time.monotonic() - started


def write(url: str, uri: str, content: str) -> tuple[int, dict, float]:
    started = time.monotonic()
    response = httpx.post(
        url + "/api/v1/content/write", json={"uri": uri, "content": content, "wait": True}, timeout=ANSWER_WITHIN_S
    )
    return response.status_code, response.json(), time.monotonic() - started


def assert_refused(answer, status: int, *words: str) -> dict:
    got, body, took = answer
    assert got == status, body
    error = body["error"]
    assert error["code"] == ("INVALID_ARGUMENT" if status == 422 else "RESOURCE_EXHAUSTED"), error
    for word in words:
        assert word in error["message"], error
    assert took < ANSWER_WITHIN_S
    return error


# Each: the upload's name, its builder, the status and the words the refusal must hold (the file, the reason).
REFUSED_UPLOADS = {
    "pdf-outline-deep": ("deep.pdf", lambda: hostile.pdf_outline_deep(2000), 413, ["deep.pdf", "outline depth"]),
    "pdf-flate-bomb": ("bomb.pdf", hostile.pdf_flate_bomb, 413, ["bomb.pdf", "decompressing"]),
    "pdf-page-tree-not-dict": ("tree.pdf", hostile.pdf_page_tree_malformed, 422, ["tree.pdf", "no extractable text"]),
    "pdf-page-tree-cycle": ("kids.pdf", lambda: hostile.pdf_page_tree_malformed("cycle"), 422, ["kids.pdf", "cyclic"]),
    "pdf-unknown-filter": ("filter.pdf", hostile.pdf_unknown_filter, 422, ["filter.pdf", "Unsupported filter"]),
    "pdf-bad-lzw": ("lzw.pdf", hostile.pdf_bad_lzw, 422, ["lzw.pdf", "LZW"]),
    "pdf-negative-predictor": (
        "predictor.pdf",
        hostile.pdf_negative_predictor_columns,
        422,
        ["predictor.pdf", "/Columns"],
    ),
    "pdf-corrupt-flate": ("flate.pdf", hostile.pdf_corrupt_flate, 413, ["flate.pdf", "decompressing"]),
    "pdf-too-many-pages": ("pages.pdf", lambda: hostile.pdf_many_pages(600), 413, ["pages.pdf", "600 pages"]),
    # zipfile reads no more than a member declares: the 1 GB member is its 16 declared bytes, binary ones.
    "zip-bomb-deflate": ("deflate.zip", hostile.zip_bomb_deflate, 422, ["no text files"]),
    # ... but inflates a bzip2 member whole before it cuts: the box's memory limit stops it.
    # (or, on a machine too loaded to inflate 256 MB in 8 s, its deadline: either limit is the box's).
    "zip-bomb-bzip2": ("bzip2.zip", hostile.zip_bomb_bzip2, 413, ["bzip2.zip"]),
    "zip-many-members": ("many.zip", lambda: hostile.zip_many_members(2001), 413, ["2001 files"]),
    "zip-bad-crc": ("crc.zip", hostile.zip_bad_crc, 422, ["note.md", "Bad CRC"]),
    "zip-encrypted": ("secret.zip", hostile.zip_encrypted_member, 422, ["note.md", "encrypted"]),
    "zip-unknown-method": ("method.zip", hostile.zip_unknown_method, 422, ["note.md", "compression method"]),
    "zip-corrupt-deflate": ("corrupt.zip", hostile.zip_corrupt_deflate, 422, ["note.md", "cannot be inflated"]),
}


@pytest.mark.parametrize("case", REFUSED_UPLOADS)
def test_a_hostile_upload_is_refused_in_time_and_nothing_is_written(url, case):
    name, build, status, words = REFUSED_UPLOADS[case]
    assert_refused(upload(url, name, build()), status, *words)
    stored = httpx.get(url + "/api/v1/fs/stat", params={"uri": f"viking://resources/{name.removesuffix('.zip')}"})
    assert stored.status_code == 404, stored.text


def test_a_pdf_whose_outline_loops_is_read_in_time(url):
    """pypdf 7 walks an outline with a visited set: the loop that hung 5.6 is one bookmark."""
    got, body, took = upload(url, "loop.pdf", hostile.pdf_outline_cycle())
    assert got == 200 and body["result"]["files"] == 1, body
    assert took < ANSWER_WITHIN_S


def test_a_skill_zip_with_files_outside_its_folder_is_refused(url):
    error = assert_refused(upload(url, "skill.zip", hostile.zip_skill_two_roots(), "/api/v1/skills"), 422, "outside")
    assert error["details"]["outside"]


@pytest.mark.parametrize(
    "name,text",
    [
        ("laughs", hostile.yaml_billion_laughs()),
        ("deep", hostile.yaml_deep_front_matter(2000).replace("---\n", "---\nname: deep\n", 1)),
    ],
)
def test_a_skill_whose_front_matter_expands_or_nests_is_refused(url, name, text):
    got = upload(url, "SKILL.md", text.encode(), "/api/v1/skills")
    assert_refused(got, 422, "SKILL.md front matter is not valid YAML")


def test_a_skill_written_with_aliases_lists_at_its_own_size(url):
    """Written through content/write (which never checks front matter), it must not inflate every listing."""
    laughs = hostile.yaml_billion_laughs()
    assert write(url, "viking://agent/default/skills/laughs/SKILL.md", laughs)[0] == 200
    listing = httpx.get(url + "/api/v1/skills", timeout=ANSWER_WITHIN_S)
    assert listing.status_code == 200 and len(listing.content) < 10 * len(laughs)


# Each several times what breaks the naive parser (ast: from 3,000 levels; its tokenizer: 200 parentheses; the
# old heading pattern: 1.3 s at 1,000 characters, cubic); what a text costs beyond that is embedding its chunks.
@pytest.mark.parametrize(
    "uri,text",
    [
        ("viking://resources/deep.py", hostile.python_deep_expression(20_000)),
        ("viking://resources/parens.py", hostile.python_deep_expression(10_000, "parens")),
        ("viking://resources/padded.md", hostile.markdown_redos_heading(10_000)),
        ("viking://resources/front.md", hostile.yaml_deep_front_matter(2000) + "\n# Body\n\nText below."),
        ("viking://resources/nested.html", hostile.html_deep_nesting(50_000)),
    ],
)
def test_a_hostile_text_document_is_stored_as_text_in_time(url, uri, text):
    got, body, took = write(url, uri, text)
    assert got == 200, body
    assert body["result"]["semantic_status"] == "complete", body
    assert took < ANSWER_WITHIN_S
    read = httpx.get(url + "/api/v1/content/read", params={"uri": uri}, timeout=ANSWER_WITHIN_S).json()
    assert read["result"] == text


def test_a_normal_upload_still_works_beside_them(url):
    got, body, _ = upload(url, "manual.pdf", hostile.pdf_plain("Restart the billing workers with systemctl."))
    assert got == 200, body
    assert body["result"]["files"] == 1
