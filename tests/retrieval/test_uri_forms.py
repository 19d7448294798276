"""The URI forms a request may use, on every REST field that takes a URI (issue 39, item 1): one resolver with
OpenViking 0.5.2's rules (`retrieval.uris.parse_uri`). `viking://~/…` is the caller's own space; a uid-less
`viking://user/<reserved>/…` (memories, resources, skills, peers, privacy, sessions), the shorthand OpenViking's
plugins were written with, is refused as OpenViking refuses it (400 INVALID_URI, its hint), never answered with an
empty success; a user whose id is literally the reserved name keeps `viking://user/<that name>/…`.

Dev mode (no root key) unless a test says otherwise: the loopback caller is account `default`, user `default`.
The MCP tools' fields: tests/mcp_server/test_mcp_uri_forms.py.
"""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import override_settings
from rest_framework.test import APIClient

from retrieval.models import Context
from tests.conftest import Api, hit_uris

FIND = "/api/v1/search/find"
SEARCH = "/api/v1/search/search"
RECALL = "/api/v1/search/recall"
OWN = "viking://user/default"
COFFEE = f"{OWN}/memories/preferences/coffee.md"
TEA = f"{OWN}/memories/preferences/tea.md"
DEPLOY = f"{OWN}/memories/events/2026/12/01/deploy.md"
MEMORIES = {
    COFFEE: "The user drinks black coffee, no sugar.",
    TEA: "In the afternoon the user prefers green tea to coffee.",
    DEPLOY: "# Summary\nDeployed ovsite 0.3 to production; the user had coffee while it rolled out.",
}
HINT = (
    "'memories' is a reserved name, not a user id. Use 'viking://~/memories' for the current user, "
    "or 'viking://user/{user_id}/memories'"
)


@pytest.fixture
def store(api):
    api.write_all(MEMORIES)
    return api


def assert_refused_with_the_hint(status, body, uri, rest="memories"):
    """OpenViking's refusal: 400 INVALID_URI naming the URI, with the `~` form to use instead."""
    assert status == 400 and body["status"] == "error", body
    error = body["error"]
    assert error["code"] == "INVALID_URI", error
    name = rest.split("/")[0]
    hint = (
        f"'{name}' is a reserved name, not a user id. Use 'viking://~/{rest}' for the current user, "
        f"or 'viking://user/{{user_id}}/{rest}'"
    )
    assert hint in error["message"], error["message"]
    assert error["details"]["uri"] == uri and error["details"]["suggestion"] == f"viking://~/{rest}", error


# the resolver's rules, one field at a time ---------------------------------------------------------------------


def test_find_target_uri_in_the_uid_less_form_is_refused_with_openvikings_hint(store):
    status, body = store.post(FIND, {"query": "what does the user drink?", "target_uri": "viking://user/memories"})
    assert_refused_with_the_hint(status, body, "viking://user/memories")
    assert HINT in body["error"]["message"]


def test_find_target_uri_in_the_tilde_form_finds_the_callers_memories(store):
    result = store.find("what does the user drink?", target_uri="viking://~/memories")
    assert {COFFEE, TEA} <= set(hit_uris(result))


def test_find_target_uri_list_names_the_uid_less_member(store):
    status, body = store.post(FIND, {"query": "coffee", "target_uri": ["viking://~/memories", "viking://user/skills/"]})
    assert_refused_with_the_hint(status, body, "viking://user/skills/", rest="skills")


def test_search_list_mode_target_uri_is_resolved_alike(store):
    status, body = store.post(SEARCH, {"query": "coffee", "target_uri": "viking://user/memories/preferences/"})
    assert_refused_with_the_hint(status, body, "viking://user/memories/preferences/", "memories/preferences")
    status, body = store.post(SEARCH, {"query": "coffee", "target_uri": "viking://~/memories/preferences/"})
    assert status == 200 and set(hit_uris(body["result"])) == {COFFEE, TEA}, body


@pytest.mark.parametrize("mode", ["context", "bootstrap"])
def test_search_exclude_uris_in_the_uid_less_form_are_refused_naming_their_index(store, mode):
    body = {"mode": mode, "exclude_uris": ["viking://~/memories/events", "viking://user/memories/preferences"]}
    if mode == "context":
        body["query"] = "what does the user drink?"
    status, answer = store.post(SEARCH, body)
    assert_refused_with_the_hint(status, answer, "viking://user/memories/preferences", "memories/preferences")
    assert answer["error"]["details"]["loc"] == ["exclude_uris", 1]


def test_recall_exclude_uris_in_the_tilde_form_exclude_the_callers_memories(store):
    query = {"query": "what does the user drink?", "score_threshold": 0}
    status, body = store.post(RECALL, query)
    assert status == 200 and COFFEE in body["result"]["rendered"], body
    status, body = store.post(RECALL, {**query, "exclude_uris": ["viking://~/memories/preferences/"]})
    assert status == 200, body
    assert "memories/preferences" not in body["result"]["rendered"] and body["result"]["stats"]["excluded"] >= 2
    status, body = store.post(RECALL, {**query, "exclude_uris": ["viking://user/memories/preferences/"]})
    assert_refused_with_the_hint(status, body, "viking://user/memories/preferences/", "memories/preferences")


