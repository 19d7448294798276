"""The relevance floor of /recall's defaults, derived from the operator's own store (docs/retrieval.md,
"Thresholds"): the fused value a question meets by chance. Cosines between random pairs of stored files are what
unrelated texts score under this embedder; a high percentile of them is about the best that a question which the
store cannot answer finds among a few hundred unrelated items, and, on the vector side's share of the fusion,
the floor. Unrelated texts share no rare words, so the lexical side adds next to nothing to that chance level."""

from dataclasses import dataclass

import numpy as np

from retrieval.models import Context
from retrieval.search.fusion import Ranking

# The percentile of random pairs' cosines: on the bilingual bench store (bench/quality.py --suite recall) it
# gives 0.205 at lexical weight 0.5, where labelled questions put the floor at 0.2 (docs/retrieval.md).
FLOOR_PERCENTILE = 99.5


@dataclass(frozen=True)
class Calibration:
    floor: float
    sampled: int
    percentile: float


def derive_relevance_floor(
    *, ranking: Ranking, sample: int = 1000, percentile: float = FLOOR_PERCENTILE, seed: int = 0
) -> Calibration | None:
    """None with fewer than two embedded files, or in lexical mode, whose BM25 order has no chance level."""
    if ranking.mode == "lexical":
        return None
    ids = list(
        Context.objects.filter(state="ready", kind="file", embedding__isnull=False)
        .order_by("id")
        .values_list("id", flat=True)
    )
    if len(ids) < 2:
        return None
    picked = np.random.default_rng(seed).permutation(len(ids))[:sample]
    vectors = np.array(
        [
            np.asarray(vector, dtype=np.float32)
            for vector in Context.objects.filter(id__in=[ids[index] for index in picked]).values_list(
                "embedding", flat=True
            )
        ]
    )
    cosines = vectors @ vectors.T
    pairs = cosines[~np.eye(len(vectors), dtype=bool)]  # every pair of two different files
    weight = 1.0 - ranking.lexical_weight if ranking.mode == "hybrid" else 1.0
    return Calibration(
        floor=round(weight * float(np.percentile(pairs, percentile)), 4), sampled=len(vectors), percentile=percentile
    )
