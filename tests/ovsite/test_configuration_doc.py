"""docs/configuration.md cannot drift from the code (issue 26 §6): every environment variable the code reads and
every admin setting (the fields of the settings row and of a purpose profile) is on the page, every entry of the
page is one the code still reads, and every default the page gives is the code's.

The names come from the code itself: an AST walk over `ovsite/settings.py` for `env.<cast>("NAME", default=…)` and
over every module of `ovsite/`, `core/` and the apps for `os.environ` / `os.getenv` reads, and the models'
`_meta.get_fields()` for the admin. The page's entries are the first cells of the tables under its `## ` sections.
"""

import ast
import operator
import re
from dataclasses import dataclass
from pathlib import Path

from django.db.models import NOT_PROVIDED

from profiles.models import BUCKETS, PurposeProfile, RetrievalSettings
from profiles.seeds import BUILTIN_PROFILES

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "configuration.md"
SETTINGS = ROOT / "ovsite" / "settings.py"
CODE_PACKAGES = ("ovsite", "core", "profiles", "retrieval", "sessions_app", "assembly", "mcp_server")
RUN_FILES = ("Makefile", "Procfile", "Dockerfile", "compose.yaml")

ENV_SECTION = "Environment variables"
RUN_FILES_SECTION = "Variables of the run files"
ADMIN_SECTIONS = {RetrievalSettings: "Retrieval settings (admin)", PurposeProfile: "Purpose profiles (admin)"}

NAME_CELL = re.compile(r"`([^`]+)`")
BACKTICKED = re.compile(r"`([^`]*)`")
COMPOSE_VARIABLE = re.compile(r"\$\{([A-Z][A-Z0-9_]*)")
ARITHMETIC = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul}
NO_DEFAULT = object()  # a default the check cannot read as a value (an expression of other settings)


@dataclass(frozen=True)
class Read:
    name: str
    where: str  # path:line
    default: object = NO_DEFAULT


def constant(node: ast.AST | None):
    """A default written as a literal or as arithmetic on literals (`2 * 1024 * 1024`); NO_DEFAULT otherwise."""
    if node is None:
        return NO_DEFAULT
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.List) and all(isinstance(e, ast.Constant) for e in node.elts):
        return [e.value for e in node.elts]
    if isinstance(node, ast.BinOp) and type(node.op) in ARITHMETIC:
        left, right = constant(node.left), constant(node.right)
        if isinstance(left, int | float) and isinstance(right, int | float):
            return ARITHMETIC[type(node.op)](left, right)
    return NO_DEFAULT