@pytest.mark.parametrize("route", ["read", "abstract", "overview"])
def test_content_read_routes_resolve_the_uri(store, route):
    level_uri = "preferences/coffee.md" if route != "overview" else "preferences"
    status, body = store.get(f"/api/v1/content/{route}", uri=f"viking://user/memories/{level_uri}")
    assert_refused_with_the_hint(status, body, f"viking://user/memories/{level_uri}", f"memories/{level_uri}")
    status, body = store.get(f"/api/v1/content/{route}", uri=f"viking://~/memories/{level_uri}")
    assert status == 200 and body["result"], body


def test_content_write_in_the_uid_less_form_writes_nothing(store):
    before = Context.objects.count()
    status, body = store.post(
        "/api/v1/content/write", {"uri": "viking://user/memories/preferences/milk.md", "content": "Oat milk."}
    )
    assert_refused_with_the_hint(
        status, body, "viking://user/memories/preferences/milk.md", "memories/preferences/milk.md"
    )
    assert Context.objects.count() == before and not Context.objects.filter(owner="memories").exists()


def test_batch_write_operations_and_root_uri_resolve_alike(store):
    before = Context.objects.count()
    ops = [
        {"uri": "viking://~/memories/preferences/milk.md", "content": "Oat milk."},
        {"uri": "viking://user/memories/preferences/sugar.md", "content": "No sugar."},
    ]
    status, body = store.post("/api/v1/content/batch-write", {"operations": ops})
    assert_refused_with_the_hint(
        status, body, "viking://user/memories/preferences/sugar.md", "memories/preferences/sugar.md"
    )
    status, body = store.post(
        "/api/v1/content/batch-write", {"operations": ops[:1], "root_uri": "viking://user/memories"}
    )
    assert_refused_with_the_hint(status, body, "viking://user/memories")
    assert Context.objects.count() == before


@pytest.mark.parametrize("route", ["ls", "tree", "stat"])
def test_fs_read_routes_resolve_the_uri(store, route):
    uri = "viking://user/memories/preferences/" + ("coffee.md" if route == "stat" else "")
    status, body = store.get(f"/api/v1/fs/{route}", uri=uri)
    assert_refused_with_the_hint(status, body, uri, "memories/preferences" + ("/coffee.md" if route == "stat" else ""))
    status, body = store.get(f"/api/v1/fs/{route}", uri=uri.replace("viking://user/", "viking://~/"))
    assert status == 200 and COFFEE in str(body["result"]), body


def test_fs_mkdir_and_rm_resolve_the_uri(store):
    status, body = store.post("/api/v1/fs/mkdir", {"uri": "viking://user/resources/notes"})
    assert_refused_with_the_hint(status, body, "viking://user/resources/notes", "resources/notes")
    status, body = store.delete("/api/v1/fs", uri="viking://user/memories/preferences/coffee.md")
    assert_refused_with_the_hint(
        status, body, "viking://user/memories/preferences/coffee.md", "memories/preferences/coffee.md"
    )
    assert Context.objects.filter(uri=COFFEE).exists()


def _upload(api: Api, name: str, text: bytes) -> str:
    response = api.client.post(
        "/api/v1/resources/temp_upload", {"file": SimpleUploadedFile(name, text)}, format="multipart"
    )
    assert response.status_code == 200, response.content
    return response.json()["result"]["temp_file_id"]


@pytest.mark.parametrize("field", ["to", "parent"])
def test_add_resource_target_resolves_the_uri(api, field):
    uri = "viking://user/resources/notes"
    status, body = api.post("/api/v1/resources", {"temp_file_id": _upload(api, "n.md", b"# Notes\n"), field: uri})
    assert_refused_with_the_hint(status, body, uri, "resources/notes")
    assert not Context.objects.filter(uri__startswith="viking://user/resources").exists()


def test_skills_target_uri_resolves_alike_on_add_and_list(api):
    skill = {"name": "grep", "description": "Search files", "content": "Use rg."}
    status, body = api.post("/api/v1/skills", {"data": skill, "target_uri": "viking://user/skills"})
    assert_refused_with_the_hint(status, body, "viking://user/skills", "skills")
    status, body = api.get("/api/v1/skills", target_uri="viking://user/skills")
    assert_refused_with_the_hint(status, body, "viking://user/skills", "skills")
    status, body = api.post("/api/v1/skills", {"data": skill, "target_uri": "viking://~/skills", "wait": True})
    assert status == 200, body
    status, body = api.get("/api/v1/skills", target_uri="viking://~/skills")
    assert status == 200 and [s["name"] for s in body["result"]["skills"]] == ["grep"], body


