"""A search's rows ranked, with no I/O: scores on OpenViking's scale, the vector and lexical sides fused, the score
threshold applied (docs/retrieval.md)."""

import re
from dataclasses import dataclass
from functools import lru_cache

_ROW_ONLY = ("distance", "query", "lexical_rank")
# Words of each script a query and a node may share: a Latin or Cyrillic word each, or about two ideographs, kana or
# hangul syllables (what a Chinese word spans). Digits and punctuation belong to every script and count for none.
_SCRIPTS = {
    "latin": (re.compile(r"[A-Za-z\u00c0-\u024f]+"), 1.0),
    "cyrillic": (re.compile(r"[\u0400-\u04ff]+"), 1.0),
    "han": (re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]"), 0.5),
    "kana": (re.compile(r"[\u3040-\u30ff]"), 0.5),
    "hangul": (re.compile(r"[\uac00-\ud7af]"), 0.5),
}


# What chance gives a pair of texts in two scripts, as a share of what it gives two texts in one: the packaged
# embedder's random cross-language pairs score lower (99.5th percentile of cosines 0.375 against 0.433 on the
# recall suite's items, 0.474 against 0.568 on the coding suite's; 90th: 0.83 of it on both). The relevance floor,
# calibrated on same-script chance, asks this much less of a row out of lexical reach (`fuse`, floor_scale).
CROSS_SCRIPT_CHANCE = 0.85


def score_of(distance: float) -> float:
    """OpenViking 0.5.2's score for a cosine distance: its engine maps a cosine c to (1 + c) / 2, clamped to [0, 1]
    (measured on 3,070 hits to within its int8 quantisation, 4.7e-4: bench/vs_openviking), so a score and a
    threshold mean there what they mean here for the same vectors (docs/retrieval.md, "Scores")."""
    return round(min(1.0, max(0.0, 1.0 - distance / 2.0)), 6)


@lru_cache(maxsize=4096)
def script_words(text: str) -> tuple[tuple[str, float], ...]:
    """(script, words) of each script `text` is written in."""
    words = ((name, len(pattern.findall(text)) * per) for name, (pattern, per) in _SCRIPTS.items())
    return tuple((name, count) for name, count in words if count)


def lexical_reach(query: str, node: str) -> float:
    """How far words can match between a query and a node (its abstract), 0 to 1: the smaller of the query's share
    of words in scripts the node also uses and the node's share in scripts the query uses. An English question and
    a Chinese memory share no script (0); a Chinese memory naming one English service, little; two texts of one
    script, 1 (and 1 when either has no words to judge by)."""
    asked, held = dict(script_words(query)), dict(script_words(node))
    if not asked or not held:
        return 1.0
    shared = asked.keys() & held.keys()
    return min(
        sum(asked[name] for name in shared) / sum(asked.values()),
        sum(held[name] for name in shared) / sum(held.values()),
    )


@dataclass(frozen=True)
class Ranking:
    """How a search orders what it found: `mode` (hybrid, vector, lexical), the lexical side's weight in the
    fusion, the coverage from which a lexical match passes the score threshold (None: never), and the relevance
    floor of /recall's defaults (None: none)."""

    mode: str
    lexical_weight: float
    rescue_coverage: float | None = None
    relevance_floor: float | None = None  # see `relevance_cut`

    @property
    def nearest(self) -> bool:
        return self.mode != "lexical"

    @property
    def lexical(self) -> bool:
        return self.mode != "vector"


