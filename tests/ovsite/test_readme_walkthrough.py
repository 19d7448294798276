"""The README's "Try it" tour, run as a new user would (issue 21 §5, issue 26 §1): its shell blocks, read from
README.md at test time, each command through bash in order, against a fresh ovsite served as `make run` serves it
(uvicorn on the ASGI app, Django and /mcp) on the test database.

A block runs in dev mode (no root key) unless the prose just before it starts the server with
`OVSITE_ROOT_API_KEY=…`: those run on a second server started with that key. A `<name>` placeholder in a command is
what a reader pastes from an earlier answer: the latest value of the JSON field `name` the tour printed on that
server (`<user_key>` from the account creation). Every curl must print JSON: `"status": "ok"` for the REST API, a
JSON-RPC `result` that is no tool error for /mcp. And the context examples (/search `mode="context"`, /recall, the
MCP `recall` tool) must give a non-empty block that holds the memory the tour wrote.

The parsing and running (`tour_blocks`, `commands`, `Tour`) are meant to be the one mechanism any other test of the
README's shell blocks uses.

The README stays a front page (issue 26 §1: at most 8 KB, the manual is docs/), and every relative link of it, of
CONTRIBUTING.md, CHANGELOG.md and docs/*.md leads to a file and heading that exist.
"""

import json
import re
import shlex
import subprocess
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path

import pytest

from tests import live
from tests.live import ROOT, child_env, database_env

README = ROOT / "README.md"
README_MAX_BYTES = 8 * 1024
LINKED_PAGES = ("README.md", "CONTRIBUTING.md", "CHANGELOG.md", "docs/*.md")
TOUR_SECTION = "Try it"
README_ADDRESS = re.compile(r"\b(?:localhost|127\.0\.0\.1):8000\b")
ROOT_KEY_IN_PROSE = re.compile(r"OVSITE_ROOT_API_KEY=([^\s`'\"]+)")
PLACEHOLDER = re.compile(r"<([A-Za-z_][A-Za-z0-9_]*)>")
MARKDOWN_LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCED = re.compile(r"```.*?```", re.DOTALL)
CODE = re.compile(r"```.*?```|`[^`\n]*`", re.DOTALL)
COMMAND_TIMEOUT_S = 120
QUOTED_OUTPUT_CHARS = 2500


@dataclass
class Block:
    key: str | None  # the root key the server runs with, None in dev mode
    code: str
    line: int  # README line of the opening fence


def tour_blocks(markdown: str, section: str = TOUR_SECTION) -> list[Block]:
    """The ```sh blocks of the `## {section}` section (up to the next `## ` heading), in order, each with the root
    key the prose before it starts the server with (since the previous block)."""
    lines = markdown.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip() == f"## {section}"), None)
    assert start is not None, f"README.md has no '## {section}' section"
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    blocks, prose, i = [], [], start + 1
    while i < end:
        if lines[i].strip().startswith("```"):
            language, fence_line, body = lines[i].strip()[3:].strip(), i + 1, []
            i += 1
            while i < end and not lines[i].strip().startswith("```"):
                body.append(lines[i])
                i += 1
            if language in ("sh", "bash", "shell", "console"):
                key = ROOT_KEY_IN_PROSE.search(" ".join(prose))
                blocks.append(Block(key.group(1) if key else None, "\n".join(body), fence_line))
            prose = []
        else:
            prose.append(lines[i])
        i += 1
    return blocks


def commands(code: str) -> list[str]:
    """A block's commands: `\\`-continued lines joined, comment-only and blank lines left out."""
    found, pending = [], ""
    for line in code.splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1].rstrip() + " "
            continue
        found.append((pending + line.strip()).strip())
        pending = ""
    if pending.strip():
        found.append(pending.strip())
    return found


def json_fields(value, name: str) -> list:
    """Every value of the field `name`, at any depth of a JSON document."""
    if isinstance(value, dict):
        return [v for k, v in value.items() if k == name] + [x for v in value.values() for x in json_fields(v, name)]
    if isinstance(value, list):
        return [x for v in value for x in json_fields(v, name)]
    return []


def request_body(command: str) -> dict | None:
    """The JSON body a curl command sends (`-d`/`--data…`), or None."""
    words = shlex.split(command)
    for flag, value in pairwise(words):
        if flag in ("-d", "--data", "--data-raw", "--data-binary"):
            try:
                return json.loads(value)
            except ValueError:
                return None
    return None