@pytest.mark.parametrize("name", ["memories", "resources", "skills", "peers", "privacy", "sessions"])
def test_every_reserved_name_is_refused_in_the_user_id_place(store, name):
    status, body = store.get("/api/v1/fs/ls", uri=f"viking://user/{name}")
    assert_refused_with_the_hint(status, body, f"viking://user/{name}", name)


def test_an_explicit_user_id_and_the_bare_user_space_still_resolve(store):
    assert store.find("coffee", target_uri=f"{OWN}/memories")["memories"]
    status, body = store.get("/api/v1/fs/ls", uri="viking://user")
    assert status == 200 and [e["name"] for e in body["result"]] == ["default"], body


# the self-id escape ----------------------------------------------------------------------------------------------

ROOT_KEY = "uri-forms-root-key"


def keyed(key: str) -> Api:
    client = APIClient()
    client.credentials(HTTP_X_API_KEY=key)
    return Api(client)


def test_a_user_named_after_a_reserved_space_keeps_its_own_uris(seeded):
    """`viking://user/memories/…` is the space of a user whose id is `memories` (OpenViking's self-id escape);
    for that user, another reserved name there is refused all the same."""
    with override_settings(OVSITE_ROOT_API_KEY=ROOT_KEY):
        root = keyed(ROOT_KEY)
        status, body = root.post("/api/v1/admin/accounts", {"account_id": "acme", "admin_user_id": "memories"})
        assert status == 200, body
        named = keyed(body["result"]["user_key"])
        own = "viking://user/memories/memories/preferences/coffee.md"
        named.write(own, "Drinks black coffee.", wait=True)
        assert hit_uris(named.find("coffee", target_uri="viking://user/memories/memories")) == [own]
        assert hit_uris(named.find("coffee", target_uri="viking://~/memories")) == [own]
        status, body = named.get("/api/v1/content/read", uri=own)
        assert status == 200 and body["result"] == "Drinks black coffee.", body
        status, body = named.get("/api/v1/fs/ls", uri="viking://user/resources")
        assert_refused_with_the_hint(status, body, "viking://user/resources", "resources")


# OpenViking's own plugins -----------------------------------------------------------------------------------------

# The bodies OpenViking's plugins sent as of 0.5.2 (examples/ in volcengine/OpenViking before the `~` alias, commit
# 3228798a7^): the OpenClaw plugin's memory_recall posts its `targetUri` (default `viking://user/memories`, trailing
# slashes trimmed) to /find; its scope URIs name a category below it; the LangChain example writes and finds under it.
PLUGIN_FINDS = [
    {"query": "what does the user drink?", "target_uri": "viking://user/memories", "limit": 5, "score_threshold": 0},
    {
        "query": "what does the user drink?",
        "target_uri": "viking://user/memories",
        "limit": 10,
        "score_threshold": 0,
        "context_type": "memory",
    },
    {"query": "what does the user drink?", "target_uri": "viking://user/memories/preferences/"},
    {"query": "what does the user drink?", "target_uri": "viking://user/memories/preferences"},
    {"query": "what does the user drink?", "target_uri": ["viking://user/memories", "viking://user/skills"]},
    {"query": "deploy", "target_uri": "viking://user/memories/events/"},
]


@pytest.mark.parametrize("body", PLUGIN_FINDS, ids=lambda b: str(b["target_uri"]))
def test_an_openviking_plugin_body_gets_the_callers_memories_or_the_hint_never_an_empty_success(store, body):
    status, answer = store.post(FIND, body)
    if status == 200:
        assert hit_uris(answer["result"]), f"an empty success for {body}: {answer}"
        return
    assert status == 400 and answer["error"]["code"] == "INVALID_URI", answer
    assert "is a reserved name, not a user id. Use 'viking://~/" in answer["error"]["message"], answer
    # A client that follows the hint gets the caller's memories.
    followed = dict(body, target_uri=answer["error"]["details"]["suggestion"])
    if isinstance(body["target_uri"], list):
        followed["target_uri"] = [uri.replace("viking://user/", "viking://~/") for uri in body["target_uri"]]
    assert set(hit_uris(store.find(**followed))) & set(MEMORIES), followed


def test_the_claude_code_plugins_own_resolution_of_the_shorthand_finds_the_callers_memories(store):
    """The Claude Code plugin's recall (recall-core.mjs, 0.5.2) rewrites `viking://user/memories` itself: the user
    from /system/status, else the one non-reserved directory `fs/ls viking://user` lists, then an explicit-uid
    target. On ovsite that lands in the caller's space."""
    status, body = store.get("/api/v1/system/status")
    assert status == 200, body
    space = body["result"].get("user") or "default"
    status, body = store.get("/api/v1/fs/ls", uri="viking://user", output="original")
    names = [e["name"] for e in body["result"] if e["isDir"] and e["name"] not in ("memories", "skills")]
    assert status == 200 and names == [space], body
    result = store.find("what does the user drink?", target_uri=f"viking://user/{space}/memories", limit=10)
    assert {COFFEE, TEA} <= set(hit_uris(result))
