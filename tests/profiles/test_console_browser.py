"""The console in a real browser: headless Chromium (Debian's `chromium` + `chromium-driver`, installed by
`make test`) driven by Selenium. Screenshots go to tests/artefacts/ (git-ignored). The operator's questions of
issue 27 are answered from the console alone: why did the agent not see X, who changed the recall threshold, what
did rewrites cost."""

import datetime as dt
import json
from decimal import Decimal

import httpx
import pytest
from django.contrib.auth.models import User
from django.db.models import Sum
from django.test import Client
from django.utils import timezone
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ready
from selenium.webdriver.support.ui import Select

from core.models import Account, ApiKey, hash_key
from profiles.models import LLMUsage, ModelPrice, RecallEvent, RetrievalSettings
from tests.browser import chromium, shot, wait
from tests.profiles.test_console_admin import change_url, form_data
from tests.profiles.test_dashboards import rewrites  # noqa: F401 (a fixture)
from tests.profiles.test_recall_tracing import QUERY, corpus  # noqa: F401 (a fixture)


@pytest.fixture
def browser():
    driver = chromium()
    yield driver
    driver.quit()


@pytest.fixture
def seeded_usage(seeded):
    """Two days of recall events and LLM calls, with a price for one model."""
    now = timezone.now()
    account = Account.objects.get(name="default")
    for days_ago, latency, used in ((1, 12.0, 300), (1, 18.0, 500), (0, 25.0, 900)):
        event = RecallEvent.objects.create(
            endpoint="recall",
            purpose="coding",
            account=account,
            max_tokens=1600,
            used_tokens=used,
            returned=3,
            tier_full=1,
            tier_abstract=2,
            dropped=1,
            query_expansion="used",
            latency_ms=latency,
        )
        RecallEvent.objects.filter(pk=event.pk).update(created_at=now - dt.timedelta(days=days_ago))
    for days_ago, kind, model, prompt, completion in (
        (1, "rewrite", "fake-planner", 1200, 80),
        (0, "summary", "fake-main", 3000, 400),
    ):
        row = LLMUsage.objects.create(
            kind=kind,
            model=model,
            account=account,
            prompt_tokens=prompt,
            completion_tokens=completion,
            latency_ms=5,
            outcome="ok",
        )
        LLMUsage.objects.filter(pk=row.pk).update(created_at=now - dt.timedelta(days=days_ago))
    ModelPrice.objects.create(model="fake-main", prompt_per_million=Decimal("2"), completion_per_million=Decimal("8"))


def log_in(driver, live_server) -> None:
    User.objects.create_superuser("operator", "op@example.com", "pw-operator")
    driver.get(live_server.url + "/admin/login/")
    driver.find_element(By.NAME, "username").send_keys("operator")
    driver.find_element(By.NAME, "password").send_keys("pw-operator")
    driver.find_element(By.CSS_SELECTOR, "input[type=submit]").click()
    wait(driver, ready.presence_of_element_located((By.CSS_SELECTOR, ".app-dashboards")))
    shot(driver, "01-admin-index")


def sidebar(driver, link_text: str) -> None:
    """Follows a link of the admin's sidebar (the Dashboards section is the console's, profiles/console.py)."""
    driver.find_element(By.XPATH, f'//nav[@id="nav-sidebar"]//a[normalize-space()="{link_text}"]').click()


def charts_drawn(driver) -> list:
    """Every chart container holds plotly's SVG once drawn."""
    containers = driver.find_elements(By.CSS_SELECTOR, ".dashboard-chart")
    drawn = [c for c in containers if c.find_elements(By.CSS_SELECTOR, "svg.main-svg")]
    return drawn if containers and len(drawn) == len(containers) else []


