"""Tenant isolation, route by route: every read, search, session, content, fs, system, bootstrap and MCP route is
probed with another principal's URIs and session ids (and their trick spellings).

The oracle is stronger than "no secret words": a probe with the victim's URI or session id must answer exactly
as the same probe with a twin that exists nowhere (the victim's distinguishing word swapped for another), once
both names, ids and timestamps are blanked. Any difference — 403 against 404, a count, a field — is an existence
signal. Each table row is one route; adding a route is adding a row.

The world (account `acme` with alice and bob, account `globex` with gina) is `tests/core/test_isolation.py`'s.
"""

import asyncio
import json
import re
from dataclasses import dataclass

import httpx2
import pytest
from mcp import Client as McpClient
from mcp.client.streamable_http import streamable_http_client

from retrieval.models import Context, ProcessingTask
from sessions_app.models import Session
from tests.core.test_isolation import (
    A_VAULT,
    ALIAS_TRICKS,
    DISTINCT_TRICKS,
    HIDDEN_FROM,
    INVALID_TRICKS,
    ROOT_KEY,
    Client,
    without_server_noise,
)

pytestmark = pytest.mark.usefixtures("root_key", "shipped_rows")

QUERY = "code notebook allergy locker combination skates"


@pytest.fixture(scope="module")
def shipped_rows(django_db_setup, django_db_blocker):
    """Recall needs the shipped purpose profiles, which an earlier transactional test may have flushed."""
    from profiles.models import PurposeProfile, RetrievalSettings
    from profiles.seeds import seed_rows

    with django_db_blocker.unblock():
        seed_rows(PurposeProfile, RetrievalSettings)


@dataclass(frozen=True)
class Victim:
    """A name of another principal's thing, and the word that tells it from its twin (which exists nowhere)."""

    value: str
    word: str
    twin_word: str

    @property
    def twin(self) -> str:
        return re.sub(
            self.word,
            lambda m: self.twin_word.upper() if m.group().isupper() else self.twin_word,
            self.value,
            flags=re.IGNORECASE,
        )


def vault(spelling: str) -> Victim:
    return Victim(spelling, "vault", "nothing")


# alice's private nodes, seen from bob (same account) and gina (other account); acme's shared ones from gina.
# `CORE` is what the costlier routes (assembly, MCP) are probed with; the cheap ones take every trick spelling.
ALICE_CORE = [
    vault(A_VAULT),
    Victim("viking://user/alice/memories", "alice", "nobody"),
    Victim("viking://user/alice", "alice", "nobody"),
    Victim("viking://~/../alice", "alice", "nobody"),
    Victim("viking://user/alice/skills/encabulator", "encabulator", "nothing"),
    vault(INVALID_TRICKS[0]),
    vault(ALIAS_TRICKS[0]),
    vault(DISTINCT_TRICKS[0]),
]
ALICE_TRICKS = [vault(trick) for trick in INVALID_TRICKS[1:] + ALIAS_TRICKS[1:] + DISTINCT_TRICKS[1:]]
ACME_CORE = [
    Victim("viking://resources/acme-only/pricing.md", "pricing", "nothing"),
    Victim("viking://resources/acme-only", "acme-only", "nothing-here"),
    Victim("viking://user/bob/memories/preferences/food.md", "food", "nothing"),
]
URIS_HIDDEN_FROM = {
    ("bob", "core"): ALICE_CORE,
    ("gina", "core"): ALICE_CORE + ACME_CORE,
    ("bob", "all"): ALICE_CORE + ALICE_TRICKS,
    ("gina", "all"): ALICE_CORE + ACME_CORE + ALICE_TRICKS,
}

SESSIONS = {"core": [Victim(spelling, "alice", "nobody") for spelling in ("alice-chat", "ALICE-CHAT", "alice-chat/")]}
SESSIONS["all"] = SESSIONS["core"] + [
    Victim(spelling, "alice", "nobody")
    for spelling in (
        "Alice-Chat",
        "alice-chat ",
        " alice-chat",
        "alice-chat%2F..",
        "alice-chat//",
        "..%2Falice-chat",
        "alice%2Dchat",
    )
]


