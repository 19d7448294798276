"""Request and response examples of the search surfaces, for the OpenAPI reference (core/openapi.py).

Each is a real exchange: the request was answered over `CORPUS` in a fresh account, and the response kept as it
came (scores from the packaged embedder) except that a context block's `stats` is abridged to its main fields (all
of them: docs/api.md, the context result). tests/core/test_schema_quality.py sends each request again over the
same corpus and checks that the answer serves the example's URIs, and that request and response fit their schemas.
"""

from dataclasses import dataclass

CORPUS = {
    "viking://~/memories/events/2026/11/30/deploy.md": (
        "# Summary\nDeployed ovsite 0.3 to production on Nov 30; the canary ran for an hour first."
    ),
    "viking://~/memories/preferences/reports.md": "Prefers deploy reports that lead with the conclusion.",
    "viking://resources/runbooks/deploy.md": (
        "# Deploy runbook\nRun migrations, then switch traffic. Roll back with `make rollback`."
    ),
}


@dataclass(frozen=True)
class Example:
    name: str
    summary: str
    request: dict
    response: dict


RUNBOOKS = "viking://resources/runbooks"
RUNBOOK = "viking://resources/runbooks/deploy.md"
REPORTS = "viking://user/default/memories/preferences/reports.md"
DEPLOY_EVENT = "viking://user/default/memories/events/2026/11/30/deploy.md"
INSTRUCTIONS = "viking://server/instructions"

RUNBOOK_ABSTRACT = "# Deploy runbook Run migrations, then switch traffic. Roll back with `make rollback`."
RUNBOOKS_ABSTRACT = f"runbooks (1 entries) — deploy.md: {RUNBOOK_ABSTRACT}"
RUNBOOKS_OVERVIEW = f"# runbooks\n\n- deploy.md: {RUNBOOK_ABSTRACT}"
REPORTS_TEXT = "Prefers deploy reports that lead with the conclusion."
DEPLOY_TEXT = CORPUS["viking://~/memories/events/2026/11/30/deploy.md"]
INSTRUCTIONS_HEAD = (
    "How to use this context: each memory element names a viking:// URI; detail is what you see: full (the text, "
    "or its head\n… [cut at this slot's share; the whole text: viking://server/instructions]"
)

HITS = {
    "memories": [
        {
            "context_type": "memory",
            "uri": REPORTS,
            "level": 2,
            "score": 0.564377,
            "abstract": REPORTS_TEXT,
            "tags": [],
        }
    ],
    "resources": [
        {
            "context_type": "resource",
            "uri": RUNBOOKS,
            "level": 1,
            "score": 0.61535,
            "abstract": RUNBOOKS_ABSTRACT,
            "tags": [],
        },
        {
            "context_type": "resource",
            "uri": RUNBOOK,
            "level": 2,
            "score": 0.593891,
            "abstract": RUNBOOK_ABSTRACT,
            "tags": [],
        },
    ],
    "skills": [],
    "total": 3,
}


def _memory(uri: str, category: str, score: float, detail: str, text: str) -> tuple[dict, str]:
    """An entry and its element in `rendered` (assembly/render.py's shape)."""
    head = f'<memory uri="{uri}" type="{category}" score="{score:.2f}" detail="{detail}"'
    element = f"{head} />" if detail == "uri" else f"{head}>\n{text}\n</memory>"
    return {"uri": uri, "category": category, "score": score, "detail": detail, "text": text}, element


def _block(memories: list[tuple[dict, str]], stats: dict) -> dict:
    return {
        "status": "ok",
        "result": {
            "entries": [entry for entry, _ in memories],
            "rendered": "\n\n".join(element for _, element in memories),
            "digest": "",
            "stats": stats,
        },
    }


CONTEXT_MEMORIES = [
    _memory(RUNBOOKS, "resources", 0.61535, "overview", RUNBOOKS_OVERVIEW),
    _memory(RUNBOOK, "resources", 0.593891, "abstract", RUNBOOK_ABSTRACT),
    _memory(REPORTS, "preferences", 0.564377, "full", REPORTS_TEXT),
]
CONTEXT_STATS = {
    "candidates": 3,
    "returned": 3,
    "dropped": 0,
    "max_tokens": 400,
    "used_tokens": 147,
    "tier_counts": {"full": 1, "overview": 1, "abstract": 1, "uri": 0},
    "tokenizer": "o200k",
    "exact_tokens": True,
    "search_mode": "hybrid",
    "purpose": "coding",
    "query_expansion": "off",
    "planned_queries": ["how do we deploy?"],
}

EXAMPLES = {
    "search_find": (
        Example(
            "hits",
            "Ranked hits, by context type",
            {"query": "how do we deploy?", "limit": 3},
            {"status": "ok", "result": HITS},
        ),
    ),
    "search_search": (
        Example(
            "list",
            "mode list: the find hits",
            {"query": "how do we deploy?", "mode": "list", "limit": 3},
            {"status": "ok", "result": HITS},
        ),
        Example(
            "context",
            "mode context: a token-budgeted block to inject",
            {"query": "how do we deploy?", "mode": "context", "max_tokens": 400, "purpose": "coding"},
            _block(
                CONTEXT_MEMORIES,
                {**CONTEXT_STATS, "threshold": {"score_threshold": 0.55, "source": "settings", "below": 1}},
            ),
        ),
        Example(
            "bootstrap",
            "mode bootstrap: the block a session starts with, no query",
            {"mode": "bootstrap", "session_id": "s1", "max_tokens": 800},
            _block(
                [
                    _memory(INSTRUCTIONS, "instructions", 1.0, "full", INSTRUCTIONS_HEAD),
                    _memory(DEPLOY_EVENT, "events", 1.0, "full", DEPLOY_TEXT),
                    _memory(RUNBOOK, "resources", 1.0, "abstract", RUNBOOK_ABSTRACT),
                    _memory(REPORTS, "preferences", 1.0, "uri", ""),
                ],
                {
                    "mode": "bootstrap",
                    "candidates": 4,
                    "returned": 4,
                    "max_tokens": 800,
                    "used_tokens": 228,
                    "tier_counts": {"full": 2, "overview": 0, "abstract": 1, "uri": 1},
                    "slots": {
                        "instructions": {"budget": 80, "planned_tokens": 78, "candidates": 1, "returned": 1},
                        "identity": {"budget": 202, "planned_tokens": 0, "candidates": 0, "returned": 0},
                        "continuity": {"budget": 362, "planned_tokens": 0, "candidates": 0, "returned": 0},
                        "working_state": {"budget": 602, "planned_tokens": 70, "candidates": 1, "returned": 1},
                        "listing": {"budget": 652, "planned_tokens": 88, "candidates": 2, "returned": 2},
                    },
                    "instructions": {"uri": INSTRUCTIONS, "version": "bootstrap-instructions-1"},
                },
            ),
        ),
    ),
    "search_recall": (
        Example(
            "recall",
            "A context block with the operator's recall defaults",
            {"query": "how do we deploy?", "max_tokens": 400},
            _block(
                CONTEXT_MEMORIES,
                {
                    **CONTEXT_STATS,
                    "threshold": {"score_threshold": 0.55, "source": "recall_preset", "below": 1},
                },
            ),
        ),
    ),
}
