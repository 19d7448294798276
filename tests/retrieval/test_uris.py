"""Unit tests of `viking://` parsing and normalisation (no database)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.errors import InvalidUri
from retrieval.uris import MAX_URI_LENGTH, RESERVED_USER_SEGMENTS, parse_file_uri, parse_stored_uri, parse_uri

USER = "alice"


def parse(raw, user_id=USER):
    return parse_uri(raw, user_id=user_id)


def test_tilde_is_the_callers_own_space():
    assert parse("viking://~/memories/profile.md").uri == "viking://user/alice/memories/profile.md"


def test_bare_tilde_is_the_callers_root():
    assert parse("viking://~").uri == "viking://user/alice"


def test_tilde_depends_on_the_caller():
    assert parse("viking://~/resources/x", user_id="bob").uri == "viking://user/bob/resources/x"


def test_the_root_parses_to_no_segments():
    assert parse("viking://").segments == ()


def test_trailing_slashes_are_dropped():
    assert parse("viking://resources/docs/").uri == "viking://resources/docs"


def test_scheme_is_case_insensitive_and_normalised():
    assert parse("VIKING://resources/Docs").uri == "viking://resources/Docs"


def test_path_keeps_its_case():
    assert parse("viking://resources/Docs").segments == ("resources", "Docs")


def test_space_name_is_case_sensitive():
    with pytest.raises(InvalidUri):
        parse("viking://User/alice/x")


@pytest.mark.parametrize(
    "raw",
    [
        "viking://~/../bob/memories/profile.md",
        "viking://user/bob/..",
        "viking://user/alice/../bob",
        "viking://resources/./x",
        "viking://resources//x",
        "viking:///resources/x",
        "viking://user//alice",
    ],
)
def test_dot_and_empty_segments_are_refused(raw):
    with pytest.raises(InvalidUri):
        parse(raw)


@pytest.mark.parametrize(
    "raw",
    [
        "viking://user%2Fbob/x",
        "viking://user/alice%2f..%2fbob",
        "viking://resources/a%5Cb",
        "viking://resources/a%00b",
        "viking://resources/%2e%2e/x",
        "viking://resources/%2E/x",
        "viking://resources/a%252fb",
        "viking://resources/%252e%252e",
    ],
)
def test_percent_encoded_separators_and_dots_are_refused(raw):
    with pytest.raises(InvalidUri):
        parse(raw)


@pytest.mark.parametrize(
    "raw",
    ["viking://resources/a\\b", "viking://resources/a\nb", "viking://resources/a\x00b", "viking://resources/a\x7fb"],
)
def test_control_characters_and_backslashes_are_refused(raw):
    with pytest.raises(InvalidUri):
        parse(raw)


@pytest.mark.parametrize(
    "raw",
    [
        "",
        None,
        42,
        ["viking://resources"],
        "resources/x",
        "http://resources/x",
        "viking:/resources",
        "viking:resources",
    ],
)
def test_non_uris_are_refused(raw):
    with pytest.raises(InvalidUri):
        parse(raw)


def test_unknown_space_is_refused():
    with pytest.raises(InvalidUri):
        parse("viking://secrets/x")


@pytest.mark.parametrize(
    "raw", ["viking://user/~/x", "viking://user/a b/x", "viking://agent/" + "a" * 65, "viking://user/ali:ce"]
)
def test_bad_owner_ids_are_refused(raw):
    with pytest.raises(InvalidUri):
        parse(raw)


def test_segments_with_outer_whitespace_are_refused():
    with pytest.raises(InvalidUri):
        parse("viking://resources/ x")


def test_overlong_segment_is_refused():
    with pytest.raises(InvalidUri):
        parse("viking://resources/" + "a" * 256)


def test_overlong_uri_is_refused():
    with pytest.raises(InvalidUri):
        parse("viking://resources/" + "/".join(["a" * 200] * 6))


def test_uri_that_grows_past_the_limit_when_tilde_expands_is_refused():
    """The stored column holds MAX_URI_LENGTH characters: the check must apply to the expanded URI."""
    raw = "viking://~/" + "/".join(["a" * 200] * 5)
    raw += "/" + "b" * (MAX_URI_LENGTH - len(raw) - 1)
    assert len(raw) == MAX_URI_LENGTH
    with pytest.raises(InvalidUri):
        parse(raw, user_id="u" * 64)


def test_memories_outside_the_categories_are_refused():
    with pytest.raises(InvalidUri):
        parse("viking://~/memories/random/x.md")


def test_invalid_uri_error_names_the_uri():
    with pytest.raises(InvalidUri) as caught:
        parse("viking://nowhere/x")
    assert caught.value.details["uri"] == "viking://nowhere/x" and caught.value.status == 400


@pytest.mark.parametrize(
    "raw, owner, context_type, category",
    [
        ("viking://user/bob/memories/preferences/tea.md", "bob", "memory", "preferences"),
        ("viking://user/bob/memories/profile.md", "bob", "memory", "profile"),
        ("viking://user/bob/resources/notes.md", "bob", "resource", "resources"),
        ("viking://user/bob/skills/grep/SKILL.md", "bob", "skill", "skills"),
        ("viking://resources/docs/a.md", "", "resource", "resources"),
        ("viking://agent/bot/skills/x/SKILL.md", "", "skill", "skills"),
    ],
)
def test_derived_facts(raw, owner, context_type, category):
    parsed = parse(raw)
    assert (parsed.owner, parsed.context_type, parsed.category) == (owner, context_type, category)


def test_ancestors_stop_at_the_owners_root():
    assert parse("viking://~/memories/events/e.md").ancestors() == [
        "viking://user/alice",
        "viking://user/alice/memories",
        "viking://user/alice/memories/events",
    ]


def test_shared_resources_ancestors_start_at_resources():
    assert parse("viking://resources/a/b.md").ancestors() == ["viking://resources", "viking://resources/a"]


@pytest.mark.parametrize(
    "raw",
    [
        "viking://",
        "viking://resources",
        "viking://user",
        "viking://user/alice",
        "viking://~",
        "viking://agent/bot",
        "viking://~/memories",
    ],
)
def test_file_uris_must_be_below_an_owners_root(raw):
    with pytest.raises(InvalidUri):
        parse_file_uri(raw, user_id=USER)


def test_file_uri_below_a_root_parses():
    assert parse_file_uri("viking://~/memories/profile.md", user_id=USER).uri == (
        "viking://user/alice/memories/profile.md"
    )


# OpenViking 0.5.2's request-boundary rules ---------------------------------------------------------------------


@pytest.mark.parametrize("name", RESERVED_USER_SEGMENTS)
def test_a_reserved_name_in_the_user_id_place_is_refused_with_openvikings_hint(name):
    with pytest.raises(InvalidUri) as caught:
        parse(f"viking://user/{name}")
    assert caught.value.details["reason"] == (
        f"'{name}' is a reserved name, not a user id. Use 'viking://~/{name}' for the current user, "
        f"or 'viking://user/{{user_id}}/{name}' for an explicit user"
    )
    assert caught.value.code == "INVALID_URI" and caught.value.details["suggestion"] == f"viking://~/{name}"


def test_the_hint_carries_the_whole_path_without_a_trailing_slash():
    with pytest.raises(InvalidUri) as caught:
        parse("viking://user/memories/preferences/")
    assert "Use 'viking://~/memories/preferences' for the current user" in caught.value.message
    assert caught.value.details["uri"] == "viking://user/memories/preferences/"
    assert caught.value.details["suggestion"] == "viking://~/memories/preferences"


def test_a_file_uri_in_the_uid_less_form_is_refused_too():
    with pytest.raises(InvalidUri):
        parse_file_uri("viking://user/memories/preferences/tea.md", user_id=USER)


def test_a_user_named_after_a_reserved_space_keeps_it():
    """OpenViking's self-id escape: the same spelling is an explicit-uid URI for a user literally so named."""
    assert parse("viking://user/memories/memories/profile.md", user_id="memories").owner == "memories"
    assert parse("viking://~/memories", user_id="memories").uri == "viking://user/memories/memories"
    with pytest.raises(InvalidUri):
        parse("viking://user/skills/x", user_id="memories")


