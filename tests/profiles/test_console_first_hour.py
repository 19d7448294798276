"""What a newcomer's first hour in the console ran into (issue 39, "the newcomer's hour"): latencies with 15
decimals, help texts in the RFC's and the score migration's words, "Change reason: None" in the history, "View site"
leading to a JSON 404, and the relevance floor's help saying one candidate where docs/retrieval.md says up to two."""

import re
from pathlib import Path

import pytest
from django.urls import reverse
from django.utils.html import strip_tags

from core.models import Account
from profiles.models import LLMUsage, PurposeProfile, RecallEvent, RetrievalSettings

LATENCY = 6.053905000044324  # the ledger's float, as a request measured it
RETRIEVAL_DOC = Path(__file__).resolve().parents[2] / "docs" / "retrieval.md"


@pytest.fixture
def ledgers(seeded):
    account = Account.objects.get(name="default")
    event = RecallEvent.objects.create(endpoint="recall", purpose="coding", account=account, latency_ms=LATENCY)
    usage = LLMUsage.objects.create(kind="rewrite", model="m", account=account, latency_ms=LATENCY, outcome="ok")
    return event, usage


@pytest.mark.parametrize(
    "page",
    [
        lambda event, usage: reverse("admin:profiles_recallevent_changelist"),
        lambda event, usage: reverse("admin:profiles_recallevent_change", args=[event.pk]),
        lambda event, usage: reverse("admin:profiles_llmusage_changelist"),
        lambda event, usage: reverse("admin:profiles_llmusage_change", args=[usage.pk]),
    ],
    ids=["events", "event", "llm-usage", "llm-call"],
)
def test_a_latency_reads_as_milliseconds_with_one_decimal(operator, ledgers, page):
    response = operator.get(page(*ledgers))
    assert response.status_code == 200
    text = strip_tags(response.content.decode())
    assert "6.1 ms" in text and "6.0539" not in text


def test_help_texts_speak_in_the_operators_terms():
    """Each knob says what it does and its default in the console's words: no RFC section numbers ("RFC: 5") and no
    history of the score scale ("the 0.1 cosine of before the scale changed")."""
    for model in (RetrievalSettings, PurposeProfile):
        for field in model._meta.get_fields():
            help_text = str(getattr(field, "help_text", ""))
            assert not re.search(r"\bRFC\b", help_text), (model.__name__, field.name, help_text)
            assert "before the scale changed" not in help_text, (model.__name__, field.name, help_text)


def test_the_relevance_floor_help_says_what_docs_retrieval_says():
    """Below the floor /recall serves up to two candidates (the most relevant and the best-scoring) within a
    quarter of the budget, not pinned at abstract: the help and docs/retrieval.md say the same."""
    help_text = str(RetrievalSettings._meta.get_field("recall_relevance_floor").help_text)
    section = RETRIEVAL_DOC.read_text().split("### /recall's relevance floor", 1)[1].split("\n#", 1)[0]
    doc = " ".join(section.split())  # as it reads, whatever the line breaks
    assert "the best candidate by fused value and the best by score" in doc
    assert "quarter of `max_tokens`" in doc and "a head past the abstract where it fits" in doc
    assert "up to two candidates" in help_text and "quarter of max_tokens" in help_text
    assert "at abstract" not in help_text
    assert "only that best candidate is served" not in help_text


def test_the_history_shows_no_reason_as_a_dash_not_none(operator):
    row = RetrievalSettings.objects.get(pk=1)
    row.default_max_tokens = 1200
    row.save()  # a change with no reason given, as the migration's baseline and a plain save
    page = operator.get(reverse("admin:profiles_retrievalsettings_history", args=[1]))
    assert page.status_code == 200
    table = page.content.decode().split('<table id="change-history"', 1)[1].split("</table>", 1)[0]
    headers = [strip_tags(h).strip() for h in re.findall(r"<th[^>]*>(.*?)</th>", table, re.DOTALL)]
    column = headers.index("Change reason")
    rows = re.findall(r"<tr>(.*?)</tr>", table.split("<tbody>", 1)[1], re.DOTALL)
    reasons = [strip_tags(re.findall(r"<td>(.*?)</td>", row, re.DOTALL)[column]).strip() for row in rows]
    assert len(reasons) >= 2 and "None" not in reasons and "—" in reasons, reasons


def test_view_site_leads_to_the_api_reference_not_a_json_404(operator):
    index = operator.get(reverse("admin:index")).content.decode()
    [href] = re.findall(r'<a href="([^"]+)">View site</a>', index)
    assert href == "/api/docs/"
    page = operator.get(href)
    assert page.status_code == 200 and "text/html" in page["Content-Type"]
