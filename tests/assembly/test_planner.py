"""The planner on hand-built candidates: no database, no I/O (docs/design.md §5, RFC §3.4)."""

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from assembly.planner import Candidate, Caps, block_cost, plan_tiers, weak_evidence_budget
from assembly.render import render_block, render_blocks
from retrieval.tokens import estimate_tokens


def memory(name, score, *, category="events", abstract="short abstract of the memory", content_tokens=300):
    return Candidate(
        uri=f"viking://user/u/memories/{category}/{name}.md",
        category=category,
        context_type="memory",
        kind="file",
        score=score,
        abstract=abstract,
        content_tokens=content_tokens,
    )


def resource_dir(name, score, overview_tokens=120):
    return Candidate(
        uri=f"viking://resources/{name}",
        category="resources",
        context_type="resource",
        kind="dir",
        score=score,
        abstract=f"{name} directory abstract",
        overview_tokens=overview_tokens,
    )


def tiers(plan):
    return {e.candidate.uri.rsplit("/", 1)[-1]: e.tier for e in plan.entries}


def test_round_zero_gives_every_candidate_an_abstract_before_anyone_goes_deeper():
    candidates = [memory(f"m{i}", 0.9 - i / 100) for i in range(5)]
    abstract_cost = block_cost(candidates[0], "abstract", estimate_tokens(candidates[0].abstract), "o200k")
    plan = plan_tiers(candidates, Caps(max_tokens=abstract_cost * 5 + 5))
    assert set(tiers(plan).values()) == {"abstract"} and len(plan.entries) == 5


def test_a_weak_block_keeps_its_share_or_room_for_the_best_hits_abstract_whichever_is_more():
    best = memory("best", 0.6, abstract="the weekly report has three parts: progress, risks and next week's plan")
    abstract_cost = block_cost(best, "abstract", estimate_tokens(best.abstract), "o200k")
    roomy = Caps(max_tokens=abstract_cost * 8)
    assert weak_evidence_budget([best], roomy, 0.25) == abstract_cost * 2
    small = Caps(max_tokens=abstract_cost * 2)
    budget = weak_evidence_budget([best, memory("other", 0.5)], small, 0.25)
    assert budget == abstract_cost
    assert tiers(plan_tiers([best], replace(small, max_tokens=budget))) == {"best.md": "abstract"}
    assert tiers(plan_tiers([best], replace(small, max_tokens=int(small.max_tokens * 0.25)))) != {"best.md": "abstract"}
    # An abstract larger than the whole budget cannot be promised: the share stands.
    assert weak_evidence_budget([best], Caps(max_tokens=abstract_cost - 1), 0.25) == int((abstract_cost - 1) * 0.25)
    assert weak_evidence_budget([], small, 0.25) == int(small.max_tokens * 0.25)


def test_leftover_budget_upgrades_files_to_full_in_score_order():
    candidates = [memory("top", 0.9, content_tokens=100), memory("low", 0.5, content_tokens=100)]
    plan = plan_tiers(candidates, Caps(max_tokens=220))
    assert tiers(plan) == {"top.md": "full", "low.md": "abstract"}


def test_directories_go_to_overview_and_files_to_full():
    candidates = [resource_dir("ops", 0.8), memory("note", 0.7, content_tokens=50)]
    plan = plan_tiers(candidates, Caps(max_tokens=1600))
    assert tiers(plan) == {"ops": "overview", "note.md": "full"}


def test_resources_and_skills_are_capped_at_abstract_by_default():
    doc = Candidate(
        uri="viking://resources/doc.md",
        category="resources",
        context_type="resource",
        kind="file",
        score=0.9,
        abstract="a doc",
        content_tokens=40,
    )
    assert tiers(plan_tiers([doc], Caps(max_tokens=1600))) == {"doc.md": "abstract"}
    assert tiers(plan_tiers([doc], Caps(max_tokens=1600, detail="full"))) == {"doc.md": "abstract"}


def test_full_is_capped_per_entry_and_keeps_the_head():
    plan = plan_tiers([memory("big", 0.9, content_tokens=5000)], Caps(max_tokens=1600, per_entry_cap=400))
    entry = plan.entries[0]
    assert entry.tier == "full" and entry.body_tokens == 400


