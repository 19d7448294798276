"""The corpus of bench/quality.py: runbooks and manuals in English and Chinese whose answers sit in later sections
(eight of them past the head of a long section), and the questions about them, each with its gold document and the
answer string that must reach `rendered`.

The data is in bench/corpora/ (its README.md gives source and licence): quality_docs.jsonl, a document a line
(`name`, `text`), and quality_questions.jsonl, a `Question` a line."""

import json
from dataclasses import dataclass
from pathlib import Path

_CORPORA = Path(__file__).resolve().parent / "corpora"


@dataclass(frozen=True)
class Question:
    query: str
    document: str  # a key of DOCUMENTS: the gold is that document or one of its sections
    answer: str  # must appear verbatim in `rendered`
    language: str
    deep: bool = False  # the answer sits past the head (~450 characters) of its section


def _records(name: str) -> list[dict]:
    """A JSONL file's records. Its lines are read as the file's lines, which end at "\n" only: str.splitlines()
    would also split at U+2028 and the like, which json.dumps(ensure_ascii=False) writes unescaped."""
    with (_CORPORA / name).open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines]


DOCUMENTS = {record["name"]: record["text"] for record in _records("quality_docs.jsonl")}  # name → text, as ingested
QUESTIONS = [Question(**record) for record in _records("quality_questions.jsonl")]
