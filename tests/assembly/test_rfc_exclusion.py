"""RFC conformance of context and bootstrap mode (issue 22): `exclude_uris` names what the caller means — the
`~` shorthand, a trailing slash, a directory or a document with all it holds — and `level` does nothing in
context mode (the detail ladder owns the tier)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assembly import bootstrap
from retrieval.uris import Subtrees, served_uri
from tests.retrieval.test_section_ingest import runbook

SEARCH = "/api/v1/search/search"
USER_SPACE = "viking://user/default"
DEPLOY = f"{USER_SPACE}/memories/events/2026/11/30/deploy.md"
PROFILE = f"{USER_SPACE}/memories/profile.md"
DOC = "viking://resources/runbook.md"
SESSION = "boot-x"


@pytest.fixture
def store(api):
    api.write_all(
        {
            "viking://~/memories/profile.md": "# Profile\nName: Ada. Works on ovsite, a context server.",
            "viking://~/memories/events/2026/11/30/deploy.md": (
                "# Summary\nDeployed ovsite 0.3 to production on Nov 30; the rollback plan was not needed."
            ),
            "viking://~/memories/events/2026/11/29/canary.md": "# Summary\nThe deploy canary ran for an hour.",
            "viking://~/memories/preferences/reports.md": "Prefers deploy reports that lead with the conclusion.",
            "viking://resources/runbooks/restart.md": "# Restart the workers\nsystemctl restart ovsite-worker",
        }
    )
    api.write(DOC, runbook(), wait=True)
    return api


def context(api, **body):
    status, result = api.post(SEARCH, {"mode": "context", "score_threshold": 0, **body})
    assert status == 200, result
    return result["result"]


def boot(api, **body):
    status, result = api.post(SEARCH, {"mode": "bootstrap", "max_tokens": 4000, **body})
    assert status == 200, result
    return result["result"]


def uris(result) -> list[str]:
    return [e["uri"] for e in result["entries"]]


def under(uris_: list[str], prefix: str) -> list[str]:
    return [uri for uri in uris_ if uri == prefix or uri.startswith(prefix + "/")]


SEGMENT = st.text(alphabet="abz-_.", min_size=1, max_size=6).filter(lambda s: s not in (".", ".."))
PATH = st.lists(SEGMENT, min_size=1, max_size=4).map("/".join)


@given(PATH, PATH, st.text(alphabet="abz-_", min_size=1, max_size=3))
def test_an_excluded_uri_covers_what_lies_below_it_and_nothing_beside_it(path, below, suffix):
    base = f"viking://resources/{path}"
    covering = Subtrees([served_uri(base + "/", user_id="ada")])
    assert base in covering and f"{base}/{below}" in covering
    assert base + suffix not in covering and "viking://resources" not in covering


def test_tilde_covers_the_callers_space_only():
    covering = Subtrees([served_uri("viking://~/memories", user_id="ada")])
    assert "viking://user/ada/memories/events/e.md" in covering
    assert "viking://user/bob/memories/events/e.md" not in covering


# context mode ------------------------------------------------------------------------------------------------


def test_context_exclusion_takes_the_tilde_shorthand(store):
    assert DEPLOY in uris(context(store, query="production deploy"))
    result = context(store, query="production deploy", exclude_uris=["viking://~/memories/events/2026/11/30/deploy.md"])
    assert DEPLOY not in uris(result) and result["stats"]["excluded"] == 1


def test_context_exclusion_ignores_a_trailing_slash(store):
    result = context(store, query="production deploy", exclude_uris=[DEPLOY + "/"])
    assert DEPLOY not in uris(result) and result["stats"]["excluded"] == 1


def test_context_exclusion_of_a_directory_covers_its_files(store):
    assert under(uris(context(store, query="deploy")), f"{USER_SPACE}/memories/events")
    result = context(store, query="deploy", exclude_uris=["viking://~/memories/events"])
    assert not under(uris(result), f"{USER_SPACE}/memories/events") and result["stats"]["excluded"] >= 2


def test_context_exclusion_of_a_document_covers_its_sections(store):
    query = "restart the billing workers and rotate the credentials"
    assert under(uris(context(store, query=query)), DOC)
    result = context(store, query=query, exclude_uris=[DOC])
    assert not under(uris(result), DOC) and DOC not in result["rendered"]
    assert result["stats"]["excluded"] >= 2


@pytest.mark.parametrize(
    "raw",
    ["https://example.com/a.md", "viking://nowhere/a.md", "viking://resources/../x", "viking://user/memories/a.md"],
)
def test_an_unparseable_exclude_uri_is_invalid_uri_naming_it_and_its_index(store, raw):
    """As every field that takes a URI (issue 39): 400 INVALID_URI, `details.loc` where it stood."""
    status, body = store.post(SEARCH, {"mode": "context", "query": "deploy", "exclude_uris": [DEPLOY, raw]})
    assert status == 400 and body["error"]["code"] == "INVALID_URI", body
    assert raw in body["error"]["message"] and body["error"]["details"]["uri"] == raw
    assert body["error"]["details"]["loc"] == ["exclude_uris", 1]


# bootstrap mode ----------------------------------------------------------------------------------------------


def test_bootstrap_exclusion_takes_the_tilde_shorthand(store):
    assert PROFILE in uris(boot(store))
    result = boot(store, exclude_uris=["viking://~/memories/profile.md"])
    assert PROFILE not in uris(result) and result["stats"]["excluded"] == 1


def test_bootstrap_exclusion_ignores_a_trailing_slash_on_stored_and_served_uris(store):
    store.post(f"/api/v1/sessions/{SESSION}/messages", {"role": "user", "content": "Let us finish the MCP tools."})
    session_uri = bootstrap.SESSION_URI.format(SESSION)
    assert session_uri in uris(boot(store, session_id=SESSION))
    result = boot(
        store, session_id=SESSION, exclude_uris=[PROFILE + "/", bootstrap.INSTRUCTIONS_URI + "/", session_uri + "/"]
    )
    assert not {PROFILE, bootstrap.INSTRUCTIONS_URI, session_uri} & set(uris(result))
    assert result["stats"]["excluded"] == 3


def test_bootstrap_exclusion_of_a_directory_covers_its_files(store):
    assert under(uris(boot(store)), f"{USER_SPACE}/memories/events")
    result = boot(store, exclude_uris=["viking://~/memories/events/"])
    assert not under(uris(result), f"{USER_SPACE}/memories/events") and result["stats"]["excluded"] >= 2


def test_bootstrap_exclusion_of_a_document_covers_its_sections(store):
    assert under(uris(boot(store)), DOC)
    result = boot(store, exclude_uris=[DOC])
    assert not under(uris(result), DOC) and result["stats"]["excluded"] >= 2


def test_an_unparseable_bootstrap_exclude_uri_is_invalid_uri_naming_it(store):
    status, body = store.post(SEARCH, {"mode": "bootstrap", "exclude_uris": ["viking:///a.md"]})
    assert status == 400 and body["error"]["code"] == "INVALID_URI", body
    assert "viking:///a.md" in body["error"]["message"]
    assert body["error"]["details"]["loc"] == ["exclude_uris", 0]


# level -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("level", [1, 2])
def test_level_does_not_change_a_context_block_and_is_listed_as_ignored(store, level):
    query = "restart the workers after the deploy"
    plain = context(store, query=query)
    leveled = context(store, query=query, level=level)
    assert uris(leveled) == uris(plain) and leveled["rendered"] == plain["rendered"]
    assert leveled["stats"]["ignored"] == ["level"] and plain["stats"]["ignored"] == []
