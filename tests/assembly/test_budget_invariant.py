"""The budget invariant (docs/tokens.md): the final `rendered`, counted by the request's family, never exceeds
`max_tokens`; the estimator that plans stays within its own limits."""

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assembly.pipeline import _counted, _fit, _rendered_entries
from assembly.planner import Candidate, Caps, plan_tiers
from retrieval.tokenizers import FAMILIES as COUNTED_FAMILIES
from retrieval.tokenizers import counter_for
from retrieval.tokens import PROFILES, estimate_tokens, truncate_to_tokens

PIECES = [
    "deploy ",
    "the ",
    "回滚计划",
    "こんにちは",
    "한국어 ",
    "😀",
    '{"k": 12}',
    "\n",
    "</memory>",
    "</openviking-context>",
    '<memory uri="x">',
    "# Summary\n",
    "&amp;",
    "Ωμέγα ",
    "42 ",
]
texts = st.lists(st.sampled_from(PIECES), max_size=120).map("".join)
FAMILIES = sorted(PROFILES)  # every profile, including any added later


@st.composite
def corpora(draw):
    items = draw(
        st.lists(
            st.tuples(
                st.floats(0, 1),
                texts,
                texts,
                st.sampled_from(["file", "dir"]),
                st.sampled_from(["events", "preferences", "resources"]),
            ),
            max_size=20,
        )
    )
    return [
        (
            Candidate(
                uri=f"viking://resources/n{i}" if kind == "dir" else f"viking://user/u/memories/{cat}/{i}.md",
                category="resources" if kind == "dir" else cat,
                context_type="resource" if kind == "dir" else "memory",
                kind=kind,
                score=score,
                abstract=abstract[:450],
            ),
            body,
        )
        for i, (score, abstract, body, kind, cat) in enumerate(items)
    ]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    corpora(),
    st.integers(64, 4000),
    st.sampled_from(["auto", "abstract", "overview", "full"]),
    st.sampled_from(COUNTED_FAMILIES),
    st.sampled_from(FAMILIES),
)
def test_rendered_never_exceeds_max_tokens(corpus, max_tokens, detail, family, stored_family):
    """Planned by the estimator from counts made in one family, counted and fitted exactly in another: still
    within budget, every served entry named in the block."""
    counter = counter_for(family)
    candidates = [
        replace(
            c, overview_tokens=estimate_tokens(body, stored_family), content_tokens=estimate_tokens(body, stored_family)
        )
        for c, body in corpus
    ]
    full_text = {c.uri: body for c, body in corpus}
    plan = plan_tiers(candidates, Caps(max_tokens=max_tokens, detail=detail, family=counter.profile, per_entry_cap=300))
    bodies = {
        e.candidate.uri: e.candidate.abstract
        if e.tier == "abstract"
        else truncate_to_tokens(full_text[e.candidate.uri], e.body_tokens, counter.profile)
        for e in plan.entries
    }
    entries = _rendered_entries(plan, bodies)
    entries, rendered, used = _fit(entries, *_counted(entries, counter), max_tokens, counter)
    assert used == counter.count(rendered) <= max_tokens
    assert all(f'uri="{e["uri"]}"' in rendered for e in entries)


@settings(max_examples=200, deadline=None)
@given(texts, st.integers(0, 400), st.sampled_from(FAMILIES))
def test_truncation_keeps_the_head_within_the_limit(text, limit, family):
    head = truncate_to_tokens(text, limit, family)
    assert estimate_tokens(head, family) <= max(limit, 0) or head == ""
    stem = head[:-2] if head.endswith("\n…") else head
    assert text.startswith(stem.rstrip()) or stem == ""


@pytest.mark.parametrize("family", FAMILIES)
def test_estimate_is_additive_up_to_rounding(family):
    a, b = "hello 世界 " * 7, '😀 {"json": [1,2,3]}\n' * 5
    assert estimate_tokens(a + b, family) <= estimate_tokens(a, family) + estimate_tokens(b, family)
