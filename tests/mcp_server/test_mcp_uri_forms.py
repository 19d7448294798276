"""The MCP tools' URI arguments go through the REST routes' one resolver (issue 39, item 1): `viking://~/…` is the
caller's space; a uid-less `viking://user/<reserved>/…` is a tool error carrying OpenViking's INVALID_URI and its
hint, as REST answers it (tests/retrieval/test_uri_forms.py); never an empty answer."""

import json

import pytest

from tests.mcp_server.test_mcp import mcp_session

COFFEE = "viking://user/default/memories/preferences/coffee.md"
HINT = "'memories' is a reserved name, not a user id. Use 'viking://~/memories"


@pytest.fixture
def store(api):
    api.write_all(
        {
            COFFEE: "The user drinks black coffee, no sugar.",
            "viking://user/default/memories/events/2026/12/01/deploy.md": "# Summary\nDeployed ovsite 0.3.",
        }
    )
    return api


def call(url: str, tool: str, arguments: dict):
    async def actions(client):
        return await client.call_tool(tool, arguments)

    return mcp_session(url, actions)


def assert_hint(result, uri: str, loc=None):
    assert result.is_error, result.content
    error = json.loads(result.content[0].text)["error"]
    assert error["code"] == "INVALID_URI" and HINT in error["message"], error
    assert error["details"]["uri"] == uri, error
    if loc is not None:
        assert error["details"]["loc"] == loc, error


def text(result) -> str:
    assert not result.is_error, result.content
    return "".join(part.text for part in result.content)


QUERY = "what does the user drink?"
# Each tool's URI argument; find, search and recall take their REST body as their arguments.
FIELDS = {
    "find target_uri": ("find", {"query": QUERY, "target_uri": "{uri}", "score_threshold": 0}, None),
    "search target_uri": ("search", {"query": QUERY, "target_uri": "{uri}"}, None),
    "search exclude_uris": (
        "search",
        {"query": QUERY, "mode": "context", "exclude_uris": ["{uri}/events"]},
        ["exclude_uris", 0],
    ),
    "recall exclude_uris": ("recall", {"query": QUERY, "exclude_uris": ["{uri}/events"]}, ["exclude_uris", 0]),
    "bootstrap exclude_uris": ("bootstrap", {"exclude_uris": ["{uri}/events"]}, ["exclude_uris", 0]),
    "read uris": ("read", {"uris": ["{uri}/preferences/coffee.md"]}, None),
    "ls uri": ("ls", {"uri": "{uri}/preferences", "recursive": True}, None),
}


def filled(value, uri: str):
    if isinstance(value, str):
        return value.replace("{uri}", uri)
    if isinstance(value, list):
        return [filled(v, uri) for v in value]
    if isinstance(value, dict):
        return {k: filled(v, uri) for k, v in value.items()}
    return value


def first_uri(arguments: dict) -> str:
    found = []

    def walk(value):
        if isinstance(value, str) and value.startswith("viking://"):
            found.append(value)
        elif isinstance(value, list):
            [walk(v) for v in value]
        elif isinstance(value, dict):
            [walk(v) for v in value.values()]

    walk(arguments)
    return found[0]


@pytest.mark.parametrize("field", list(FIELDS))
def test_a_tool_refuses_the_uid_less_form_with_the_hint_and_resolves_the_tilde_form(live_url, store, field):
    tool, arguments, loc = FIELDS[field]
    refused = filled(arguments, "viking://user/memories")
    assert_hint(call(live_url, tool, refused), first_uri(refused), loc)
    answer = text(call(live_url, tool, filled(arguments, "viking://~/memories")))
    assert answer, field
    if tool in ("find", "search") and "exclude_uris" not in json.dumps(arguments):
        assert COFFEE in answer, answer
    if tool in ("read", "ls"):
        assert "black coffee" in answer or COFFEE in answer, answer
