"""Resources and skills from uploads: a text file or a zip of a folder becomes files under one root URI."""

import hashlib
import re
import uuid
from pathlib import Path, PurePosixPath

import yaml
from django.conf import settings

from core.auth import Caller
from core.errors import InvalidArgument, NotFound, PayloadTooLarge
from retrieval.documents import box
from retrieval.documents.markdown import front_matter, load_front_matter
from retrieval.documents.pdf import is_pdf
from retrieval.documents.uploads import UploadCaps, UploadTexts, decode_text, document_text, is_zip, upload_texts
from retrieval.selectors import visible_nodes
from retrieval.services import FileWrite, write_files
from retrieval.uris import parse_uri

_TEMP_ID = re.compile(r"^[0-9a-f]{32}$")
_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._ -]+")
_SKILL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def _account_upload_dir(caller: Caller) -> Path:
    """The caller's own folder: an upload is its uploader's until used, not every user's of the account. The user
    id is hashed into the name: a root caller's X-OpenViking-User is any string."""
    user = hashlib.sha256(caller.user_id.encode()).hexdigest()[:32]
    folder = Path(settings.OVSITE_UPLOAD_DIR) / str(caller.account_id) / user
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def save_temp_upload(*, caller: Caller, name: str, chunks) -> dict:
    temp_id = uuid.uuid4().hex
    target = _account_upload_dir(caller) / temp_id
    size = 0
    with open(target, "wb") as out:
        for chunk in chunks:
            size += len(chunk)
            if size > settings.OVSITE_MAX_UPLOAD_BYTES:
                out.close()
                target.unlink(missing_ok=True)
                raise PayloadTooLarge(
                    f"upload exceeds {settings.OVSITE_MAX_UPLOAD_BYTES} bytes",
                    {"limit_bytes": settings.OVSITE_MAX_UPLOAD_BYTES},
                )
            out.write(chunk)
    (target.with_suffix(".name")).write_text(_UNSAFE_NAME.sub("_", name)[:200] or "upload")
    return {"temp_file_id": temp_id, "size": size}


def _take_upload(caller: Caller, temp_id: str) -> tuple[str, bytes]:
    if not _TEMP_ID.match(temp_id or ""):
        raise InvalidArgument("temp_file_id is not an id returned by temp_upload", loc=["temp_file_id"])
    path = _account_upload_dir(caller) / temp_id
    if not path.exists():
        raise NotFound(temp_id, "temp_file")
    name_path = path.with_suffix(".name")
    name = name_path.read_text() if name_path.exists() else "upload"
    return name, path.read_bytes()


def _drop_upload(caller: Caller, temp_id: str) -> None:
    path = _account_upload_dir(caller) / temp_id
    path.unlink(missing_ok=True)
    path.with_suffix(".name").unlink(missing_ok=True)


def _upload_caps() -> UploadCaps:
    return UploadCaps(
        max_files=settings.OVSITE_MAX_UPLOAD_FILES,
        max_file_bytes=settings.OVSITE_MAX_UPLOAD_BYTES,
        max_inflated_bytes=settings.OVSITE_MAX_UPLOAD_BYTES * 5,
        max_pdf_pages=settings.OVSITE_PDF_MAX_PAGES,
    )


def parse_upload(name: str, data: bytes) -> UploadTexts:
    """An upload's texts, parsed in the box (retrieval/documents/box.py): no parser runs unbounded here."""
    return box.run(upload_texts, name, data, _upload_caps(), what=name)


def file_text(name: str, data: bytes) -> str | None:
    """One local file's text (manage.py import_dir): a PDF parsed in the box, UTF-8 text as is, None for other
    binaries (a zip among them: a folder is imported file by file)."""
    return box.run(document_text, data, _upload_caps(), what=name) if is_pdf(data) else decode_text(data)


def add_resource(
    *,
    caller: Caller,
    temp_file_id: str,
    to: str | None,
    parent: str | None,
    source_name: str | None,
    tags: list[str] | None,
) -> dict:
    """`POST /api/v1/resources`: a text file or a zip of a folder, placed under `viking://resources/{name}`."""
    upload_name, data = _take_upload(caller, temp_file_id)
    name = _UNSAFE_NAME.sub("_", (source_name or upload_name).strip()) or "resource"
    parsed = parse_upload(name, data)
    if parsed.is_zip and name.lower().endswith(".zip"):
        name = name[:-4]
    if to:
        root = parse_uri(to, user_id=caller.user_id).uri
    else:
        base = parse_uri(parent, user_id=caller.user_id).uri if parent else "viking://resources"
        root = f"{base}/{name}"
    skipped = parsed.skipped
    files = [(f"{root}/{rel}" if rel else root, text) for rel, text in parsed.files]
    if not files:
        raise InvalidArgument("the upload holds no text files", loc=["temp_file_id"], details={"skipped": skipped})
    tag_tuple = tuple(tags) if tags is not None else None
    written = write_files(
        caller=caller, writes=[FileWrite(uri, text, "replace", tag_tuple) for uri, text in files], kind="add_resource"
    )
    _drop_upload(caller, temp_file_id)
    # `source_path` and `errors` are OpenViking's fields: the client's path is never sent, so its name stands in;
    # a failing upload raises instead of listing errors, so the list is always empty.
    return {
        "status": "success",
        "root_uri": root,
        "source_path": source_name or upload_name,
        "errors": [],
        "task_id": written["task_id"],
        "files": len(files),
        "changed": len(written["changed"]),
        "skipped": skipped,
    }


def skill_front_matter(text: str) -> dict:
    try:
        return load_front_matter(text)[0]
    except (yaml.YAMLError, ValueError) as exc:
        raise InvalidArgument(f"SKILL.md front matter is not valid YAML: {exc}", loc=["data"]) from exc