@dataclass(frozen=True)
class Route:
    """One probe: `method` is get/post/delete (REST) or `mcp` (then `path` is the tool); `{uri}` and `{session}`
    stand for the victim (or its twin) in the path and anywhere in `args` (query parameters, body, arguments)."""

    method: str
    path: str
    args: dict | None = None
    victims: str = "all"  # or "core"

    def __str__(self):
        return f"{self.method} {self.path} {json.dumps(self.args or {}, sort_keys=True)}"

    def hidden_from(self, name: str) -> list[Victim]:
        return URIS_HIDDEN_FROM[name, self.victims]


URI_ROUTES = [
    Route("get", "/api/v1/content/read", {"uri": "{uri}"}),
    Route("get", "/api/v1/content/abstract", {"uri": "{uri}"}),
    Route("get", "/api/v1/content/overview", {"uri": "{uri}"}),
    Route("get", "/api/v1/fs/stat", {"uri": "{uri}"}),
    Route("get", "/api/v1/fs/ls", {"uri": "{uri}"}),
    Route("get", "/api/v1/fs/ls", {"uri": "{uri}", "recursive": "true"}),
    Route("get", "/api/v1/fs/tree", {"uri": "{uri}"}),
    Route("post", "/api/v1/search/find", {"query": QUERY, "target_uri": "{uri}", "read_content": True}),
    Route("post", "/api/v1/search/find", {"query": QUERY, "target_uri": ["{uri}"]}),
    Route("post", "/api/v1/search/search", {"query": QUERY, "mode": "list", "target_uri": "{uri}"}),
    Route(
        "post",
        "/api/v1/search/search",
        {"query": QUERY, "mode": "context", "query_expansion": "off", "exclude_uris": ["{uri}"]},
        victims="core",
    ),
    Route("post", "/api/v1/search/search", {"mode": "bootstrap", "exclude_uris": ["{uri}"]}, victims="core"),
    Route("post", "/api/v1/search/recall", {"query": QUERY, "exclude_uris": ["{uri}"]}, victims="core"),
]
SESSION_ROUTES = [
    Route("get", "/api/v1/sessions/{session}"),
    Route("get", "/api/v1/sessions/{session}", {"auto_create": "true"}),
    Route("get", "/api/v1/sessions/{session}/context"),
    Route("delete", "/api/v1/sessions/{session}"),
    Route("post", "/api/v1/sessions", {"session_id": "{session}"}),
    Route("post", "/api/v1/sessions/{session}/messages", {"role": "user", "content": "probe"}),
    Route("post", "/api/v1/sessions/{session}/messages/batch", {"messages": [{"role": "user", "content": "probe"}]}),
    Route("post", "/api/v1/sessions/{session}/commit"),
    Route(
        "post",
        "/api/v1/search/search",
        {"query": QUERY, "mode": "context", "session_id": "{session}", "query_expansion": "off", "dedup_turns": 5},
        victims="core",
    ),
    Route("post", "/api/v1/search/search", {"query": QUERY, "mode": "list", "session_id": "{session}"}),
    Route("post", "/api/v1/search/search", {"mode": "bootstrap", "session_id": "{session}"}, victims="core"),
    Route("post", "/api/v1/search/recall", {"query": QUERY, "session_id": "{session}"}, victims="core"),
]
# The tools call the REST routes' services: the core victims show that the tool layer adds no signal of its own.
MCP_URI_ROUTES = [
    Route("mcp", "read", {"uris": ["{uri}"]}, victims="core"),
    Route("mcp", "read", {"uris": ["{uri}"], "level": "overview"}, victims="core"),
    Route("mcp", "ls", {"uri": "{uri}", "recursive": True}, victims="core"),
    Route("mcp", "find", {"query": QUERY, "target_uri": "{uri}"}, victims="core"),
    Route("mcp", "search", {"query": QUERY, "target_uri": "{uri}"}, victims="core"),
]
MCP_SESSION_ROUTES = [
    Route("mcp", "bootstrap", {"session_id": "{session}"}, victims="core"),
    Route(
        "mcp",
        "search",
        {"query": QUERY, "mode": "context", "session_id": "{session}", "query_expansion": "off"},
        victims="core",
    ),
    Route(
        "mcp",
        "remember",
        {"session_id": "{session}", "messages": [{"role": "user", "content": "probe"}]},
        victims="core",
    ),
]
# Routes without a victim argument: what they answer must hold nothing of anyone else's.
OPEN_ROUTES = [
    Route("get", "/api/v1/fs/ls", {"uri": "viking://", "recursive": "true"}),
    Route("get", "/api/v1/fs/ls", {"uri": "viking://user"}),
    Route("get", "/api/v1/fs/tree", {"uri": "viking://user"}),
    Route("get", "/api/v1/fs/tree", {"uri": "viking://resources"}),
    Route("get", "/api/v1/sessions"),
    Route("get", "/api/v1/skills"),
    Route("get", "/api/v1/system/status"),
    Route("post", "/api/v1/system/wait", {"timeout": 1}),
    Route("post", "/api/v1/search/find", {"query": QUERY, "limit": 50, "read_content": True}),
    Route(
        "post",
        "/api/v1/search/search",
        {
            "query": QUERY,
            "mode": "context",
            "query_expansion": "off",
            "detail": "full",
            "max_tokens": 8000,
            "score_threshold": 0,
        },
    ),
    Route("post", "/api/v1/search/search", {"mode": "bootstrap", "max_tokens": 8000}),
    Route("post", "/api/v1/search/recall", {"query": QUERY, "score_threshold": 0, "max_tokens": 8000}),
    Route("mcp", "find", {"query": QUERY, "limit": 50}),
    Route("mcp", "search", {"query": QUERY, "mode": "context", "query_expansion": "off", "score_threshold": 0}),
    Route("mcp", "recall", {"query": QUERY, "score_threshold": 0}),
    Route("mcp", "bootstrap", {"max_tokens": 8000}),
    Route("mcp", "ls", {"uri": "viking://", "recursive": True}),
]
OTHERS_URI_PREFIXES = {"bob": ("viking://user/alice",), "gina": ("viking://user/alice", "viking://user/bob")}

