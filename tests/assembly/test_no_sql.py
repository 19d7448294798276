"""assembly/ reads no contexts itself: every statement that reads them is retrieval/search/'s (docs/retrieval.md),
and the assembler calls it. Checked on the source, so a shortcut through the ORM or a cursor fails here."""

import ast
from pathlib import Path

import pytest

ASSEMBLY = Path(__file__).resolve().parents[2] / "assembly"
# The ways to the database: a model's manager, a cursor, raw SQL, the connection, the visibility rule's queryset.
ATTRIBUTES = {"objects", "cursor", "raw", "execute", "connection", "visible_nodes"}
NAMES = {"connection", "visible_nodes"}
MODULES = ("django.db", "retrieval.selectors")


def database_access(source: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in ATTRIBUTES:
            found.append(f"line {node.lineno}: .{node.attr}")
        elif isinstance(node, ast.Name) and node.id in NAMES:
            found.append(f"line {node.lineno}: {node.id}")
        elif isinstance(node, ast.ImportFrom | ast.Import):
            modules = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
            found += [f"line {node.lineno}: import {m}" for m in modules if m.startswith(MODULES)]
    return found


@pytest.mark.parametrize("path", sorted(ASSEMBLY.glob("*.py")), ids=lambda path: path.name)
def test_assembly_modules_do_not_touch_the_database(path):
    assert database_access(path.read_text()) == []


def test_the_check_sees_a_read_through_the_orm():
    before = "from retrieval.selectors import visible_nodes\n\nrows = visible_nodes(caller).filter(kind='file')\n"
    assert database_access(before) == ["line 1: import retrieval.selectors", "line 3: visible_nodes"]
    raw_sql = "from django.db import connection\nconnection.cursor().execute('SELECT 1')\n"
    assert sorted(database_access(raw_sql)) == [
        "line 1: import django.db",
        "line 2: .cursor",
        "line 2: .execute",
        "line 2: connection",
    ]
