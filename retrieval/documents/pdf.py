"""PDF via pypdf: the extracted text as Markdown, one `## Page N` section a page (outline titles when set).

pypdf bounds what it inflates and walks (its Configuration: stream output, outline and page-tree depth and size,
cycles); the caps below tighten the stream limits to the upload's, and the parse box (box.py) bounds the rest.
"""

import io

from pypdf import PdfReader, apply_configuration
from pypdf.errors import LimitReachedError

from core.errors import InvalidArgument, PayloadTooLarge

MAX_PAGES = 2000
MAX_STREAM_BYTES = 20 * 1024 * 1024
OUTLINE_MAX_ENTRIES = 10_000


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


def _limits(max_pages: int, max_stream_bytes: int) -> dict:
    stream = {
        name: max_stream_bytes
        for name in (
            "maximum_declared_stream_length",
            "array_based_stream_maximum_output_length",
            "jbig2_maximum_output_length",
            "lzw_maximum_output_length",
            "run_length_maximum_output_length",
            "zlib_maximum_output_length",
            "brotli_maximum_output_length",
            "image_maximum_buffer_size",
        )
    }
    return {
        **stream,
        "stream_decoding_work_maximum_length": 4 * max_stream_bytes,
        "outline_maximum_entries": OUTLINE_MAX_ENTRIES,
        # Counted while the page tree is read, before its length is known: a tree of 100,000 pages is refused
        # there, not after 300 MB of it (its intermediate /Pages nodes count too, hence the margin).
        "page_tree_maximum_entries": 2 * max_pages + 100,
        "jbig2dec_binary": None,  # no external decoder runs on an upload
    }


def _pages(reader: PdfReader, max_pages: int) -> list[str]:
    if len(reader.pages) > max_pages:
        raise PayloadTooLarge(
            f"the PDF has {len(reader.pages)} pages; the limit is {max_pages}",
            {"pages": len(reader.pages), "limit_pages": max_pages},
        )
    titles = _outline_titles(reader)
    parts = []
    for number, page in enumerate(reader.pages):
        text = page.extract_text() or ""
        # A line of page text that starts with `#` is text, not a heading of ours.
        text = "\n".join("\\" + line if line.lstrip().startswith("#") else line for line in text.splitlines())
        parts.append(f"## {titles.get(number, f'Page {number + 1}')}\n\n{text.strip()}")
    return parts


def to_markdown(data: bytes, *, max_pages: int = MAX_PAGES, max_stream_bytes: int = MAX_STREAM_BYTES) -> str:
    try:
        with apply_configuration(**_limits(max_pages, max_stream_bytes)):
            parts = _pages(PdfReader(io.BytesIO(data)), max_pages)
    except PayloadTooLarge:
        raise
    except (LimitReachedError, MemoryError) as exc:
        raise PayloadTooLarge(f"the PDF is beyond the parse limits: {exc}", {"reason": str(exc)}) from exc
    # A malformed PDF makes pypdf raise whatever its code meets (TypeError, IndexError, ZeroDivisionError,
    # NotImplementedError, RecursionError, ...): every one of them is the file's fault, not the server's.
    except Exception as exc:
        raise InvalidArgument(f"the PDF cannot be read: {type(exc).__name__}: {exc}", loc=["temp_file_id"]) from exc
    if not any(part.split("\n\n", 1)[-1].strip() for part in parts):
        raise InvalidArgument("the PDF holds no extractable text (a scanned PDF needs OCR first)", loc=["temp_file_id"])
    return "\n\n".join(parts)
