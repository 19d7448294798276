"""The parse box (retrieval/documents/box.py): a parse that runs away is killed at its limit and answered as a 4xx
naming the limit and the file it had reached; the asking process is untouched."""

import faulthandler
import os
import resource
import threading
import time

import pytest

from core.errors import InvalidArgument, PayloadTooLarge, ResourceExhausted
from retrieval.documents import box, progress

LIMITS = box.BoxLimits(cpu_seconds=1, memory_bytes=128 * 1024 * 1024, wall_seconds=3.0, concurrency=2)


def _spin(name):
    progress.reached(name)
    while True:
        pass


def _hoard():
    kept = []
    while True:
        kept.append(bytearray(16 * 1024 * 1024))


def _sleep():
    progress.reached(str(os.getpid()))  # the refusal names it: the test can look for the process afterwards
    time.sleep(60)


def _abort():
    faulthandler.disable()  # pytest's dump of the child's stack would only be noise here
    os.abort()


def _divide():
    return 1 / 0


def _refuse():
    raise InvalidArgument("not a document", loc=["temp_file_id"], details={"path": "a.md"})


def _limits_seen():
    return resource.getrlimit(resource.RLIMIT_CPU), resource.getrlimit(resource.RLIMIT_AS)


def test_a_result_comes_back_from_the_child_and_the_child_is_limited():
    (cpu, _), (address_space, _) = box.run(_limits_seen, what="x", limits=LIMITS)
    assert cpu == LIMITS.cpu_seconds
    assert address_space != resource.RLIM_INFINITY
    assert resource.getrlimit(resource.RLIMIT_CPU)[0] == resource.RLIM_INFINITY  # the asking process is untouched


@pytest.mark.slow
def test_a_parse_past_its_cpu_time_is_413_naming_the_file_it_reached():
    # A wall-clock deadline far past the CPU limit: on a loaded machine a second of CPU takes longer than a second.
    patient = box.BoxLimits(cpu_seconds=1, memory_bytes=LIMITS.memory_bytes, wall_seconds=60.0, concurrency=2)
    with pytest.raises(PayloadTooLarge) as refused:
        box.run(_spin, "deep/loop.pdf", what="upload.zip", limits=patient)
    assert refused.value.details == {"path": "deep/loop.pdf", "limit": "cpu_seconds", "limit_value": 1}


def test_a_parse_past_its_memory_is_413():
    with pytest.raises(PayloadTooLarge) as refused:
        box.run(_hoard, what="bomb.zip", limits=LIMITS)
    assert refused.value.details["limit"] == "memory_mb"
    assert refused.value.details["path"] == "bomb.zip"


@pytest.mark.slow
def test_a_parse_past_its_deadline_is_413_and_the_child_is_killed():
    with pytest.raises(PayloadTooLarge) as refused:
        box.run(_sleep, what="slow.pdf", limits=LIMITS)
    child = refused.value.details.pop("path")
    assert refused.value.details == {"limit": "timeout_s", "limit_value": 3.0}
    assert not os.path.exists(f"/proc/{child}")


def test_a_parser_that_dies_is_413_not_a_hang():
    with pytest.raises(PayloadTooLarge, match="the parser died \\(signal SIGABRT\\)"):
        box.run(_abort, what="crash.pdf", limits=LIMITS)


def test_any_exception_of_a_parser_is_422_naming_the_file():
    with pytest.raises(InvalidArgument, match="x.pdf cannot be parsed: ZeroDivisionError"):
        box.run(_divide, what="x.pdf", limits=LIMITS)


def test_a_refusal_comes_back_whole():
    with pytest.raises(InvalidArgument) as refused:
        box.run(_refuse, what="a.md", limits=LIMITS)
    assert refused.value.message == "not a document"
    assert refused.value.details["path"] == "a.md"
    assert refused.value.details["validation_errors"][0]["loc"] == ["temp_file_id"]


@pytest.mark.slow
def test_a_busy_box_is_429_once_the_deadline_passes():
    holding = box.BoxLimits(cpu_seconds=5, memory_bytes=LIMITS.memory_bytes, wall_seconds=3.0, concurrency=1)
    waiting = box.BoxLimits(cpu_seconds=5, memory_bytes=LIMITS.memory_bytes, wall_seconds=0.5, concurrency=1)
    holder = threading.Thread(
        target=pytest.raises, args=(PayloadTooLarge, box.run, _sleep), kwargs={"what": "a", "limits": holding}
    )
    holder.start()
    time.sleep(0.5)
    with pytest.raises(ResourceExhausted) as refused:
        box.run(_limits_seen, what="b", limits=waiting)
    holder.join()
    assert refused.value.details == {"limit": "concurrency", "limit_value": 1}
