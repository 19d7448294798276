"""The corpus of `bench.quality --suite recall` (issue 21): one developer's store as an agent would fill it —
profile, preferences, entities, dated events and experiences, resources and skills, 120 items of which 51 (42.5 %)
are Chinese — and the questions asked of it, each with the item that answers it and the answer string that must
reach `rendered`, or none when nothing in the store answers it.

Every answer string occurs in its item and in no other (`validate()`), so "answer in rendered" means that item was
served with enough of its text. Resources and skills are served at `abstract` (RFC §3.4), so their answers sit in
the head of a section or in a skill's description; memories are short enough that their abstract is their text.

The data is in bench/corpora/ (its README.md gives source and licence): recall_store.jsonl, an `Item` a line (a
skill's text is its whole SKILL.md, front matter included), and recall_questions.jsonl, a `Question` a line.
"""

from dataclasses import dataclass

from bench.harness import corpus_records

BENCH_FOLDER = "recall-bench"  # below each memory category: the run removes only what it wrote
RESOURCES_ROOT = f"viking://resources/{BENCH_FOLDER}"
SKILLS_ROOT = "viking://agent/default/skills"
KINDS = ("profile", "preferences", "entities", "events", "experiences", "resources", "skills")


@dataclass(frozen=True)
class Item:
    kind: str  # one of KINDS
    name: str  # a memory's file name, a resource's path below RESOURCES_ROOT, a skill's name
    language: str
    text: str

    def uri(self, user: str) -> str:
        """Where the item is written; a skill's folder, whose SKILL.md its document is."""
        if self.kind == "profile":
            return f"viking://user/{user}/memories/profile.md"
        if self.kind == "resources":
            return f"{RESOURCES_ROOT}/{self.name}"
        if self.kind == "skills":
            return f"{SKILLS_ROOT}/{self.name}"
        return f"viking://user/{user}/memories/{self.kind}/{BENCH_FOLDER}/{self.name}"


@dataclass(frozen=True)
class Question:
    query: str
    answer: str | None  # must appear verbatim in `rendered`; None: nothing in the store answers the question
    item: str | None  # the name of the item holding the answer
    language: str


ITEMS = [Item(**record) for record in corpus_records("recall_store.jsonl")]
QUESTIONS = [Question(**record) for record in corpus_records("recall_questions.jsonl")]
BY_NAME = {item.name: item for item in ITEMS}


def group(question: Question) -> str:
    """EN→EN, ZH→ZH, ZH→EN, EN→ZH (question → item language), or "unanswerable EN" / "unanswerable ZH"."""
    if question.item is None:
        return f"unanswerable {question.language.upper()}"
    return f"{question.language.upper()}→{BY_NAME[question.item].language.upper()}"


def validate() -> None:
    """Every answer occurs (whitespace as an abstract collapses it) in its own item and in no other: otherwise an
    answer in `rendered` would not say which item was served."""
    if len(BY_NAME) != len(ITEMS):
        raise ValueError("item names must be unique")
    texts = {item.name: " ".join(item.text.split()) for item in ITEMS}
    for question in QUESTIONS:
        if question.item is None:
            continue
        holders = [name for name, text in texts.items() if question.answer in text]
        if holders != [question.item]:
            raise ValueError(
                f"{question.query!r}: answer {question.answer!r} is in {holders}, not only in {question.item!r}"
            )