@pytest.mark.parametrize(
    "raw",
    ["viking://user", "viking://user/bob/memories", "viking://agent/memories/skills/x", "viking://resources/memories"],
)
def test_other_uses_of_the_reserved_words_resolve(raw):
    assert parse(raw).uri == raw


def test_a_stored_uri_is_read_without_a_callers_rules():
    """The store holds resolved URIs: one of a user named `memories` reads back, and `~` has no caller there."""
    assert parse_stored_uri("viking://user/memories/memories/profile.md").owner == "memories"
    with pytest.raises(InvalidUri):
        parse_stored_uri("viking://~/memories")


# properties -------------------------------------------------------------------------------------------------

SAFE_SEGMENT = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCXYZ0123456789_-.@~é中 ", min_size=1, max_size=20).filter(
    lambda s: s not in (".", "..") and s == s.strip()
)
USER_ID = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_-.@", min_size=1, max_size=64).filter(
    lambda s: s not in (".", "..")
)
PREFIXES = st.sampled_from(
    [
        "viking://resources",
        "viking://~/resources",
        "viking://agent/bot/skills",
        "viking://user/carol/resources",
        "VIKING://resources",
        "viking://~/skills",
    ]
)


@st.composite
def safe_uris(draw):
    segments = draw(st.lists(SAFE_SEGMENT, min_size=0, max_size=8))
    trailing = draw(st.sampled_from(["", "/"]))
    return draw(PREFIXES) + "".join("/" + s for s in segments) + trailing


