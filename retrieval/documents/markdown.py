"""Markdown and plain text: ATX headings outside code fences, front matter kept apart."""

import re

import yaml

from retrieval.documents.tree import Section

_FRONT_MATTER = re.compile(r"\A---\n(.*?)\n---\n?", re.DOTALL)
_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")


def front_matter(text: str) -> tuple[dict, str]:
    """(metadata, body); metadata is {} when there is none or it is not a YAML mapping."""
    match = _FRONT_MATTER.match(text)
    if not match:
        return {}, text
    try:
        meta = yaml.safe_load(match.group(1))
    except yaml.YAMLError:
        return {}, text
    return (meta if isinstance(meta, dict) else {}), text[match.end() :]


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
        current = Section(heading.group(2), level, "")
        stack[-1].children.append(current)
        stack.append(current)
        lines = [line]
    current.text = "\n".join(lines).strip("\n")
    # The text before the first heading is a section of its own, without the children it would bring twice.
    lead = [Section(root.title or "introduction", 0, root.text)] if root.text.strip() else []
    return lead + root.children