def _skill_folder(texts: dict[str, str]) -> tuple[str, list[tuple[str, str]]]:
    """(SKILL.md, the other files by their path inside its folder) of a zipped skill folder; a file outside
    that folder would land nowhere the skill can name, so it refuses the archive."""
    skill_md = min((rel for rel in texts if PurePosixPath(rel).name == "SKILL.md"), key=len, default=None)
    if skill_md is None:
        raise InvalidArgument("the skill archive has no SKILL.md", loc=["temp_file_id"])
    folder = PurePosixPath(skill_md).parent
    outside = sorted(rel for rel in texts if folder.parts and not PurePosixPath(rel).is_relative_to(folder))
    if outside:
        raise InvalidArgument(
            f"the skill archive holds files outside {folder}/, the folder of its SKILL.md: {', '.join(outside[:3])}",
            loc=["temp_file_id"],
            details={"outside": outside[:20]},
        )
    text = texts.pop(skill_md)
    return text, [(str(PurePosixPath(rel).relative_to(folder)), body) for rel, body in texts.items()]


def _skill_from_data(data) -> tuple[str, str]:
    """(name, SKILL.md text) from a SKILL.md string or a `{name, description, content}` object."""
    if isinstance(data, dict):
        name, description = data.get("name"), data.get("description", "")
        body = data.get("content") or data.get("body") or ""
        if not isinstance(name, str) or not isinstance(description, str) or not isinstance(body, str):
            raise InvalidArgument("a skill object needs string name, description and content", loc=["data"])
        return name, f"---\nname: {name}\ndescription: {description}\n---\n\n{body}"
    if isinstance(data, str):
        name = skill_front_matter(data).get("name")
        if not isinstance(name, str):
            raise InvalidArgument("SKILL.md needs front matter with a name", loc=["data"])
        return name, data
    raise InvalidArgument("data must be SKILL.md text or a skill object", loc=["data"])


def add_skill(*, caller: Caller, data=None, temp_file_id: str | None = None, target_uri: str | None = None) -> dict:
    extra: list[tuple[str, str]] = []
    skipped: list[dict] = []
    if temp_file_id:
        upload_name, raw = _take_upload(caller, temp_file_id)
        if is_zip(upload_name, raw):
            parsed = parse_upload(upload_name, raw)
            texts, skipped = dict(parsed.files), parsed.skipped
            data, extra = _skill_folder(texts)
        else:
            data = decode_text(raw)
            if data is None:
                raise InvalidArgument(f"{upload_name} is not a UTF-8 SKILL.md", loc=["temp_file_id"])
    name, skill_md = _skill_from_data(data)
    if not _SKILL_NAME.match(name):
        raise InvalidArgument("a skill name is 1-64 letters, digits, '_', '.' or '-'", loc=["data", "name"])
    # As in OpenViking, target_uri names a skills root; the skill gets its own folder below it.
    skills_root = parse_uri(target_uri or "viking://~/skills", user_id=caller.user_id)
    if skills_root.context_type != "skill":
        raise InvalidArgument(f"{skills_root.uri} is not a skills folder (…/skills/…)", loc=["target_uri"])
    root = f"{skills_root.uri}/{name}"
    writes = [FileWrite(f"{root}/SKILL.md", skill_md)] + [FileWrite(f"{root}/{rel}", text) for rel, text in extra]
    written = write_files(caller=caller, writes=writes, kind="add_skill")
    if temp_file_id:
        _drop_upload(caller, temp_file_id)
    return {
        "status": "success",
        "name": name,
        "uri": root,
        "root_uri": root,
        "auxiliary_files": len(extra),
        "task_id": written["task_id"],
        "skipped": skipped,
    }


def _skill_summary(row: dict) -> dict:
    """One skill as OpenViking lists it (plus ovsite's abstract and processing state)."""
    # A SKILL.md written through content/write was never checked: its listing shows what parses, never fails.
    meta = front_matter(row["content"])[0]
    root = row["uri"].rsplit("/", 1)[0]
    return {
        "type": "skill",
        "name": meta.get("name") or root.rsplit("/", 1)[-1],
        "uri": root,
        "root_uri": root,
        "skill_md_uri": row["uri"],
        "description": meta.get("description", ""),
        "tags": meta.get("tags") or row["tags"],
        "allowed_tools": meta.get("allowed_tools") or meta.get("allowed-tools") or [],
        "abstract": row["abstract"],
        "state": row["state"],
    }


def list_skills(*, caller: Caller, node_limit: int = 1000, target_uri: str | None = None) -> dict:
    """`GET /api/v1/skills`: `{root_uri, skills, total}` below `target_uri`, else `{root_uris, skills, total}`."""
    # A SKILL.md of several sections is a document node (a directory that keeps the whole text).
    rows = visible_nodes(caller).filter(context_type="skill", uri__endswith="/SKILL.md").exclude(content_hash="")
    if target_uri:
        root = parse_uri(target_uri, user_id=caller.user_id).uri
        rows = rows.filter(uri__startswith=root + "/")
    skills = [
        _skill_summary(row)
        for row in rows.order_by("uri").values("uri", "abstract", "content", "tags", "state")[:node_limit]
    ]
    if target_uri:
        return {"root_uri": root, "skills": skills, "total": len(skills)}
    # The caller's own skills root first (where add_skill puts skills), then the other roots that hold any.
    own = parse_uri("viking://~/skills", user_id=caller.user_id).uri
    others = sorted({s["root_uri"].rsplit("/", 1)[0] for s in skills} - {own})
    return {"root_uris": [own, *others], "skills": skills, "total": len(skills)}