def test_what_does_not_fit_at_abstract_becomes_a_uri_line_then_is_dropped():
    long_abstract = "word " * 200
    candidates = [memory("a", 0.9), memory("b", 0.8, abstract=long_abstract), memory("c", 0.7, abstract=long_abstract)]
    a_cost = block_cost(candidates[0], "abstract", estimate_tokens(candidates[0].abstract), "o200k")
    uri_cost = block_cost(candidates[1], "uri", 0, "o200k")
    plan = plan_tiers(candidates, Caps(max_tokens=a_cost + uri_cost + 2))
    assert tiers(plan) == {"a.md": "abstract", "b.md": "uri"}
    assert [c.uri.rsplit("/", 1)[-1] for c in plan.dropped] == ["c.md"]


def test_fixed_detail_pins_tiers_and_cuts_entries_not_words():
    candidates = [memory("a", 0.9, content_tokens=500), memory("b", 0.8, content_tokens=50)]
    plan = plan_tiers(candidates, Caps(max_tokens=300, detail="full"))
    # a's full body does not fit: it is cut to a uri line instead of being truncated; b fits whole.
    assert tiers(plan) == {"a.md": "uri", "b.md": "full"}
    assert plan.entries[1].body_tokens == 50


def test_per_bucket_detail_map_pins_only_named_buckets():
    candidates = [memory("e", 0.9, content_tokens=50), memory("p", 0.8, category="preferences", content_tokens=50)]
    plan = plan_tiers(candidates, Caps(max_tokens=1600, detail={"events": "abstract"}))
    assert tiers(plan) == {"e.md": "abstract", "p.md": "full"}


def test_events_budget_ratio_keeps_room_for_the_other_buckets():
    events = [memory(f"e{i}", 0.9 - i / 100, content_tokens=200) for i in range(8)]
    others = [memory(f"p{i}", 0.5, category="preferences", content_tokens=200) for i in range(4)]
    plan = plan_tiers(events + others, Caps(max_tokens=1000, events_budget=300))
    events_cost = sum(e.cost for e in plan.entries if e.candidate.category == "events")
    assert events_cost <= 300
    assert tiers(plan)["p0.md"] == "full"


def test_room_the_other_buckets_cannot_use_goes_to_events():
    events = [memory(f"e{i}", 0.9 - i / 100, content_tokens=200) for i in range(8)]
    pref = memory("p", 0.5, category="preferences", content_tokens=200)
    plan = plan_tiers(events + [pref], Caps(max_tokens=1000, events_budget=300))
    events_cost = sum(e.cost for e in plan.entries if e.candidate.category == "events")
    pref_cost = sum(e.cost for e in plan.entries if e.candidate.category == "preferences")
    assert tiers(plan)["p.md"] == "full" and 300 < events_cost <= 1000 - pref_cost
    alone = plan_tiers(events, Caps(max_tokens=1000, events_budget=300))
    assert alone.used_tokens > 900  # nothing else wants the room: the budget is not left empty


def test_planner_serves_candidates_in_the_order_given_not_by_score():
    """The search's fused rank decides the order (retrieval.search.fusion); a score is only the vector side's."""
    candidates = [memory("b", 0.3), memory("a", 0.5), memory("c", 0.4)]
    assert [e.candidate.uri for e in plan_tiers(candidates, Caps(max_tokens=1600)).entries] == [
        "viking://user/u/memories/events/b.md",
        "viking://user/u/memories/events/a.md",
        "viking://user/u/memories/events/c.md",
    ]


def test_what_does_not_fit_is_the_last_in_the_given_order():
    candidates = [memory(name, 0.9 - index / 100) for index, name in enumerate("abcdefghij")]
    plan = plan_tiers(list(reversed(candidates)), Caps(max_tokens=120, detail="abstract"))
    assert plan.dropped and {c.uri for c in plan.dropped} == {c.uri for c in candidates[: len(plan.dropped)]}


