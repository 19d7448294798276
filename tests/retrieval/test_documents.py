"""Section trees of documents (issue 10): splitting, formats, names."""

import pytest

from core.errors import InvalidArgument
from retrieval.documents import sections_for
from retrieval.documents.pdf import to_markdown
from retrieval.documents.tree import SECTION_MAX_CHARS, section_names
from retrieval.summaries import ABSTRACT_MAX_CHARS, file_abstract

FILLER = "The workers read the queue and write their results to the store. " * 5

RUNBOOK = f"""---
title: Worker runbook
owner: ops
---
# Worker runbook

## Overview
{FILLER}

## Restart the workers
{FILLER}
```bash
# this comment is not a heading
systemctl restart worker@*
```
### Check the queue depth
{FILLER} The queue depth must fall below 40 within five minutes.
"""


def test_nested_headings_fences_and_front_matter():
    sections = sections_for("runbook.md", RUNBOOK)
    titles = [s.title for s in sections]
    # The body-less H1 is merged into the next section; the fenced `#` line stays inside its section.
    assert titles == ["Worker runbook", "Restart the workers", "Check the queue depth"]
    assert "# this comment is not a heading" in sections[1].text
    assert "owner: ops" not in "".join(s.text for s in sections)
    assert section_names(sections) == ["01-worker-runbook", "02-restart-the-workers", "03-check-the-queue-depth"]


def test_names_are_stable_across_parses():
    assert section_names(sections_for("a.md", RUNBOOK)) == section_names(sections_for("a.md", RUNBOOK))


def test_cjk_without_spaces_splits_at_sentences():
    text = "# 重启\n\n" + "工作进程读取队列并把结果写入存储。" * 600
    sections = sections_for("zh.md", text)
    assert len(sections) > 1
    assert all(len(s.text) <= SECTION_MAX_CHARS for s in sections)
    assert all(s.text.endswith("。") for s in sections)
    assert "".join(s.text.replace("\n", "") for s in sections).count("工作进程") == 600


def test_200_kb_document():
    text = "".join(f"## Part {n}\n\n" + ("Paragraph text that goes on. " * 30 + "\n\n") * 8 for n in range(90))
    assert len(text) > 200_000
    sections = sections_for("big.md", text)
    assert all(len(s.text) <= SECTION_MAX_CHARS for s in sections)
    assert len(sections) >= 90
    assert sum(len(s.text) for s in sections) >= len(text) * 0.95
    names = section_names(sections)
    assert len(set(names)) == len(names) and names[0].startswith("0001-")


def test_a_long_section_splits_into_parts_its_abstract_covers_each_under_its_heading():
    paragraphs = [
        f"Paragraph {n} explains step {n} of the failover in some detail, with its checks." for n in range(12)
    ]
    text = "# Failover\n\n" + "\n\n".join(paragraphs) + "\n\nThe standby takes over within 90 seconds.\n"
    parts = sections_for("runbook.md", text)
    assert len(parts) > 1 and all(len(p.text) <= SECTION_MAX_CHARS for p in parts)
    # Each part can be served whole at a resource's abstract cap (RFC §3.4), the last sentence included.
    assert all(file_abstract(p.text) == " ".join(p.text.split()) for p in parts)
    assert "within 90 seconds" in file_abstract(parts[-1].text)
    assert all(p.text.startswith("# Failover\n\n") for p in parts)
    assert [p.title for p in parts][:2] == [f"Failover (1/{len(parts)})", f"Failover (2/{len(parts)})"]
    assert "\n\n".join(p.text.split("\n\n", 1)[1] for p in parts) == text.split("\n\n", 1)[1].strip()


def test_the_section_cap_is_the_abstract_length_and_code_keeps_whole_functions():
    assert SECTION_MAX_CHARS == ABSTRACT_MAX_CHARS
    body = "\n".join(f"    total += {n}  # step {n} of the long loop body" for n in range(60))
    source = f"def long_function(total):\n{body}\n    return total\n\n\ndef short():\n    return 1\n"
    sections = sections_for("job.py", source)
    assert [s.title for s in sections] == ["long_function", "short"]
    assert len(sections[0].text) > SECTION_MAX_CHARS


