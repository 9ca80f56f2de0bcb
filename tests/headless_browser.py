"""Debian's headless Chromium driven by Selenium, shared by the browser tests
(tests/test_web_browser.py, tests/test_report_browser.py).

`.ci/run` installs chromium and chromium-driver; under CI a missing browser fails the test,
locally it skips."""

from __future__ import annotations

import os
import shutil

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"


def browser_or_skip():
    """A headless Chrome WebDriver (1280x1300 window), or fail (CI) / skip (locally)."""
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not os.path.exists(p)]
    if missing:
        message = f"no headless browser ({', '.join(missing)}); .ci/run installs chromium"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,1300", "--disable-extensions"):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
