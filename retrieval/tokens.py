"""The one token estimator (DESIGN.md §5): linear, single pass, pure Python, no tokenizer at run time.

Each character falls into a class with a weight per tokenizer family; the estimate is the weighted sum, rounded
up. Weights start from the RFC's rule (≥ U+3000 → 1.5, else 0.25) refined per family; `bench/tokens.py`
calibrates them against the real tokenizers.
"""
import math

# Character classes, as indexes into a family's weight tuple.
LETTER, DIGIT, PUNCT, NEWLINE, SPACE, LATIN_EXT, SYMBOL, CJK, KANA, HANGUL, ASTRAL, OTHER = range(12)

FAMILIES: dict[str, tuple[float, ...]] = {
    #            letter digit punct  nl    space  latin  symbol cjk   kana  hangul astral other
    "o200k":    (0.22, 0.40, 0.55, 0.50, 0.06, 0.40, 0.70, 0.84, 0.90, 0.75, 1.60, 0.50),
    "cl100k":   (0.22, 0.40, 0.55, 0.50, 0.06, 0.55, 0.90, 1.24, 1.10, 1.10, 2.00, 0.60),
    "qwen":     (0.22, 0.45, 0.55, 0.50, 0.06, 0.45, 0.80, 0.62, 0.90, 0.80, 1.80, 0.55),
    "deepseek": (0.22, 0.45, 0.55, 0.50, 0.06, 0.45, 0.80, 0.60, 0.90, 0.80, 1.80, 0.55),
}
DEFAULT_FAMILY = "o200k"


def _ascii_class(code: int) -> int:
    char = chr(code)
    if char.isalpha():
        return LETTER
    if char.isdigit():
        return DIGIT
    if char == "\n":
        return NEWLINE
    if char.isspace():
        return SPACE
    return PUNCT


_ASCII_CLASSES = bytes(_ascii_class(code) for code in range(128)) + bytes(128)


def _char_class(code: int) -> int:
    if code < 128:
        return _ASCII_CLASSES[code]
    if code < 0x0530:  # Latin-1 supplement, Latin extended, Greek, Cyrillic, Armenian
        return LATIN_EXT
    if 0x2000 <= code < 0x3000:  # general punctuation, arrows, math, box drawing
        return SYMBOL
    if 0x3040 <= code < 0x3100:
        return KANA
    if 0xAC00 <= code < 0xD7B0 or 0x1100 <= code < 0x1200:
        return HANGUL
    if 0x3000 <= code < 0xA000 or 0xF900 <= code < 0xFB00 or 0xFF00 <= code < 0xFFF0:
        return CJK
    if code > 0xFFFF:
        return ASTRAL
    return OTHER


def estimate_tokens(text: str, family: str = DEFAULT_FAMILY) -> int:
    """Estimated tokens of `text` for a tokenizer `family`; 0 for the empty string."""
    if not text:
        return 0
    weights = FAMILIES[family]
    counts = [0] * len(weights)
    if text.isascii():
        classes = text.encode("ascii").translate(_ASCII_CLASSES)  # one C pass; count() per class is C too
        counts = [classes.count(cls) for cls in range(len(weights))]
    else:
        for char in text:
            counts[_char_class(ord(char))] += 1
    return math.ceil(sum(n * w for n, w in zip(counts, weights)))


def truncate_to_tokens(text: str, max_tokens: int, family: str = DEFAULT_FAMILY, marker: str = "\n…") -> str:
    """The longest head of `text` whose estimate, with `marker` appended when cut, is at most `max_tokens`."""
    if estimate_tokens(text, family) <= max_tokens:
        return text
    weights = FAMILIES[family]
    allowance = max_tokens - estimate_tokens(marker, family)
    total, cut = 0.0, 0
    for index, char in enumerate(text):
        total += weights[_char_class(ord(char))]
        if total > allowance:
            break
        cut = index + 1
    head = text[:cut]
    # Prefer to end on a line or word boundary when one is close.
    for boundary in ("\n", " "):
        position = head.rfind(boundary)
        if position > len(head) * 0.8:
            head = head[:position]
            break
    return head.rstrip() + marker if head.strip() else ""
