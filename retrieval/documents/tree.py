"""The neutral section tree every format produces, and the pass that shapes it into stored sections."""

import re
import unicodedata
from dataclasses import dataclass, field

from retrieval.tokens import estimate_tokens

# A section above this is split at paragraph boundaries (settings.OVSITE_SECTION_MAX_CHARS passes the deployment's).
# It is the abstract's length (summaries.ABSTRACT_MAX_CHARS): resources are served at their abstract (RFC §3.4
# source caps), so a part no longer than its abstract can serve any sentence of it, and its vector sees all of it.
SECTION_MAX_CHARS = 450
# Code is split by definition, not by size: a function cut in two is neither; its abstract is its skeleton.
CODE_SECTION_MAX_CHARS = 4000
HEADING_REPEAT_MAX_CHARS = SECTION_MAX_CHARS // 3
# A section whose body is shorter is merged into its next neighbour. Counted in tokens, not characters: 200
# characters are a short English paragraph but a long Chinese one.
SECTION_MIN_TOKENS = 40  # ≈ 200 characters of English, ≈ 60 of Chinese
SLUG_MAX_CHARS = 48
_SENTENCE_END = re.compile(r"(?<=[。！？.!?])")
_SLUG_DROP = re.compile(r"[^\w]+")


@dataclass
class Section:
    title: str
    level: int
    text: str  # the section's own text, its heading line included
    children: list["Section"] = field(default_factory=list)


def flatten(root: list[Section]) -> list[Section]:
    """Sections in document order, children after their parent, each without children."""
    out = []
    for section in root:
        out.append(Section(section.title, section.level, section.text))
        out.extend(flatten(section.children))
    return out


def _pieces(text: str, limit: int) -> list[str]:
    """`text` in pieces of at most `limit` characters: paragraphs first, then sentences (CJK text has no spaces
    but has 。！？), then a hard cut."""
    if len(text) <= limit:
        return [text]
    units = []
    for paragraph in re.split(r"\n\s*\n", text):
        if len(paragraph) <= limit:
            units.append(paragraph)
            continue
        for sentence in _SENTENCE_END.split(paragraph):
            units.extend(sentence[i : i + limit] for i in range(0, len(sentence), limit))
    pieces, current = [], ""
    for unit in units:
        if current and len(current) + 2 + len(unit) > limit:
            pieces.append(current)
            current = unit
        else:
            current = f"{current}\n\n{unit}" if current else unit
    if current:
        pieces.append(current)
    return pieces


def _body_tokens(section: Section) -> int:
    """The tokens below its heading line; a level-0 section (text before the first heading, plain text) has none."""
    lines = section.text.strip().splitlines()
    heading = section.level > 0 and bool(lines)
    return estimate_tokens("\n".join(lines[1:] if heading else lines).strip())


def _heading_and_body(section: Section, text: str) -> tuple[str, str]:
    """A section's heading line (repeated atop each of its parts, so every part's abstract and vector say what
    it is about) and the rest; none for level 0 (a lead, or plain text whose `#` starts a comment) or when it is
    too long to repeat."""
    first, _, rest = text.partition("\n")
    if section.level > 0 and first.lstrip().startswith("#") and len(first) <= HEADING_REPEAT_MAX_CHARS:
        return first, rest.strip()
    return "", text


def shape(
    sections: list[Section], min_tokens: int = SECTION_MIN_TOKENS, max_chars: int = SECTION_MAX_CHARS
) -> list[Section]:
    """Small sections merged into the next one, long ones split to the size cap, empty ones dropped."""
    merged: list[Section] = []
    carry: Section | None = None
    for section in sections:
        if not section.text.strip():
            continue
        if carry is not None:
            section = Section(carry.title, carry.level, f"{carry.text.rstrip()}\n\n{section.text.strip()}")
            carry = None
        if _body_tokens(section) < min_tokens and len(section.text) < max_chars:
            carry = section
            continue
        merged.append(section)
    if carry is not None:
        if merged and len(merged[-1].text) + len(carry.text) <= max_chars:
            last = merged[-1]
            merged[-1] = Section(last.title, last.level, f"{last.text.rstrip()}\n\n{carry.text.strip()}")
        else:
            merged.append(carry)
    out = []
    for section in merged:
        text = section.text.strip()
        head, body = _heading_and_body(section, text) if len(text) > max_chars else ("", text)
        pieces = _pieces(body, max_chars - len(head) - 2) if head else _pieces(body, max_chars)
        pieces = [f"{head}\n\n{piece}" for piece in pieces] if head else pieces
        for index, piece in enumerate(pieces):
            title = section.title if len(pieces) == 1 else f"{section.title} ({index + 1}/{len(pieces)})"
            out.append(Section(title, section.level, piece))
    return out


def slug(title: str) -> str:
    """A readable URI segment of a title (`Restart the workers` → `restart-the-workers`); CJK letters are kept."""
    text = unicodedata.normalize("NFKC", title).lower()
    text = _SLUG_DROP.sub("-", text).strip("-_")
    return text[:SLUG_MAX_CHARS].strip("-_") or "section"


def section_names(sections: list[Section]) -> list[str]:
    """`01-intro`, `02-restart-the-workers`, …: position first, so names sort in document order."""
    width = max(2, len(str(len(sections))))
    return [f"{index:0{width}d}-{slug(section.title)}" for index, section in enumerate(sections, 1)]