text = st.lists(st.sampled_from(list('abc xyz.,\n你好世界こんにちは한국어😀{}"<>/') + ["</memory>"]), max_size=300).map(
    "".join
)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(st.floats(0, 1), text, st.integers(0, 2000), st.booleans()), max_size=25),
    st.integers(64, 3000),
    st.sampled_from(["auto", "abstract", "overview", "full"]),
    st.sampled_from(["o200k", "cl100k", "qwen", "deepseek"]),
)
def test_planned_costs_bound_the_rendered_text(items, max_tokens, detail, family):
    """The budget invariant, on the planner's own arithmetic: blocks rendered at their planned sizes fit."""
    candidates = [
        Candidate(
            uri=f"viking://user/u/memories/events/{i}.md" if is_file else f"viking://resources/d{i}",
            category="events" if is_file else "resources",
            context_type="memory" if is_file else "resource",
            kind="file" if is_file else "dir",
            score=score,
            abstract=abstract,
            content_tokens=tokens,
            overview_tokens=tokens,
        )
        for i, (score, abstract, tokens, is_file) in enumerate(items)
    ]
    plan = plan_tiers(candidates, Caps(max_tokens=max_tokens, detail=detail, family=family))
    assert plan.used_tokens <= max_tokens
    filler = {e.candidate.uri: "a" * (e.body_tokens * 4) for e in plan.entries}  # a letter ≤ 0.18/char ≤ 1/4
    blocks = [
        render_block(
            e.candidate.uri,
            e.candidate.category,
            e.candidate.score,
            e.tier,
            e.candidate.abstract if e.tier == "abstract" else filler[e.candidate.uri],
        )
        for e in plan.entries
    ]
    assert estimate_tokens(render_blocks(blocks), family) <= max_tokens


def test_given_counts_replace_the_estimates():
    """Counts the pipeline made exactly (assembly/costs.py) are what the planner spends."""
    plain = Candidate(
        uri="viking://resources/a.md",
        category="resources",
        context_type="resource",
        kind="file",
        score=0.5,
        abstract="An abstract of some length, long enough to cost a few tokens.",
    )
    counted = replace(plain, abstract_tokens=7, shell_tokens=(30, 40, 41, 42))  # uri, abstract, overview, full
    assert block_cost(counted, "abstract", 7, "o200k") == 47 and block_cost(counted, "uri", 0, "o200k") == 30
    assert block_cost(counted, "full", 100, "o200k") == 142
    plan = plan_tiers([counted], Caps(max_tokens=1000))
    assert plan.used_tokens == 47 and plan.entries[0].tier == "abstract"
    assert plan_tiers([plain], Caps(max_tokens=1000)).used_tokens != 47


def test_a_first_ranked_event_with_details_is_served_deeper_than_abstract_though_breadth_could_fill_the_budget():
    """Issue 37, shape 1: a dated incident ranks first and its answer is in its Details; forty lower-ranked short
    memories and resources could fill the block at abstract. The incident goes `full` (its head), the rest follow."""
    incident = memory(
        "2026/03/02/inc-2291", 0.72, abstract="INC-2291: the billing workers stalled. " * 3, content_tokens=900
    )
    short = [memory(f"note-{n}", 0.6 - n / 100, category="preferences", content_tokens=25) for n in range(40)]
    caps = Caps(max_tokens=1600, depth_ranks=3)
    plan = plan_tiers([incident, *short], caps)
    first = plan.entries[0]
    assert first.candidate is incident and first.tier == "full" and first.body_tokens == caps.per_entry_cap
    assert plan.used_tokens <= caps.max_tokens
    breadth_first = plan_tiers([incident, *short], replace(caps, depth_ranks=0))
    assert breadth_first.entries[0].tier == "abstract"  # what the rule changes: without it, breadth starves depth


def test_depth_first_keeps_to_its_share_and_skips_memories_no_deeper_than_their_abstract():
    shallow = memory("short", 0.95, content_tokens=20)
    deep = [memory(f"inc-{n}", 0.9 - n / 10, content_tokens=900) for n in range(3)]
    filler = [memory(f"note-{n}", 0.5, category="preferences", content_tokens=25) for n in range(30)]
    plan = plan_tiers([shallow, *deep, *filler], Caps(max_tokens=1000, depth_ranks=3))
    by_name = {e.candidate.uri.rsplit("/", 1)[-1]: e for e in plan.entries}
    # Half of 1000 holds one 400-token head: the first deep hit's. The second is within the ranks but past the share.
    assert by_name["inc-0.md"].tier == "full" and by_name["inc-0.md"].body_tokens == 400
    assert by_name["inc-1.md"].tier == "abstract" and by_name["inc-2.md"].tier == "abstract"
    # Ranked first but no deeper than its abstract: not planned deep; breadth filled what its round 2 would have used.
    assert by_name["short.md"].tier == "abstract"


