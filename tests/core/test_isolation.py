"""Tenant isolation and API-key auth against the real PostgreSQL and embedder.

One module-wide world, built once through the admin API with a root key: account `acme` (admin `alice`, user
`bob`) and account `globex` (admin `gina`), each with private memories, shared resources and a skill. The probes
run inside a rolled-back transaction (`db`), so a probe that wrongly deletes or writes cannot spoil the others.
"""

import json
import re
from dataclasses import dataclass
from urllib.parse import urlencode

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import override_settings
from rest_framework.test import APIClient

from core.auth import Caller
from core.errors import NotFound
from core.models import Account, AccountUser, ApiKey, hash_key
from retrieval.selectors import task_detail

ROOT_KEY = "root-test-key"
pytestmark = pytest.mark.usefixtures("root_key")

A_VAULT = "viking://user/alice/memories/entities/vault.md"
A_ENTITIES = "viking://user/alice/memories/entities"
A_MEMORIES = "viking://user/alice/memories"
A_ROOT = "viking://user/alice"
A_SKILL = "viking://user/alice/skills/encabulator"
B_FOOD = "viking://user/bob/memories/preferences/food.md"
G_LOCKER = "viking://user/gina/memories/entities/locker.md"
ROADMAP = "viking://resources/plan/roadmap.md"  # the same URI in both accounts
ACME_PRICING = "viking://resources/acme-only/pricing.md"
ACME_ONLY = "viking://resources/acme-only"

# Words that appear only in one principal's content (and so in its abstracts, overviews and hits).
ALICE_PRIVATE = ("4711", "turbo encabulator")
BOB_PRIVATE = ("peanuts",)
ACME_SHARED = ("rocket skates", "99 dollars")
GLOBEX = ("9902", "doomsday")
HIDDEN_FROM = {
    "alice": BOB_PRIVATE + GLOBEX,
    "bob": ALICE_PRIVATE + GLOBEX,
    "gina": ALICE_PRIVATE + BOB_PRIVATE + ACME_SHARED,
}
READ_ROUTES = (
    "/api/v1/content/read",
    "/api/v1/content/abstract",
    "/api/v1/content/overview",
    "/api/v1/fs/stat",
    "/api/v1/fs/ls",
    "/api/v1/fs/tree",
)


class Client:
    """One caller: an API key sent as `X-API-Key` (or `Authorization: Bearer`), from a given address."""

    def __init__(self, key: str | None = None, *, bearer: bool = False, remote_addr: str = "127.0.0.1"):
        self.client = APIClient(REMOTE_ADDR=remote_addr)
        if key and bearer:
            self.client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
        elif key:
            self.client.credentials(HTTP_X_API_KEY=key)

    def get(self, path, **params):
        return self.client.get(path, params)

    def post(self, path, body=None, **headers):
        return self.client.post(
            path, json.dumps(body if body is not None else {}), content_type="application/json", **headers
        )

    def delete(self, path, **params):
        return self.client.delete(f"{path}?{urlencode(params)}")

    def ok(self, response):
        assert response.status_code == 200, response.content
        return response.json()["result"]

    def write(self, uri, content):
        return self.ok(self.post("/api/v1/content/write", {"uri": uri, "content": content}))

    def find(self, query, **extra):
        return self.ok(self.post("/api/v1/search/find", {"query": query, **extra}))


@dataclass
class World:
    keys: dict
    clients: dict
    alice_task: str
    bob_task: str
    gina_task: str

    def __getitem__(self, name) -> Client:
        return self.clients[name]


def assert_error(response, status, code):
    body = response.json()
    assert response.status_code == status, body
    assert body["status"] == "error" and body["error"]["code"] == code, body
    assert body["error"]["message"] and isinstance(body["error"]["details"], dict), body
    return body["error"]


# The server's own random request id (32 hex digits) and its timestamps (microseconds: "13:26:20.471187") can hold
# a secret made of digits, such as "4711", by chance.
REQUEST_ID = re.compile(r"""["']request_id["']:\s*["'][0-9a-fA-F-]*["']""")  # in JSON, or in a repr of it
TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?([+-]\d{2}:\d{2}|Z)?")


def without_server_noise(text: str) -> str:
    return TIMESTAMP.sub("", REQUEST_ID.sub("", text))