_UUID = re.compile(r"\b[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}\b")
_TIME = re.compile(r"\d{4}-\d\d-\d\d[T ][0-9:.]+(?:[+-]\d\d:\d\d|Z)?")


def fill(value, placeholder: str, text: str):
    if isinstance(value, str):
        return value.replace(placeholder, text)
    if isinstance(value, list):
        return [fill(item, placeholder, text) for item in value]
    if isinstance(value, dict):
        return {key: fill(item, placeholder, text) for key, item in value.items()}
    return value


def blanked(text: str, word: str) -> str:
    """The answer with the one word that names the victim (or its twin), ids and timestamps blanked."""
    return _TIME.sub("<time>", _UUID.sub("<id>", re.sub(re.escape(word), "<name>", text, flags=re.IGNORECASE)))


def rest_call(client: Client, route: Route, placeholder: str = "", text: str = "") -> tuple[int, str]:
    path, args = fill(route.path, placeholder, text), fill(route.args or {}, placeholder, text)
    if route.method == "get":
        response = client.client.get(path, args)
    elif route.method == "delete":
        response = client.client.delete(path)
    else:
        response = client.post(path, args)
    return response.status_code, response.content.decode()


def mcp_calls(url: str, key: str, calls: list[tuple[str, dict]]) -> list[tuple[bool, str]]:
    """Runs the tool calls in one MCP session as the key's user: (is_error, text) for each."""

    async def run():
        async with httpx2.AsyncClient(headers={"X-API-Key": key}, timeout=60) as http:
            async with McpClient(streamable_http_client(f"{url}/mcp", http_client=http)) as client:
                results = []
                for tool, arguments in calls:
                    result = await client.call_tool(tool, arguments)
                    results.append((result.is_error, "".join(part.text for part in result.content)))
                return results

    return asyncio.run(run())


