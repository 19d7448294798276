"""The parse box: untrusted documents are parsed in a child process with a CPU-time limit, a memory limit and a
wall-clock deadline, so that a runaway parse (an outline that loops, a decompression bomb, a pathological nesting or
regex) costs a child that is killed, never the web process or the worker that asked (docs/operations.md, "Limits").

A parse pays a fork of a small forkserver that imported the parsers once, not an interpreter's start and imports
(bench/RESULTS.md, "parse_box"). At most
`concurrency` boxes run at once in a process: what parsing can add to a server's memory is that many times the
memory limit.
"""

import logging
import multiprocessing
import resource
import signal
import threading
import time
import warnings
from dataclasses import dataclass

from core.errors import InvalidArgument, OvsiteError, PayloadTooLarge, ResourceExhausted
from retrieval.documents import html, markdown, progress, python, uploads  # noqa: F401  (the forkserver's preload)

# Children fork from a forkserver: a fresh, single-threaded interpreter that imported the parsers once. A fork of the
# server itself copies whatever lock another of its threads held (uvicorn's workers hung their second child that way,
# tests/ovsite/test_serve_layout.py). A child imports the asking process's main module again before its parse unless
# that is a package's __main__ (`python -m uvicorn`, `python -m celery`: the Procfile's); CPython 3.11 ignores
# "__main__" in the preload list (it looks for a key spawn's data does not have), which later versions may honour.
_context = multiprocessing.get_context("forkserver")
_context.set_forkserver_preload(["__main__", "retrieval.documents.box"])
_slots_lock = threading.Lock()
_slots: dict[int, threading.BoundedSemaphore] = {}


@dataclass(frozen=True)
class BoxLimits:
    cpu_seconds: int
    memory_bytes: int  # above what the forkserver's child starts with
    wall_seconds: float
    concurrency: int


def limits_from_settings() -> BoxLimits:
    from django.conf import settings

    return BoxLimits(
        cpu_seconds=settings.OVSITE_PARSE_CPU_SECONDS,
        memory_bytes=settings.OVSITE_PARSE_MEMORY_MB * 1024 * 1024,
        wall_seconds=settings.OVSITE_PARSE_TIMEOUT_S,
        concurrency=settings.OVSITE_PARSE_CONCURRENCY,
    )


def _virtual_size() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[0]) * resource.getpagesize()


def _child(conn, limits: BoxLimits, function, args) -> None:
    # A parser's log records and warnings about a hostile file would only fill the server's log: the refusal says it.
    logging.disable(logging.CRITICAL)
    warnings.simplefilter("ignore")
    # The counters start at zero in a forked child: the CPU limit is this parse's alone.
    resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 1))
    address_space = _virtual_size() + limits.memory_bytes
    resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    try:
        progress.listen(lambda name: conn.send(("file", name)))
        outcome = ("ok", function(*args))
    except OvsiteError as exc:
        outcome = ("refused", exc)
    except MemoryError:
        outcome = ("memory", None)
    # A parser's own exception on malformed input (the formats' modules map what they know; this is the rest).
    except Exception as exc:
        outcome = ("malformed", f"{type(exc).__name__}: {exc}")
    conn.send(outcome)
    conn.close()


def _slot(concurrency: int) -> threading.BoundedSemaphore:
    with _slots_lock:
        return _slots.setdefault(concurrency, threading.BoundedSemaphore(concurrency))


def _died(process, current: str, limits: BoxLimits) -> OvsiteError:
    process.join(1)
    if process.exitcode in (-signal.SIGXCPU, -signal.SIGKILL):
        return PayloadTooLarge(
            f"{current}: parsing used more than {limits.cpu_seconds} s of CPU time",
            {"path": current, "limit": "cpu_seconds", "limit_value": limits.cpu_seconds},
        )
    # A C parser that cannot allocate aborts or faults instead of raising MemoryError.
    how = f"signal {signal.Signals(-process.exitcode).name}" if process.exitcode < 0 else f"exit {process.exitcode}"
    memory_mb = limits.memory_bytes // (1024 * 1024)
    return PayloadTooLarge(
        f"{current}: the parser died ({how}): malformed input, or more than its {memory_mb} MB of memory",
        {"path": current, "limit": "memory_mb", "limit_value": memory_mb},
    )


def _outcome(process, reader, what: str, limits: BoxLimits):
    current = what  # the file being parsed, as the child last said
    deadline = time.monotonic() + limits.wall_seconds
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not reader.poll(remaining):
            raise PayloadTooLarge(
                f"{current}: parsing took longer than {limits.wall_seconds:g} s",
                {"path": current, "limit": "timeout_s", "limit_value": limits.wall_seconds},
            )
        try:
            kind, value = reader.recv()
        except EOFError:
            raise _died(process, current, limits) from None
        if kind == "file":
            current = value
        elif kind == "ok":
            return value
        elif kind == "refused":
            raise value
        elif kind == "memory":
            raise PayloadTooLarge(
                f"{current}: parsing needs more than {limits.memory_bytes // (1024 * 1024)} MB of memory",
                {"path": current, "limit": "memory_mb", "limit_value": limits.memory_bytes // (1024 * 1024)},
            )
        else:
            raise InvalidArgument(
                f"{current} cannot be parsed: {value}", loc=["temp_file_id"], details={"path": current}
            )


def run(function, *args, what: str, limits: BoxLimits | None = None):
    """`function(*args)` in a box; its result, or the 4xx its input deserves: 422 for a malformed document, 413
    when a limit trips (naming the limit and the file it reached: progress.reached), 429 when every box stays
    busy past the deadline."""
    limits = limits or limits_from_settings()
    slot = _slot(limits.concurrency)
    if not slot.acquire(timeout=limits.wall_seconds):
        raise ResourceExhausted(
            f"every document parser is busy ({limits.concurrency} at once); retry shortly",
            {"limit": "concurrency", "limit_value": limits.concurrency},
        )
    try:
        reader, writer = _context.Pipe(duplex=False)
        process = _context.Process(target=_child, args=(writer, limits, function, args), daemon=True)
        process.start()
        writer.close()
        try:
            result = _outcome(process, reader, what, limits)
        except BaseException:
            process.kill()
            raise
        finally:
            reader.close()
            process.join(1)  # a child that answered exits at once; one that did not was just killed
            if process.is_alive():
                process.kill()
                process.join()
        return result
    finally:
        slot.release()
