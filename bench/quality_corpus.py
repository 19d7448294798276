"""The corpus of bench/quality.py: runbooks and manuals in English and Chinese whose answers sit in later sections
(eight of them past the head of a long section), and the questions about them, each with its gold document and the
answer string that must reach `rendered`.

The data is in bench/corpora/ (its README.md gives source and licence): quality_docs.jsonl, a document a line
(`name`, `text`), and quality_questions.jsonl, a `Question` a line."""

from dataclasses import dataclass

from bench.harness import corpus_records


@dataclass(frozen=True)
class Question:
    query: str
    document: str  # a key of DOCUMENTS: the gold is that document or one of its sections
    answer: str  # must appear verbatim in `rendered`
    language: str
    deep: bool = False  # the answer sits past the head (~450 characters) of its section


DOCUMENTS = {
    record["name"]: record["text"] for record in corpus_records("quality_docs.jsonl")
}  # name → text, as ingested
QUESTIONS = [Question(**record) for record in corpus_records("quality_questions.jsonl")]