def assert_nothing_of_others(name: str, text: str, where, *, uris: bool = True):
    """No word of another principal's content; with `uris`, none of their URIs either (a probe that names one
    may see it echoed: its twin comparison covers that)."""
    text = without_server_noise(text)
    leaked = [word for word in HIDDEN_FROM[name] if word in text]
    leaked += [prefix for prefix in OTHERS_URI_PREFIXES[name] if uris and prefix in text]
    assert not leaked, f"{where}: {name} saw {leaked}: {text[:400]}"


def assert_as_absent(name: str, route: Route, victim: Victim, answer, twin_answer):
    """The victim's answer equals its twin's (both blanked) and holds nothing of anyone else's."""
    assert_nothing_of_others(name, str(answer), (route, victim.value), uris=False)
    status, text = answer
    twin_status, twin_text = twin_answer
    assert status == twin_status and blanked(text, victim.word) == blanked(twin_text, victim.twin_word), (
        f"{route} tells {victim.value!r} from {victim.twin!r}:\n{status} {text[:400]}\n{twin_status} {twin_text[:400]}"
    )
    if route.method != "mcp":
        assert status < 500, (route, victim.value, text[:400])


# REST -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("route", URI_ROUTES, ids=str)
@pytest.mark.parametrize("name", ["bob", "gina"])
def test_uri_route_answers_other_principals_nodes_as_absent_ones(w, name, route):
    for victim in route.hidden_from(name):
        answer = rest_call(w[name], route, "{uri}", victim.value)
        assert_as_absent(name, route, victim, answer, rest_call(w[name], route, "{uri}", victim.twin))


@pytest.mark.parametrize("route", SESSION_ROUTES, ids=str)
@pytest.mark.parametrize("name", ["bob", "gina"])
def test_session_route_answers_other_principals_sessions_as_absent_ones(w, name, route):
    for victim in SESSIONS[route.victims]:
        answer = rest_call(w[name], route, "{session}", victim.value)
        assert_as_absent(name, route, victim, answer, rest_call(w[name], route, "{session}", victim.twin))
    assert "4711" in w["alice"].ok(w["alice"].get("/api/v1/sessions/alice-chat/context"))["messages"][0]["content"]


@pytest.mark.parametrize("route", [route for route in OPEN_ROUTES if route.method != "mcp"], ids=str)
@pytest.mark.parametrize("name", ["bob", "gina"])
def test_open_route_holds_nothing_of_other_principals(w, name, route):
    status, text = rest_call(w[name], route)
    assert status == 200, text[:400]
    assert_nothing_of_others(name, text, route)


def test_session_id_of_another_user_is_free_for_the_caller(w):
    """Ids are unique per user: bob may use alice's id, for a session of his own; hers is untouched."""
    bob, alice = w["bob"], w["alice"]
    assert bob.ok(bob.post("/api/v1/sessions", {"session_id": "alice-chat"}))["total_message_count"] == 0
    bob.ok(bob.post("/api/v1/sessions/alice-chat/messages", {"role": "user", "content": "bob's own"}))
    assert [m["content"] for m in bob.ok(bob.get("/api/v1/sessions/alice-chat/context"))["messages"]] == ["bob's own"]
    assert [m["content"] for m in alice.ok(alice.get("/api/v1/sessions/alice-chat/context"))["messages"]] == [
        "Remember: the vault code is 4711."
    ]
    assert Session.objects.filter(session_id="alice-chat", account__name="acme").count() == 2


# system/status and system/wait -------------------------------------------------------------------------------


def _hold_pending(uri: str) -> None:
    """As if no worker had processed the node's write yet (Celery is eager in the tests)."""
    Context.objects.filter(uri=uri, account__name="acme").update(state="pending")
    ProcessingTask.objects.filter(uris__contains=[uri], account__name="acme").update(status="pending")


def _status(client: Client) -> dict:
    return client.ok(client.get("/api/v1/system/status"))


