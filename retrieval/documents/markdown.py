"""Markdown and plain text: ATX headings outside code fences, front matter kept apart."""

import re

import yaml

from retrieval.documents.tree import Section

_FRONT_MATTER = re.compile(r"\A---\n(.*?)\n---\n?", re.DOTALL)
# Linear on any line: the classes meet nowhere. The former `(.+?)\s*#*\s*$` backtracked in cubic time on a
# heading padded with spaces (2,000 spaces: 20 s); the closing hashes are cut in _title instead.
_HEADING = re.compile(r"^(#{1,6})\s+(\S.*)$")
_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
FRONT_MATTER_MAX_CHARS = 64 * 1024
FRONT_MATTER_MAX_DEPTH = 20


class _BoundedLoader(yaml.SafeLoader):
    """YAML that loads in time and memory linear in its size: no aliases (400 bytes of nested anchors expand to
    gigabytes, a "billion laughs") and no nesting deeper than FRONT_MATTER_MAX_DEPTH (PyYAML's composer recurses
    once a level)."""

    depth = 0

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            raise yaml.composer.ComposerError(None, None, "aliases are not allowed", self.peek_event().start_mark)
        self.depth += 1
        if self.depth > FRONT_MATTER_MAX_DEPTH:
            raise yaml.composer.ComposerError(
                None, None, f"nested deeper than {FRONT_MATTER_MAX_DEPTH} levels", self.peek_event().start_mark
            )
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def load_front_matter(text: str) -> tuple[dict, int]:
    """(metadata, where the body starts) of a text; ({}, 0) without front matter. Front matter that is not a
    YAML mapping within the bounds above raises yaml.YAMLError (a ValueError when it is too long)."""
    match = _FRONT_MATTER.match(text)
    if not match:
        return {}, 0
    if len(match.group(1)) > FRONT_MATTER_MAX_CHARS:
        raise ValueError(f"front matter longer than {FRONT_MATTER_MAX_CHARS} characters")
    meta = yaml.load(match.group(1), Loader=_BoundedLoader)
    return (meta if isinstance(meta, dict) else {}), match.end()


def front_matter(text: str) -> tuple[dict, str]:
    """(metadata, body); metadata is {} when there is none or it is not a YAML mapping within the bounds."""
    try:
        meta, start = load_front_matter(text)
    except (yaml.YAMLError, ValueError):
        return {}, text
    return meta, text[start:]


def _title(text: str) -> str:
    """A heading's text without its optional closing sequence of `#` (CommonMark: `## Title ##`)."""
    text = text.rstrip()
    bare = text.rstrip("#")
    return bare.rstrip() if bare.strip() and bare[-1] in " \t" else text


def parse(text: str) -> list[Section]:
    """A heading tree: each heading owns the lines up to the next heading; deeper headings are its children."""
    meta, body = front_matter(text)
    root = Section(str(meta.get("title") or ""), 0, "")
    stack = [root]
    current, lines, fence = root, [], None
    for line in body.splitlines():
        opening = _FENCE.match(line)
        if opening and (fence is None or opening.group(1)[0] == fence[0] and len(opening.group(1)) >= len(fence)):
            fence = opening.group(1) if fence is None else None
        heading = _HEADING.match(line) if fence is None and not opening else None
        if heading is None:
            lines.append(line)
            continue
        current.text = "\n".join(lines).strip("\n")
        level = len(heading.group(1))
        while stack[-1].level >= level:
            stack.pop()
        current = Section(_title(heading.group(2)), level, "")
        stack[-1].children.append(current)
        stack.append(current)
        lines = [line]
    current.text = "\n".join(lines).strip("\n")
    # The text before the first heading is a section of its own, without the children it would bring twice.
    lead = [Section(root.title or "introduction", 0, root.text)] if root.text.strip() else []
    return lead + root.children