def assert_no_leak(name, response):
    text = without_server_noise(response.content.decode())
    leaked = [word for word in HIDDEN_FROM[name] if word in text]
    assert not leaked, f"{name} saw {leaked}: {text[:500]}"


def hit_uris(result) -> list[str]:
    return [hit["uri"] for key in ("memories", "resources", "skills") for hit in result[key]]


def skills_of(result) -> list[dict]:
    """`GET /api/v1/skills` answers a list, or OpenViking's `{skills: [...], ...}`."""
    return result["skills"] if isinstance(result, dict) else result


def still_there(w, uri=A_VAULT, marker="4711"):
    assert marker in w["alice"].ok(w["alice"].get("/api/v1/content/read", uri=uri))


# across accounts ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("route", READ_ROUTES)
@pytest.mark.parametrize("uri", [A_VAULT, A_ENTITIES, A_MEMORIES, A_ROOT, A_SKILL, ACME_PRICING, ACME_ONLY])
def test_other_accounts_nodes_are_not_found_on_every_read_route(w, route, uri):
    response = w["gina"].get(route, uri=uri)
    assert_error(response, 404, "NOT_FOUND")
    assert_no_leak("gina", response)


def test_same_uri_in_two_accounts_reads_each_accounts_own_content(w):
    assert "rocket skates" in w["alice"].ok(w["alice"].get("/api/v1/content/read", uri=ROADMAP))
    assert "doomsday" in w["gina"].ok(w["gina"].get("/api/v1/content/read", uri=ROADMAP))


def test_same_uri_in_two_accounts_has_each_accounts_own_directory_overview(w):
    response = w["gina"].get("/api/v1/content/overview", uri="viking://resources/plan")
    assert "doomsday" in w["gina"].ok(response)
    assert_no_leak("gina", response)


@pytest.mark.parametrize(
    "target",
    ["", A_ROOT, A_MEMORIES, ACME_ONLY, "viking://resources", "viking://", "viking://user", [A_ROOT, ACME_ONLY]],
)
def test_find_never_returns_other_accounts_nodes(w, target):
    response = w["gina"].post(
        "/api/v1/search/find",
        {"query": "vault code notebook skates pricing", "target_uri": target, "limit": 50, "read_content": True},
    )
    assert response.status_code == 200, response.content
    assert_no_leak("gina", response)
    assert all(
        not uri.startswith(("viking://user/alice", "viking://user/bob", ACME_ONLY))
        for uri in hit_uris(response.json()["result"])
    )


def test_find_with_owner_filter_of_other_account_is_empty(w):
    assert w["gina"].find("vault code", filter={"owner": "alice"})["total"] == 0


def test_find_still_finds_own_nodes(w):
    """Positive control for the leak probes above: the same query does find the caller's own memory."""
    assert G_LOCKER in hit_uris(w["gina"].find("locker combination", limit=50))


def test_ls_of_shared_resources_lists_only_own_account(w):
    response = w["gina"].get("/api/v1/fs/ls", uri="viking://resources", recursive="true")
    uris = {entry["uri"] for entry in w["gina"].ok(response)}
    assert uris == {"viking://resources/plan", ROADMAP}
    assert_no_leak("gina", response)


def test_ls_of_user_space_lists_only_the_callers_own_root(w):
    entries = w["gina"].ok(w["gina"].get("/api/v1/fs/ls", uri="viking://user"))
    assert [entry["uri"] for entry in entries] == ["viking://user/gina"]


def test_tree_of_shared_resources_shows_only_own_account(w):
    response = w["gina"].get("/api/v1/fs/tree", uri="viking://resources")
    assert response.status_code == 200
    assert_no_leak("gina", response)


def test_skill_list_shows_only_own_account(w):
    response = w["gina"].get("/api/v1/skills")
    assert [skill["name"] for skill in skills_of(w["gina"].ok(response))] == ["doomsday"]
    assert_no_leak("gina", response)


def test_skill_list_under_other_accounts_space_is_empty(w):
    assert skills_of(w["gina"].ok(w["gina"].get("/api/v1/skills", target_uri="viking://user/alice/skills"))) == []


def test_task_of_other_account_is_not_found(w):
    assert_error(w["gina"].get(f"/api/v1/tasks/{w.alice_task}"), 404, "NOT_FOUND")


