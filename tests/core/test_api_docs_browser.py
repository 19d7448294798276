"""The API reference at /api/docs/ in a real browser, from the server `make run` starts (uvicorn, the ASGI app):
Swagger UI and its files come from this server (drf-spectacular-sidecar, served by WhiteNoise), so the page works
offline and asks no other host for anything. Headless Chromium driven by Selenium, as in
tests/profiles/test_console_browser.py; the screenshot goes to tests/artefacts/ (git-ignored)."""

import json
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

import httpx
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ready
from selenium.webdriver.support.ui import WebDriverWait

from tests.browser import ARTEFACTS, chromium
from tests.live import child_env, database_env, start_asgi

SEARCH_OPERATIONS = ("search_find", "search_search", "search_recall")


@pytest.fixture(scope="module")
def server(django_db_setup, tmp_path_factory):
    """One server for the module, on the test database; nothing here writes to it (a keyless caller is not
    counted by the rate limit)."""
    process, url = start_asgi(tmp_path_factory.mktemp("api-docs"), child_env(**database_env()))
    yield url
    process.stop()


@pytest.fixture
def browser():
    driver = chromium(network_log=True)
    yield driver
    driver.quit()


class Assets(HTMLParser):
    """The URLs a page loads by its markup: scripts, stylesheets and icons."""

    def __init__(self):
        super().__init__()
        self.urls = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "script" and attrs.get("src"):
            self.urls.append(attrs["src"])
        if tag == "link" and attrs.get("href"):
            self.urls.append(attrs["href"])


def origin(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.scheme, parts.netloc


def test_the_page_names_no_other_host_and_its_files_are_served(server):
    page = httpx.get(server + "/api/docs/", timeout=30)
    assert page.status_code == 200 and page.headers["Content-Type"].startswith("text/html")
    assert "http://" not in page.text and "https://" not in page.text
    parser = Assets()
    parser.feed(page.text)
    assert len(parser.urls) == 4, parser.urls  # the stylesheet, the icon and Swagger UI's two scripts
    for url in parser.urls:
        assert url.startswith("/static/drf_spectacular_sidecar/"), url
        asset = httpx.get(urljoin(server, url), timeout=30)
        assert asset.status_code == 200 and asset.content, url


def network_requests(driver) -> list[str]:
    """The URL of every request the page made (Chrome's DevTools log), whatever its outcome."""
    return [
        message["params"]["request"]["url"]
        for entry in driver.get_log("performance")
        for message in [json.loads(entry["message"])["message"]]
        if message["method"] == "Network.requestWillBeSent"
    ]


def test_the_reference_renders_the_search_operations_from_this_server_alone(server, browser):
    browser.get(server + "/api/docs/")
    wait = WebDriverWait(browser, 60)
    for operation_id in SEARCH_OPERATIONS:
        wait.until(ready.presence_of_element_located((By.ID, f"operations-search-{operation_id}")))
    tags = [t.get_attribute("data-tag") for t in browser.find_elements(By.CSS_SELECTOR, ".opblock-tag")]
    assert tags[:2] == ["search", "sessions"] and "api" not in tags, tags
    find = browser.find_element(By.ID, "operations-search-search_find")
    assert "/api/v1/search/find" in find.text and "Ranked hits for a query" in find.text

    # Opened, /search shows its three request examples and the error envelope of its 4xx.
    browser.find_element(By.CSS_SELECTOR, "#operations-search-search_search .opblock-summary-control").click()
    opened = wait.until(
        ready.presence_of_element_located((By.CSS_SELECTOR, "#operations-search-search_search .examples-select"))
    )
    assert [o.text for o in opened.find_elements(By.TAG_NAME, "option")][:3] == [
        "mode list: the find hits",
        "mode context: a token-budgeted block to inject",
        "mode bootstrap: the block a session starts with, no query",
    ]
    responses = browser.find_element(By.CSS_SELECTOR, "#operations-search-search_search .responses-table").text
    assert "invalid arguments: details.validation_errors lists each one" in responses
    browser.save_screenshot(str(ARTEFACTS / "api-docs-search.png"))

    requests = network_requests(browser)
    assert server + "/api/schema/" in requests and any(r.endswith("swagger-ui-bundle.js") for r in requests)
    elsewhere = [r for r in requests if urlsplit(r).scheme not in ("data", "blob") and origin(r) != origin(server)]
    assert not elsewhere, elsewhere
    # The same from the page's side: everything it loaded came from this origin.
    loaded = browser.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    assert loaded and all(origin(r) == origin(server) for r in loaded), loaded
