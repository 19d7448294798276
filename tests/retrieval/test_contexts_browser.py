"""Stored contexts in a real browser (headless Chromium, as tests/profiles/test_console_browser.py): an operator
answers "what is in this account?" and "why did the agent not see X?" from the console alone. Screenshots go to
tests/artefacts/ (git-ignored)."""

import httpx
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions as ready
from selenium.webdriver.support.ui import Select

from retrieval.models import Context
from tests.browser import shot, wait
from tests.conftest import hit_uris
from tests.profiles.test_console_browser import browser, log_in  # noqa: F401 (browser: a fixture)
from tests.retrieval.test_contexts_admin import BILLING, KAFKA, TEA, VACUUM, store  # noqa: F401 (store: a fixture)


def listed(driver) -> list[str]:
    wait(driver, ready.presence_of_element_located((By.ID, "changelist")))
    return [cell.text for cell in driver.find_elements(By.CSS_SELECTOR, "#result_list tbody th.field-node_uri a")]


def left_page(driver, act) -> None:
    """`act`, then wait until the page it leaves is gone: the next page has a changelist too, and reading it
    before the navigation ends reads the old one's rows, or rows going stale under the reader."""
    page = driver.find_element(By.TAG_NAME, "html")
    act()
    wait(driver, ready.staleness_of(page))


def filter_by(driver, title: str, choice: str) -> None:
    links = driver.find_elements(By.CSS_SELECTOR, f'#changelist-filter details[data-filter-title="{title}"] a')
    [link] = [link for link in links if link.text == choice]
    left_page(driver, lambda: driver.execute_script("arguments[0].click()", link))  # below the sidebar's fold


def search(driver, term: str) -> list[str]:
    box = driver.find_element(By.ID, "searchbar")
    box.clear()
    left_page(driver, lambda: box.send_keys(term, Keys.RETURN))
    return listed(driver)


def open_node(driver, uri: str) -> None:
    driver.find_element(By.LINK_TEXT, uri).click()
    wait(driver, ready.presence_of_element_located((By.ID, "visibility")))


def test_what_is_in_an_account(browser, live_server, store):  # noqa: F811 (fixtures)
    log_in(browser, live_server)
    browser.find_element(By.LINK_TEXT, "Contexts").click()
    assert set(listed(browser)) == set(Context.objects.values_list("uri", flat=True))
    shot(browser, "contexts-01-all-accounts")

    filter_by(browser, "account", "acme")
    acme = listed(browser)
    assert TEA in acme and set(acme) == set(Context.objects.filter(account=store).values_list("uri", flat=True))
    shot(browser, "contexts-02-account-acme")

    browser.get(live_server.url + "/admin/retrieval/context/")
    filter_by(browser, "account", "default")
    filter_by(browser, "bucket", "resources")
    resources = listed(browser)
    assert KAFKA in resources and TEA not in resources
    assert {
        browser.find_element(By.XPATH, f'//tr[th/a="{uri}"]/td[@class="field-bucket"]').text for uri in resources
    } == {"resources"}
    shot(browser, "contexts-03-default-resources")

    assert sorted(search(browser, "viking://resources/runbooks")) == ["viking://resources/runbooks", KAFKA, VACUUM]
    shot(browser, "contexts-04-uri-prefix-search")
    open_node(browser, "viking://resources/runbooks")
    shot(browser, "contexts-05-directory")
    browser.find_element(By.ID, "children-link").click()
    assert sorted(listed(browser)) == [KAFKA, VACUUM]
    shot(browser, "contexts-06-children")

    open_node(browser, KAFKA)
    page = browser.find_element(By.ID, "content").text
    kafka = Context.objects.get(uri=KAFKA)
    assert kafka.content in page and f"{len(kafka.embedding)} dimensions" in page
    assert "Ready and embedded by" in browser.find_element(By.CSS_SELECTOR, "#visibility li.success").text
    shot(browser, "contexts-07-file")

    browser.get(live_server.url + "/admin/retrieval/context/")
    found = search(browser, "consumer lag")
    assert KAFKA in found and VACUUM not in found
    shot(browser, "contexts-08-text-search")

    search(browser, BILLING)
    billing = Context.objects.get(uri=BILLING).pk
    browser.find_element(By.CSS_SELECTOR, f'#result_list input.action-select[value="{billing}"]').click()
    Select(browser.find_element(By.NAME, "action")).select_by_value("delete_nodes")
    browser.find_element(By.CSS_SELECTOR, "button[name=index]").click()
    wait(browser, ready.presence_of_element_located((By.ID, "delete-nodes")))
    assert "document" in browser.find_element(By.ID, "delete-nodes").text
    shot(browser, "contexts-09-delete-confirmation")
    browser.find_element(By.ID, "confirm-delete").click()
    message = wait(browser, ready.presence_of_element_located((By.CSS_SELECTOR, ".messagelist .success")))
    assert message.text.startswith("Deleted 1 selected node(s)")
    assert not Context.objects.filter(uri__startswith=BILLING).exists()
    shot(browser, "contexts-10-deleted")


def test_why_the_agent_did_not_see_a_note(browser, live_server, api, remote_embedder):  # noqa: F811 (the fixture)
    remote_embedder.script.mode = "error"
    api.write(KAFKA, "Kafka consumer lag alerts fire above 10k messages. Restart the consumer group.")
    remote_embedder.script.mode = "ok"
    api.write(VACUUM, "Vacuum the bloated tables weekly.")

    def agent_finds() -> list[str]:
        response = httpx.post(live_server.url + "/api/v1/search/find", json={"query": "kafka consumer lag"}, timeout=60)
        assert response.status_code == 200, response.text
        return hit_uris(response.json()["result"])

    assert KAFKA not in agent_finds()

    log_in(browser, live_server)
    browser.find_element(By.LINK_TEXT, "Contexts").click()
    assert KAFKA in search(browser, "viking://resources/runbooks/kafka")
    filter_by(browser, "state", "failed")
    assert listed(browser) == [KAFKA]
    shot(browser, "contexts-11-failed-nodes")
    open_node(browser, KAFKA)
    error = browser.find_element(By.CSS_SELECTOR, "#visibility li.error").text
    assert error.startswith("Failed after 1 attempt(s):") and "InternalServerError" in error
    shot(browser, "contexts-12-failed-node")

    browser.find_element(By.ID, "node-reembed_nodes").click()
    message = wait(browser, ready.presence_of_element_located((By.CSS_SELECTOR, ".messagelist .success")))
    assert message.text == "Re-embedding 1 node(s) in 1 task(s): done."
    shot(browser, "contexts-13-reembedded")
    assert Context.objects.get(uri=KAFKA).state == "ready"
    assert KAFKA in agent_finds()