def test_own_task_is_found(w):
    assert w["alice"].ok(w["alice"].get(f"/api/v1/tasks/{w.alice_task}"))["status"] == "done"


def test_delete_of_other_accounts_shared_resource_is_not_found(w):
    assert_error(w["gina"].delete("/api/v1/fs", uri=ACME_PRICING), 404, "NOT_FOUND")
    still_there(w, ACME_PRICING, "99 dollars")


def test_recursive_delete_of_shared_resources_removes_only_own_account(w):
    assert w["gina"].delete("/api/v1/fs", uri="viking://resources/plan", recursive="true").status_code == 200
    still_there(w, ROADMAP, "rocket skates")


def test_delete_in_other_accounts_user_space_is_refused(w):
    assert_error(w["gina"].delete("/api/v1/fs", uri=A_VAULT), 403, "PERMISSION_DENIED")
    still_there(w)


def test_write_into_other_accounts_user_space_is_refused(w):
    response = w["gina"].post("/api/v1/content/write", {"uri": A_VAULT, "content": "overwritten"})
    assert_error(response, 403, "PERMISSION_DENIED")
    still_there(w)


def test_write_to_same_shared_uri_in_other_account_leaves_ours_alone(w):
    w["gina"].write(ACME_PRICING, "Globex pricing: 5 dollars.")
    still_there(w, ACME_PRICING, "99 dollars")


# inside one account ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("route", READ_ROUTES)
@pytest.mark.parametrize("uri", [A_VAULT, A_ENTITIES, A_MEMORIES, A_ROOT, A_SKILL])
def test_other_users_private_nodes_are_not_found_on_every_read_route(w, route, uri):
    response = w["bob"].get(route, uri=uri)
    assert_error(response, 404, "NOT_FOUND")
    assert_no_leak("bob", response)


@pytest.mark.parametrize("uri", [ACME_PRICING, ROADMAP])
def test_shared_resources_are_readable_within_the_account(w, uri):
    response = w["bob"].get("/api/v1/content/read", uri=uri)
    assert "rocket skates" in w["bob"].ok(response)
    assert_no_leak("bob", response)


def test_shared_resources_are_found_within_the_account(w):
    assert ACME_PRICING in hit_uris(w["bob"].find("how much do the rocket skates cost", limit=50))


@pytest.mark.parametrize("target", ["", A_ROOT, A_MEMORIES, A_SKILL, "viking://user", "viking://"])
def test_find_never_returns_other_users_private_nodes(w, target):
    response = w["bob"].post(
        "/api/v1/search/find",
        {"query": "vault code notebook encabulator", "target_uri": target, "limit": 50, "read_content": True},
    )
    assert response.status_code == 200, response.content
    assert_no_leak("bob", response)
    assert not [uri for uri in hit_uris(response.json()["result"]) if uri.startswith(A_ROOT)]


def test_find_with_owner_filter_of_other_user_is_empty(w):
    assert w["bob"].find("vault code", filter={"owner": "alice"})["total"] == 0


def test_ls_of_user_space_hides_other_users_of_the_account(w):
    entries = w["bob"].ok(w["bob"].get("/api/v1/fs/ls", uri="viking://user"))
    assert [entry["uri"] for entry in entries] == ["viking://user/bob"]


def test_skill_list_hides_other_users_private_skills(w):
    response = w["bob"].get("/api/v1/skills")
    assert skills_of(w["bob"].ok(response)) == []
    assert_no_leak("bob", response)


def test_task_of_other_user_in_the_account_is_not_found(w):
    """A task's `uris` name the nodes it touched; another user's private URIs must not leak through it."""
    assert_error(w["bob"].get(f"/api/v1/tasks/{w.alice_task}"), 404, "NOT_FOUND")


def test_task_selector_hides_other_users_tasks(w):
    """`selectors.task_detail` (what the route above should call) hides a task naming another user's nodes."""

    def caller(user_id):
        user = AccountUser.objects.select_related("account").get(account__name="acme", user_id=user_id)
        return Caller(user.account_id, user.account.name, user.user_id, user.role)

    assert task_detail(caller=caller("alice"), task_id=w.alice_task)["uris"] == [A_VAULT]
    assert task_detail(caller=caller("bob"), task_id=w.bob_task)["uris"] == [B_FOOD]
    with pytest.raises(NotFound):
        task_detail(caller=caller("bob"), task_id=w.alice_task)


