"""The deployment's tokenizer family (RetrievalSettings.tokenizer_family) end to end: write-time counts (exact),
the recount after a change, /search context stats and budget, session context budgets (docs/tokens.md)."""

import pytest
from django.core.management import call_command

from profiles.models import RetrievalSettings
from retrieval.models import Context
from retrieval.recount import recount_tokens
from retrieval.tokenizers import FAMILIES, counter_for, version_of
from retrieval.tokens import estimate_tokens

CHINESE = "周二的上线失败了，原因是数据库迁移把订单表锁了十一分钟。我们先回滚，然后把迁移拆成两步。" * 6
FILE = "viking://user/default/memories/events/2026/11/30/deploy.md"


def stored(uri: str) -> dict:
    return (
        Context.objects.filter(uri=uri)
        .values("abstract", "overview", "content", "abstract_tokens", "overview_tokens", "content_tokens")
        .get()
    )


def counted_with(row: dict, family: str) -> bool:
    count = counter_for(family).count
    return (row["abstract_tokens"], row["overview_tokens"], row["content_tokens"]) == (
        count(row["abstract"]),
        count(row["overview"]),
        count(row["content"]),
    )


def test_the_write_path_counts_with_the_deployment_profile(api):
    RetrievalSettings.objects.filter(pk=1).update(tokenizer_family="cl100k")
    api.write("viking://~/memories/events/2026/11/30/deploy.md", CHINESE)
    row = stored(FILE)
    assert counted_with(row, "cl100k") and not counted_with(row, "o200k")
    assert counted_with(stored("viking://user/default/memories/events/2026/11/30"), "cl100k")


def test_saving_a_new_family_recounts_every_node(api):
    api.write("viking://~/memories/events/2026/11/30/deploy.md", CHINESE)
    api.write("viking://resources/runbooks/rollback.md", "# Rollback\n回滚步骤：先停流量，再恢复备份。")
    assert counted_with(stored(FILE), "o200k")
    settings_row = RetrievalSettings.objects.get(pk=1)
    settings_row.tokenizer_family = "qwen"
    settings_row.save()  # as the admin does
    for row in Context.objects.values(
        "abstract", "overview", "content", "abstract_tokens", "overview_tokens", "content_tokens"
    ):
        assert counted_with(row, "qwen")
    assert RetrievalSettings.objects.get(pk=1).token_counts_version == version_of("qwen")


def test_the_recount_command_catches_up_after_an_unsignalled_change(api, capsys):
    api.write("viking://~/memories/events/2026/11/30/deploy.md", CHINESE)
    RetrievalSettings.objects.filter(pk=1).update(tokenizer_family="deepseek")  # .update() sends no signal
    assert not counted_with(stored(FILE), "deepseek")
    call_command("recount_tokens")
    assert "recounted tokens with deepseek" in capsys.readouterr().out
    assert counted_with(stored(FILE), "deepseek")
    call_command("recount_tokens")
    assert "0 nodes changed" in capsys.readouterr().out
    assert RetrievalSettings.objects.get(pk=1).token_counts_version == version_of("deepseek")


def counts_under_old_weights() -> None:
    """As a database looks after an upgrade that changed how a family counts (a new tokenizer release, or the
    estimator's counts of before exact counting): the counts and the stamp are another version's."""
    for row in Context.objects.values("id", "abstract", "overview", "content"):
        Context.objects.filter(id=row["id"]).update(
            **{
                f"{level}_tokens": estimate_tokens(row[level], "cl100k")
                for level in ("abstract", "overview", "content")
            }
        )
    RetrievalSettings.objects.filter(pk=1).update(token_counts_version="o200k:00000000")


def test_make_run_recounts_counts_made_with_other_weights_and_only_then(api, capsys):
    api.write("viking://~/memories/events/2026/11/30/deploy.md", CHINESE)
    counts_under_old_weights()
    assert not counted_with(stored(FILE), "o200k")
    call_command("recount_tokens", "--if-stale")  # as `make run` does after migrate
    assert "recounted tokens with o200k" in capsys.readouterr().out
    assert counted_with(stored(FILE), "o200k")
    assert RetrievalSettings.objects.get(pk=1).token_counts_version == version_of("o200k")
    Context.objects.filter(uri=FILE).update(content_tokens=1)  # a current stamp: the next start reads nothing
    call_command("recount_tokens", "--if-stale")
    assert capsys.readouterr().out.strip() == f"token counts are current ({version_of('o200k')})"
    assert stored(FILE)["content_tokens"] == 1


