"""Cross-turn dedup and exclusion (RFC §3.2 L2): pure filtering of candidates."""

from dataclasses import dataclass

from assembly.planner import Candidate
from core.errors import InvalidArgument, InvalidUri
from retrieval.uris import Subtrees, served_uri


@dataclass
class Filtered:
    kept: list[Candidate]
    excluded: int
    cooled: int


def exclusion(exclude_uris, *, user_id: str) -> Subtrees:
    """`exclude_uris` as the caller means them: normalised as the write path normalises (`~` is `user_id`'s
    space, a trailing slash does not count), each covering what lies below it (a directory its files, a document
    its sections). A URI that does not parse is a 422 naming it, before anything is searched."""
    normalised = []
    for index, raw in enumerate(exclude_uris):
        try:
            normalised.append(served_uri(raw, user_id=user_id))
        except InvalidUri as error:
            raise InvalidArgument(error.message, loc=["exclude_uris", index], type_="invalid_uri") from None
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