@pytest.mark.parametrize("name", ["bob", "gina"])
@pytest.mark.parametrize(
    "body",
    [
        {"mode": "list"},
        {"mode": "list", "target_uri": A_ROOT},
        {"mode": "context", "query_expansion": "off"},
        {"mode": "context", "query_expansion": "off", "detail": "full", "max_tokens": 4000},
    ],
)
def test_search_never_returns_other_principals_nodes(w, name, body):
    response = w[name].post(
        "/api/v1/search/search",
        {"query": "vault code notebook encabulator allergy locker combination skates price", **body},
    )
    assert response.status_code == 200, response.content
    assert_no_leak(name, response)


@pytest.mark.parametrize("name", ["bob", "gina"])
def test_recall_never_returns_other_principals_nodes(w, name):
    response = w[name].post(
        "/api/v1/search/recall",
        {"query": "vault code notebook allergy locker skates", "score_threshold": 0.0, "max_tokens": 4000},
    )
    assert response.status_code == 200, response.content
    assert_no_leak(name, response)


@pytest.mark.parametrize("name", ["bob", "gina"])
@pytest.mark.parametrize("path", ["/api/v1/sessions/alice-chat", "/api/v1/sessions/alice-chat/context"])
def test_other_principals_session_is_not_found(w, name, path):
    response = w[name].get(path)
    assert_error(response, 404, "NOT_FOUND")
    assert_no_leak(name, response)


@pytest.mark.parametrize("name", ["bob", "gina"])
def test_session_list_hides_other_principals_sessions(w, name):
    response = w[name].get("/api/v1/sessions")
    assert response.status_code == 200 and "alice-chat" not in response.content.decode()


@pytest.mark.parametrize("name", ["bob", "gina"])
def test_delete_of_other_principals_session_is_refused(w, name):
    assert w[name].delete("/api/v1/sessions/alice-chat").status_code == 404
    assert w["alice"].get("/api/v1/sessions/alice-chat").status_code == 200


@pytest.mark.parametrize(
    "path, body",
    [
        ("/api/v1/content/write", {"uri": A_VAULT, "content": "bob was here"}),
        ("/api/v1/content/write", {"uri": "viking://user/alice/memories/events/new.md", "content": "bob was here"}),
        (
            "/api/v1/content/batch-write",
            {
                "operations": [
                    {"uri": "viking://~/memories/events/mine.md", "content": "fine"},
                    {"uri": A_VAULT, "content": "bob was here"},
                ]
            },
        ),
        ("/api/v1/fs/mkdir", {"uri": "viking://user/alice/resources/bobdir"}),
        ("/api/v1/skills", {"data": {"name": "evil", "description": "x", "content": "x"}, "target_uri": A_SKILL}),
    ],
)
def test_writes_into_other_users_space_are_refused(w, path, body):
    assert_error(w["bob"].post(path, body), 403, "PERMISSION_DENIED")
    still_there(w)
    uris = {e["uri"] for e in w["alice"].ok(w["alice"].get("/api/v1/fs/ls", uri=A_ROOT, recursive="true"))}
    assert not [uri for uri in uris if "new.md" in uri or "bobdir" in uri or "evil" in uri]
    assert_error(w["bob"].get("/api/v1/fs/stat", uri="viking://~/memories/events/mine.md"), 404, "NOT_FOUND")


@pytest.mark.parametrize("uri", [A_VAULT, A_ENTITIES, A_SKILL])
def test_delete_in_other_users_space_is_refused(w, uri):
    assert_error(w["bob"].delete("/api/v1/fs", uri=uri, recursive="true"), 403, "PERMISSION_DENIED")
    still_there(w)


def test_recursive_delete_of_shared_space_spares_other_users_private_nodes(w):
    """`viking://resources` is shared; removing it must not reach into `viking://user/...`."""
    w["bob"].ok(w["bob"].delete("/api/v1/fs", uri="viking://resources/plan", recursive="true"))
    still_there(w)


# tricks ----------------------------------------------------------------------------------------------------------

