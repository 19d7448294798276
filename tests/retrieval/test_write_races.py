"""Racing writes of one URI against a real server (security probe): exactly one winner per URI, the others a clean
409 (`create`) or an update (`replace`: last writer wins; `append`: every text lands once), never a 500; and the
content cap holds for the content an `append` results in."""

import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from retrieval.documents import named_sections
from retrieval.models import Context
from retrieval.services import URI_LOCKS_MAX

WRITE = "/api/v1/content/write"
BATCH = "/api/v1/content/batch-write"
# Eight writers on a barrier caught the per-URI locks' removal as often as twenty did (tried), in half the time.
RACERS = 8
FILLER = "The workers read the queue and write their results to the store. " * 3


def race(url: str, requests: list[tuple[str, dict]]) -> list[tuple[int, dict]]:
    """Sends every (path, body) from a thread of its own, all released together by a barrier once connected."""
    barrier = threading.Barrier(len(requests))

    def send(request):
        path, body = request
        with httpx.Client(base_url=url, timeout=120) as client:
            client.get("/health")  # connected and warm before the start
            barrier.wait(timeout=60)
            response = client.post(path, json=body)
            return response.status_code, response.json()

    with ThreadPoolExecutor(len(requests)) as pool:
        return list(pool.map(send, requests))


def assert_no_500(answers):
    assert all(status < 500 for status, _ in answers), [body for status, body in answers if status >= 500]


def assert_one_winner(answers) -> int:
    """Exactly one 200, every other a 409 CONFLICT; returns the winner's index."""
    assert_no_500(answers)
    statuses = [status for status, _ in answers]
    assert statuses.count(200) == 1, statuses
    assert statuses.count(409) == len(answers) - 1, statuses
    assert {body["error"]["code"] for status, body in answers if status == 409} == {"CONFLICT"}
    return statuses.index(200)


def node(uri: str) -> Context:
    return Context.objects.get(account__name="default", uri=uri)


def children(uri: str) -> list[Context]:
    return list(Context.objects.filter(account__name="default", parent_uri=uri).order_by("uri"))


def document(n: int) -> str:
    return f"# Guide {n}\n\n## Alpha {n}\n{FILLER}\n\n## Beta {n}\n{FILLER}\n"


def assert_sections_match(uri: str, content: str):
    """A document node holds its text and exactly the sections parsed from it."""
    row = node(uri)
    assert row.kind == "dir" and row.content == content
    expected = named_sections(uri.rsplit("/", 1)[1], content)
    assert len(expected) > 1
    assert [(c.uri, c.content) for c in children(uri)] == [(f"{uri}/{name}", s.text) for name, s in expected]


@pytest.fixture
def url(seeded, live_server):
    return live_server.url


@pytest.fixture(params=["existing", "new"])
def folder(request, api):
    """The racers' folder: one that exists already (the usual case: only the URI is new), or one they all create
    (their inserts of the directories meet first)."""
    base = f"viking://user/default/memories/events/race-{request.param}"
    if request.param == "existing":
        api.write(f"{base}/sibling.md", "already there")
    return base


@pytest.fixture(params=["existing", "new"])
def shelf(request, api):
    """The same for documents: a resource folder (resources are parsed into sections)."""
    base = f"viking://resources/race-{request.param}"
    if request.param == "existing":
        api.write(f"{base}/sibling.md", "already there")
    return base


# one URI ------------------------------------------------------------------------------------------------------


def test_racing_creates_of_a_new_file_have_one_winner_and_409s(url, folder):
    uri = f"{folder}/race-create.md"
    texts = [f"create {n}" for n in range(RACERS)]
    answers = race(url, [(WRITE, {"uri": uri, "content": text, "mode": "create"}) for text in texts])
    winner = assert_one_winner(answers)
    assert node(uri).content == texts[winner]


def test_racing_replaces_of_a_new_file_all_succeed_and_the_last_wins(url, folder):
    uri = f"{folder}/race-replace.md"
    texts = [f"replace {n}" for n in range(RACERS)]
    answers = race(url, [(WRITE, {"uri": uri, "content": text, "mode": "replace"}) for text in texts])
    assert_no_500(answers)
    assert [status for status, _ in answers] == [200] * RACERS, answers
    assert node(uri).content in texts
    assert Context.objects.filter(uri=uri).count() == 1


def test_racing_appends_to_a_new_file_keep_every_text_once(url, folder):
    uri = f"{folder}/race-append.md"
    texts = [f"<append {n:02}>\n" for n in range(RACERS)]
    answers = race(url, [(WRITE, {"uri": uri, "content": text, "mode": "append"}) for text in texts])
    assert_no_500(answers)
    assert [status for status, _ in answers] == [200] * RACERS, answers
    content = node(uri).content
    assert sorted(content.splitlines(keepends=True)) == texts
    assert all(content.count(text) == 1 for text in texts)


# documents (a directory node with section children) -----------------------------------------------------------


def test_racing_creates_of_a_new_document_have_one_winner_and_its_sections(url, shelf):
    uri = f"{shelf}/create-guide.md"
    texts = [document(n) for n in range(RACERS)]
    answers = race(url, [(WRITE, {"uri": uri, "content": text, "mode": "create"}) for text in texts])
    winner = assert_one_winner(answers)
    assert_sections_match(uri, texts[winner])


def test_racing_replaces_of_a_new_document_leave_one_text_and_its_sections(url, shelf):
    uri = f"{shelf}/replace-guide.md"
    texts = [document(n) for n in range(RACERS)]
    answers = race(url, [(WRITE, {"uri": uri, "content": text, "mode": "replace"}) for text in texts])
    assert_no_500(answers)
    assert [status for status, _ in answers] == [200] * RACERS, answers
    content = node(uri).content
    assert content in texts
    assert_sections_match(uri, content)


