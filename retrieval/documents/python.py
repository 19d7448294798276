"""Python source via `ast`: one section per top-level class or function; the module head is the first."""

import ast

from core.errors import InvalidArgument
from retrieval.documents.tree import Section


def _signature(node: ast.AST) -> str:
    if isinstance(node, ast.ClassDef):
        bases = ", ".join(ast.unparse(base) for base in node.bases)
        return f"class {node.name}({bases})" if bases else f"class {node.name}"
    prefix = "async def" if isinstance(node, ast.AsyncFunctionDef) else "def"
    returns = f" -> {ast.unparse(node.returns)}" if node.returns else ""
    return f"{prefix} {node.name}({ast.unparse(node.args)}){returns}"


def skeleton(node: ast.AST, indent: str = "") -> list[str]:
    """Signatures and docstrings of a class or function and the methods inside it."""
    lines = [indent + _signature(node) + ":"]
    doc = ast.get_docstring(node)
    if doc:
        lines.append(f'{indent}    """{doc.strip().splitlines()[0]}"""')
    for child in getattr(node, "body", []):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            lines.extend(skeleton(child, indent + "    "))
    return lines


def parse(text: str) -> list[Section]:
    """Each section's text starts with its skeleton (what its abstract shows), then the source itself."""
    try:
        return _sections(ast.parse(text), text)
    except SyntaxError as exc:
        raise InvalidArgument(f"not valid Python: {exc.msg} (line {exc.lineno})", loc=["content"]) from exc
    # A source nested deeper than the parser's or the unparser's stack (`-` * 200_000 + `1`): text, not Python.
    except (RecursionError, MemoryError, ValueError) as exc:
        raise InvalidArgument(f"Python too deeply nested to parse: {type(exc).__name__}", loc=["content"]) from exc


def _sections(module: ast.Module, text: str) -> list[Section]:
    sections = []
    doc = ast.get_docstring(module)
    head = [n for n in module.body if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    if doc or head:
        source = "\n".join(ast.get_source_segment(text, n) or "" for n in head)
        sections.append(Section("module", 1, source))
    for node in module.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            source = ast.get_source_segment(text, node) or ""
            sections.append(Section(node.name, 1, "\n".join(skeleton(node)) + "\n\n" + source))
    return sections
