"""PDF via pypdf: the extracted text as Markdown, one `## Page N` section a page (outline titles when set)."""

import io

from pypdf import PdfReader
from pypdf.errors import PdfReadError

from core.errors import InvalidArgument


def is_pdf(data: bytes) -> bool:
    return data[:5] == b"%PDF-"


def _outline_titles(reader: PdfReader) -> dict[int, str]:
    """The first top-level bookmark title that points at each page."""
    titles: dict[int, str] = {}
    for item in reader.outline:
        if isinstance(item, list):
            continue
        page = reader.get_destination_page_number(item)
        titles.setdefault(page, str(item.title))
    return titles


def to_markdown(data: bytes) -> str:
    try:
        reader = PdfReader(io.BytesIO(data))
        titles = _outline_titles(reader)
        parts = []
        for number, page in enumerate(reader.pages):
            text = page.extract_text() or ""
            # A line of page text that starts with `#` is text, not a heading of ours.
            text = "\n".join("\\" + line if line.lstrip().startswith("#") else line for line in text.splitlines())
            parts.append(f"## {titles.get(number, f'Page {number + 1}')}\n\n{text.strip()}")
    except (PdfReadError, ValueError, KeyError) as exc:
        raise InvalidArgument(f"the PDF cannot be read: {exc}", loc=["temp_file_id"]) from exc
    if not any(part.split("\n\n", 1)[-1].strip() for part in parts):
        raise InvalidArgument("the PDF holds no extractable text (a scanned PDF needs OCR first)", loc=["temp_file_id"])
    return "\n\n".join(parts)
