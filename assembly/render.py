"""The renderer (DESIGN.md §4): one flat XML element per entry, attributes escaped, bodies neutralised. Pure."""
import re
from html import escape

SEPARATOR = "\n\n"
# Anything that could close our element or open/close the client's envelope is defanged by escaping its "<".
_DANGEROUS_TAG = re.compile(r"<(\s*/?\s*)(memory|openviking-context)", re.IGNORECASE)


def neutralise(body: str) -> str:
    return _DANGEROUS_TAG.sub(lambda m: "&lt;" + m.group(1) + m.group(2), body)


def open_tag(uri: str, category: str, score: float, detail: str) -> str:
    return (f'<memory uri="{escape(uri, quote=True)}" type="{escape(category, quote=True)}" '
            f'score="{score:.2f}" detail="{detail}"')


def render_block(uri: str, category: str, score: float, detail: str, body: str) -> str:
    if detail == "uri":
        return open_tag(uri, category, score, detail) + " />"
    return f"{open_tag(uri, category, score, detail)}>\n{neutralise(body)}\n</memory>"


def render_blocks(blocks: list[str]) -> str:
    return SEPARATOR.join(blocks)
