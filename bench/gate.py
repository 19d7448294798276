"""The quality gate across data shapes (issue 37): every retrieval-quality suite the project keeps, each one's figures
at 400 and 1600 tokens for /find@10, /search context and /recall, beside the figures of the last commit on main
stored in bench/results/quality_gate.json, so that a change that helps one shape and hurts another is seen before it
lands.

    make bench-quality                                 # .venv/bin/python -m bench.gate
    make bench-quality BENCH_ARGS=--update             # the same, then this run's figures become the baseline
    options: --suites docs,recall,coding,conversation-generated,conversation-locomo,conversation-zh  --no-fail
             --update  --json PATH  --no-write

The suites (SUITES), each measured by its own bench's code on a gunicorn of this checkout that the bench starts with
the shipped settings, on the bench's own database of the embedded PostgreSQL; the gate runs each in a child process
of its own (`python -m bench.gate --child NAME`), so each configures its own database as its CLI does:

- `docs` (bench/quality.py `gate_docs`): resources whose answers sit deep in later sections, English and Chinese;
  the shipped section tree only (not the CLI's before/after shapes), no `detail` sent. Gold in entries (/find@10:
  among the hits) and answer in rendered (all, English, Chinese, deep in a section).
- `recall` (bench/quality.py `gate_recall`): one developer's bilingual store; answered per group EN→EN, ZH→ZH, ZH→EN,
  EN→ZH and all (/find@10: the answering item among the hits); the cross-language groups ZH→EN and EN→ZH asked
  again with `search_mode: "vector"` on the same requests, beside them as `ZH→EN (vector)` and `EN→ZH (vector)`
  (issue 37: hybrid within 1 point of vector mode); for /recall, the mean share of the budget used on unanswerable
  questions and on questions whose answering item is among /find's three best hits, and the share of unanswerable
  questions given an empty block.
- `coding` (bench/quality.py `gate_coding`): a coding agent's bilingual memory (bench/coding_corpus.py), measured by
  the recall suite's code: dated incident memories whose answers sit in their `# Details`, past the `# Summary`
  that is their abstract, runbooks and design docs with answers deep in later sections, and short preferences,
  people, services and lessons; answered per group EN→EN, ZH→ZH, ZH→EN, EN→ZH, answer in details, answer deep in a
  resource, identifier questions and all answerable, with the recall suite's vector-mode cross-language figures and
  its /recall budget and empty-block figures.
- `conversation-generated` (bench/conversation.py `gate`): the generated conversations, the CLI's seeded sample of
  400 of 516 questions, in the server's default search mode: evidence recall per question kind and over all, and the
  multi-hop all-evidence rate.
- `conversation-locomo`: the same on the public LoCoMo set, all 1,535 questions, when bench/.data/locomo10.json or
  locomo10.zip exists; otherwise skipped (not failed) with how to fetch it (CC BY-NC 4.0 keeps it out of the
  repository).
- `conversation-zh` (bench/conversation.py `gate_chinese`): three stored conversations mostly in Chinese
  (bench/corpora/conversation_zh_*.jsonl: two friends; an engineer and a code-switched AI assistant; a personal
  assistant), one memory per turn, 532 turns in 50 dated sessions, all 100 questions, validated first
  (`conversation_corpus.validate_chinese`): evidence recall per kind (single-hop, multi-hop, temporal, changed-fact)
  and over all, per question language (zh, en, mixed; the English questions asked again with `search_mode:
  "vector"`, `evidence recall: en (vector)`), the multi-hop all-evidence rate, and `changed-fact: current first`:
  of the 25 questions whose fact changed later in the conversation, the share where the newer turn is returned and
  ranked above every stale turn returned (rank: the order of the entries or hits as the server returns them). Its
  own database, `ovsite_bench_conversation_zh`; the child prints each changed fact's places.

/recall gets `{query, max_tokens}` only, exactly what the auto-recall plugin sends; /search `{query, mode: "context",
max_tokens}`; /find `{query, limit: 10}`. For each suite and metric the gate prints the figure now, the baseline's
and the delta in points, and flags a change for the worse of more than 1 point: a drop, or a rise for the metrics a
suite marks lower-is-better (budget used). It exits 1 when any is flagged (2 when a suite could not run), unless
--no-fail. It rewrites its `quality_gate` section of bench/RESULTS.md and writes this run's figures as JSON to
bench/.data/quality_gate.last.json (or --json PATH). `--update` accepts the run: it rewrites
bench/results/quality_gate.json with this run's figures, the commit and the date (suites skipped or failed keep their
stored figures), shows what changed and does not fail; that is how the baseline moves when a change lands.

Adding a suite: a function in its bench module that measures on its own server and database (configured by the
gate's child with `harness.configure(database)`) and returns `{"figures": {metric: {request: value}}, "questions":
N, "server": "...", "lower_is_better": [metric, ...]}` with values in 0–1 and requests named as REQUESTS; then a
`Suite` in SUITES, and `make bench-quality BENCH_ARGS=--update` to store its first baseline.
"""

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench import conversation, conversation_corpus, harness, quality