def _is_os_environ(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "environ" and isinstance(node.value, ast.Name)


def _first_string(call: ast.Call) -> str | None:
    first = call.args[0] if call.args else None
    return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None


def environment_reads(source: str, where: str, *, django_environ: bool = True) -> list[Read]:
    """`os.environ.get/setdefault/[...]`, `"NAME" in os.environ` and `os.getenv("NAME")` in one module's source,
    and with `django_environ` (the settings module, whose `env` is django-environ's) `env.<cast>("NAME",
    default=…)` and `env("NAME")`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        at = f"{where}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Call):
            func, name = node.func, _first_string(node)
            if name is None:
                continue
            default = constant(next((k.value for k in node.keywords if k.arg == "default"), None))
            if django_environ and (
                (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "env")
                or (isinstance(func, ast.Name) and func.id == "env")
            ):
                found.append(Read(name, at, default))
            elif isinstance(func, ast.Attribute) and func.attr in ("get", "setdefault") and _is_os_environ(func.value):
                found.append(Read(name, at))
            elif isinstance(func, ast.Attribute) and func.attr == "getenv":
                found.append(Read(name, at))
        elif isinstance(node, ast.Subscript) and _is_os_environ(node.value) and isinstance(node.ctx, ast.Load):
            if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
                found.append(Read(node.slice.value, at))
        elif isinstance(node, ast.Compare) and any(_is_os_environ(c) for c in node.comparators):
            if isinstance(node.left, ast.Constant) and isinstance(node.left.value, str):
                found.append(Read(node.left.value, at))
    return found


def code_environment_reads() -> list[Read]:
    modules = [path for package in CODE_PACKAGES for path in sorted((ROOT / package).rglob("*.py"))]
    return [
        read
        for path in modules
        # Only the settings module reads through django-environ; elsewhere a name `env` may be anything.
        for read in environment_reads(path.read_text(), str(path.relative_to(ROOT)), django_environ=path == SETTINGS)
    ]


def page_sections(markdown: str) -> dict[str, list[str]]:
    """The lines under each `## ` heading, up to the next one."""
    sections, current = {}, None
    for line in markdown.splitlines():
        if line.startswith("## "):
            current = sections.setdefault(line[3:].strip(), [])
        elif current is not None:
            current.append(line)
    return sections


def page_tables(markdown: str, section: str) -> list[list[list[str]]]:
    """The tables under `## {section}` (its `### ` subsections included), each a list of rows of cells, header
    first, the separator row left out."""
    lines = page_sections(markdown).get(section)
    assert lines is not None, f"docs/configuration.md has no '## {section}' section"
    tables, current = [], None
    for line in lines:
        if not line.startswith("|"):
            current = None
            continue
        if current is None:
            current = []
            tables.append(current)
        cells = [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        if not all(re.fullmatch(r":?-+:?", cell) for cell in cells):
            current.append(cells)
    return tables


def page_entries(markdown: str, section: str) -> dict[str, str]:
    """{name: default cell} of the rows of the section's tables whose header starts with `variable` or `field`,
    each row's first cell one backticked name."""
    entries = {}
    for header, *rows in page_tables(markdown, section):
        if header[0] not in ("variable", "field"):
            continue
        for row in rows:
            name = NAME_CELL.fullmatch(row[0])
            assert name, f"docs/configuration.md, '## {section}': a row's first cell is not one `name`: {row}"
            assert name.group(1) not in entries, f"docs/configuration.md lists {name.group(1)} twice under {section}"
            entries[name.group(1)] = row[1]
    return entries


def default_problem(value, cell: str, *, missing_word: str) -> str | None:
    """Why a default cell does not state `value`, or None. Empty values are stated by a word ("unset", "blank"),
    others by a backticked literal: `true`/`false`, a number equal to the value, the text, a list comma-joined."""
    if value is NO_DEFAULT:
        return None
    if value is None or value == "":
        return None if cell.startswith(missing_word) else f"says {cell!r}, not {missing_word!r}"
    shown = BACKTICKED.findall(cell)
    if isinstance(value, bool):
        expected = "true" if value else "false"
        return None if expected in shown else f"says {cell!r}, not `{expected}`"
    if isinstance(value, int | float):
        numbers = []
        for text in shown:
            try:
                numbers.append(float(text))
            except ValueError:
                pass
        return None if any(abs(n - value) < 1e-9 for n in numbers) else f"says {cell!r}, not `{value}`"
    expected = ",".join(value) if isinstance(value, list) else str(value)
    return None if expected in shown else f"says {cell!r}, not `{expected}`"


def admin_fields(model) -> dict[str, object]:
    """{field name: its default} of a settings model: every concrete field but the automatic primary key. A
    nullable field without a default starts empty (None); a required one has no default to state."""
    fields = {}
    for field in model._meta.get_fields():
        if not field.concrete or field.auto_created:
            continue
        if field.default is NOT_PROVIDED:
            fields[field.name] = None if field.null else NO_DEFAULT
        else:
            fields[field.name] = NO_DEFAULT if callable(field.default) else field.default
    return fields


def test_every_environment_variable_the_code_reads_is_on_the_page_and_no_other():
    reads = code_environment_reads()
    documented = page_entries(PAGE.read_text(), ENV_SECTION)
    read_names = {read.name for read in reads}
    missing = sorted({f"{read.name} (read at {read.where})" for read in reads if read.name not in documented})
    stale = sorted(set(documented) - read_names)
    assert not missing and not stale, (
        f"docs/configuration.md, '## {ENV_SECTION}', is out of step with the code:\n"
        + "".join(f"  not on the page: {entry}\n" for entry in missing)
        + "".join(f"  on the page, read nowhere in {', '.join(CODE_PACKAGES)}: {name}\n" for name in stale)
    )


def test_the_documented_defaults_of_environment_variables_are_the_codes():
    documented = page_entries(PAGE.read_text(), ENV_SECTION)
    problems = [
        f"{read.name} (default at {read.where}): {problem}"
        for read in code_environment_reads()
        if read.name in documented
        and (problem := default_problem(read.default, documented[read.name], missing_word="unset"))
    ]
    assert not problems, "docs/configuration.md states other defaults than the code:\n" + "\n".join(problems)


def test_every_admin_setting_is_on_the_page_and_no_other():
    markdown = PAGE.read_text()
    problems = []
    for model, section in ADMIN_SECTIONS.items():
        fields, documented = set(admin_fields(model)), set(page_entries(markdown, section))
        problems += [f"{model.__name__}.{name} is not under '## {section}'" for name in sorted(fields - documented)]
        problems += [
            f"'## {section}' lists {name}, no field of {model.__name__}" for name in sorted(documented - fields)
        ]
    assert not problems, "docs/configuration.md is out of step with profiles/models.py:\n" + "\n".join(problems)


def test_the_documented_defaults_of_admin_settings_are_the_models():
    markdown = PAGE.read_text()
    problems = []
    for model, section in ADMIN_SECTIONS.items():
        documented = page_entries(markdown, section)
        for name, default in admin_fields(model).items():
            if name in documented and (problem := default_problem(default, documented[name], missing_word="blank")):
                problems.append(f"{model.__name__}.{name}: {problem}")
    assert not problems, "docs/configuration.md states other defaults than profiles/models.py:\n" + "\n".join(problems)


def test_the_built_in_purposes_on_the_page_are_the_seeded_ones():
    tables = [t for t in page_tables(PAGE.read_text(), ADMIN_SECTIONS[PurposeProfile]) if t[0][0] == "purpose"]
    assert len(tables) == 1, "docs/configuration.md needs one table of the built-in purposes (header `purpose`)"
    header, *rows = tables[0]
    assert header[1:] == [*BUCKETS, "events budget ratio"], header
    on_page = {
        NAME_CELL.fullmatch(row[0]).group(1): (
            {bucket: int(count) for bucket, count in zip(BUCKETS, row[1:-1], strict=True)},
            float(row[-1]),
        )
        for row in rows
    }
    seeded = {name: (values["quotas"], values["events_budget_ratio"]) for name, values in BUILTIN_PROFILES.items()}
    assert on_page == seeded


def test_the_run_files_variables_on_the_page_are_the_ones_the_run_files_use():
    markdown = PAGE.read_text()
    run_files = {name: (ROOT / name).read_text() for name in RUN_FILES}
    documented = page_entries(markdown, RUN_FILES_SECTION)
    unused = [
        name
        for name in documented
        if not any(re.search(rf"\b{re.escape(name)}\b", text) for text in run_files.values())
    ]
    everything = set(documented) | set(page_entries(markdown, ENV_SECTION))
    undocumented = sorted(set(COMPOSE_VARIABLE.findall(run_files["compose.yaml"])) - everything)
    assert not unused and not undocumented, (
        f"docs/configuration.md, '## {RUN_FILES_SECTION}':\n"
        + "".join(f"  {name} appears in none of {', '.join(RUN_FILES)}\n" for name in unused)
        + "".join(f"  compose.yaml reads ${{{name}}}, which the page does not list\n" for name in undocumented)
    )


def test_the_extraction_finds_each_way_a_module_reads_the_environment():
    """On a made-up module, so that a reader the walk misses fails here rather than leaving the page unchecked."""
    source = "\n".join(
        [
            "import os",
            'DEBUG = env.bool("A_BOOL", default=False)',
            'SIZE = env.int("A_SIZE", default=2 * 1024)',
            'HOSTS = env.list("A_LIST", default=["x", "y"])',
            'KEY = env.str("A_KEY", default=OTHER)',
            'CACHES = {"default": env.cache_url("A_URL")}',
            'os.environ.setdefault("A_SETDEFAULT", "v")',
            'DIR = os.environ.get("A_GET")',
            'VALUE = os.environ["A_ITEM"]',
            'ON = "A_IN" in os.environ',
            'OTHER = os.getenv("A_GETENV")',
        ]
    )
    reads = {read.name: read.default for read in environment_reads(source, "m.py")}
    assert set(reads) == {
        "A_BOOL",
        "A_SIZE",
        "A_LIST",
        "A_KEY",
        "A_URL",
        "A_SETDEFAULT",
        "A_GET",
        "A_ITEM",
        "A_IN",
        "A_GETENV",
    }
    assert (reads["A_BOOL"], reads["A_SIZE"], reads["A_LIST"]) == (False, 2048, ["x", "y"])
    assert reads["A_KEY"] is NO_DEFAULT and reads["A_GET"] is NO_DEFAULT
    assert default_problem(2048, "`2048`", missing_word="unset") is None
    assert default_problem(2048, "`2049` (two KB)", missing_word="unset") is not None
    assert default_problem(["x", "y"], "`x,y`", missing_word="unset") is None
    assert default_problem("", "unset (dev mode)", missing_word="unset") is None
    assert default_problem(None, "`0.2`", missing_word="blank") is not None
