"""Documents parsed into a neutral section tree (issue 10): one module per format, one shared shaping pass."""
from retrieval.documents.tree import Section, flatten, shape

__all__ = ["Section", "flatten", "shape", "sections_for"]


def sections_for(name: str, text: str) -> list[Section]:
    """The shaped, flat section list of a text document, by its file name's format."""
    from retrieval.documents import html, markdown, python

    lower = name.lower()
    if lower.endswith(".py"):
        return shape(python.parse(text), min_chars=0)  # a short function is still its own section
    if lower.endswith((".html", ".htm")):
        tree = html.parse(text)
    else:
        tree = markdown.parse(text)
    return shape(flatten(tree))