@dataclass
class Ran:
    block: Block
    command: str  # as run: the server's address and the placeholders filled in
    returncode: int
    stdout: str
    stderr: str
    answer: object = None  # stdout's JSON, when it is JSON

    def quote(self) -> str:
        out = self.stdout if len(self.stdout) <= QUOTED_OUTPUT_CHARS else self.stdout[:QUOTED_OUTPUT_CHARS] + " …"
        err = f"\n  stderr: {self.stderr.strip()[:800]}" if self.stderr.strip() else ""
        key = f", server with OVSITE_ROOT_API_KEY={self.block.key}" if self.block.key else ", dev-mode server"
        return (
            f"README.md block at line {self.block.line}{key}\n  $ {self.command}\n  exit {self.returncode}\n"
            f"  output: {out or '(nothing)'}{err}"
        )


@dataclass
class Tour:
    """Runs the blocks in order; one server per key mode, started on first use and stopped by `stop()`."""

    log_dir: Path
    servers: dict = field(default_factory=dict)  # key (None: dev mode) -> (Process, base URL)
    ran: list[Ran] = field(default_factory=list)

    def server(self, key: str | None) -> str:
        if key not in self.servers:
            env = child_env(**database_env())
            for name in ("OVSITE_ROOT_API_KEY", "CELERY_BROKER_URL"):  # dev mode, writes processed in-process
                env.pop(name, None)
            if key is not None:
                env["OVSITE_ROOT_API_KEY"] = key
            log_dir = self.log_dir / ("dev" if key is None else "root-key")
            log_dir.mkdir(exist_ok=True)
            self.servers[key] = live.start_asgi(log_dir, env)
        return self.servers[key][1]

    def placeholder(self, key: str | None, name: str) -> str | None:
        for earlier in reversed([r for r in self.ran if r.block.key == key]):
            values = [v for v in json_fields(earlier.answer, name) if isinstance(v, str)]
            if values:
                return values[-1]
        return None

    def run(self, blocks: list[Block]) -> list[Ran]:
        for block in blocks:
            address = self.server(block.key).removeprefix("http://")
            for command in commands(block.code):
                command = README_ADDRESS.sub(address, command)
                for name in PLACEHOLDER.findall(command):
                    value = self.placeholder(block.key, name)
                    if value is not None:
                        command = command.replace(f"<{name}>", value)
                try:
                    done = subprocess.run(
                        ["bash", "-c", command], capture_output=True, text=True, cwd=ROOT, timeout=COMMAND_TIMEOUT_S
                    )
                    ran = Ran(block, command, done.returncode, done.stdout, done.stderr)
                except subprocess.TimeoutExpired as timeout:
                    partial = timeout.stdout or b""  # bytes, even with text=True
                    ran = Ran(
                        block,
                        command,
                        -1,
                        partial.decode(errors="replace") if isinstance(partial, bytes) else partial,
                        f"timed out after {COMMAND_TIMEOUT_S} s",
                    )
                try:
                    ran.answer = json.loads(ran.stdout)
                except ValueError:
                    pass
                self.ran.append(ran)
        return self.ran

    def stop(self) -> None:
        for process, _ in self.servers.values():
            process.stop()

    def server_logs(self) -> str:
        return "\n".join(
            f"--- {p.name} ({'dev' if k is None else 'root key'}) log tail:\n{p.tail(1500)}"
            for k, (p, _) in self.servers.items()
        )


def answer_problem(ran: Ran) -> str | None:
    """What is wrong with one command's exit and output, as a new user would see it; None if nothing."""
    if ran.returncode != 0:
        return "exited non-zero"
    if ran.answer is None:
        if ran.command.startswith("curl"):
            return "printed no JSON"
        return None
    if not isinstance(ran.answer, dict):
        return "printed JSON that is not an object"
    if "jsonrpc" in ran.answer:  # an MCP JSON-RPC answer
        if "result" not in ran.answer:
            return "JSON-RPC answer without a result"
        if ran.answer["result"].get("isError"):
            return "the MCP tool answered an error"
        return None
    if ran.answer.get("status") != "ok":
        return f'"status" is {ran.answer.get("status")!r}, not "ok"'
    return None


def context_block(ran: Ran) -> str | None:
    """The block a context example gives: `result.rendered` on REST, the tool's text on MCP."""
    if not isinstance(ran.answer, dict):
        return None
    result = ran.answer.get("result")
    if "jsonrpc" in ran.answer:
        parts = (result or {}).get("content") or []
        return "".join(part.get("text", "") for part in parts if isinstance(part, dict))
    return result.get("rendered") if isinstance(result, dict) else None