BASELINE = harness.ROOT / "bench" / "results" / "quality_gate.json"
LAST_RUN = harness.ROOT / "bench" / ".data" / "quality_gate.last.json"
MARKERS = ("<!-- quality_gate:begin -->", "<!-- quality_gate:end -->")
REQUESTS = ("/find@10", "context 400", "context 1600", "/recall 400", "/recall 1600")
TOLERANCE_POINTS = 1.0  # a change for the worse larger than this is flagged
LOCOMO_HOW = (
    "LoCoMo is not in bench/.data/ (its licence, CC BY-NC 4.0, keeps it out of the repository). To measure it: "
    "`git clone https://github.com/snap-research/locomo` and copy its `data/locomo10.zip` (or LoCoMo's "
    "`locomo10.json`) to `bench/.data/` of this checkout (git-ignored), then run the gate again."
)


@dataclass(frozen=True)
class Suite:
    name: str
    title: str
    database: str
    run: Callable[[], dict]  # in the child process, after harness.configure(database)
    missing: Callable[[], str | None] = lambda: None  # why it cannot run here (and how to fix that), else None


def _generated() -> dict:
    return conversation.gate(conversation_corpus.generate(seed=conversation_corpus.SEED))


def _locomo() -> dict:
    return conversation.gate(conversation_corpus.read_locomo(conversation.locomo_file()))


SUITES = (
    Suite("docs", "answers deep in resources, EN and ZH (bench.quality)", quality.DATABASE, quality.gate_docs),
    Suite(
        "recall",
        "a developer's bilingual store, EN/ZH and cross-language (bench.quality --suite recall)",
        quality.RECALL_DATABASE,
        quality.gate_recall,
    ),
    Suite(
        "coding",
        "a coding agent's bilingual memory: answers in events' Details and deep in documents (bench/coding_corpus.py)",
        quality.CODING_DATABASE,
        quality.gate_coding,
    ),
    Suite(
        "conversation-generated",
        "generated conversations, one memory per turn (bench.conversation)",
        conversation.DATABASE,
        _generated,
    ),
    Suite(
        "conversation-locomo",
        "LoCoMo conversations, one memory per turn (bench.conversation --locomo)",
        conversation.DATABASE,
        _locomo,
        lambda: None if conversation.locomo_file() else LOCOMO_HOW,
    ),
    Suite(
        "conversation-zh",
        "conversations mostly in Chinese, code-switched, with facts that change (bench/corpora/conversation_zh_*)",
        conversation.CHINESE_DATABASE,
        conversation.gate_chinese,
    ),
)
BY_NAME = {suite.name: suite for suite in SUITES}


# ------------------------------------------------------------------------------------------------------------
# Running the suites


def child(name: str, out: Path) -> int:
    """One suite, in this process: its database configured as its own CLI does, its figures to `out`."""
    suite = BY_NAME[name]
    harness.configure(suite.database)
    started = time.perf_counter()
    result = suite.run()
    result["seconds"] = round(time.perf_counter() - started, 1)
    out.write_text(json.dumps(result, ensure_ascii=False))
    return 0


def run_suite(suite: Suite) -> dict:
    """`{"status": "ok", **figures}`, or skipped (with why) or failed (with the child's exit status)."""
    reason = suite.missing()
    if reason:
        harness.log(f"{suite.name}: skipped. {reason}")
        return {"status": "skipped", "reason": reason}
    harness.log(f"{suite.name}: {suite.title}")
    with tempfile.TemporaryDirectory(prefix="ovsite-gate-") as tmp:
        out = Path(tmp) / "figures.json"
        started = time.perf_counter()
        code = subprocess.call(
            [sys.executable, "-m", "bench.gate", "--child", suite.name, "--child-out", str(out)], cwd=harness.ROOT
        )
        if code or not out.exists():
            harness.log(f"{suite.name}: FAILED (exit status {code})")
            return {"status": "failed", "reason": f"The suite's process exited with status {code}; see above."}
        result = json.loads(out.read_text())
    harness.log(f"{suite.name}: done in {time.perf_counter() - started:.0f} s")
    return {"status": "ok", **result}