INVALID_TRICKS = [
    "viking://~/../alice/memories/entities/vault.md",
    "viking://user/bob/../alice/memories/entities/vault.md",
    "viking://user/alice/memories/entities/vault.md/..",
    "viking://user/alice/..",
    "viking://user/bob/%2e%2e/alice/memories/entities/vault.md",
    "viking://user%2Falice/memories/entities/vault.md",
    "viking://user/alice%2Fmemories/entities/vault.md",
    "viking://user/bob%252F..%252Falice/memories/entities/vault.md",
    "viking://User/alice/memories/entities/vault.md",
    "viking://USER/alice/memories/entities/vault.md",
    "viking://user//alice/memories/entities/vault.md",
    "viking:////user/alice/memories/entities/vault.md",
    "viking://user/alice/memories//entities/vault.md",
    "viking://user/alice\\memories\\entities\\vault.md",
    "viking://user/alice/memories/entities/vault.md\x00",
    "viking://user/alice/memories/entities/vault.md%2500",
    "viking:/user/alice/memories/entities/vault.md",
    "vikings://user/alice/memories/entities/vault.md",
]
# Spellings that normalise to A_VAULT: alice reads her node through them, nobody else does.
ALIAS_TRICKS = [
    "VIKING://user/alice/memories/entities/vault.md",
    "Viking://user/alice/memories/entities/vault.md",
    "viking://user/alice/memories/entities/vault.md/",
    "viking://user/alice/memories/entities/vault.md///",
    "  viking://user/alice/memories/entities/vault.md  ",
    "viking://user/alice/memories/entities/vault.md\n",
]
# Spellings that name another (absent) node: not found for everyone, alice included.
DISTINCT_TRICKS = [
    "viking://user/ALICE/memories/entities/vault.md",
    "viking://user/alice/memories/entities/VAULT.md",
    "viking://user/alice/memories/entities/vault%2Emd",
]
# A shared path spelled like alice's: anyone may write it, but it never maps onto her space.
LOOKALIKE = "viking://resources/user/alice/memories/entities/vault.md"
CONTENT_ROUTES = ("/api/v1/content/read", "/api/v1/content/abstract", "/api/v1/content/overview", "/api/v1/fs/stat")


@pytest.mark.parametrize("trick", INVALID_TRICKS)
@pytest.mark.parametrize("name", ["alice", "bob", "gina"])
def test_trick_uri_is_invalid_on_every_read_route(w, name, trick):
    for route in CONTENT_ROUTES + ("/api/v1/fs/ls",):
        response = w[name].get(route, uri=trick)
        assert response.status_code in (400, 422), (route, response.content)
        assert_error(
            response, response.status_code, "INVALID_URI" if response.status_code == 400 else "INVALID_ARGUMENT"
        )
        assert_no_leak(name, response)


@pytest.mark.parametrize("trick", ALIAS_TRICKS)
def test_alias_spelling_reaches_the_owners_node(w, trick):
    assert "4711" in w["alice"].ok(w["alice"].get("/api/v1/content/read", uri=trick))


@pytest.mark.parametrize("trick", ALIAS_TRICKS + DISTINCT_TRICKS + [LOOKALIKE])
@pytest.mark.parametrize("name", ["bob", "gina"])
def test_alias_spelling_is_not_found_for_others(w, name, trick):
    for route in CONTENT_ROUTES:
        response = w[name].get(route, uri=trick)
        assert_error(response, 404, "NOT_FOUND")
        assert_no_leak(name, response)


@pytest.mark.parametrize("trick", DISTINCT_TRICKS + [LOOKALIKE])
def test_distinct_spelling_is_not_found_for_the_owner_either(w, trick):
    assert_error(w["alice"].get("/api/v1/content/read", uri=trick), 404, "NOT_FOUND")


@pytest.mark.parametrize("trick", ALIAS_TRICKS + DISTINCT_TRICKS + INVALID_TRICKS + [LOOKALIKE])
def test_trick_uri_cannot_delete_other_users_node(w, trick):
    for name in ("bob", "gina"):
        response = w[name].delete("/api/v1/fs", uri=trick, recursive="true")
        assert response.status_code in (400, 403, 404, 422), (name, response.content)
        still_there(w)