def context_example(ran: Ran) -> str | None:
    """Which context example a command is: 'search context', 'recall', 'MCP recall', or None."""
    body = request_body(ran.command) or {}
    if "/api/v1/search/search" in ran.command and body.get("mode") == "context":
        return "search context"
    if "/api/v1/search/recall" in ran.command:
        return "recall"
    if (
        re.search(r"/mcp\b", ran.command)
        and body.get("method") == "tools/call"
        and (body.get("params") or {}).get("name") == "recall"
    ):
        return "MCP recall"
    return None


def bootstrap_example(ran: Ran) -> bool:
    return "/api/v1/search/search" in ran.command and (request_body(ran.command) or {}).get("mode") == "bootstrap"


def bootstrap_problems(ran: Ran, live: dict) -> list[str]:
    """What the README says of its bootstrap example (issue 39 §2), checked on the block: each preference the tour
    wrote is listed by name only (`detail="uri"`, no body), and with no `memories/profile.md` written there is no
    profile entry (the identity slot is empty)."""
    entries = (ran.answer.get("result") or {}).get("entries") or []
    block = context_block(ran) or ""
    problems = []
    for uri, text in live.items():
        if "/memories/preferences/" not in uri:
            continue
        served = [e for e in entries if same_node(uri, e["uri"])]
        if [e["detail"] for e in served] != ["uri"] or text in block:
            problems.append(f"the bootstrap example does not list the preference {uri} by name only ({served})")
    if not any(uri.endswith("/memories/profile.md") for uri in live) and any(
        e.get("category") == "profile" for e in entries
    ):
        problems.append("the bootstrap example serves a profile the tour never wrote")
    return problems


def written_text(ran: Ran) -> tuple[str, str] | None:
    """(URI, the text a reader would look for) of a content/write command: its content's first line that is no
    Markdown heading."""
    if "/api/v1/content/write" not in ran.command:
        return None
    body = request_body(ran.command) or {}
    lines = [line.strip() for line in str(body.get("content", "")).splitlines()]
    text = next((line for line in lines if line and not line.startswith("#")), "")
    return (body.get("uri", ""), text) if body.get("uri") and text else None


def deleted_uri(ran: Ran) -> str | None:
    """The URI a `DELETE /api/v1/fs?uri=…` command removes."""
    if not re.search(r"-X\s*DELETE\b|--request\s+DELETE\b", ran.command):
        return None
    found = re.search(r"/api/v1/fs\?(?:[^'\s]*&)?uri=([^&'\s]+)", ran.command)
    return found.group(1) if found else None


def same_node(written: str, served: str) -> bool:
    """`viking://~/…` as written is `viking://user/{id}/…` as served."""
    if written.startswith("viking://~/"):
        own = re.escape(written.removeprefix("viking://~/"))
        return re.fullmatch(r"viking://user/[^/]+/" + own, served) is not None
    return written == served


def tour_problems(ran: list[Ran]) -> list[str]:
    """Everything a new user following the tour would find wrong, in the tour's order."""
    problems, seen = [], set()
    memories: dict = {}  # key mode -> {uri: text} written and not deleted on that server so far
    for one in ran:
        wrong = answer_problem(one)
        if wrong:
            problems.append(f"{wrong}:\n{one.quote()}")
        unfilled = PLACEHOLDER.findall(one.command)
        if unfilled:
            problems.append(f"no earlier answer gave {unfilled} to paste in:\n{one.quote()}")
        live = memories.setdefault(one.block.key, {})
        if written := written_text(one):
            live[written[0]] = written[1]
        if gone := deleted_uri(one):
            live.pop(gone, None)

        # /find lists what the tour wrote on this server
        if "/api/v1/search/find" in one.command and live and not wrong:
            served = [u for u in json_fields(one.answer.get("result"), "uri") if isinstance(u, str)]
            for uri in live:
                if not any(same_node(uri, s) for s in served):
                    problems.append(
                        f"the /find example does not list the memory the tour wrote ({uri}):\n{one.quote()}"
                    )

        # the bootstrap example shows what the README says of it: the tour's preferences by name only, and no profile
        if bootstrap_example(one) and live and not wrong:
            problems += [f"{problem}:\n{one.quote()}" for problem in bootstrap_problems(one, live)]

        # the context examples serve the memory the tour wrote, in a non-empty block
        kind = context_example(one)
        if kind is None:
            continue
        seen.add(kind)
        if not live:
            problems.append(
                f"the {kind} example runs when the memory the tour wrote is not (or no longer) there:\n{one.quote()}"
            )
            continue
        if wrong:
            problems.append(
                f"the {kind} example gave no block to check (its answer is wrong, quoted above): $ {one.command}"
            )
            continue
        block = context_block(one)
        if not block:
            problems.append(f"the {kind} example returned an empty block:\n{one.quote()}")
            continue
        for uri, text in live.items():
            if text not in block:
                problems.append(
                    f"the {kind} example's block lacks the memory the tour wrote ({uri}: {text!r}):\n{one.quote()}"
                )
    if not any(written_text(one) for one in ran):
        problems.append("the tour writes no memory (no content/write command with a uri and a content)")
    for kind in ("search context", "recall", "MCP recall"):
        if kind not in seen:
            problems.append(f"README.md's '{TOUR_SECTION}' tour has no {kind} example")
    return problems


