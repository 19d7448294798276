"""The renderer (docs/design.md §4): one flat XML element per entry, attributes escaped, bodies neutralised. Pure."""

import re
from html import escape

SEPARATOR = "\n\n"
# XML 1.0 carries only these characters, escaped or not; the others (control characters, U+FFFE/U+FFFF) would
# make the block unparseable, so they become U+FFFD.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def neutralise(body: str) -> str:
    """The body as XML character data: with `&` and `<` escaped no stored text can open or close an element, a
    comment or a CDATA section — ours or the client's `<openviking-context>` envelope — so the block parses."""
    return _NOT_XML.sub("\ufffd", body.replace("&", "&amp;").replace("<", "&lt;").replace("]]>", "]]&gt;"))


def open_tag(uri: str, category: str, score: float, detail: str, date: str | None = None) -> str:
    dated = f' date="{escape(date, quote=True)}"' if date else ""
    return (
        f'<memory uri="{escape(uri, quote=True)}" type="{escape(category, quote=True)}" '
        f'score="{score:.2f}"{dated} detail="{detail}"'
    )


def render_block(uri: str, category: str, score: float, detail: str, body: str, date: str | None = None) -> str:
    if detail == "uri":
        return open_tag(uri, category, score, detail, date) + " />"
    return f"{open_tag(uri, category, score, detail, date)}>\n{neutralise(body)}\n</memory>"


def render_blocks(blocks: list[str]) -> str:
    return SEPARATOR.join(blocks)
