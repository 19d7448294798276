"""`viking://` URIs: parsing, normalisation and the facts derived from a path, in one place.

`parse_uri` is the one resolver of a URI a request names, REST and MCP alike, with OpenViking 0.5.2's rules at its
request boundary (`openviking/core/namespace.py`, `resolve_current_user_uri`): `viking://~/…` is the caller's own
space, and `viking://user/<reserved>/…` (a space name where the user id belongs: OpenViking's old uid-less
shorthand, which its plugins still send) is refused with the way to say it, unless the caller's user id is that
very name. `parse_stored_uri` reads a URI the store already holds, with no caller to resolve against.
"""

import re
from dataclasses import dataclass
from urllib.parse import unquote

from core.errors import InvalidUri

SCHEME = "viking://"
SPACES = ("user", "agent", "resources")
# Spaces of what an assembled block serves without a stored node (the bootstrap's instructions and session
# continuity): a client may hand those URIs back in `exclude_uris`.
SERVED_SPACES = ("server", "session")
MEMORY_CATEGORIES = ("events", "entities", "preferences", "experiences")
MAX_URI_LENGTH = 1024
MAX_SEGMENT_LENGTH = 255
_FORBIDDEN = re.compile(r"[\x00-\x1f\x7f\\]|%(2f|5c|00)", re.IGNORECASE)
_OWNER_ID = re.compile(r"^[A-Za-z0-9_.@-]{1,64}$")
_DECODED_FORBIDDEN = re.compile(r"[\x00-\x1f\x7f/\\]")
# Names of a user's spaces that OpenViking 0.5.2 refuses as the user id of `viking://user/<id>/…`.
RESERVED_USER_SEGMENTS = ("memories", "resources", "skills", "peers", "privacy", "sessions")


def _decoded(segment: str) -> str:
    """The segment as a client that percent-decodes (even repeatedly) would see it."""
    for _ in range(8):
        if "%" not in segment:
            break
        decoded = unquote(segment)
        if decoded == segment:
            break
        segment = decoded
    return segment


@dataclass(frozen=True)
class VikingUri:
    uri: str
    segments: tuple[str, ...]

    @property
    def space(self) -> str:
        return self.segments[0] if self.segments else ""

    @property
    def parent(self) -> str | None:
        if not self.segments:
            return None
        return SCHEME + "/".join(self.segments[:-1])

    @property
    def name(self) -> str:
        return self.segments[-1] if self.segments else ""

    @property
    def owner(self) -> str:
        """The user whose private space this is; "" for spaces shared within the account."""
        return self.segments[1] if self.space == "user" and len(self.segments) > 1 else ""

    @property
    def space_root_depth(self) -> int:
        """Segments of the shallowest node that belongs to one owner: `resources`, `user/alice`, `agent/bot`."""
        return 1 if self.space == "resources" else 2

    @property
    def context_type(self) -> str:
        rest = self.segments[2:] if self.space in ("user", "agent") else ()
        if rest[:1] == ("memories",):
            return "memory"
        if rest[:1] == ("skills",):
            return "skill"
        return "resource"

    @property
    def category(self) -> str:
        kind = self.context_type
        if kind == "skill":
            return "skills"
        if kind == "resource":
            return "resources"
        rest = self.segments[3:]
        if rest == ("profile.md",):
            return "profile"
        return rest[0] if rest and rest[0] in MEMORY_CATEGORIES else ""

    @property
    def is_structural(self) -> bool:
        """A directory that is a container, not content worth a search hit: space and type roots, and every folder
        of memories (categories, event dates) and of skills, whose files are the hits. Resource folders are
        documents, and stay searchable."""
        depth, n = self.space_root_depth, len(self.segments)
        if n <= depth:
            return True
        if self.space == "resources":
            return False
        rest = self.segments[2:]
        return rest[0] in ("memories", "skills") or (n == depth + 1 and rest[0] == "resources")

    def ancestors(self) -> list[str]:
        """Directory URIs from the owner's root down to this node's parent (never the bare spaces)."""
        depth = self.space_root_depth
        return [SCHEME + "/".join(self.segments[:n]) for n in range(depth, len(self.segments))]

    def is_under(self, prefix: "VikingUri") -> bool:
        return self.segments[: len(prefix.segments)] == prefix.segments


def reserved_name_refusal(raw: str, segments: list[str]) -> InvalidUri:
    """OpenViking's refusal of `viking://user/<reserved>/…`, with its hint: the `~` form for the caller's space,
    the explicit form for another user's."""
    rest = "/".join(segments[1:])
    reason = (
        f"'{segments[1]}' is a reserved name, not a user id. Use 'viking://~/{rest}' for the current user, "
        f"or 'viking://user/{{user_id}}/{rest}' for an explicit user"
    )
    return InvalidUri(raw, reason, suggestion=f"{SCHEME}~/{rest}")