@settings(max_examples=300, deadline=None)
@given(raw=safe_uris(), user_id=USER_ID)
def test_parsing_is_idempotent(raw, user_id):
    first = parse_uri(raw, user_id=user_id)
    assert parse_uri(first.uri, user_id=user_id) == first


@settings(max_examples=300, deadline=None)
@given(raw=safe_uris(), user_id=USER_ID)
def test_normalised_uri_has_no_dot_or_empty_segments(raw, user_id):
    rest = parse_uri(raw, user_id=user_id).uri.removeprefix("viking://")
    assert "//" not in rest and ".." not in rest.split("/") and "." not in rest.split("/")
    assert not rest.endswith("/") and "~" not in rest.split("/")[:1]


@settings(max_examples=300, deadline=None)
@given(segments=st.lists(SAFE_SEGMENT, min_size=1, max_size=6), user_id=USER_ID)
def test_tilde_maps_to_the_users_space(segments, user_id):
    tail = "/".join(["resources", *segments])
    assert parse_uri(f"viking://~/{tail}", user_id=user_id).uri == f"viking://user/{user_id}/{tail}"


@settings(max_examples=500, deadline=None)
@given(
    raw=st.one_of(
        st.text(max_size=200),
        st.text(max_size=200).map(lambda s: "viking://" + s),
        st.text(alphabet="/.~%2fFeE5cC0", max_size=40).map(lambda s: "viking://" + s),
    )
)
def test_any_text_parses_or_raises_invalid_uri(raw):
    try:
        parsed = parse_uri(raw, user_id=USER)
    except InvalidUri:
        return
    assert parse_uri(parsed.uri, user_id=USER) == parsed
    assert ".." not in parsed.segments and "" not in parsed.segments


@settings(max_examples=200, deadline=None)
@given(name=st.sampled_from(RESERVED_USER_SEGMENTS), user_id=USER_ID, tail=st.lists(SAFE_SEGMENT, max_size=4))
def test_the_hints_uri_is_the_same_path_in_the_callers_own_space(name, user_id, tail):
    """Whoever calls, the hint names the same path below `~`; only the user so named is let through. (A path that
    breaks another rule, a memory outside the categories, is refused for that once the hint is followed.)"""
    raw = "viking://user/" + "/".join([name, *tail])
    try:
        parsed = parse_uri(raw, user_id=user_id)
    except InvalidUri as refused:
        assert user_id != name and "is a reserved name" in refused.details["reason"]
        assert refused.details["suggestion"] == "viking://~/" + "/".join([name, *tail])
        try:
            followed = parse_uri(refused.details["suggestion"], user_id=user_id)
        except InvalidUri as other:
            assert "is a reserved name" not in other.details["reason"]
        else:
            assert followed.owner == user_id and followed.segments[2:] == (name, *tail)
    else:
        assert user_id == name and parsed.owner == name
