"""The real-browser lane's driver: headless Chromium (Debian's `chromium` + `chromium-driver`, installed by
`make test`) under Selenium. Screenshots go to tests/artefacts/ (git-ignored)."""

import shutil
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.support.ui import WebDriverWait

ARTEFACTS = Path(__file__).resolve().parent / "artefacts"
CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")


def chromium(*, network_log: bool = False) -> webdriver.Chrome:
    """A headless Chromium; with `network_log`, Chrome's performance log records every request a page makes."""
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
    if network_log:
        options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.implicitly_wait(0)
    ARTEFACTS.mkdir(exist_ok=True)
    return driver


def wait(driver, condition, timeout: float = 30):
    return WebDriverWait(driver, timeout).until(condition)


def shot(driver, name: str) -> None:
    driver.save_screenshot(str(ARTEFACTS / f"{name}.png"))
