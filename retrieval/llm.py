"""The LLM gateway: every LLM call in ovsite goes through `complete()`.

One OpenAI-compatible endpoint (LLM_URL / LLM_MODEL / LLM_API_KEY, QUERY_PLANNER_MODEL for expansion and
rewrite), a hard timeout per call that its retries of transient failures (LLM_MAX_RETRIES, retrieval/retries.py) stay
within, one `profiles.LLMUsage` row per call, and no exceptions: a failed call is a result with `outcome != "ok"`, so
every caller can degrade (docs/design.md §5).
"""

import logging
import time
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path

import openai
from django.conf import settings

from core import metrics
from retrieval.retries import call_with_retries

log = logging.getLogger(__name__)
PROMPTS_DIR = Path(__file__).resolve().parent / "prompts"


@dataclass(frozen=True)
class Completion:
    outcome: str  # "ok" | "timeout" | "error" | "invalid" | "off"
    text: str = ""
    value: object = None  # what `parse` made of the text
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.outcome == "ok"


def llm_configured() -> bool:
    return bool(settings.LLM_URL and settings.LLM_MODEL)


def planner_model() -> str:
    """QUERY_PLANNER_MODEL, falling back to LLM_MODEL (RFC §3.2: query_planner first, then the main model)."""
    return settings.QUERY_PLANNER_MODEL or settings.LLM_MODEL


@lru_cache(maxsize=8)
def _client(url: str, api_key: str):
    return openai.OpenAI(base_url=url, api_key=api_key, max_retries=0)  # retries are complete()'s own, bounded


@dataclass(frozen=True)
class Prompt:
    name: str
    version: str
    system: str
    user: str


@cache
def load_prompt(name: str) -> Prompt:
    """`retrieval/prompts/{name}.md`: a `version:` line, then `## system` and `## user` sections."""
    text = (PROMPTS_DIR / f"{name}.md").read_text()
    header, _, rest = text.partition("\n## system\n")
    system, _, user = rest.partition("\n## user\n")
    version = next(line.split(":", 1)[1].strip() for line in header.splitlines() if line.startswith("version:"))
    return Prompt(name=name, version=version, system=system.strip(), user=user.strip())


def record_usage(*, kind: str, model: str, account_id: int | None, completion: Completion, latency_ms: float):
    from profiles.models import LLMUsage

    metrics.record_llm_call(
        kind=kind,
        model=model,
        outcome=completion.outcome,
        prompt_tokens=completion.prompt_tokens,
        completion_tokens=completion.completion_tokens,
    )
    try:
        LLMUsage.objects.create(
            kind=kind,
            model=model,
            account_id=account_id or None,
            prompt_tokens=completion.prompt_tokens,
            completion_tokens=completion.completion_tokens,
            latency_ms=latency_ms,
            outcome=completion.outcome,
            error=completion.error[:2000],
        )
    except Exception:  # accounting must never fail the call it accounts for
        log.exception("could not record LLM usage")


def complete(
    *,
    kind: str,
    messages: list[dict],
    timeout_s: float,
    account_id: int | None = None,
    model: str | None = None,
    max_tokens: int | None = None,
    json_mode: bool = False,
    parse=None,
) -> Completion:
    """One chat completion, bounded by `timeout_s`, recorded in LLMUsage. Never raises.

    `parse(text)` validates the answer into `value`; a ValueError from it makes the outcome "invalid"."""
    if not llm_configured():
        return Completion(outcome="off")
    model = model or settings.LLM_MODEL
    started = time.perf_counter()
    extra = {"response_format": {"type": "json_object"}} if json_mode else {}

    def attempt(time_left_s: float):
        client = _client(settings.LLM_URL, settings.LLM_API_KEY).with_options(timeout=time_left_s)
        return client.chat.completions.create(
            model=model, messages=messages, max_tokens=max_tokens, temperature=0, **extra
        )

    try:
        response = call_with_retries(
            attempt, timeout_s=timeout_s, max_retries=settings.LLM_MAX_RETRIES, what=f"LLM call ({kind})"
        )
        usage = response.usage
        text = (response.choices[0].message.content or "") if response.choices else ""
        tokens = {
            "prompt_tokens": getattr(usage, "prompt_tokens", 0) or 0,
            "completion_tokens": getattr(usage, "completion_tokens", 0) or 0,
        }
        try:
            completion = Completion(outcome="ok", text=text, value=parse(text) if parse else text, **tokens)
        except ValueError as exc:
            completion = Completion(outcome="invalid", text=text, error=f"invalid output: {exc}", **tokens)
    except openai.APITimeoutError as exc:
        completion = Completion(outcome="timeout", error=str(exc))
    except (openai.OpenAIError, ValueError, KeyError, IndexError, AttributeError) as exc:
        completion = Completion(outcome="error", error=f"{type(exc).__name__}: {exc}")
    record_usage(
        kind=kind,
        model=model,
        account_id=account_id,
        completion=completion,
        latency_ms=(time.perf_counter() - started) * 1000,
    )
    return completion