def fuse(rows: list[dict], ranking: Ranking, grouped: bool, texts: tuple[str, ...] = ()) -> list[dict]:
    """Each (group, URI) once, best first; a group is a row's bucket when `grouped`, else all rows are one.

    In hybrid mode a row's fused value for one query is (1 − w) × cosine + w × coverage, w the lexical weight and
    coverage the share of the query's information (idf) the node holds; its value is the best over the queries.
    Weighted scores, not ranks: a reciprocal rank fusion lifts a node that shares one word with the question over
    a better vector match that shares none (a cross-lingual one), as any lexical rank outweighs a step of vector
    rank. Coverage counts only as far as the query's words can be in the node at all (`lexical_reach` of the query,
    `texts[row["query"]]`, and the node's abstract): beyond that reach the cosine stands in for it where that ranks
    the node higher, so a Chinese memory is ranked for an English question by its vector, not pushed down by English
    nodes sharing a word. Vector mode orders by cosine, lexical mode by BM25. A row keeps its score (the best of its
    queries'), its coverage (the largest), its BM25 (`lexical_rank`, the largest; 0 when no full-text list had it)
    and its `floor_scale`: the relevance floor, calibrated on the cosine's share 1 − w of a fused value, is met by
    chance at (1 − w × reach) / (1 − w) of it where the cosine stands in for coverage, times what chance gives a
    pair of scripts as far apart (CROSS_SCRIPT_CHANCE out of reach, 1 within it; `relevance_cut`).
    """
    best: dict[tuple, dict] = {}
    for row in rows:
        cosine, coverage, bm25 = 1.0 - row["distance"], row["coverage"] or 0.0, row["lexical_rank"] or 0.0
        floor_scale = 1.0
        if ranking.mode == "hybrid":
            fused = (1.0 - ranking.lexical_weight) * cosine + ranking.lexical_weight * coverage
            reach = lexical_reach(texts[row["query"]], row.get("abstract") or "") if texts else 1.0
            weight = ranking.lexical_weight * reach
            # The cosine stands in for coverage out of reach only where that lifts the row: a Chinese turn naming
            # the English term an English question asks about keeps what its coverage earns.
            imputed = (1.0 - weight) * cosine + weight * coverage
            if imputed > fused and ranking.lexical_weight < 1:
                chance = CROSS_SCRIPT_CHANCE + (1.0 - CROSS_SCRIPT_CHANCE) * reach
                fused, floor_scale = imputed, chance * (1.0 - weight) / (1.0 - ranking.lexical_weight)
        else:
            fused = cosine if ranking.mode == "vector" else bm25
        key = (row["bucket"] if grouped else "", row["uri"])
        kept = best.get(key)
        if kept is None:
            best[key] = kept = {
                **{k: v for k, v in row.items() if k not in _ROW_ONLY},
                "score": 0.0,
                "coverage": 0.0,
                "fused": float("-inf"),
                "lexical_rank": 0.0,
                "floor_scale": floor_scale,
            }
        fused = round(fused, 9)
        if fused > kept["fused"]:
            kept.update(fused=fused, floor_scale=floor_scale)
        kept.update(
            score=max(kept["score"], score_of(row["distance"])),
            coverage=max(kept["coverage"], coverage),
            lexical_rank=max(kept["lexical_rank"], bm25),
        )
    return sorted(best.values(), key=lambda row: (-row["fused"], -row["lexical_rank"], -row["score"], row["uri"]))


def above_threshold(rows: list[dict], threshold: float | None, ranking: Ranking) -> tuple[list[dict], int]:
    """(the rows that pass, how many did not). A row passes above the threshold (strictly, as in OpenViking), or,
    with a rescue coverage, when it holds at least that share of its query's information: a question that names
    a person or a place finds the memory that names them even where the embedder scores it low. The threshold
    cuts the k found, not the scan: in SQL it would make an iterative HNSW scan walk the whole index looking for
    k rows that pass when few do."""
    if not threshold:
        return rows, 0
    rescue = ranking.rescue_coverage
    kept = [row for row in rows if row["score"] > threshold or (rescue is not None and row["coverage"] >= rescue)]
    return kept, len(rows) - len(kept)


def relevance_cut(rows: list[dict], floor: float | None) -> tuple[list[dict], bool | None]:
    """(the rows to serve, whether the evidence was strong; None without a floor). A row is evidence when its fused
    value reaches the floor scaled by its `floor_scale` (what chance gives a row of its kind). When none is, the
    store most likely does not hold the answer: only the best row by fused value and the best by score (the vector
    side's best, when another: a question in one language about an item in another shares no words with it) are
    served, in rank order, so an auto-recall injects a pointer or two instead of a budget of filler, and never
    nothing when something was found (docs/retrieval.md, "Thresholds")."""
    if floor is None or not rows:
        return rows, None
    if any(row["fused"] >= floor * row.get("floor_scale", 1.0) for row in rows):
        return rows, True
    best = max(rows, key=lambda row: row["fused"])
    nearest = max(rows, key=lambda row: row["score"])
    return [row for row in rows if row is best or row is nearest], False
