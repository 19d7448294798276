"""Cross-turn dedup and exclusion (RFC §3.2 L2): pure filtering of candidates."""
from dataclasses import dataclass

from assembly.planner import Candidate


@dataclass
class Filtered:
    kept: list[Candidate]
    excluded: int
    cooled: int


def drop_served(candidates: list[Candidate], *, exclude: set[str], cooled: dict[str, str]) -> Filtered:
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
