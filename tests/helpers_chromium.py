"""One headless Chromium for every test that opens a page (the site's pages, the class report).

Debian's Chromium and chromedriver (``.ci/run`` installs them with apt), driven by
Selenium, with a fresh profile folder that is removed afterwards. ``chromium_or_skip``
gives the two paths or skips the test saying what is missing.
"""

from __future__ import annotations

import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

import pytest

CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser")
CHROMEDRIVER_CANDIDATES = ("/usr/bin/chromedriver",)
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--window-size=1280,900",
)


def _find(candidates, name):
    for path in candidates:
        if Path(path).is_file():
            return path
    return shutil.which(name)


def chromium_paths() -> tuple[str | None, str | None]:
    """(chromium, chromedriver): Debian's, else whatever is on PATH; None where missing."""
    return _find(CHROMIUM_CANDIDATES, "chromium"), _find(CHROMEDRIVER_CANDIDATES, "chromedriver")


# Every skip of a browser test starts with this; tests that run other tests (test_unprivileged)
# accept it as a documented skip, so the suite is green with and without Chromium.
BROWSER_SKIP = "browser test skipped"


def chromium_or_skip() -> tuple[str, str]:
    """(chromium, chromedriver), or skip the calling test saying which is missing."""
    chromium, chromedriver = chromium_paths()
    if not chromium or not chromedriver:
        pytest.skip(
            f"{BROWSER_SKIP}: Debian's Chromium and chromedriver are not installed "
            f"(chromium: {chromium}, chromedriver: {chromedriver}); "
            "install them with `apt-get install chromium chromium-driver` (.ci/run does this)"
        )
    pytest.importorskip(
        "selenium.webdriver", reason=f"{BROWSER_SKIP}: the selenium package is not installed in .venv"
    )
    return chromium, chromedriver


@contextmanager
def headless_chromium(chromium: str, chromedriver: str, prefix: str = "course-chromium-"):
    """A headless Chromium driven by selenium, with a fresh profile folder removed afterwards."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    profile = tempfile.mkdtemp(prefix=prefix)
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=chromedriver), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
