"""The corpus of the quality gate's `coding` suite (issue 37): a coding agent's memory of one backend engineer — her
preferences, the people and services she works with, dated incident memories (events), lessons (experiences), and
the team's runbooks and design docs (resources) — about half of it Chinese, with questions in English, in Chinese
and across the two, identifier questions (service names, error codes, ticket ids, config keys) and unanswerable
ones (nothing in the store answers them).

The shape the recall suite misses: each event is a `# Summary` of 200–350 characters, which is its abstract
(retrieval/summaries.py `file_abstract`), then a `# Details` section of 600–1500 characters, and the answer to each
question about an event sits in the Details, never in the abstract; each question about a resource is answered in a
later section of a long runbook or design doc, past its first 450 characters. The other memories are short: their
abstract is their text.

Every answer string occurs in its item and in no other (`validate()`, which also checks the shape above), so "answer
in rendered" means that item was served with enough of its text. The data is in bench/corpora/ (its README.md gives
source and licence): coding_store.jsonl, an `Item` a line, and coding_questions.jsonl, a `Question` a line. The API
is recall_corpus's, so bench/quality.py's recall measuring code runs on either module.
"""

import re
from dataclasses import dataclass

from bench.harness import corpus_records

BENCH_FOLDER = "coding-bench"  # below each memory category: the run removes only what it wrote
RESOURCES_ROOT = f"viking://resources/{BENCH_FOLDER}"
KINDS = ("preferences", "entities", "events", "experiences", "resources")
WHERE = ("details", "deep")  # an event's Details section; a later section of a resource, past its head
ABSTRACT_CHARS = 450  # retrieval/summaries.py ABSTRACT_MAX_CHARS: an abstract is at most this long
SUMMARY_CHARS = (200, 350)  # an event's `# Summary` section (its abstract)
DETAILS_CHARS = (600, 1500)  # an event's `# Details` section
_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class Item:
    kind: str  # one of KINDS
    name: str  # a memory's path below its category's bench folder (events: YYYY/MM/DD/…), a resource's path
    language: str
    text: str

    def uri(self, user: str) -> str:
        if self.kind == "resources":
            return f"{RESOURCES_ROOT}/{self.name}"
        return f"viking://user/{user}/memories/{self.kind}/{BENCH_FOLDER}/{self.name}"


@dataclass(frozen=True)
class Question:
    query: str
    answer: str | None  # must appear verbatim in `rendered`; None: nothing in the store answers the question
    item: str | None  # the name of the item holding the answer
    language: str
    where: str | None  # "details", "deep", or None: anywhere in a short memory
    identifier: bool  # the question names or asks for an identifier: service, error code, ticket id, config key


ITEMS = [Item(**record) for record in corpus_records("coding_store.jsonl")]
QUESTIONS = [Question(**record) for record in corpus_records("coding_questions.jsonl")]
BY_NAME = {item.name: item for item in ITEMS}


def group(question: Question) -> str:
    """EN→EN, ZH→ZH, ZH→EN, EN→ZH (question → item language), or "unanswerable EN" / "unanswerable ZH"."""
    if question.item is None:
        return f"unanswerable {question.language.upper()}"
    return f"{question.language.upper()}→{BY_NAME[question.item].language.upper()}"


def sections(text: str) -> list[tuple[str, str]]:
    """(heading, body) of a Markdown text in order; text before the first heading has the heading ""."""
    marks = list(_HEADING.finditer(text))
    found = [("", text[: marks[0].start()] if marks else text)]
    for n, mark in enumerate(marks):
        found.append((mark.group(1), text[mark.end() : marks[n + 1].start() if n + 1 < len(marks) else len(text)]))
    return [(heading, body) for heading, body in found if heading or body.strip()]


def _flat(text: str) -> str:
    return " ".join(text.split())


def validate() -> None:
    """Every answer occurs (whitespace collapsed, as an abstract collapses it) in its own item and in no other;
    each event is a Summary of SUMMARY_CHARS and Details of DETAILS_CHARS; a "details" answer is in its event's
    Details and not in its abstract (the Summary); a "deep" answer is in a resource's later section, past the
    document's first ABSTRACT_CHARS characters."""
    if len(BY_NAME) != len(ITEMS):
        raise ValueError("item names must be unique")
    for item in ITEMS:
        if item.kind not in KINDS:
            raise ValueError(f"{item.name}: unknown kind {item.kind!r}")
        if item.kind == "events":
            parts = dict(sections(item.text))
            summary, details = _flat(parts.get("Summary", "")), _flat(parts.get("Details", ""))
            if not SUMMARY_CHARS[0] <= len(summary) <= SUMMARY_CHARS[1]:
                raise ValueError(f"{item.name}: Summary of {len(summary)} characters, not {SUMMARY_CHARS}")
            if not DETAILS_CHARS[0] <= len(details) <= DETAILS_CHARS[1]:
                raise ValueError(f"{item.name}: Details of {len(details)} characters, not {DETAILS_CHARS}")
    texts = {item.name: _flat(item.text) for item in ITEMS}
    for question in QUESTIONS:
        if question.item is None:
            if question.answer is not None or question.where is not None:
                raise ValueError(f"{question.query!r}: an unanswerable question has no answer and no place")
            continue
        holders = [name for name, text in texts.items() if question.answer in text]
        if holders != [question.item]:
            raise ValueError(
                f"{question.query!r}: answer {question.answer!r} is in {holders}, not only in {question.item!r}"
            )
        item = BY_NAME[question.item]
        if question.where == "details":
            parts = dict(sections(item.text))
            if item.kind != "events" or question.answer not in _flat(parts.get("Details", "")):
                raise ValueError(f"{question.query!r}: answer not in the Details of an event")
            if question.answer in _flat(parts["Summary"]):
                raise ValueError(f"{question.query!r}: answer in the event's Summary, its abstract")
        elif question.where == "deep":
            first = _flat(" ".join(sections(item.text)[0]))  # the title and what precedes the second heading
            if item.kind != "resources" or question.answer in texts[item.name][:ABSTRACT_CHARS]:
                raise ValueError(f"{question.query!r}: answer not past the head of a resource")
            if question.answer in first:
                raise ValueError(f"{question.query!r}: answer in the resource's first section")
        elif question.where is not None:
            raise ValueError(f"{question.query!r}: where is one of {WHERE} or None")
