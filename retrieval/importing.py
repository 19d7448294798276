"""`manage.py import_dir`: a local folder of text files and PDFs becomes resources under one URI."""

from pathlib import Path

from core.auth import Caller
from core.errors import InvalidArgument, PayloadTooLarge
from retrieval.documents.uploads import SUPPORTED
from retrieval.ingest import file_text
from retrieval.services import FileWrite, write_files
from retrieval.uris import parse_uri

BATCH_FILES = 200


def local_files(root: Path) -> list[Path]:
    return sorted(
        p
        for p in root.rglob("*")
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)
    )


def import_directory(*, caller: Caller, root: Path, to: str, progress=None) -> dict:
    """Writes every document below `root` under `to`, in atomic batches; other files are reported, with why."""
    base = parse_uri(to, user_id=caller.user_id).uri
    files = local_files(root)
    skipped, written, batch = [], 0, []

    def flush():
        nonlocal written, batch
        if batch:
            write_files(caller=caller, writes=batch, kind="import_dir")
            written += len(batch)
            if progress:
                progress(len(batch))
            batch = []

    for path in files:
        rel = path.relative_to(root).as_posix()
        try:
            text = file_text(rel, path.read_bytes())
        except (InvalidArgument, PayloadTooLarge) as exc:
            skipped.append({"path": rel, "reason": exc.message})
            continue
        if text is None:
            skipped.append({"path": rel, "reason": f"not {SUPPORTED}"})
            continue
        batch.append(FileWrite(f"{base}/{rel}", text))
        if len(batch) >= BATCH_FILES:
            flush()
    flush()
    return {"root_uri": base, "written": written, "skipped": skipped}