def test_operator_edits_coding_quotas_reads_both_dashboards_and_issues_a_key(browser, live_server, seeded_usage):
    log_in(browser, live_server)

    browser.find_element(By.LINK_TEXT, "Purpose profiles").click()
    browser.find_element(By.LINK_TEXT, "coding").click()
    quotas = browser.find_element(By.ID, "id_quotas")
    new = {"events": 2, "entities": 3, "preferences": 1, "experiences": 0, "resources": 4, "skills": 1}
    quotas.clear()
    quotas.send_keys('{"events": 2, "memes": 1}')  # a mistake first: shown as a form error, nothing saved
    browser.find_element(By.NAME, "_save").click()
    error = wait(browser, ready.presence_of_element_located((By.CSS_SELECTOR, ".field-quotas .errorlist")))
    assert "unknown bucket" in error.text
    shot(browser, "02-quotas-error")
    quotas = browser.find_element(By.ID, "id_quotas")
    quotas.clear()
    quotas.send_keys(json.dumps(new))
    browser.find_element(By.NAME, "_save").click()
    success = wait(browser, ready.presence_of_element_located((By.CSS_SELECTOR, ".messagelist .success")))
    assert "coding" in success.text
    shot(browser, "03-quotas-saved")

    response = httpx.post(
        live_server.url + "/api/v1/search/search",
        json={"query": "deploy", "mode": "context", "purpose": "coding"},
        timeout=60,
    )
    assert response.status_code == 200 and response.json()["result"]["stats"]["quotas"] == new

    browser.get(live_server.url + "/admin/")
    browser.find_element(By.LINK_TEXT, "Recall traffic").click()
    assert len(wait(browser, charts_drawn)) == 8
    events = RecallEvent.objects.all()  # the seeded three and the /search call above
    totals = events.aggregate(used=Sum("used_tokens"), dropped=Sum("dropped"))
    assert browser.find_element(By.ID, "total-requests").text == str(events.count()) == "4"
    assert browser.find_element(By.ID, "total-mean-used").text == f"{totals['used'] / events.count():.1f}"
    assert browser.find_element(By.ID, "total-dropped").text == str(totals["dropped"])
    shot(browser, "04-recall-traffic")

    browser.get(live_server.url + "/admin/")
    browser.find_element(By.LINK_TEXT, "LLM cost").click()
    assert len(wait(browser, charts_drawn)) == 5
    usage = LLMUsage.objects.aggregate(prompt=Sum("prompt_tokens"), completion=Sum("completion_tokens"))
    assert browser.find_element(By.ID, "total-prompt").text == str(usage["prompt"]) == "4200"
    assert browser.find_element(By.ID, "total-completion").text == str(usage["completion"])
    assert browser.find_element(By.ID, "total-cost").text == "0.0092 USD"  # 3000 × 2/M + 400 × 8/M
    shot(browser, "05-llm-cost")

    today = timezone.now().date().isoformat()
    browser.get(f"{live_server.url}/admin/dashboards/llm-cost/?since={today}&until={today}")
    assert len(wait(browser, charts_drawn)) == 5
    assert browser.find_element(By.ID, "total-prompt").text == "3000"
    shot(browser, "06-llm-cost-today")

    browser.get(live_server.url + "/admin/ovsite/apikey/add/")  # one browser session: a key, shown once
    Select(browser.find_element(By.ID, "id_user")).select_by_visible_text("default/default")
    browser.find_element(By.NAME, "_save").click()
    key = wait(browser, ready.presence_of_element_located((By.ID, "issued-key"))).text
    assert ApiKey.objects.get().key_hash == hash_key(key)
    shot(browser, "07-key-issued")
    browser.find_element(By.PARTIAL_LINK_TEXT, "Continue to").click()
    wait(browser, ready.presence_of_element_located((By.CSS_SELECTOR, ".field-status")))
    assert key not in browser.page_source
    browser.back()  # the page that showed it is not cached: coming back shows no key
    assert key not in browser.page_source
    shot(browser, "08-key-not-shown-again")