def test_status_and_wait_ignore_other_users_pending_writes(w):
    before = {name: _status(w[name]) for name in ("bob", "gina")}
    _hold_pending(A_VAULT)
    for name in ("bob", "gina"):
        assert _status(w[name]) == before[name]
        assert w[name].ok(w[name].post("/api/v1/system/wait", {"timeout": 0.2}))["done"] is True
    alice = _status(w["alice"])
    assert alice["pending_nodes"] >= 1 and alice["pending_tasks"] >= 1
    assert w["alice"].ok(w["alice"].post("/api/v1/system/wait", {"timeout": 0.2}))["done"] is False


def test_status_and_wait_count_the_accounts_shared_pending_writes(w):
    """Shared spaces are visible to every user of the account, and so is their work (not to other accounts)."""
    gina_before = _status(w["gina"])
    _hold_pending("viking://resources/acme-only/pricing.md")
    bob = _status(w["bob"])
    assert bob["pending_nodes"] >= 1 and bob["pending_tasks"] >= 1
    assert w["bob"].ok(w["bob"].post("/api/v1/system/wait", {"timeout": 0.2}))["done"] is False
    assert _status(w["gina"]) == gina_before


def test_tasks_belong_to_the_space_they_touch(w):
    alice = w["alice"]
    private = alice.write("viking://~/memories/events/owned.md", "a private event")["task_id"]
    shared = alice.write("viking://resources/owned/shared.md", "a shared resource")["task_id"]
    commit_task = alice.ok(alice.post("/api/v1/sessions/alice-chat/commit"))["task_id"]
    owners = dict(ProcessingTask.objects.filter(id__in=[private, shared, commit_task]).values_list("id", "owner"))
    assert {str(task): owner for task, owner in owners.items()} == {private: "alice", shared: "", commit_task: "alice"}
    for task in (private, commit_task):
        response = w["bob"].get(f"/api/v1/tasks/{task}")
        assert response.status_code == 404 and "owned" not in response.content.decode()
    assert w["bob"].ok(w["bob"].get(f"/api/v1/tasks/{shared}"))["uris"] == ["viking://resources/owned/shared.md"]


# MCP --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("route", MCP_URI_ROUTES + MCP_SESSION_ROUTES, ids=str)
@pytest.mark.parametrize("name", ["bob", "gina"])
def test_mcp_tool_answers_other_principals_names_as_absent_ones(
    world,
    live_url,
    django_db_blocker,
    name,
    route,
):
    placeholder, victims = (
        ("{uri}", route.hidden_from(name)) if route in MCP_URI_ROUTES else ("{session}", SESSIONS[route.victims])
    )
    calls = [
        (route.path, fill(route.args, placeholder, text)) for victim in victims for text in (victim.value, victim.twin)
    ]
    try:
        answers = iter(mcp_calls(live_url, world.keys[name], calls))
        for victim in victims:
            assert_as_absent(name, route, victim, next(answers), next(answers))
    finally:
        with django_db_blocker.unblock():  # `remember` made the caller sessions of their own under these ids
            Session.objects.filter(user=name).delete()


@pytest.mark.parametrize("route", [route for route in OPEN_ROUTES if route.method == "mcp"], ids=str)
@pytest.mark.parametrize("name", ["bob", "gina"])
def test_mcp_tool_holds_nothing_of_other_principals(world, live_url, name, route):
    [(is_error, text)] = mcp_calls(live_url, world.keys[name], [(route.path, route.args)])
    assert not is_error, text[:400]
    assert_nothing_of_others(name, text, route)


def test_mcp_refuses_a_revoked_key(world, live_url, django_db_blocker):
    root = Client(ROOT_KEY)
    with django_db_blocker.unblock():
        fresh = root.ok(root.post("/api/v1/admin/accounts/globex/users", {"user_id": "gus"}))["user_key"]
    assert mcp_calls(live_url, fresh, [("ls", {"uri": "viking://"})])[0][0] is False
    with django_db_blocker.unblock():
        root.ok(root.post("/api/v1/admin/accounts/globex/users/gus/key"))
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "probe", "version": "0"},
        },
    }
    response = httpx2.post(
        f"{live_url}/mcp",
        json=initialize,
        headers={"X-API-Key": fresh, "Accept": "application/json, text/event-stream"},
    )
    assert response.status_code == 401 and response.json()["error"]["code"] == "UNAUTHENTICATED"
