"""The LLM gateway against a real HTTP fake of the OpenAI API: bounded, recorded, never raising."""

import json

from profiles.models import LLMUsage
from retrieval.llm import complete


def ask(**extra):
    return complete(
        kind="rewrite", messages=[{"role": "user", "content": "hi"}], timeout_s=1.0, account_id=None, **extra
    )


def test_off_without_an_llm(seeded):
    assert ask().outcome == "off" and LLMUsage.objects.count() == 0


def test_ok_call_records_usage_from_the_response(seeded, fake_llm):
    fake_llm.script.chat, fake_llm.script.usage = "hello", (123, 45)
    result = ask()
    assert result.ok and result.text == "hello" and (result.prompt_tokens, result.completion_tokens) == (123, 45)
    row = LLMUsage.objects.get()
    assert (row.kind, row.model, row.outcome, row.prompt_tokens, row.completion_tokens) == (
        "rewrite",
        "fake-main",
        "ok",
        123,
        45,
    )


def test_timeout_is_an_outcome_not_an_exception(seeded, fake_llm):
    fake_llm.script.delay_s = 3
    assert ask().outcome == "timeout"
    assert LLMUsage.objects.get().outcome == "timeout"


def test_http_error_and_garbage_are_errors(seeded, fake_llm):
    fake_llm.script.mode = "error"
    assert ask().outcome == "error"
    fake_llm.script.mode = "garbage"
    assert ask().outcome == "error"
    assert list(LLMUsage.objects.values_list("outcome", flat=True)) == ["error", "error"]


def test_parse_failure_is_invalid(seeded, fake_llm):
    fake_llm.script.chat = "not json"
    result = ask(parse=json.loads)
    assert result.outcome == "invalid" and LLMUsage.objects.get().outcome == "invalid"
