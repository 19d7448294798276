"""The token estimator (DESIGN.md §5, issue 9): character classes, profiles, rounding, and its algebra."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval.tokens import (CLASSES, DEFAULT_PROFILE, FEATURES, PROFILES, RUNS, Profile, class_counts,
                              estimate_tokens, feature_counts)

PROFILE_NAMES = sorted(PROFILES)


@pytest.mark.parametrize("char, expected", [
    ("a", "letter"), ("Z", "letter"), ("7", "digit"), ("{", "punct"), ("~", "punct"), ("\n", "newline"),
    (" ", "space"), ("\t", "space"), ("é", "latin"), ("ß", "latin"), ("\u0301", "latin"), ("Ω", "greek"),
    ("Ж", "cyrillic"), ("ש", "semitic"), ("ع", "semitic"), ("क", "indic"), ("ก", "indic"), ("ế", "other"),
    ("ა", "other"), ("\ue000", "other"), ("—", "symbol"), ("→", "symbol"), ("✅", "symbol"), ("。", "cjk_punct"),
    ("「", "cjk_punct"), ("，", "cjk_punct"), ("Ａ", "cjk_punct"), ("あ", "kana"), ("カ", "kana"), ("ー", "kana"),
    ("中", "cjk"), ("㐀", "kana"), ("한", "hangul"), ("😀", "astral"), ("𠀀", "astral"), ("\ufe0f", "emoji_glue"),
    ("\u200d", "emoji_glue"),
])
def test_each_character_falls_into_its_class(char, expected):
    counts = class_counts(char * 3)
    assert {CLASSES[i]: n for i, n in enumerate(counts) if n} == {expected: 3}


def test_classes_of_a_mixed_string_are_counted_separately():
    counts = dict(zip(CLASSES, class_counts("Hi 你好，こんにちは 😀\n")))
    assert {k: v for k, v in counts.items() if v} == {"letter": 2, "space": 2, "cjk": 2, "cjk_punct": 1,
                                                       "kana": 5, "astral": 1, "newline": 1}


@pytest.mark.parametrize("profile", PROFILE_NAMES)
def test_the_empty_string_costs_nothing(profile):
    assert estimate_tokens("", profile) == 0


@pytest.mark.parametrize("text, expected", [
    ("", [0, 0]), ("abc", [0, 0]), ("7", [1, 0]), ("2026-12-02", [3, 2]), ("a1b22,,c", [2, 1]),
    ('{"k": [1, 2]}', [2, 5]), ("v0.8.6。", [3, 2]), ("…—", [0, 0]), ("１２", [0, 0]),
])
def test_runs_of_ascii_digits_and_punctuation_are_counted_once_each(text, expected):
    assert feature_counts(text)[len(CLASSES):] == expected and len(RUNS) == 2


# Hand-checked against the o200k weights (thousandths): letter 182, space 217, newline 162, digit 235, punct 170,
# cjk 620, cjk_punct 1849, kana 627, hangul 660, cyrillic 228, astral 2159; a number 961, a punctuation run 695.
@pytest.mark.parametrize("text, expected", [
    ("a", 1),  # 182 → 1 (rounded up)
    ("hello world\n", 3),  # 10·182 + 217 + 162 = 2199
    ("2026-12-02", 7),  # 8·235 + 2·170 + 3 numbers·961 + 2 runs·695 = 6493
    ("回滚计划", 3),  # 4·620 = 2480
    ("回滚计划。", 5),  # 2480 + 1849 = 4329
    ("こんにちは", 4),  # 5·627 = 3135
    ("안녕하세요", 4),  # 5·660 = 3300
    ("Привет", 2),  # 6·228 = 1368
    ("😀", 3),  # 2159
])
def test_default_profile_is_the_weighted_sum_rounded_up(text, expected):
    assert estimate_tokens(text) == estimate_tokens(text, DEFAULT_PROFILE) == expected


def test_profiles_differ_where_their_tokenizers_do():
    """cl100k spends about half again as much on Chinese as o200k; Qwen and DeepSeek less than both."""
    chinese = "周二的上线失败了，原因是数据库迁移把订单表锁了十一分钟。"
    costs = {p: estimate_tokens(chinese, p) for p in PROFILE_NAMES}
    assert costs["cl100k"] > costs["o200k"] > max(costs["qwen"], costs["deepseek"])
    assert len({estimate_tokens("plain English words", p) for p in PROFILE_NAMES}) <= 2  # letters cost alike


# Real counts from each family's tokenizer (bench/tokens.py's tokenizers, counted once by hand), per text class.
REAL_COUNTS = {
    "The deploy on Tuesday failed because the migration locked the orders table for eleven minutes.":
        {"o200k": 16, "cl100k": 16, "qwen": 16, "deepseek": 16},
    "周二的上线失败了，原因是数据库迁移把订单表锁了十一分钟。": {"o200k": 20, "cl100k": 26, "qwen": 16, "deepseek": 16},
    "火曜日のデプロイは失敗しました。マイグレーションが注文テーブルを十一分間ロックしたためです。":
        {"o200k": 30, "cl100k": 43, "qwen": 25, "deepseek": 30},
    "화요일 배포는 실패했습니다. 마이그레이션이 주문 테이블을 십일 분 동안 잠갔기 때문입니다.":
        {"o200k": 30, "cl100k": 48, "qwen": 25, "deepseek": 35},
    "Развёртывание во вторник не удалось: миграция заблокировала таблицу заказов на одиннадцать минут.":
        {"o200k": 28, "cl100k": 40, "qwen": 22, "deepseek": 31},
    '{"status": "ok", "result": {"uri": "viking://user/alice/memories/preferences/lang.md", "score": 0.82, '
    '"level": 2}}': {"o200k": 40, "cl100k": 40, "qwen": 41, "deepseek": 41},
    "def plan(candidates):\n    order = sorted(candidates, key=lambda c: -c.score)\n    return order[:10]\n":
        {"o200k": 26, "cl100k": 26, "qwen": 30, "deepseek": 26},
    "ship it 🚀🚀🚀 thanks everyone 🙏❤️": {"o200k": 13, "cl100k": 19, "qwen": 18, "deepseek": 15},
    "viking://resources/docs/runbooks/rollback.md": {"o200k": 10, "cl100k": 10, "qwen": 10, "deepseek": 12},
    "今天把 PostgreSQL 从 15 升级到 18，pgvector 也升到了 0.8.6。":
        {"o200k": 27, "cl100k": 31, "qwen": 27, "deepseek": 26},
}


@pytest.mark.parametrize("profile", PROFILE_NAMES)
@pytest.mark.parametrize("text", list(REAL_COUNTS))
def test_estimate_stays_near_the_real_tokenizer_on_each_class(text, profile):
    """One string is noisier than a class median (bench/RESULTS.md): within 35 %, where len/4 and the RFC rule
    miss CJK by a factor of two to three."""
    real = REAL_COUNTS[text][profile]
    assert abs(estimate_tokens(text, profile) - real) <= 0.35 * real


def test_a_profile_needs_one_non_negative_weight_per_feature():
    with pytest.raises(ValueError):
        Profile("short", "too few weights", (100,) * (len(FEATURES) - 1))
    with pytest.raises(ValueError):
        Profile("negative", "a negative weight", (-1,) + (100,) * (len(FEATURES) - 1))


def test_a_profile_version_names_its_weights():
    """Stored counts are recounted when the version changes (retrieval/recount.py): new weights, new version."""
    weights = PROFILES["o200k"].weights
    assert Profile("o200k", "same", weights).version == PROFILES["o200k"].version
    assert Profile("o200k", "refit", (weights[0] + 1,) + weights[1:]).version != PROFILES["o200k"].version
    assert len({p.version for p in PROFILES.values()}) == len(PROFILES)


def test_an_unknown_profile_is_refused():
    with pytest.raises(KeyError):
        estimate_tokens("text", "gpt2")


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_every_character_is_counted_once(text):
    assert sum(class_counts(text)) == len(text)


@settings(max_examples=300, deadline=None)
@given(st.text(), st.text(), st.sampled_from(PROFILE_NAMES))
def test_appending_text_never_lowers_the_estimate(head, tail, profile):
    assert estimate_tokens(head + tail, profile) >= estimate_tokens(head, profile)


@settings(max_examples=300, deadline=None)
@given(st.text(), st.text(), st.sampled_from(PROFILE_NAMES))
def test_the_estimate_is_additive_within_rounding(a, b, profile):
    """Each part is rounded up once, and a number or punctuation run across the seam counts once in the whole but
    in both parts: the parts' sum never falls short of the whole and exceeds it by at most that run's weight plus
    one token of rounding."""
    run_weight = max(PROFILES[profile].weights[len(CLASSES):])
    assert 0 <= estimate_tokens(a, profile) + estimate_tokens(b, profile) - estimate_tokens(a + b, profile) \
        <= 1 + -(-run_weight // 1000)


@settings(max_examples=300, deadline=None)
@given(st.text(), st.text(), st.sampled_from(PROFILE_NAMES))
def test_parts_joined_by_a_space_add_up_within_one_token(a, b, profile):
    """A space ends every run: joined that way (as the renderer joins entries), only rounding is lost."""
    whole = estimate_tokens(a + " " + b, profile)
    assert 0 <= estimate_tokens(a + " ", profile) + estimate_tokens(b, profile) - whole <= 1