def test_the_first_make_run_on_an_empty_store_prints_one_line_and_no_progress_bar(api, capsys):
    """tqdm drew `recount: 0node [00:00, ?node/s]` three times for a store with nothing in it (issue 39)."""
    RetrievalSettings.objects.filter(pk=1).update(token_counts_version="")  # a fresh database: never stamped
    call_command("recount_tokens", "--if-stale")  # as `make run` does after migrate
    captured = capsys.readouterr()
    assert captured.out == f"no stored nodes to recount; token counts will be made with {version_of('o200k')}\n"
    assert captured.err == ""
    assert RetrievalSettings.objects.get(pk=1).token_counts_version == version_of("o200k")


def test_saving_the_settings_recounts_counts_made_with_other_weights(api):
    api.write("viking://~/memories/events/2026/11/30/deploy.md", CHINESE)
    counts_under_old_weights()
    settings_row = RetrievalSettings.objects.get(pk=1)
    settings_row.default_max_tokens = 1200  # any save, as the admin does; the family stays o200k
    settings_row.save()
    assert counted_with(stored(FILE), "o200k")
    assert RetrievalSettings.objects.get(pk=1).token_counts_version == version_of("o200k")


def test_saving_the_settings_with_current_counts_recounts_nothing(api):
    api.write("viking://~/memories/events/2026/11/30/deploy.md", CHINESE)
    call_command("recount_tokens")  # stamps the current version
    Context.objects.filter(uri=FILE).update(content_tokens=1)
    settings_row = RetrievalSettings.objects.get(pk=1)
    settings_row.default_max_tokens = 1200
    settings_row.save()
    assert stored(FILE)["content_tokens"] == 1


@pytest.mark.parametrize("profile", FAMILIES)
def test_context_mode_budgets_and_names_the_deployment_profile(api, profile):
    RetrievalSettings.objects.filter(pk=1).update(tokenizer_family=profile)
    for day in range(1, 8):
        api.write(f"viking://~/memories/events/2026/11/{day:02}/deploy.md", f"# Summary\n第{day}次上线。\n" + CHINESE)
    status, body = api.post("/api/v1/search/search", {"query": "上线失败 回滚", "mode": "context", "max_tokens": 300})
    assert status == 200, body
    result = body["result"]
    assert result["stats"]["tokenizer"] == profile
    assert result["stats"]["used_tokens"] == counter_for(profile).count(result["rendered"]) <= 300
    assert result["entries"]


def test_session_context_budget_uses_the_deployment_profile(api):
    RetrievalSettings.objects.filter(pk=1).update(tokenizer_family="cl100k")
    status, body = api.post("/api/v1/sessions/s-tok/messages", {"role": "user", "content": CHINESE})
    assert status == 200, body
    cost = estimate_tokens(CHINESE, "cl100k")
    assert cost > estimate_tokens(CHINESE, "o200k")
    status, body = api.get("/api/v1/sessions/s-tok/context", token_budget=cost)
    assert status == 200 and body["result"]["estimated_tokens"] == cost
    status, body = api.get("/api/v1/sessions/s-tok/context", token_budget=cost - 1)
    assert status == 200 and body["result"]["messages"] == []


def test_recount_in_small_batches_reports_every_row_once_and_updates_only_stale_ones(api):
    for day in range(1, 4):
        api.write(f"viking://~/memories/events/2026/11/{day:02}/deploy.md", CHINESE)
    seen = []
    assert recount_tokens(counter=counter_for("o200k"), batch_size=2, progress=seen.append) == 0  # already o200k
    assert sum(seen) == Context.objects.count()
    assert recount_tokens(counter=counter_for("cl100k"), batch_size=2) > 0
    assert all(
        counted_with(row, "cl100k")
        for row in Context.objects.values(
            "abstract", "overview", "content", "abstract_tokens", "overview_tokens", "content_tokens"
        )
    )
