"""Resources and skills added from the API: ingest's work (retrieval/ingest.py), then, when the client waits
(`wait=true`), its processing."""

from core.auth import Caller
from retrieval import ingest
from retrieval.services import with_processing


def add_resource(
    *,
    caller: Caller,
    temp_file_id: str,
    to: str | None = None,
    parent: str | None = None,
    source_name: str | None = None,
    tags: list[str] | None = None,
    wait: bool = False,
    timeout_s: float | None = None,
) -> dict:
    """`POST /api/v1/resources`."""
    result = ingest.add_resource(
        caller=caller, temp_file_id=temp_file_id, to=to, parent=parent, source_name=source_name, tags=tags
    )
    return with_processing(caller=caller, result=result, wait=wait, timeout_s=timeout_s)


def add_skill(
    *,
    caller: Caller,
    data=None,
    temp_file_id: str | None = None,
    target_uri: str | None = None,
    wait: bool = False,
    timeout_s: float | None = None,
) -> dict:
    """`POST /api/v1/skills`."""
    result = ingest.add_skill(caller=caller, data=data, temp_file_id=temp_file_id, target_uri=target_uri)
    return with_processing(caller=caller, result=result, wait=wait, timeout_s=timeout_s)