def test_racing_appends_to_a_new_document_keep_every_section_once(url, shelf):
    uri = f"{shelf}/append-guide.md"
    texts = [f"## Part {n:02}\n{FILLER}\n\n" for n in range(RACERS)]
    answers = race(url, [(WRITE, {"uri": uri, "content": text, "mode": "append"}) for text in texts])
    assert_no_500(answers)
    assert [status for status, _ in answers] == [200] * RACERS, answers
    content = node(uri).content
    assert all(content.count(text) == 1 for text in texts) and len(content) == sum(map(len, texts))
    assert_sections_match(uri, content)


# a file where another writer needs a directory -----------------------------------------------------------------


def test_a_file_and_a_file_below_it_racing_never_500_and_leave_a_consistent_tree(url):
    base = "viking://resources/race/shape"
    requests = [
        (WRITE, {"uri": base if n % 2 else f"{base}/inner-{n}.md", "content": f"text {n}", "mode": "replace"})
        for n in range(RACERS)
    ]
    answers = race(url, requests)
    assert_no_500(answers)
    assert {status for status, _ in answers} <= {200, 409}
    assert all(body["error"]["code"] == "CONFLICT" for status, body in answers if status == 409)
    below = children(base)
    file_won = node(base).kind == "file"
    # The file won: every write below it was refused and nothing is there. The directory won: every file below it
    # landed and every write of the file was refused.
    assert len(below) == (0 if file_won else RACERS // 2)
    for (status, _), (_, body) in zip(answers, requests, strict=True):
        assert status == (200 if (body["uri"] == base) == file_won else 409), body


# batch-write: several URIs, all or nothing ---------------------------------------------------------------------


def batch(n: int, mode: str, uris: list[str]) -> dict:
    ordered = uris if n % 2 else list(reversed(uris))  # half the writers list them the other way round
    return {"operations": [{"uri": uri, "content": f"{uri} by {n}", "mode": mode} for uri in ordered]}


BATCH_URIS = ["viking://resources/race/batch/a.md", "viking://resources/race/batch/b.md"]


def test_racing_batch_creates_have_one_winner_for_all_its_uris(url):
    answers = race(url, [(BATCH, batch(n, "create", BATCH_URIS)) for n in range(RACERS)])
    winner = assert_one_winner(answers)
    assert [node(uri).content for uri in BATCH_URIS] == [f"{uri} by {winner}" for uri in BATCH_URIS]


def test_racing_batch_replaces_leave_every_uri_from_one_writer(url):
    answers = race(url, [(BATCH, batch(n, "replace", BATCH_URIS)) for n in range(RACERS)])
    assert_no_500(answers)
    assert [status for status, _ in answers] == [200] * RACERS, answers
    writers = {node(uri).content.rsplit(" by ", 1)[1] for uri in BATCH_URIS}
    assert len(writers) == 1, writers  # all or nothing: one transaction's writes, never a mix


def test_a_batch_past_the_uri_locks_races_single_writes_of_one_of_its_uris(url, api):
    """A batch of more nodes than URI_LOCKS_MAX takes its account's lock instead of one per URI: it still excludes
    the writers of each of its URIs."""
    api.write("viking://resources/race/big/sibling.md", "already there")
    uris = [f"viking://resources/race/big/{n:03}.md" for n in range(URI_LOCKS_MAX + 20)]
    big = {"operations": [{"uri": uri, "content": f"{uri} by the batch", "mode": "create"} for uri in uris]}
    single = {"uri": uris[-1], "content": "by a single write", "mode": "create"}
    answers = race(url, [(BATCH, big)] + [(WRITE, single)] * 9)
    winner = assert_one_winner(answers)
    written = Context.objects.filter(uri__in=uris).count()
    assert written == (len(uris) if winner == 0 else 1)  # all or nothing


# the content cap holds for append -------------------------------------------------------------------------------


def test_append_past_the_content_cap_is_413_and_writes_nothing(api, settings):
    uri = "viking://user/default/memories/events/grows.md"
    settings.OVSITE_MAX_CONTENT_BYTES = 30
    api.write(uri, "0123456789")
    api.write(uri, "é" * 10, mode="append")  # 30 bytes: at the limit is allowed
    assert node(uri).content == "0123456789" + "é" * 10
    status, body = api.post(WRITE, {"uri": uri, "content": "x", "mode": "append"})
    assert status == 413, body
    error = body["error"]
    assert error["code"] == "RESOURCE_EXHAUSTED"
    assert error["details"] == {"uri": uri, "size_bytes": 31, "limit_bytes": 30}
    assert "31" in error["message"] and "30" in error["message"]
    assert node(uri).content == "0123456789" + "é" * 10


def test_a_batch_with_one_append_past_the_cap_writes_nothing(api, settings):
    grows, other = "viking://resources/cap/grows.md", "viking://resources/cap/other.md"
    settings.OVSITE_MAX_CONTENT_BYTES = 20
    api.write(grows, "x" * 15)
    status, body = api.post(
        BATCH,
        {
            "operations": [
                {"uri": other, "content": "fine"},
                {"uri": grows, "content": "y" * 6, "mode": "append"},
            ]
        },
    )
    assert status == 413, body
    assert body["error"]["details"] == {"uri": grows, "size_bytes": 21, "limit_bytes": 20}
    assert node(grows).content == "x" * 15
    assert not Context.objects.filter(uri=other).exists()
