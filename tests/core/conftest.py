"""The isolation modules' world (tests/core/test_isolation.py), shared by test_isolation_routes.py: each module that
uses it builds its own."""

import pytest
from django.test import override_settings

from core.models import Account
from tests.core.test_isolation import A_VAULT, ACME_PRICING, B_FOOD, G_LOCKER, ROADMAP, ROOT_KEY, Client, World


@pytest.fixture(scope="module")
def world(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock(), override_settings(OVSITE_ROOT_API_KEY=ROOT_KEY):
        before = set(Account.objects.values_list("id", flat=True))
        root = Client(ROOT_KEY)
        keys = {
            "alice": root.ok(root.post("/api/v1/admin/accounts", {"account_id": "acme", "admin_user_id": "alice"})),
            "gina": root.ok(root.post("/api/v1/admin/accounts", {"account_id": "globex", "admin_user_id": "gina"})),
            "bob": root.ok(root.post("/api/v1/admin/accounts/acme/users", {"user_id": "bob"})),
        }
        keys = {name: result["user_key"] for name, result in keys.items()}
        clients = {name: Client(key) for name, key in keys.items()}
        alice, bob, gina = clients["alice"], clients["bob"], clients["gina"]
        alice_task = alice.write(
            "viking://~/memories/entities/vault.md", "Alice keeps the vault code 4711 in her notebook."
        )["task_id"]
        alice.write(ROADMAP, "Acme roadmap: ship rocket skates in spring.")
        alice.write(ACME_PRICING, "Acme pricing: the rocket skates cost 99 dollars.")
        alice.ok(
            alice.post(
                "/api/v1/skills",
                {
                    "data": {
                        "name": "encabulator",
                        "description": "Tune the turbo encabulator",
                        "content": "Align the turbo encabulator before each deploy.",
                    }
                },
            )
        )
        alice.ok(
            alice.post(
                "/api/v1/sessions/alice-chat/messages", {"role": "user", "content": "Remember: the vault code is 4711."}
            )
        )
        bob_task = bob.write("viking://~/memories/preferences/food.md", "Bob is secretly allergic to peanuts.")[
            "task_id"
        ]
        gina_task = gina.write("viking://~/memories/entities/locker.md", "Gina's locker combination is 9902.")[
            "task_id"
        ]
        gina.write(ROADMAP, "Globex roadmap: build the doomsday device by autumn.")
        gina.ok(
            gina.post(
                "/api/v1/skills",
                {
                    "data": {
                        "name": "doomsday",
                        "description": "Arm the doomsday device",
                        "content": "Arm the doomsday device.",
                    }
                },
            )
        )
        for client, uri in ((alice, A_VAULT), (bob, B_FOOD), (gina, G_LOCKER), (alice, ROADMAP), (gina, ROADMAP)):
            assert client.ok(client.get("/api/v1/fs/stat", uri=uri))["state"] == "ready"
        yield World(keys, clients, alice_task, bob_task, gina_task)
        Account.objects.exclude(id__in=before).delete()


@pytest.fixture
def root_key():
    with override_settings(OVSITE_ROOT_API_KEY=ROOT_KEY):
        yield


@pytest.fixture
def w(world, db):
    return world
