"""Deterministic L0/L1 text without an LLM: the `# Summary` section or the head of a file; children for a dir."""
import re

ABSTRACT_MAX_CHARS = 450
OVERVIEW_MAX_CHILDREN = 200
CHILD_SNIPPET_CHARS = 100
_SUMMARY_HEADING = re.compile(r"^#{1,6}\s*summary\s*$", re.IGNORECASE | re.MULTILINE)
_NEXT_HEADING = re.compile(r"^#{1,6}\s", re.MULTILINE)
_FRONT_MATTER = re.compile(r"\A---\n.*?\n---\n", re.DOTALL)


def clip(text: str, limit: int = ABSTRACT_MAX_CHARS) -> str:
    """Cuts at a word boundary and marks the cut, so a reader knows there is more."""
    text = text.strip()
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    if space > limit * 0.6:
        cut = cut[:space]
    return cut.rstrip() + "…"


def _front_matter_line(front: str) -> str:
    """`name: description` of a SKILL.md-style front matter, or ""."""
    fields = dict(re.findall(r"^(name|description):\s*(.+?)\s*$", front, re.MULTILINE))
    if "description" not in fields:
        return ""
    return f"{fields['name']}: {fields['description']}" if "name" in fields else fields["description"]


def file_abstract(content: str) -> str:
    front = _FRONT_MATTER.match(content)
    if front and (line := _front_matter_line(front.group(0))):
        return clip(line)
    body = content[front.end():] if front else content
    heading = _SUMMARY_HEADING.search(body)
    if heading:
        rest = body[heading.end():]
        following = _NEXT_HEADING.search(rest)
        section = rest[: following.start()] if following else rest
        if section.strip():
            return clip(" ".join(section.split()))
    return clip(" ".join(body.split()))


def directory_texts(name: str, children: list[dict]) -> tuple[str, str]:
    """(abstract, overview) of a directory from its children (`name`, `kind`, `abstract`), newest first."""
    if not children:
        return f"{name}: empty directory", f"# {name}\n\n(empty)"
    shown = children[:OVERVIEW_MAX_CHILDREN]
    lines = [f"# {name}", ""]
    for child in shown:
        label = child["name"] + ("/" if child["kind"] == "dir" else "")
        lines.append(f"- {label}: {child['abstract']}" if child["abstract"] else f"- {label}")
    if len(children) > len(shown):
        lines.append(f"- … and {len(children) - len(shown)} more entries (list them with fs/ls)")
    # Sub-directories contribute their name only: their own abstracts would nest summaries of summaries.
    listing = "; ".join(
        f"{c['name']}: {clip(c['abstract'], CHILD_SNIPPET_CHARS)}" if c["kind"] == "file" and c["abstract"]
        else c["name"] + ("/" if c["kind"] == "dir" else "") for c in children[:12])
    abstract = clip(f"{name} ({len(children)} entries) — {listing}")
    return abstract, "\n".join(lines)