@pytest.mark.parametrize("trick", ALIAS_TRICKS + DISTINCT_TRICKS + INVALID_TRICKS)
def test_trick_uri_cannot_write_into_other_users_space(w, trick):
    for name in ("bob", "gina"):
        response = w[name].post("/api/v1/content/write", {"uri": trick, "content": "pwned"})
        assert response.status_code in (400, 403, 422), (name, response.content)
        still_there(w)


@pytest.mark.parametrize("trick", ALIAS_TRICKS + INVALID_TRICKS)
def test_trick_uri_as_find_target_never_leaks(w, trick):
    response = w["bob"].post("/api/v1/search/find", {"query": "vault code notebook", "target_uri": trick})
    assert_no_leak("bob", response)
    if trick in INVALID_TRICKS:
        assert response.status_code in (400, 422), response.content
    else:
        assert response.status_code == 200 and response.json()["result"]["total"] == 0, response.content


# authentication ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "method, path, params",
    [
        ("post", "/api/v1/search/find", {"query": "vault"}),
        ("get", "/api/v1/content/read", {"uri": A_VAULT}),
        ("get", "/api/v1/fs/ls", {"uri": "viking://"}),
        ("get", "/api/v1/skills", {}),
        ("get", "/api/v1/admin/accounts", {}),
    ],
)
def test_missing_key_is_unauthenticated_when_a_root_key_is_set(w, method, path, params):
    client = Client()
    response = client.post(path, params) if method == "post" else client.get(path, **params)
    assert_error(response, 401, "UNAUTHENTICATED")
    assert_no_leak("gina", response)


def test_unknown_key_is_unauthenticated(w):
    assert_error(Client("ovk_not-a-real-key").get("/api/v1/fs/ls", uri="viking://"), 401, "UNAUTHENTICATED")


def test_rotated_key_is_revoked(w):
    Client(ROOT_KEY).ok(Client(ROOT_KEY).post("/api/v1/admin/accounts/acme/users/bob/key"))
    assert_error(w["bob"].get("/api/v1/content/read", uri=B_FOOD), 401, "UNAUTHENTICATED")


def test_rotated_key_is_replaced_by_a_working_one(w):
    new_key = Client(ROOT_KEY).ok(Client(ROOT_KEY).post("/api/v1/admin/accounts/acme/users/bob/key"))["user_key"]
    assert new_key != w.keys["bob"]
    assert "peanuts" in Client(new_key).ok(Client(new_key).get("/api/v1/content/read", uri=B_FOOD))


def test_rotating_a_key_leaves_other_users_keys_working(w):
    Client(ROOT_KEY).ok(Client(ROOT_KEY).post("/api/v1/admin/accounts/acme/users/bob/key"))
    still_there(w)


def test_keys_are_stored_hashed(w):
    rows = [str(row) for row in ApiKey.objects.values()]
    for key in w.keys.values():
        assert not [row for row in rows if key in row]
        assert ApiKey.objects.filter(key_hash=hash_key(key)).count() == 1


def test_bearer_header_works_like_x_api_key(w):
    alice = Client(w.keys["alice"], bearer=True)
    assert "4711" in alice.ok(alice.get("/api/v1/content/read", uri="viking://~/memories/entities/vault.md"))


def test_bearer_header_carries_the_keys_identity(w):
    assert_error(Client(w.keys["bob"], bearer=True).get("/api/v1/content/read", uri=A_VAULT), 404, "NOT_FOUND")


def test_bearer_with_unknown_key_is_unauthenticated(w):
    assert_error(Client("nope", bearer=True).get("/api/v1/fs/ls", uri="viking://"), 401, "UNAUTHENTICATED")


ADMIN_CALLS = [
    ("get", "/api/v1/admin/accounts", None),
    ("post", "/api/v1/admin/accounts", {"account_id": "evil", "admin_user_id": "mallory"}),
    ("post", "/api/v1/admin/accounts/globex/users", {"user_id": "mallory"}),
    ("post", "/api/v1/admin/accounts/acme/users", {"user_id": "mallory", "role": "admin"}),
    ("post", "/api/v1/admin/accounts/globex/users/gina/key", None),
]


@pytest.mark.parametrize("method, path, body", ADMIN_CALLS)
@pytest.mark.parametrize("name", ["alice", "bob"])
def test_account_keys_are_refused_by_the_admin_api(w, name, method, path, body):
    response = w[name].get(path) if method == "get" else w[name].post(path, body)
    assert_error(response, 403, "PERMISSION_DENIED")
    assert "user_key" not in response.content.decode()
    assert "9902" in w["gina"].ok(w["gina"].get("/api/v1/content/read", uri=G_LOCKER))


