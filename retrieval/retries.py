"""Retries of the calls to the OpenAI-compatible endpoints (embeddings, the LLM): a transient failure (no connection,
429, 5xx) is tried again after a jittered, growing pause, every attempt and every pause inside the call's one timeout.

Not the `openai` client's own retries: each of its attempts gets the whole timeout (three attempts of a 30 s timeout
can take 90 s), and it sleeps as long as a Retry-After header asks, up to a minute, whatever the caller's deadline.
"""

import itertools
import logging
import random
import time

import openai

log = logging.getLogger(__name__)

# A timeout is an APIConnectionError too; it has spent the whole remaining time, so it is never retried.
TRANSIENT = (openai.APIConnectionError, openai.RateLimitError, openai.InternalServerError)
FIRST_PAUSE_S = 0.25
LONGEST_PAUSE_S = 4.0


def _pause_s(attempt: int, exc: Exception) -> float:
    """The server's Retry-After when it gives one (in seconds), else exponential backoff with jitter, so that the
    clients a failure hit together do not come back together."""
    response = getattr(exc, "response", None)
    if response is not None:
        try:
            return max(0.0, float(response.headers.get("retry-after", "")))
        except ValueError:
            pass
    return min(LONGEST_PAUSE_S, FIRST_PAUSE_S * 2**attempt) * random.uniform(0.5, 1.0)


def call_with_retries(call, *, timeout_s: float, max_retries: int, what: str):
    """`call(timeout_s)`, given the time left, retried up to `max_retries` times on a transient failure as long as
    the pause ends before `timeout_s` has passed; the last failure is raised."""
    deadline = time.monotonic() + timeout_s
    for attempt in itertools.count():
        try:
            return call(deadline - time.monotonic())
        except TRANSIENT as exc:
            pause = _pause_s(attempt, exc)
            if attempt >= max_retries or time.monotonic() + pause >= deadline:
                raise
            log.info(
                "%s failed (%s), retry %d of %d in %.2f s", what, type(exc).__name__, attempt + 1, max_retries, pause
            )
            time.sleep(pause)
