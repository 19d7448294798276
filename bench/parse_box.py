"""What the parse box costs a normal upload: each document parsed in process and in its box, paired.

    .venv/bin/python -m bench.parse_box [--rounds 40]

The process first loads what a web process holds (Django, the embedder with a first embedding, the tokenizers), so
that the direct parse runs where a server's would. Then, for each normal
document (Markdown of a few sections, a 1-page and a 30-page PDF, a zip of 20 Markdown files, and a Markdown
resource's sectioning on the write path), it alternates the direct call and the boxed one `--rounds` times and
reports both medians, the median paired difference and the ratio. Rewrites its section of bench/RESULTS.md.
"""

import io
import sys
import time
import zipfile

from bench import harness

DATABASE = "ovsite_bench_box"
SECTION_BEGIN, SECTION_END = "<!-- parse_box:begin -->", "<!-- parse_box:end -->"
PARAGRAPH = (
    "The billing workers read invoices from the queue, price each line against the tariff of its account and write "
    "the totals to the ledger; a worker that fails mid-invoice leaves it in the queue for the next one. "
)


def markdown(sections: int = 6) -> str:
    body = "".join(f"## Step {n}\n\n{PARAGRAPH * 3}\n\n" for n in range(1, sections + 1))
    return f"# Runbook\n\n{PARAGRAPH}\n\n{body}"


def pdf(pages: int) -> bytes:
    """A PDF of `pages` pages of Helvetica text, written as raw syntax with its cross-reference table."""
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b""]
    kids = []
    for n in range(pages):
        page_id, content_id = len(objects) + 1, len(objects) + 2
        kids.append(f"{page_id} 0 R")
        lines = "".join(f"({PARAGRAPH[i : i + 90]}) Tj T* " for i in range(0, len(PARAGRAPH), 90))
        stream = f"BT /F1 11 Tf 14 TL 50 780 Td (Page {n + 1}) Tj T* {lines}ET".encode()
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {content_id} 0 R "
            f"/Resources << /Font << /F1 << /Type /Font /Subtype /Type1 /BaseFont /Helvetica >> >> >> >>".encode()
        )
        objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream))
    objects[1] = f"<< /Type /Pages /Kids [{' '.join(kids)}] /Count {pages} >>".encode()
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def folder_zip(files: int) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for n in range(files):
            archive.writestr(f"docs/note-{n:02}.md", markdown(3))
    return buffer.getvalue()


def cases():
    """(name, direct call, boxed call) for each normal document."""
    from django.conf import settings

    from retrieval.documents import box, documents_sections
    from retrieval.documents.uploads import upload_texts
    from retrieval.ingest import _upload_caps, parse_upload

    caps = _upload_caps()
    uploads = {
        "Markdown, 6 sections (4 KB)": ("runbook.md", markdown().encode()),
        "PDF, 1 page": ("one.pdf", pdf(1)),
        "PDF, 30 pages": ("thirty.pdf", pdf(30)),
        "zip of 20 Markdown files": ("docs.zip", folder_zip(20)),
    }
    out = []
    for label, (name, data) in uploads.items():
        out.append(
            (
                f"upload: {label}",
                len(data),
                lambda name=name, data=data: upload_texts(name, data, caps),
                lambda name=name, data=data: parse_upload(name, data),
            )
        )
    documents = [("runbook.md", markdown())]
    limit = settings.OVSITE_SECTION_MAX_CHARS
    out.append(
        (
            "write: sectioning a Markdown resource",
            len(documents[0][1].encode()),
            lambda: documents_sections(documents, limit),
            lambda: box.run(documents_sections, documents, limit, what="runbook.md"),
        )
    )
    return out


def rss_mb() -> float:
    with open("/proc/self/status") as status:
        return int(next(line for line in status if line.startswith("VmRSS:")).split()[1]) / 1024


def run(args) -> dict:
    harness.migrated_database()  # the token counter reads the settings row
    from retrieval.embedders import embed_query
    from retrieval.recount import write_counter

    embed_query("a first query loads the embedder")  # a web process holds it: the fork copies its page tables
    write_counter().count("and the tokenizer's tables")
    results = []
    for label, size, direct, boxed in cases():
        direct(), boxed()  # first-use costs out of both sides
        times = {"direct": [], "boxed": []}
        for i in range(args.rounds):
            for side, call in (
                (("direct", direct), ("boxed", boxed)) if i % 2 == 0 else (("boxed", boxed), ("direct", direct))
            ):
                started = time.perf_counter()
                call()
                times[side].append((time.perf_counter() - started) * 1000)
        results.append({"case": label, "bytes": size, **times})
        harness.log(
            f"{label}: direct {harness.median(times['direct']):.2f} ms, boxed {harness.median(times['boxed']):.2f} ms"
        )
    return {"results": results, "rss_mb": rss_mb(), "rounds": args.rounds}


def render(run: dict, command: str) -> str:
    median = harness.median
    lines = [
        SECTION_BEGIN,
        "## parse_box — what the parse box costs a normal upload",
        "",
        *harness.heading(command, " (shared machine)"),
        f"The asking process held {run['rss_mb']:.0f} MB resident (Django, the embedder, the tokenizers), as a web "
        f"process does; each document parsed {run['rounds']} times each way, alternating. Medians, ms.",
        "",
        "| document | bytes | in process | in the box | paired difference | ratio |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for row in run["results"]:
        direct, boxed = median(row["direct"]), median(row["boxed"])
        lines.append(
            f"| {row['case']} | {row['bytes']:,} | {direct:.2f} | {boxed:.2f} | "
            f"{harness.paired_median(row['boxed'], row['direct']):.2f} | {boxed / direct:.2f} |"
        )
    lines += [
        "",
        "The box's cost is a fork of the forkserver, the arguments and the result through pipes and the child's "
        "exit: a few milliseconds whatever the document, against the seconds a runaway parse held the web process "
        "before (issue 38).",
        SECTION_END,
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    args_parser = harness.parser(__doc__, DATABASE)
    # A forkserver's child imports the asking process's main module again before its parse, by its spec's name or
    # its path (CPython 3.11's forkserver never preloads it: its preload asks spawn's data for a key spawn does not
    # use). A server's main is skipped outright (`python -m uvicorn`, `python -m celery`: a package's __main__), so
    # this bench hides its own main the same way, and its figures are a server's.
    main_module = sys.modules["__main__"]
    main_module.__spec__ = None
    del main_module.__file__
    args_parser.add_argument("--rounds", type=int, default=40)
    args = args_parser.parse_args()
    harness.configure(args.database)
    result = run(args)
    harness.publish(
        render(result, harness.command_line("bench.parse_box")), SECTION_BEGIN, SECTION_END, not args.no_write
    )


if __name__ == "__main__":
    sys.exit(main())
