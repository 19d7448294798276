"""Documents parsed into a neutral section tree (issue 10): one module per format, one shared shaping pass."""

from core.errors import InvalidArgument
from retrieval.documents import progress
from retrieval.documents.tree import CODE_SECTION_MAX_CHARS, SECTION_MAX_CHARS, Section, flatten, section_names, shape

__all__ = ["Section", "flatten", "shape", "sections_for", "named_sections", "documents_sections"]

MARKDOWN_SUFFIXES = (".md", ".markdown", ".mdx", ".txt", ".text", ".pdf")  # a PDF arrives as Markdown (pdf.py)
HTML_SUFFIXES = (".html", ".htm")


def _plain(name: str, text: str, max_chars: int) -> list[Section]:
    """Any other text (JSON, YAML, shell, other languages): no headings to trust (`#` starts a comment), so only
    the size cap splits it."""
    return shape([Section(name.rsplit("/", 1)[-1], 0, text)], min_tokens=0, max_chars=max_chars)


def sections_for(name: str, text: str, max_chars: int = SECTION_MAX_CHARS) -> list[Section]:
    """The shaped, flat section list of a text document, by its file name's format; prose split to `max_chars`."""
    from retrieval.documents import html, markdown, python

    lower = name.lower()
    if lower.endswith(".py"):
        # A short function is still its own section, and a long one stays whole.
        return shape(python.parse(text), min_tokens=0, max_chars=CODE_SECTION_MAX_CHARS)
    if lower.endswith(HTML_SUFFIXES):
        return shape(flatten(html.parse(text)), max_chars=max_chars)
    if lower.endswith(MARKDOWN_SUFFIXES) or "." not in lower.rsplit("/", 1)[-1]:
        return shape(flatten(markdown.parse(text)), max_chars=max_chars)
    return _plain(name, text, max_chars)


def named_sections(name: str, text: str, max_chars: int = SECTION_MAX_CHARS) -> list[tuple[str, Section]]:
    """(URI segment, section) pairs of a document; one its format's parser cannot read (Python that does not parse,
    HTML nested past BeautifulSoup's stack) is still stored, as plain text: nothing written is lost to a parser."""
    try:
        sections = sections_for(name, text, max_chars)
    except (InvalidArgument, RecursionError):
        sections = _plain(name, text, max_chars)
    return list(zip(section_names(sections), sections, strict=True))


def documents_sections(documents: list[tuple[str, str]], max_chars: int) -> list[list[tuple[str, Section]]]:
    """`named_sections` of each (name, text): what the write path runs in the parse box (box.py), one box a
    request however many documents it writes."""
    out = []
    for name, text in documents:
        progress.reached(name)
        out.append(named_sections(name, text, max_chars))
    return out
