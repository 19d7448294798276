"""Resources and skills from uploads: a text file or a zip of a folder becomes files under one root URI."""

import io
import re
import uuid
import zipfile
from pathlib import Path, PurePosixPath

import yaml
from django.conf import settings

from core.auth import Caller
from core.errors import InvalidArgument, NotFound, PayloadTooLarge
from retrieval.documents.pdf import is_pdf
from retrieval.documents.pdf import to_markdown as pdf_markdown
from retrieval.selectors import visible_nodes
from retrieval.services import FileWrite, write_files
from retrieval.uris import parse_uri

_TEMP_ID = re.compile(r"^[0-9a-f]{32}$")
_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._ -]+")
_FRONT_MATTER = re.compile(r"\A---\n(.*?)\n---\n?", re.DOTALL)
_SKILL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def _account_upload_dir(caller: Caller) -> Path:
    folder = Path(settings.OVSITE_UPLOAD_DIR) / str(caller.account_id)
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


def decode_text(data: bytes) -> str | None:
    """UTF-8 text without NUL bytes, or None for anything binary."""
    if b"\x00" in data:
        return None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None


SUPPORTED = "UTF-8 text (Markdown, plain text, HTML, source code) or PDF"


def document_text(data: bytes) -> str | None:
    """The text a file is stored as: UTF-8 text as is, a PDF as Markdown of its pages; None for other binaries.
    An unreadable PDF raises InvalidArgument."""
    if is_pdf(data):
        return pdf_markdown(data)
    return decode_text(data)


def _zip_members(data: bytes) -> tuple[list[tuple[str, bytes]], list[dict]]:
    """Regular files of a zip as (relative path, bytes); unsafe or oversized entries are refused, not skipped."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile as exc:
        raise InvalidArgument(f"not a valid zip archive: {exc}", loc=["temp_file_id"]) from exc
    infos = [info for info in archive.infolist() if not info.is_dir()]
    if len(infos) > settings.OVSITE_MAX_UPLOAD_FILES:
        raise PayloadTooLarge(
            f"the archive holds {len(infos)} files; the limit is {settings.OVSITE_MAX_UPLOAD_FILES}",
            {"limit_files": settings.OVSITE_MAX_UPLOAD_FILES},
        )
    expanded = sum(info.file_size for info in infos)
    if expanded > settings.OVSITE_MAX_UPLOAD_BYTES * 5:
        raise PayloadTooLarge(
            f"the archive expands to {expanded} bytes; the limit is {settings.OVSITE_MAX_UPLOAD_BYTES * 5}",
            {"limit_bytes": settings.OVSITE_MAX_UPLOAD_BYTES * 5, "size_bytes": expanded},
        )
    members, skipped = [], []
    for info in infos:
        path = PurePosixPath(info.filename)
        if path.is_absolute() or ".." in path.parts or "\\" in info.filename:
            raise InvalidArgument(f"unsafe path in archive: {info.filename}", loc=["temp_file_id"])
        if any(part.startswith(".") for part in path.parts) or path.parts[0] == "__MACOSX":
            skipped.append({"path": info.filename, "reason": "hidden file"})
            continue
        members.append((str(path), archive.read(info)))
    return members, skipped


def _texts(items: list[tuple[str, bytes]], skipped: list[dict]) -> list[tuple[str, str]]:
    """The members stored as text; the others are reported in `skipped` (a folder of documents often holds an
    image or two: refusing the whole archive for them would help no one)."""
    out = []
    for rel, data in items:
        try:
            text = document_text(data)
        except InvalidArgument as exc:
            skipped.append({"path": rel, "reason": exc.message})
            continue
        if text is None:
            skipped.append({"path": rel, "reason": f"not {SUPPORTED}"})
        else:
            out.append((rel, text))
    return out


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
    is_zip = zipfile.is_zipfile(io.BytesIO(data))
    if not is_zip and (name.lower().endswith(".zip") or data[:4] == b"PK\x03\x04"):
        raise InvalidArgument(f"{name} is not a valid zip archive", loc=["temp_file_id"])
    if is_zip and name.lower().endswith(".zip"):
        name = name[:-4]
    if to:
        root = parse_uri(to, user_id=caller.user_id).uri
    else:
        base = parse_uri(parent, user_id=caller.user_id).uri if parent else "viking://resources"
        root = f"{base}/{name}"
    skipped: list[dict] = []
    if is_zip:
        members, skipped = _zip_members(data)
        files = [(f"{root}/{rel}", text) for rel, text in _texts(members, skipped)]
    else:
        text = document_text(data)
        if text is None:
            raise InvalidArgument(
                f"{name}: this binary type is not supported; send {SUPPORTED}, or a zip of them",
                loc=["temp_file_id"],
                type_="unsupported_media",
            )
        files = [(root, text)]
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
    match = _FRONT_MATTER.match(text)
    if not match:
        return {}
    try:
        meta = yaml.safe_load(match.group(1))
    except yaml.YAMLError as exc:
        raise InvalidArgument(f"SKILL.md front matter is not valid YAML: {exc}", loc=["data"]) from exc
    return meta if isinstance(meta, dict) else {}


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
        if zipfile.is_zipfile(io.BytesIO(raw)):
            members, skipped = _zip_members(raw)
            texts = dict(_texts(members, skipped))
            skill_md = next((rel for rel in texts if PurePosixPath(rel).name == "SKILL.md"), None)
            if skill_md is None:
                raise InvalidArgument("the skill archive has no SKILL.md", loc=["temp_file_id"])
            prefix = str(PurePosixPath(skill_md).parent)
            data = texts.pop(skill_md)
            for rel, text in texts.items():
                inside = str(PurePosixPath(rel).relative_to(prefix)) if prefix != "." else rel
                extra.append((inside, text))
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
    meta = skill_front_matter(row["content"]) if row["content"].startswith("---") else {}
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