def git_state() -> dict:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=harness.ROOT, capture_output=True, text=True).stdout.strip()

    return {"commit": git("rev-parse", "HEAD"), "dirty": bool(git("status", "--porcelain", "--untracked-files=no"))}


# ------------------------------------------------------------------------------------------------------------
# Comparing


def _rounded(figures: dict) -> dict:
    return {
        metric: {request: None if value is None else round(value, 4) for request, value in values.items()}
        for metric, values in figures.items()
    }


def compare(result: dict, stored: dict | None) -> list[dict]:
    """One row per metric and request, now beside the stored figure: `delta` in points, `worse` when the change
    for the worse passes the tolerance (a rise, for a metric the suite marks lower-is-better)."""
    now = _rounded(result.get("figures", {}))
    base = (stored or {}).get("figures", {})
    lower = set(result.get("lower_is_better", [])) | set((stored or {}).get("lower_is_better", []))
    rows = []
    for metric in list(now) + [m for m in base if m not in now]:
        for request in sorted(
            set(now.get(metric, {})) | set(base.get(metric, {})),
            key=lambda r: (REQUESTS.index(r) if r in REQUESTS else len(REQUESTS), r),
        ):
            value, before = now.get(metric, {}).get(request), base.get(metric, {}).get(request)
            delta = None if value is None or before is None else round((value - before) * 100, 1)
            sign = 1 if metric in lower else -1
            rows.append(
                {
                    "metric": metric,
                    "request": request,
                    "now": value,
                    "baseline": before,
                    "delta": delta,
                    "lower_is_better": metric in lower,
                    "worse": delta is not None and sign * delta > TOLERANCE_POINTS,
                }
            )
    return rows


# ------------------------------------------------------------------------------------------------------------
# The section


def _short(state: dict) -> str:
    commit = state.get("commit") or "unknown commit"
    return f"{commit[:7]}{' + uncommitted changes' if state.get('dirty') else ''}"


def _points(delta: float) -> str:
    return f"{delta:+.1f}".replace("-", "−")


def _cell(row: dict) -> str:
    if row["now"] is None and row["baseline"] is None:
        return "—"
    now = "—" if row["now"] is None else f"{row['now']:.3f}"
    if row["baseline"] is None:
        return f"{now} (new)"
    delta = "" if row["delta"] is None else f", {_points(row['delta'])}"
    return f"{now} ({row['baseline']:.3f}{delta})" + (" **▼**" if row["worse"] else "")


def render(results: dict, baseline: dict, state: dict, command: str, wall_s: float, updated: bool) -> tuple:
    """The section, and the flagged rows as (suite, row)."""
    stored = baseline.get("suites", {})
    lines = [
        MARKERS[0],
        "## quality_gate — retrieval quality across data shapes, beside the stored baseline",
        "",
        *harness.heading(command, " (shared machine)"),
        f"Tree: {_short(state)}. Baseline: `bench/results/quality_gate.json`, "
        + (f"{_short(baseline)} of {baseline.get('date', '?')}" if baseline else "none stored yet")
        + f". Run time {wall_s:.0f} s"
        + "".join(
            f"; {name} {r['seconds']:.0f} s" for name, r in results.items() if r["status"] == "ok" and "seconds" in r
        )
        + ".  ",
        "Each cell: the figure now (the baseline's, the change in points); **▼** a change for the worse of more "
        f"than {TOLERANCE_POINTS:g} point (a drop, or a rise where the metric says lower is better). Requests, each "
        'with the server\'s defaults: `/find {query, limit: 10}`, `/search {query, mode: "context", max_tokens}`, '
        "`/recall {query, max_tokens}` (what the auto-recall plugin sends).",
        "",
    ]
    flagged = []
    for name, result in results.items():
        suite = BY_NAME[name]
        old = stored.get(name)
        if result["status"] != "ok":
            kept = f" Its stored figures ({_short(old)}) stay as they are." if old else ""
            lines += [f"### {name}: {result['status']}", "", f"{suite.title}. {result['reason']}{kept}", ""]
            continue
        questions = f"{result['questions']} questions"
        if old and old.get("questions") not in (None, result["questions"]):
            questions += f" (baseline: {old['questions']}: deltas compare different question sets)"
        rows = compare(result, old)
        flagged += [(name, row) for row in rows if row["worse"]]
        requests = [r for r in REQUESTS if any(row["request"] == r for row in rows)]
        requests += sorted({row["request"] for row in rows} - set(requests))
        lines += [
            f"### {name}",
            "",
            f"{suite.title}; {questions}. Server: {result['server']}.",
            "",
            "| metric | " + " | ".join(requests) + " |",
            "|---|" + "---:|" * len(requests),
        ]
        for metric in dict.fromkeys(row["metric"] for row in rows):
            cells = {row["request"]: row for row in rows if row["metric"] == metric}
            label = metric + (" (lower is better)" if any(r["lower_is_better"] for r in cells.values()) else "")
            lines.append(f"| {label} | " + " | ".join(_cell(cells[r]) if r in cells else "—" for r in requests) + " |")
        lines.append("")
    lines.append(
        "Flagged: "
        + (
            "; ".join(
                f"{name} {row['metric']}, {row['request']}: {row['baseline']:.3f} → {row['now']:.3f} "
                f"({_points(row['delta'])})"
                for name, row in flagged
            )
            if flagged
            else "none"
        )
        + "."
        + "".join(f" {name} did not run." for name, result in results.items() if result["status"] == "failed")
        + (" This run is now the baseline (`--update`)." if updated else "")
    )
    lines += [MARKERS[1], ""]
    return "\n".join(lines), flagged