def test_why_did_the_agent_not_see_x_and_who_changed_the_threshold(browser, live_server, corpus):  # noqa: F811
    """Yesterday alice raised /recall's threshold; today the agent recalled nothing about the deploy and reports its
    request id. The operator finds the event by that id, sees the threshold, its source and the hits it cut, finds
    alice's change in the settings' history, reverts it, and replays the request: now it serves the deploy."""
    alice = Client()
    alice.force_login(User.objects.create_superuser("alice", "alice@example.com", "pw-alice"))
    row = RetrievalSettings.objects.get(pk=1)
    assert alice.post(change_url(row), form_data(row, recall_score_threshold=0.95)).status_code == 302
    agent = httpx.post(live_server.url + "/api/v1/search/recall", json={"query": QUERY}, timeout=60)
    assert agent.status_code == 200 and agent.json()["result"]["entries"] == []
    request_id = agent.headers["X-Request-ID"]

    log_in(browser, live_server)
    browser.find_element(By.LINK_TEXT, "Recall events").click()
    search = browser.find_element(By.ID, "searchbar")
    search.send_keys(request_id)
    search.submit()
    rows = browser.find_elements(By.CSS_SELECTOR, "#result_list tbody tr")
    assert len(rows) == 1 and QUERY in rows[0].text
    shot(browser, "10-event-found-by-request-id")
    rows[0].find_element(By.CSS_SELECTOR, "th a").click()
    event = RecallEvent.objects.get()
    assert request_id in browser.find_element(By.CSS_SELECTOR, ".field-request_id_links").text
    assert browser.find_element(By.CSS_SELECTOR, ".field-query_text .readonly").text == QUERY
    assert browser.find_element(By.CSS_SELECTOR, ".field-score_threshold .readonly").text == "0.95"
    assert browser.find_element(By.CSS_SELECTOR, ".field-threshold_source .readonly").text == "recall_preset"
    cut = browser.find_element(By.CSS_SELECTOR, ".field-hits_before_after .readonly").text
    assert cut == f"{event.hits_before_threshold} → 0" and event.hits_before_threshold > 0
    shot(browser, "11-event-threshold-cut-everything")

    sidebar(browser, "Settings change history")
    change = wait(browser, ready.presence_of_element_located((By.CSS_SELECTOR, "#change-history tbody tr")))
    assert "alice" in change.text and "Recall score threshold: 0.55 → 0.95" in " ".join(change.text.split())
    shot(browser, "12-settings-history-who-changed-it")
    browser.find_elements(By.CSS_SELECTOR, "#change-history tbody tr td:first-child a")[1].click()  # the version before
    assert browser.find_element(By.ID, "id_recall_score_threshold").get_attribute("value") == "0.55"
    browser.find_element(By.CSS_SELECTOR, "input[value=Revert]").click()
    wait(browser, ready.presence_of_element_located((By.CSS_SELECTOR, ".messagelist .success")))
    assert RetrievalSettings.objects.get(pk=1).recall_score_threshold == 0.55
    shot(browser, "13-threshold-reverted")

    browser.get(live_server.url + f"/admin/profiles/recallevent/{event.pk}/change/")
    browser.find_element(By.ID, "replay-link").click()
    browser.find_element(By.ID, "replay-now").click()
    table = wait(browser, ready.presence_of_element_located((By.ID, "replay-compare")))
    changes = [cell.text for cell in table.find_elements(By.CSS_SELECTOR, "td:last-child")]
    assert changes and set(changes) == {"new"}
    assert "deploy.md" in table.text and "Deployed ovsite" in browser.find_element(By.ID, "replay-rendered").text
    assert RecallEvent.objects.count() == 1  # the replay is not traffic
    shot(browser, "14-replay-then-and-now")


def test_what_did_rewrites_cost_this_week(browser, live_server, rewrites):  # noqa: F811
    log_in(browser, live_server)
    browser.find_element(By.LINK_TEXT, "Recall events").click()  # any page: the sidebar links the dashboards
    sidebar(browser, "LLM cost")
    assert len(wait(browser, charts_drawn)) == 5
    by_purpose = browser.find_element(By.ID, "per-rewrite-purpose")
    cells = {
        row.get_attribute("data-key"): [c.text for c in row.find_elements(By.TAG_NAME, "td")]
        for row in by_purpose.find_elements(By.CSS_SELECTOR, "tr[data-key]")
    }
    assert cells["chat"] == ["chat", "1", "1000", "10", "0.0010 USD"]
    assert cells["coding"][:4] == ["coding", "2", "500", "20"]
    by_model = browser.find_element(By.ID, "per-rewrite-model").text
    assert "planner-a" in by_model and "planner-b" in by_model
    csv_link = browser.find_element(By.ID, "csv-rewrite-purposes").get_attribute("href")
    assert httpx.get(csv_link, cookies={c["name"]: c["value"] for c in browser.get_cookies()}).status_code == 200
    shot(browser, "20-rewrite-cost")


def test_the_dashboards_of_an_empty_database_say_what_will_appear(browser, live_server, seeded):
    log_in(browser, live_server)
    for link, name in (("Recall traffic", "30-empty-recall-traffic"), ("LLM cost", "31-empty-llm-cost")):
        browser.get(live_server.url + "/admin/")
        browser.find_element(By.LINK_TEXT, link).click()
        empty = wait(browser, ready.visibility_of_element_located((By.ID, "empty-state")))
        assert "/api/v1/search/recall" in empty.text
        assert not browser.find_elements(By.CSS_SELECTOR, ".dashboard-chart, svg.main-svg")
        shot(browser, name)
