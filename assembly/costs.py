"""Exact costs for the planner where they are cheap (docs/tokens.md): the planner stays pure and tokenizer-free,
and is handed counts made here.

- Stored abstract counts are exact in the deployment's family: a request in that family plans with them; one in
  another family gets the estimator's.
- An element's tags (`<memory uri=… type=… score=… date=… detail=…>`, its close and the separator) are what the
  estimator counts worst (it over-counts them by 8–11 %): they are counted exactly as the URI's tokens plus the
  template's around it. The template is counted once per process, family and category, the URI once per process and
  family (a URI recurs across turns); the URI's ends fall on the pre-tokenizers' boundaries (a quote before, a quote
  after), so the parts add up, and a two-decimal score costs the same whatever its digits. Where they do not (a URI
  ending in `/`, whose slash joins the quote), the plan is a token off, which the exact fit absorbs.
"""

from dataclasses import replace
from functools import lru_cache
from html import escape

from assembly.planner import TIER_ORDER, Candidate
from assembly.render import SEPARATOR, render_block
from retrieval.tokenizers import Counter

URIS_CACHED = 100_000
_TEMPLATE_URI = "viking://resources/template.md"
_TEMPLATE_DATE = "2026-06-15"


@lru_cache(maxsize=URIS_CACHED)
def _uri_tokens(counter: Counter, uri: str) -> int:
    return counter.count(escape(uri, quote=True))  # as the attribute holds it


@lru_cache(maxsize=256)
def _template_tokens(counter: Counter, category: str, dated: bool) -> tuple[int, ...]:
    """The element at each tier (TIER_ORDER: a `uri` line, then tags around a body) less the URI, separator
    included: the detail's name costs more in some vocabularies than in others. A day costs about the same
    whatever its digits."""
    uri = _uri_tokens(counter, _TEMPLATE_URI)
    date = _TEMPLATE_DATE if dated else None
    return tuple(
        counter.count(render_block(_TEMPLATE_URI, category, 0.0, tier, "", date) + SEPARATOR) - uri
        for tier in TIER_ORDER
    )


def _shell_tokens(counter: Counter, uri: str, category: str, dated: bool) -> tuple[int, ...]:
    own = _uri_tokens(counter, uri)
    return tuple(template + own for template in _template_tokens(counter, category, dated))


def with_exact_costs(candidates: list[Candidate], counter: Counter, stored_family: str) -> list[Candidate]:
    """Candidates carrying what can be counted exactly for `counter`'s family; for the estimator, nothing."""
    if not counter.exact:
        return [replace(c, abstract_tokens=None) if c.abstract_tokens is not None else c for c in candidates]
    stored = counter.family == stored_family
    return [
        replace(
            c,
            shell_tokens=_shell_tokens(counter, c.uri, c.category, c.date is not None),
            abstract_tokens=c.abstract_tokens if stored else None,
        )
        for c in candidates
    ]