@pytest.fixture
def tour(seeded, tmp_path):
    running = Tour(tmp_path)
    yield running
    running.stop()


# Marked here rather than found by the lanes' scan of the module (tests/conftest.py), so that the other tests of
# the module, which read files only, stay in the unit lane.
@pytest.mark.http
def test_the_readme_tour_works_top_to_bottom(tour):
    blocks = tour_blocks(README.read_text())
    assert blocks, f"README.md's '{TOUR_SECTION}' section has no shell block"
    ran = tour.run(blocks)
    problems = tour_problems(ran)
    assert not problems, (
        f"{len(problems)} problem(s) in README.md's '{TOUR_SECTION}' tour "
        f"({len(ran)} commands run):\n\n" + "\n\n".join(problems) + "\n\n" + tour.server_logs()
    )


def test_the_tour_parser_reads_continuations_keys_and_placeholders():
    """The parser on a README-shaped snippet, so a change of the README's layout fails here first, not as a
    puzzling tour failure."""
    markdown = "\n".join(
        [
            "## Try it",
            "dev first:",
            "```sh",
            "# a comment",
            "curl -s localhost:8000/a \\",
            "  -d '{\"x\": 1}'",
            "curl -s 127.0.0.1:8000/b",
            "```",
            "```json",
            "{}",
            "```",
            "With a root key (`OVSITE_ROOT_API_KEY=k1 make run`):",
            "",
            "```sh",
            "curl -s localhost:8000/c -H 'Authorization: Bearer <user_key>'",
            "```",
            "## Next",
            "```sh",
            "echo no",
            "```",
        ]
    )
    blocks = tour_blocks(markdown)
    assert [(b.key, commands(b.code)) for b in blocks] == [
        (None, ["curl -s localhost:8000/a -d '{\"x\": 1}'", "curl -s 127.0.0.1:8000/b"]),
        ("k1", ["curl -s localhost:8000/c -H 'Authorization: Bearer <user_key>'"]),
    ]
    assert README_ADDRESS.sub("127.0.0.1:5", commands(blocks[0].code)[1]) == "curl -s 127.0.0.1:5/b"
    assert request_body(commands(blocks[0].code)[0]) == {"x": 1}


def test_the_checks_flag_a_context_example_after_the_delete_and_an_empty_recall():
    """The checks on made-up answers: the README's old order (the DELETE before the context example) and an empty
    /recall block are both reported, with the command quoted."""
    dev = Block(None, "", 1)
    ok = lambda result: {"status": "ok", "result": result}  # noqa: E731
    write = (
        'curl -s -XPOST h/api/v1/content/write -d \'{"uri": "viking://~/memories/c.md", '
        '"content": "# Summary\\nBlack coffee."}\''
    )
    context = 'curl -s -XPOST h/api/v1/search/search -d \'{"query": "drink?", "mode": "context"}\''
    recall = 'curl -s -XPOST h/api/v1/search/recall -d \'{"query": "drink?"}\''
    mcp = (
        'curl -s -XPOST h/mcp -d \'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", '
        '"params": {"name": "recall", "arguments": {"query": "drink?"}}}\''
    )
    rpc = {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {"content": [{"type": "text", "text": "<memory>Black coffee.</memory>"}], "isError": False},
    }
    ran = [
        Ran(dev, write, 0, "", "", ok({})),
        Ran(
            dev,
            "curl -s 'h/api/v1/search/find' -d '{\"query\": \"coffee\"}'",
            0,
            "",
            "",
            ok({"memories": [{"uri": "viking://user/default/memories/c.md"}], "resources": [], "skills": []}),
        ),
        Ran(dev, recall, 0, '{"rendered": ""}', "", ok({"rendered": ""})),
        Ran(dev, mcp, 0, "", "", rpc),
        Ran(dev, "curl -s -XDELETE 'h/api/v1/fs?uri=viking://~/memories/c.md'", 0, "", "", ok({})),
        Ran(dev, context, 0, "", "", ok({"rendered": "<memory>Black coffee.</memory>"})),
    ]
    problems = tour_problems(ran)
    assert len(problems) == 2, problems
    assert problems[0].startswith("the recall example returned an empty block") and recall in problems[0]
    assert problems[1].startswith("the search context example runs when the memory the tour wrote is not")