# ------------------------------------------------------------------------------------------------------------
# The baseline


def record(results: dict, state: dict, date: str) -> dict:
    """This run's figures as the JSON the gate stores: per suite its figures (rounded), question count, run time."""
    return {
        **state,
        "date": date,
        "suites": {
            name: {
                **state,
                "date": date,
                "questions": result["questions"],
                "seconds": result.get("seconds"),
                "lower_is_better": result.get("lower_is_better", []),
                "figures": _rounded(result["figures"]),
            }
            for name, result in results.items()
            if result["status"] == "ok"
        },
    }


def updated_baseline(baseline: dict, run: dict) -> dict:
    """The stored baseline with this run's suites replaced; a suite this run skipped or failed keeps its figures."""
    return {
        "about": "bench/gate.py's baseline: the figures of the last commit on main (`make bench-quality "
        "BENCH_ARGS=--update` rewrites it); each suite says which commit measured it.",
        **{key: value for key, value in run.items() if key != "suites"},
        "suites": {**baseline.get("suites", {}), **run["suites"]},
    }


def _shown(path: Path) -> str:
    """`path` as a reader at the repository root names it."""
    path = path.resolve()
    return str(path.relative_to(harness.ROOT) if path.is_relative_to(harness.ROOT) else path)


def write_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n")
    tmp.replace(path)


def main() -> int:
    parser = harness.parser(__doc__)
    parser.add_argument(
        "--suites",
        default=",".join(BY_NAME),
        help=f"comma-separated, of {', '.join(BY_NAME)} (default: all)",
    )
    parser.add_argument(
        "--update",
        action="store_true",
        help="store this run's figures as the baseline, bench/results/quality_gate.json",
    )
    parser.add_argument("--no-fail", action="store_true", help="exit 0 even when a drop is flagged")
    parser.add_argument(
        "--json",
        type=Path,
        default=LAST_RUN,
        help="where this run's figures go (default bench/.data/quality_gate.last.json)",
    )
    parser.add_argument("--child", choices=list(BY_NAME), help=argparse.SUPPRESS)
    parser.add_argument("--child-out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child, args.child_out)
    names = list(dict.fromkeys(n.strip() for n in args.suites.split(",") if n.strip()))
    if not names or set(names) - set(BY_NAME):
        parser.error(f"--suites takes {', '.join(BY_NAME)}")
    if os.environ.get("DATABASE_URL"):
        parser.error("DATABASE_URL is set; the suites run only on the embedded PostgreSQL, each on its own database")
    started = time.perf_counter()
    command = harness.command_line("bench.gate")
    baseline = json.loads(BASELINE.read_text()) if BASELINE.exists() else {}
    state, date = git_state(), f"{dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC"
    results = {name: run_suite(BY_NAME[name]) for name in names}
    section, flagged = render(results, baseline, state, command, time.perf_counter() - started, args.update)
    harness.publish(section, *MARKERS, write=not args.no_write)
    run = record(results, state, date)
    write_json(args.json, run)
    print(f"This run's figures: {_shown(args.json)}")
    if args.update:
        write_json(BASELINE, updated_baseline(baseline, run))
        print(f"Baseline updated: {_shown(BASELINE)}")
    failed = [name for name, result in results.items() if result["status"] == "failed"]
    if failed:
        print(f"Suites that did not run: {', '.join(failed)}", file=sys.stderr)
        return 2
    if flagged and not (args.no_fail or args.update):
        print(f"{len(flagged)} figure(s) worse by more than {TOLERANCE_POINTS:g} point; see Flagged", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
