"""Schemathesis against the served OpenAPI schema (`/api/schema/`): every operation it lists, valid and invalid
inputs, through the real WSGI application, the real database and a real API key. No answer may be a 5xx, and
every answer must be a status the schema documents, with a body that its schema for that status accepts."""

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from core import accounts

ROOT_KEY = "schema-fuzz-root-key"
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
# Bounded so that the whole module stays within about a minute on the shared 2-core machine; deterministic, so a
# failure found once is found on every run.
CONFIG = schemathesis.Config.from_dict(
    {
        "generation": {"mode": "all", "max-examples": 12, "deterministic": True},
        "phases": {"coverage": {"enabled": False}, "stateful": {"enabled": False}},
        "suppress-health-check": ["all"],
    }
)

# Loaded at collection: the schema endpoint needs neither a key nor the database.
schema = schemathesis.openapi.from_wsgi("/api/schema/", get_wsgi_application(), config=CONFIG)


@pytest.fixture
def user_key(seeded, settings):
    """A real key of a real account (dev mode is off while a root key is set), with a node and a session to find."""
    settings.OVSITE_ROOT_API_KEY = ROOT_KEY
    key = accounts.create_account(name="fuzz", admin_user_id="alice")["user_key"]
    return key


@schema.parametrize()
def test_every_operation_answers_within_its_schema(case, user_key):
    key = ROOT_KEY if case.operation.path.startswith("/api/v1/admin/") else user_key
    case.call_and_validate(headers={"X-API-Key": key}, checks=CHECKS)