def test_the_readme_says_what_the_bootstrap_example_shows():
    """The tour's bootstrap block lists the coffee preference as a bare `detail="uri"` line and has no profile; the
    prose where the example stands says why, so a newcomer does not read either as a bug (issue 39 §2). The tour
    (`bootstrap_problems`) checks the block still looks so."""
    tour = README.read_text().split(f"## {TOUR_SECTION}", 1)[1].split("\n## ", 1)[0]
    after_bootstrap = tour.split('"mode": "bootstrap"', 1)[1]
    assert 'detail="uri"' in after_bootstrap and "memories/profile.md" in after_bootstrap, after_bootstrap[:600]


def test_the_readme_says_how_to_pick_a_port_and_stop_the_embedded_postgresql():
    """`make run PORT=…` serves on that port, and `make pg-stop` stops the PostgreSQL that outlives the server; both
    as the README says and as make would run them (`make -n`: printed, not run)."""
    text = README.read_text()
    assert "make run PORT=8001" in text and "make pg-stop" in text
    printed = subprocess.run(
        ["make", "-n", "--no-print-directory", "run", "PORT=8001"], cwd=ROOT, capture_output=True, text=True
    )
    assert printed.returncode == 0, printed.stderr
    assert "--port 8001" in printed.stdout.splitlines()[-1] and "/admin/" in printed.stdout, printed.stdout
    stop = subprocess.run(["make", "-n", "--no-print-directory", "pg-stop"], cwd=ROOT, capture_output=True, text=True)
    assert stop.returncode == 0 and "manage.py pg stop" in stop.stdout, stop.stdout + stop.stderr


def test_the_readme_stays_a_front_page():
    size = len(README.read_bytes())
    assert size <= README_MAX_BYTES, (
        f"README.md is {size} bytes, over {README_MAX_BYTES}: move the manual's part into docs/ and link to it"
    )


def heading_anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation but `-` and `_` dropped, spaces to `-`."""
    anchors = set()
    for line in FENCED.sub("", markdown).splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower().replace("`", "")
            anchors.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return anchors


def broken_links(page: Path, root: Path = ROOT) -> list[str]:
    """The relative links of one Markdown page that lead nowhere: a missing file, or a missing heading; paths are
    named relative to `root`."""
    broken = []
    for target in MARKDOWN_LINK.findall(CODE.sub("", page.read_text())):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{page.relative_to(root)}: {target} (no such file)")
        elif anchor and linked.suffix == ".md" and anchor not in heading_anchors(linked.read_text()):
            broken.append(f"{page.relative_to(root)}: {target} (no such heading in {linked.relative_to(root)})")
    return broken


def test_the_readme_and_the_docs_link_only_to_what_exists():
    pages = sorted({page for pattern in LINKED_PAGES for page in ROOT.glob(pattern)})
    assert README in pages and len(pages) > 3, pages
    broken = [link for page in pages for link in broken_links(page)]
    assert not broken, "links that lead nowhere:\n" + "\n".join(broken)


def test_the_link_check_reads_anchors_as_github_makes_them(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "# The operator console (`/admin/`)\n\n## /recall's relevance floor\n\n```\n# not a heading\n```\n"
        "[a](#the-operator-console-admin) [b](#recalls-relevance-floor) [c](#not-a-heading) [d](other.md)\n"
    )
    assert heading_anchors(page.read_text()) == {"the-operator-console-admin", "recalls-relevance-floor"}
    assert [link.split(": ", 1)[1] for link in broken_links(page, root=tmp_path)] == [
        "#not-a-heading (no such heading in page.md)",
        "other.md (no such file)",
    ]
