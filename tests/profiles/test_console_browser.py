"""The console in a real browser: headless Chromium (Debian's `chromium` + `chromium-driver`, installed by
`make test`) driven by Selenium. Screenshots go to tests/artefacts/ (git-ignored)."""

import datetime as dt
import json
import shutil
from decimal import Decimal
from pathlib import Path

import httpx
import pytest
from django.contrib.auth.models import User
from django.db.models import Sum
from django.utils import timezone
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ready
from selenium.webdriver.support.ui import Select, WebDriverWait

from core.models import Account, ApiKey, hash_key
from profiles.models import LLMUsage, ModelPrice, RecallEvent

ARTEFACTS = Path(__file__).resolve().parents[1] / "artefacts"
CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")


@pytest.fixture
def browser():
    if not (CHROMIUM and CHROMEDRIVER):
        pytest.fail("chromium and chromium-driver are missing: `make test` installs them (make browser)")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1400,1800",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.implicitly_wait(0)
    ARTEFACTS.mkdir(exist_ok=True)
    yield driver
    driver.quit()


def wait(driver, condition, timeout: float = 30):
    return WebDriverWait(driver, timeout).until(condition)


def shot(driver, name: str) -> None:
    driver.save_screenshot(str(ARTEFACTS / f"{name}.png"))


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
    wait(driver, ready.presence_of_element_located((By.ID, "dashboards")))
    shot(driver, "01-admin-index")


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
    assert len(wait(browser, charts_drawn)) == 7
    events = RecallEvent.objects.all()  # the seeded three and the /search call above
    totals = events.aggregate(used=Sum("used_tokens"), dropped=Sum("dropped"))
    assert browser.find_element(By.ID, "total-requests").text == str(events.count()) == "4"
    assert browser.find_element(By.ID, "total-mean-used").text == f"{totals['used'] / events.count():.1f}"
    assert browser.find_element(By.ID, "total-dropped").text == str(totals["dropped"])
    shot(browser, "04-recall-traffic")

    browser.get(live_server.url + "/admin/")
    browser.find_element(By.LINK_TEXT, "LLM cost").click()
    assert len(wait(browser, charts_drawn)) == 3
    usage = LLMUsage.objects.aggregate(prompt=Sum("prompt_tokens"), completion=Sum("completion_tokens"))
    assert browser.find_element(By.ID, "total-prompt").text == str(usage["prompt"]) == "4200"
    assert browser.find_element(By.ID, "total-completion").text == str(usage["completion"])
    assert browser.find_element(By.ID, "total-cost").text == "0.0092 USD"  # 3000 × 2/M + 400 × 8/M
    shot(browser, "05-llm-cost")

    today = timezone.now().date().isoformat()
    browser.get(f"{live_server.url}/admin/dashboards/llm-cost/?since={today}&until={today}")
    assert len(wait(browser, charts_drawn)) == 3
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
