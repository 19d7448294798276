"""An upload's bytes as texts: UTF-8 text as is, a PDF as Markdown, a zip as its members. Runs inside the parse box
(retrieval/documents/box.py), so it imports nothing of Django: what an archive inflates to is counted as it
inflates, and whatever a malformed file makes a parser raise becomes a refusal that names the file."""

import io
import lzma
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import PurePosixPath

from core.errors import InvalidArgument, PayloadTooLarge
from retrieval.documents import progress
from retrieval.documents.pdf import is_pdf
from retrieval.documents.pdf import to_markdown as pdf_markdown

SUPPORTED = "UTF-8 text (Markdown, plain text, HTML, source code) or PDF"
_CHUNK = 1 << 20
# What a member's decompressor raises on data it cannot inflate: a bad CRC or a truncated stream (BadZipFile,
# EOFError), an encrypted member (RuntimeError), a method zipfile does not know (NotImplementedError), corrupt
# deflate (zlib.error), bzip2 (OSError) or lzma data.
_MEMBER_ERRORS = (zipfile.BadZipFile, EOFError, RuntimeError, NotImplementedError, zlib.error, OSError, lzma.LZMAError)


@dataclass(frozen=True)
class UploadCaps:
    """What one upload may hold and inflate to (settings.OVSITE_MAX_UPLOAD_*; docs/operations.md, "Limits")."""

    max_files: int
    max_file_bytes: int  # one member (or a PDF stream) inflated
    max_inflated_bytes: int  # every member together, inflated
    max_pdf_pages: int


@dataclass
class UploadTexts:
    is_zip: bool
    files: list[tuple[str, str]]  # (path inside the archive, or "" for a single file; text)
    skipped: list[dict]


def decode_text(data: bytes) -> str | None:
    """UTF-8 text without NUL bytes, or None for anything binary."""
    if b"\x00" in data:
        return None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None


def document_text(data: bytes, caps: UploadCaps) -> str | None:
    """The text a file is stored as: UTF-8 text as is, a PDF as Markdown of its pages; None for other binaries.
    An unreadable PDF raises InvalidArgument, one beyond the caps PayloadTooLarge."""
    if is_pdf(data):
        return pdf_markdown(data, max_pages=caps.max_pdf_pages, max_stream_bytes=caps.max_file_bytes)
    return decode_text(data)


def _refuse_member(name: str, reason: str) -> InvalidArgument:
    return InvalidArgument(f"{name}: {reason}", loc=["temp_file_id"], details={"path": name})


def _inflate(archive: zipfile.ZipFile, info: zipfile.ZipInfo, caps: UploadCaps, inflated_so_far: int) -> bytes:
    """A member's bytes, counted as they inflate: the sizes an archive declares are the attacker's to choose."""
    chunks, size = [], 0
    try:
        with archive.open(info) as member:
            while chunk := member.read(_CHUNK):
                size += len(chunk)
                if size > caps.max_file_bytes:
                    raise PayloadTooLarge(
                        f"{info.filename} inflates to more than {caps.max_file_bytes} bytes",
                        {"path": info.filename, "limit_bytes": caps.max_file_bytes},
                    )
                if inflated_so_far + size > caps.max_inflated_bytes:
                    raise PayloadTooLarge(
                        f"the archive inflates to more than {caps.max_inflated_bytes} bytes",
                        {"path": info.filename, "limit_bytes": caps.max_inflated_bytes},
                    )
                chunks.append(chunk)
    except _MEMBER_ERRORS as exc:
        reason = "it is encrypted" if info.flag_bits & 0x1 else f"it cannot be inflated ({exc})"
        raise _refuse_member(info.filename, reason) from exc
    return b"".join(chunks)


def zip_members(data: bytes, caps: UploadCaps) -> tuple[list[tuple[str, bytes]], list[dict]]:
    """Regular files of a zip as (relative path, bytes); unsafe, corrupt or oversized entries refuse the whole
    archive, hidden files are skipped."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        infos = [info for info in archive.infolist() if not info.is_dir()]
    except (zipfile.BadZipFile, EOFError, ValueError) as exc:
        raise InvalidArgument(f"not a valid zip archive: {exc}", loc=["temp_file_id"]) from exc
    if len(infos) > caps.max_files:
        raise PayloadTooLarge(
            f"the archive holds {len(infos)} files; the limit is {caps.max_files}", {"limit_files": caps.max_files}
        )
    # The declared sizes refuse an honest oversized archive before any work; the counts in _inflate hold the rest.
    declared = sum(info.file_size for info in infos)
    if declared > caps.max_inflated_bytes:
        raise PayloadTooLarge(
            f"the archive expands to {declared} bytes; the limit is {caps.max_inflated_bytes}",
            {"limit_bytes": caps.max_inflated_bytes, "size_bytes": declared},
        )
    members, skipped, inflated = [], [], 0
    for info in infos:
        path = PurePosixPath(info.filename)
        if path.is_absolute() or ".." in path.parts or "\\" in info.filename:
            raise InvalidArgument(f"unsafe path in archive: {info.filename}", loc=["temp_file_id"])
        if any(part.startswith(".") for part in path.parts) or path.parts[0] == "__MACOSX":
            skipped.append({"path": info.filename, "reason": "hidden file"})
            continue
        body = _inflate(archive, info, caps, inflated)
        inflated += len(body)
        members.append((str(path), body))
    return members, skipped


def member_texts(members: list[tuple[str, bytes]], skipped: list[dict], caps: UploadCaps) -> list:
    """The members stored as text; the others are reported in `skipped` (a folder of documents often holds an
    image or two: refusing the whole archive for them would help no one). A member beyond a cap refuses all."""
    out = []
    for rel, data in members:
        progress.reached(rel)
        try:
            text = document_text(data, caps)
        except PayloadTooLarge:
            raise
        except InvalidArgument as exc:
            skipped.append({"path": rel, "reason": exc.message})
            continue
        if text is None:
            skipped.append({"path": rel, "reason": f"not {SUPPORTED}"})
        else:
            out.append((rel, text))
    return out


def is_zip(name: str, data: bytes) -> bool:
    """A zip by its bytes; a file that claims to be one (by name or magic) and is not is refused."""
    if zipfile.is_zipfile(io.BytesIO(data)):
        return True
    if name.lower().endswith(".zip") or data[:4] == b"PK\x03\x04":
        raise InvalidArgument(f"{name} is not a valid zip archive", loc=["temp_file_id"])
    return False


def upload_texts(name: str, data: bytes, caps: UploadCaps) -> UploadTexts:
    """An upload as texts: each text member of a zip, or the one file (path ""). A binary single file is refused."""
    progress.reached(name)
    if is_zip(name, data):
        members, skipped = zip_members(data, caps)
        return UploadTexts(True, member_texts(members, skipped, caps), skipped)
    try:
        text = document_text(data, caps)
    except PayloadTooLarge as exc:
        raise PayloadTooLarge(f"{name}: {exc.message}", exc.details) from exc
    except InvalidArgument as exc:
        raise InvalidArgument(f"{name}: {exc.message}", loc=["temp_file_id"]) from exc
    if text is None:
        raise InvalidArgument(
            f"{name}: this binary type is not supported; send {SUPPORTED}, or a zip of them",
            loc=["temp_file_id"],
            type_="unsupported_media",
        )
    return UploadTexts(False, [("", text)], [])