def parse_uri(raw, *, user_id: str, spaces: tuple[str, ...] = SPACES) -> VikingUri:
    """Parses and normalises `raw` as the caller `user_id` names it: `viking://~` is the caller's own space, and a
    reserved name where a user id belongs is refused (OpenViking 0.5.2's rules). Raises `InvalidUri`."""
    return _parse(raw, user_id=user_id, spaces=spaces)


def parse_stored_uri(uri: str) -> VikingUri:
    """A URI the store holds (already resolved when it was written): parsed with no caller's rules."""
    return _parse(uri, user_id=None, spaces=SPACES)


def _parse(raw, *, user_id: str | None, spaces: tuple[str, ...]) -> VikingUri:
    if not isinstance(raw, str) or not raw:
        raise InvalidUri(str(raw), "a URI must be a non-empty string")
    if len(raw) > MAX_URI_LENGTH:
        raise InvalidUri(raw[:80] + "…", f"longer than {MAX_URI_LENGTH} characters")
    if raw[: len(SCHEME)].lower() != SCHEME:
        raise InvalidUri(raw, "must start with viking://")
    if _FORBIDDEN.search(raw):
        raise InvalidUri(raw, "control characters, backslashes and encoded separators are not allowed")
    path = raw[len(SCHEME) :].rstrip("/")
    segments = path.split("/") if path else []
    if segments[:1] == ["~"]:
        if user_id is None:
            raise InvalidUri(raw, "~ names the caller's space, and here there is no caller")
        segments = ["user", user_id, *segments[1:]]
    for segment in segments:
        if segment in ("", ".", ".."):
            raise InvalidUri(raw, "empty, '.' and '..' path segments are not allowed")
        if len(segment) > MAX_SEGMENT_LENGTH:
            raise InvalidUri(raw, f"a path segment is longer than {MAX_SEGMENT_LENGTH} characters")
        if segment != segment.strip():
            raise InvalidUri(raw, "path segments may not start or end with whitespace")
        decoded = _decoded(segment)
        if decoded in (".", "..") or _DECODED_FORBIDDEN.search(decoded):
            raise InvalidUri(raw, "percent-encoded separators, dots and control characters are not allowed")
    if segments and segments[0] not in spaces:
        raise InvalidUri(raw, f"the first segment must be one of {', '.join(spaces)} or ~")
    if len(segments) > 1 and segments[0] in ("user", "agent") and not _OWNER_ID.match(segments[1]):
        raise InvalidUri(raw, "user and agent ids are 1-64 letters, digits, '_', '.', '@' or '-'")
    # The self-id escape: a user whose id is literally the reserved name keeps `viking://user/<that name>`.
    if (
        user_id is not None
        and len(segments) > 1
        and segments[0] == "user"
        and segments[1] in RESERVED_USER_SEGMENTS
        and segments[1] != user_id
    ):
        raise reserved_name_refusal(raw, segments)
    parsed = VikingUri(SCHEME + "/".join(segments), tuple(segments))
    if len(parsed.uri) > MAX_URI_LENGTH:  # `~` expands to `user/{id}`: check what will be stored
        raise InvalidUri(raw[:80] + "…", f"longer than {MAX_URI_LENGTH} characters once ~ is expanded")
    if parsed.context_type == "memory" and len(segments) >= 4 and parsed.category == "":
        raise InvalidUri(raw, f"memories live in profile.md or under {', '.join(MEMORY_CATEGORIES)}")
    return parsed


def parse_file_uri(raw, *, user_id: str) -> VikingUri:
    """A URI that may name a file: below an owner's root (`viking://resources/x`, `viking://user/u/x`)."""
    parsed = parse_uri(raw, user_id=user_id)
    # The error names the URI as the client sent it (`viking://~`), like every other InvalidUri.
    if len(parsed.segments) <= parsed.space_root_depth:
        raise InvalidUri(raw, "a file must live below resources/, user/{id}/ or agent/{id}/")
    if parsed.context_type == "memory" and len(parsed.segments) == 3:
        raise InvalidUri(raw, "memories/ is a directory")
    return parsed


def served_uri(raw, *, user_id: str) -> str:
    """`raw` in the one form nodes are stored and served in: scheme in lower case, `~` expanded to the caller's
    space as the write path does, no trailing slash. Stored URIs are `parse_uri`'s output, so they are already
    in this form and compare with it as strings. Raises `InvalidUri`."""
    return parse_uri(raw, user_id=user_id, spaces=SPACES + SERVED_SPACES).uri


class Subtrees:
    """Normalised URIs (`served_uri`), each standing for itself and everything below it: a directory for its
    files, a document for its section nodes."""

    def __init__(self, uris=()):
        self.uris = frozenset(uris)
        # The root `viking://` becomes `viking:/`, which every URI starts with: it covers everything.
        self._prefixes = tuple(uri.rstrip("/") + "/" for uri in self.uris)

    def __contains__(self, uri: str) -> bool:
        return uri in self.uris or uri.startswith(self._prefixes)
