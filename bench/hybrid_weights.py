"""The lexical weight of the hybrid fusion, swept: evidence recall of one search in score order per weight.

    .venv/bin/python -m bench.hybrid_weights [--locomo bench/.data/locomo10.zip] [--questions 600] [--reuse]

Loads the conversation corpus of bench/conversation.py (generated, or LoCoMo from a local copy) in-process into
its own database `ovsite_bench_weights` (one memory per turn, through the write path), then asks each question
once per configuration — vector, hybrid at lexical weights 0.3 to 0.85, lexical — with the same search the
surfaces make (retrieval.search.ranking.score_order, 50 deep), and reports the share of each question's evidence
turns among the first 10 and 50, overall and per kind. What docs/retrieval.md's choice of 0.5 rests on; the
bilingual side of that choice is `bench.quality --suite recall`. Rewrites its section of bench/RESULTS.md.
"""

import statistics
import sys
import time
from pathlib import Path

from bench import conversation, conversation_corpus, harness

DATABASE = "ovsite_bench_weights"
CONFIGS = [
    ("vector", 0.0),
    ("hybrid", 0.3),
    ("hybrid", 0.4),
    ("hybrid", 0.5),
    ("hybrid", 0.6),
    ("hybrid", 0.7),
    ("hybrid", 0.85),
    ("lexical", 1.0),
]
DEPTH = 50
BATCH = 200


def load(corpus) -> float:
    import json

    from django.db import connection
    from django.test import Client

    client, started = Client(), time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE retrieval_context RESTART IDENTITY CASCADE")
    for i in range(0, len(corpus.turns), BATCH):
        operations = [{"uri": conversation.turn_uri(t), "content": t.content} for t in corpus.turns[i : i + BATCH]]
        response = client.post(
            "/api/v1/content/batch-write",
            json.dumps({"operations": operations, "wait": True}),
            content_type="application/json",
        )
        if response.status_code != 200:
            raise RuntimeError(response.content[:500])
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE retrieval_context")  # the statistics the lexical side reads its stop words from
    return time.perf_counter() - started


def sweep(corpus, questions) -> dict:
    from core.auth import _caller_for_names
    from retrieval.embedders import embed_queries
    from retrieval.search.fusion import Ranking
    from retrieval.search.query import FindQuery, scope_predicate
    from retrieval.search.ranking import score_order
    from retrieval.search.statements import SearchQuery

    caller = _caller_for_names("default", "default", "admin")  # dev mode's caller, who wrote the turns
    uri_of = {(t.conv, t.dia_id): conversation.turn_uri(t) for t in corpus.turns}
    out = {config: {"@10": [], "@50": [], "kinds": {}} for config in CONFIGS}
    for question, vector in zip(questions, embed_queries([q.query for q in questions]), strict=True):
        wanted = {uri_of[question.conv, e] for e in question.evidence if (question.conv, e) in uri_of}
        for mode, weight in CONFIGS:
            spec = FindQuery(query=question.query, limit=DEPTH, search_mode=mode)
            rows = score_order(
                caller=caller,
                spec=spec,
                scope=scope_predicate(caller, spec),
                queries=[SearchQuery(question.query, vector)],
                limit=DEPTH,
                columns=("uri",),
                ranking=Ranking(mode, weight),
            ).rows
            uris = [row["uri"] for row in rows]
            at10 = len(wanted & set(uris[:10])) / len(wanted)
            out[mode, weight]["@10"].append(at10)
            out[mode, weight]["@50"].append(len(wanted & set(uris)) / len(wanted))
            out[mode, weight]["kinds"].setdefault(question.kind, []).append(at10)
    return out


def render(corpus, questions, result: dict, load_s: float, command: str) -> str:
    kinds = sorted({q.kind for q in questions})
    lines = [
        f"<!-- hybrid_weights:{corpus.name}:begin -->",
        f"## hybrid_weights — the fusion's lexical weight on conversations ({corpus.name})",
        "",
        *harness.heading(command, " (shared machine)"),
        f"In-process on database `{harness.database()}`: {len(corpus.turns):,} turns loaded through the write path in "
        f"{load_s:.0f} s, {len(questions)} questions; each configuration is the search in score order that "
        f"/find and context make, {DEPTH} deep. Evidence recall: the mean share of a question's evidence "
        "turns among the first 10 (50).",
        "",
        "| search_mode | lexical weight | @10 | @50 | " + " | ".join(f"{k} @10" for k in kinds) + " |",
        "|---|---:|---:|---:|" + "---:|" * len(kinds),
    ]
    for (mode, weight), values in result.items():
        lines.append(
            f"| {mode} | {weight:g} | {statistics.mean(values['@10']):.3f} | "
            f"{statistics.mean(values['@50']):.3f} | "
            + " | ".join(f"{statistics.mean(values['kinds'][k]):.3f}" for k in kinds)
            + " |"
        )
    lines += [f"<!-- hybrid_weights:{corpus.name}:end -->", ""]
    return "\n".join(lines)


def main() -> int:
    parser = harness.parser(__doc__, DATABASE)
    parser.add_argument("--locomo", type=Path)
    parser.add_argument("--questions", type=int, default=600, help="the first N questions (0: all)")
    parser.add_argument("--reuse", action="store_true", help="keep the turns already loaded")
    args = parser.parse_args()
    harness.configure(args.database)
    harness.migrated_database()
    corpus = conversation_corpus.read_locomo(args.locomo) if args.locomo else conversation_corpus.generate()
    questions = corpus.questions[: args.questions or None]
    load_s = 0.0 if args.reuse else load(corpus)
    section = render(corpus, questions, sweep(corpus, questions), load_s, harness.command_line("bench.hybrid_weights"))
    harness.publish(
        section,
        f"<!-- hybrid_weights:{corpus.name}:begin -->",
        f"<!-- hybrid_weights:{corpus.name}:end -->",
        write=not args.no_write,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