def test_fixed_detail_and_bootstrap_slots_plan_no_depth_first():
    incident = memory("inc", 0.9, content_tokens=900)
    short = [memory(f"note-{n}", 0.5, category="preferences", content_tokens=25) for n in range(60)]
    assert plan_tiers([incident, *short], Caps(max_tokens=1600, detail="abstract", depth_ranks=3)).entries[0].tier == (
        "abstract"
    )
    assert plan_tiers([incident, *short], Caps(max_tokens=1600)).entries[0].tier == "abstract"


def test_depth_takes_its_room_from_the_lowest_ranked_entries_and_the_best_hits_keep_their_abstracts():
    """At 400 tokens forty short memories fill the block at abstract; the first-ranked incident's head takes half
    of it, the room coming from the bottom of the ranking: the other best hits keep their abstracts, and what the
    head leaves over goes back to the evicted entries (as abstracts or pointers) or to round 2."""
    incident = memory("inc", 0.9, abstract="INC-7: the billing workers stalled. " * 2, content_tokens=900)
    short = [memory(f"note-{n:02}", 0.8 - n / 100, category="preferences", content_tokens=25) for n in range(40)]
    caps = Caps(max_tokens=400, depth_ranks=3)
    plan = plan_tiers([incident, *short], caps)
    first = plan.entries[0]
    assert first.candidate is incident and first.tier == "full"
    assert first.cost <= 400 * 0.5 and first.body_tokens >= 64 + estimate_tokens(incident.abstract)
    by_name = tiers(plan)
    assert by_name["note-00.md"] != "uri" and by_name["note-01.md"] != "uri"
    served = [e.candidate for e in plan.entries]
    assert served == sorted(served, key=lambda c: -c.score)  # rank order kept; the evicted are the lowest-ranked
    assert len(served) + len(plan.dropped) == 41 and set(plan.dropped).isdisjoint(served)
    assert all(c.score < min(s.score for s in served) for c in plan.dropped)
    assert 0.9 * 400 <= plan.used_tokens <= 400


def test_depth_is_not_bought_when_the_head_would_say_little_more_than_the_abstract():
    """Too small a budget for a head worth reading: the block stays what breadth made of it."""
    incident = memory("inc", 0.9, content_tokens=900)
    short = [memory(f"note-{n:02}", 0.8 - n / 100, category="preferences", content_tokens=25) for n in range(10)]
    tight = Caps(max_tokens=150, depth_ranks=3)
    assert plan_tiers([incident, *short], tight) == plan_tiers([incident, *short], replace(tight, depth_ranks=0))


def test_a_best_hits_head_is_not_bound_by_the_events_share():
    """The events share keeps room for other kinds' breadth, which a first-ranked incident's depth outranks (a coding
    purpose's 40 % held its Details out of /recall's blocks): the head takes what it needs of half the budget from
    the lowest-ranked entries, whatever their kind, and the rank order stays."""
    incident = memory("inc", 0.9, content_tokens=900)
    events = [memory(f"ev-{n}", 0.8 - n / 100, content_tokens=25) for n in range(12)]
    # Enough of the others for the events share to bind (room the others cannot use would go to events).
    prefs = [memory(f"pref-{n:02}", 0.5 - n / 100, category="preferences", content_tokens=60) for n in range(12)]
    caps = Caps(max_tokens=1000, events_budget=300, depth_ranks=3)
    plan = plan_tiers([incident, *events, *prefs], caps)
    first = plan.entries[0]
    assert first.candidate is incident and first.tier == "full"
    assert 300 < first.cost <= 1000 * 0.5  # past the events share, within the depth share
    served = [e.candidate for e in plan.entries]
    assert served == sorted(served, key=lambda c: -c.score)
    kept_prefs = [name for name in tiers(plan) if name.startswith("pref-")]
    assert (
        kept_prefs == [f"pref-{n:02}.md" for n in range(len(kept_prefs))] and len(kept_prefs) < 12
    )  # the lowest gave way
    assert plan.used_tokens <= 1000
    # Without depth the share binds the incident as before.
    shallow = plan_tiers([incident, *events, *prefs], replace(caps, depth_ranks=0))
    assert sum(e.cost for e in shallow.entries if e.candidate.category == "events") <= 300