def test_plain_text_has_markdown_headings_and_other_text_only_the_size_cap():
    notes = FILLER + "\n\n# Install\n\n" + FILLER + "\n\n# Run\n\n" + FILLER
    # The lead text before the first heading is a section of its own, and every section comes once.
    assert [s.title for s in sections_for("notes.txt", notes)] == ["introduction", "Install", "Run"]
    assert [s.title for s in sections_for("notes.txt", "A short lead.\n\n" + notes.split("\n\n", 1)[1])] == [
        "introduction",
        "Run",
    ]  # a lead too short to stand alone is merged into the next section
    config = "# the queue settings\nqueue:\n  prefetch: 20\n# the store\nstore: postgres\n"
    assert [(s.title, s.text) for s in sections_for("app.yaml", config)] == [("app.yaml", config.strip())]
    long_config = "\n\n".join(f"# block {n}\nkey_{n}: {FILLER}" for n in range(4))
    parts = sections_for("app.yaml", long_config)
    assert len(parts) > 1 and all(len(p.text) <= SECTION_MAX_CHARS for p in parts)
    assert "\n\n".join(p.text for p in parts) == long_config.strip()  # a `#` comment is not a heading to repeat


def test_python_skeleton():
    source = '''"""Worker helpers."""
import os


class Worker(Base):
    """Runs jobs from the queue."""

    def restart(self, graceful: bool = True) -> None:
        """Restarts the worker process."""
        os.kill(self.pid, 1)


async def drain(queue, timeout=5.0):
    return await queue.join()
'''
    sections = sections_for("worker.py", source)
    assert [s.title for s in sections] == ["module", "Worker", "drain"]
    assert sections[1].text.startswith(
        'class Worker(Base):\n    """Runs jobs from the queue."""\n    def restart(self, graceful: bool=True) -> None:'
    )
    assert sections[2].text.startswith("async def drain(queue, timeout=5.0):")
    with pytest.raises(InvalidArgument):
        sections_for("bad.py", "def broken(:\n")


def test_html_headings():
    page = f"""<html><head><title>Guide</title><style>h1{{}}</style></head><body>
<h1>Guide</h1><p>{FILLER}</p><h2>Restart</h2><ul><li><p>{FILLER}</p></li></ul><script>var x=1</script>
<h2>Rollback</h2><p>{FILLER} Roll back with deploy --previous.</p></body></html>"""
    sections = sections_for("guide.html", page)
    assert [s.title for s in sections] == ["Guide", "Restart", "Rollback"]
    assert sections[2].text.startswith("## Rollback") and "deploy --previous" in sections[2].text
    assert "var x" not in "".join(s.text for s in sections)
    assert sections[1].text.count("The workers read") == 5  # li>p counted once


def _pdf(pages: list[str]) -> bytes:
    """A minimal PDF with one Helvetica text line a page, with a correct xref table."""
    objects = ["<< /Type /Catalog /Pages 2 0 R >>", None, "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    kids = []
    for text in pages:
        stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
        objects.append(f"<< /Length {len(stream)} >>\nstream\n{stream.decode()}\nendstream")
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {len(objects)} 0 R "
            "/Resources << /Font << /F1 3 0 R >> >> >>"
        )
        kids.append(f"{len(objects)} 0 R")
    objects[1] = f"<< /Type /Pages /Kids [{' '.join(kids)}] /Count {len(kids)} >>"
    out, offsets = b"%PDF-1.4\n", []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n{body}\nendobj\n".encode()
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += "".join(f"{offset:010d} 00000 n \n" for offset in offsets).encode()
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return out


def test_pdf_pages_become_sections():
    text = to_markdown(_pdf(["Install the agent first.", "# Restart the workers with systemctl."]))
    sections = sections_for("manual.pdf", text)
    assert "Install the agent first." in text and "\\# Restart the workers" in text
    assert [s.title for s in sections] == ["Page 1"]  # two short pages merged into one section
    assert "Page 2" in sections[0].text


def test_unreadable_pdf_is_refused():
    with pytest.raises(InvalidArgument):
        to_markdown(b"%PDF-1.4\nnot really a pdf")
    with pytest.raises(InvalidArgument, match="no extractable text"):
        to_markdown(_pdf([""]))