def test_root_key_may_list_accounts(w):
    names = [row["account_id"] for row in Client(ROOT_KEY).ok(Client(ROOT_KEY).get("/api/v1/admin/accounts"))]
    assert {"acme", "globex"} <= set(names)


def test_root_key_in_an_unknown_account_is_refused(w):
    response = Client(ROOT_KEY).client.get("/api/v1/fs/ls", {"uri": "viking://"}, HTTP_X_OPENVIKING_ACCOUNT="nope")
    assert_error(response, 403, "PERMISSION_DENIED")
    assert not Account.objects.filter(name="nope").exists()


@pytest.mark.parametrize("user_id", [".", ".."])
def test_dot_user_ids_are_refused(w, user_id):
    response = Client(ROOT_KEY).post("/api/v1/admin/accounts/acme/users", {"user_id": user_id})
    error = assert_error(response, 422, "INVALID_ARGUMENT")
    assert error["details"]["validation_errors"][0]["loc"] == ["user_id"]


# dev mode (no root key) -------------------------------------------------------------------------------------


@pytest.fixture
def dev_mode(w):
    with override_settings(OVSITE_ROOT_API_KEY=""):
        yield w


def test_dev_mode_serves_loopback_callers_without_a_key(dev_mode):
    response = Client().post("/api/v1/search/find", {"query": "vault code rocket skates locker"})
    assert response.status_code == 200, response.content
    assert response.json()["result"]["total"] == 0  # account "default" holds nothing of acme's or globex's


def test_dev_mode_refuses_remote_callers_without_a_key(dev_mode):
    response = Client(remote_addr="203.0.113.9").get("/api/v1/fs/ls", uri="viking://")
    assert_error(response, 401, "UNAUTHENTICATED")


def test_dev_mode_still_honours_account_keys(dev_mode):
    assert "4711" in dev_mode["alice"].ok(dev_mode["alice"].get("/api/v1/content/read", uri=A_VAULT))


def test_dev_mode_revoked_key_is_unauthenticated(dev_mode):
    """In dev mode too a key that does not authenticate is refused: neither the key's former user nor the keyless
    dev caller."""
    Client().ok(Client().post("/api/v1/admin/accounts/acme/users/bob/key"))
    response = dev_mode["bob"].get("/api/v1/content/read", uri=B_FOOD)
    assert_error(response, 401, "UNAUTHENTICATED")
    assert "peanuts" not in response.content.decode()


def test_dev_mode_lets_the_keyless_loopback_caller_administer(dev_mode):
    assert {"acme", "globex"} <= {row["account_id"] for row in Client().ok(Client().get("/api/v1/admin/accounts"))}


@pytest.mark.parametrize("method, path, body", ADMIN_CALLS)
def test_dev_mode_refuses_account_keys_on_the_admin_api(dev_mode, method, path, body):
    """Without a root key an account admin's key must not reach the admin API (it could take other keys)."""
    alice = dev_mode["alice"]
    response = alice.get(path) if method == "get" else alice.post(path, body)
    assert_error(response, 403, "PERMISSION_DENIED")


def test_an_upload_is_its_uploaders_alone_until_used(w, settings, tmp_path):
    """Another user of the same account who learns the temporary id cannot claim the file (nor see it exists)."""
    settings.OVSITE_UPLOAD_DIR = tmp_path
    upload = w["alice"].client.post(
        "/api/v1/resources/temp_upload", {"file": SimpleUploadedFile("notes.md", b"# Notes\n\nalice's 4711")}
    )
    temp_id = w["alice"].ok(upload)["temp_file_id"]
    for body in ({"temp_file_id": temp_id}, {"temp_file_id": temp_id, "to": "viking://resources/stolen"}):
        assert_error(w["bob"].post("/api/v1/resources", body), 404, "NOT_FOUND")
    assert_error(w["bob"].post("/api/v1/skills", {"temp_file_id": temp_id}), 404, "NOT_FOUND")
    assert w["alice"].ok(w["alice"].post("/api/v1/resources", {"temp_file_id": temp_id}))["files"] == 1
