"""Cross-turn dedup and exclusion (RFC §3.2 L2): pure filtering of candidates."""

from dataclasses import dataclass

from assembly.planner import Candidate
from core.errors import InvalidUri
from retrieval.uris import Subtrees, served_uri


@dataclass
class Filtered:
    kept: list[Candidate]
    excluded: int
    cooled: int


def exclusion(exclude_uris, *, user_id: str) -> Subtrees:
    """`exclude_uris` as the caller means them: resolved as every URI of a request is (`~` is `user_id`'s space,
    a reserved name where a user id belongs is refused, a trailing slash does not count), each covering what lies
    below it (a directory its files, a document its sections). A URI that does not resolve is a 400 INVALID_URI
    naming it and its index (`details.loc`), before anything is searched."""
    normalised = []
    for index, raw in enumerate(exclude_uris):
        try:
            normalised.append(served_uri(raw, user_id=user_id))
        except InvalidUri as error:
            raise error.at("exclude_uris", index) from None
    return Subtrees(normalised)


def drop_served(candidates: list[Candidate], *, exclude: Subtrees, cooled: dict[str, str]) -> Filtered:
    """`exclude_uris` and the session ledger apply as a union. An entry last served only as a bare `uri` is not
    cooled: it may come back at a higher tier (uri-only grace)."""
    kept, excluded, cooled_count = [], 0, 0
    for candidate in candidates:
        if candidate.uri in exclude:
            excluded += 1
        elif cooled.get(candidate.uri, "uri") != "uri":
            cooled_count += 1
        else:
            kept.append(candidate)
    return Filtered(kept=kept, excluded=excluded, cooled=cooled_count)
