"""Documents parsed into a neutral section tree (issue 10): one module per format, one shared shaping pass."""
from ovsite.errors import InvalidArgument
from retrieval.documents.tree import Section, flatten, section_names, shape

__all__ = ["Section", "flatten", "shape", "sections_for", "named_sections"]

MARKDOWN_SUFFIXES = (".md", ".markdown", ".mdx", ".txt", ".text", ".pdf")  # a PDF arrives as Markdown (pdf.py)
HTML_SUFFIXES = (".html", ".htm")


def _plain(name: str, text: str) -> list[Section]:
    """Any other text (JSON, YAML, shell, other languages): no headings to trust (`#` starts a comment), so only
    the size cap splits it."""
    return shape([Section(name.rsplit("/", 1)[-1], 0, text)], min_tokens=0)


def sections_for(name: str, text: str) -> list[Section]:
    """The shaped, flat section list of a text document, by its file name's format."""
    from retrieval.documents import html, markdown, python

    lower = name.lower()
    if lower.endswith(".py"):
        return shape(python.parse(text), min_tokens=0)  # a short function is still its own section
    if lower.endswith(HTML_SUFFIXES):
        return shape(flatten(html.parse(text)))
    if lower.endswith(MARKDOWN_SUFFIXES) or "." not in lower.rsplit("/", 1)[-1]:
        return shape(flatten(markdown.parse(text)))
    return _plain(name, text)


def named_sections(name: str, text: str) -> list[tuple[str, Section]]:
    """(URI segment, section) pairs of a document; Python that does not parse is still stored, as plain text."""
    try:
        sections = sections_for(name, text)
    except InvalidArgument:
        sections = _plain(name, text)
    return list(zip(section_names(sections), sections))
