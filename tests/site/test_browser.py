"""Every page of _toc.yml, opened in headless Chromium as a reader would see it.

The strictly built site (``built_book``) is served on 127.0.0.1 and each page is
loaded in Debian's Chromium, driven by Selenium and Debian's chromedriver. A page
passes when

* its math is typeset: every ``.math`` element holds MathJax output and none is
  a MathJax error (with the local MathJax of book/_ext/course_mathjax.py; a site
  built with the CDN MathJax cannot typeset offline, so then only the MathJax
  script tag is checked);
* every figure loaded (``naturalWidth > 0``);
* a notebook page shows its launch buttons (Binder, Colab, JupyterHub);
* the browser console has no error, except failures to reach external hosts
  (this machine is offline).

A full-page screenshot of each page goes to ``test-artifacts/screenshots/``.
The test is skipped, saying why, where Chromium, chromedriver or Selenium is
missing (``.ci/run`` installs Chromium with apt).
"""

from __future__ import annotations

import re
import shutil
import time
import warnings
from pathlib import Path

import pytest
from helpers_site import (
    PAGES,
    branch_of,
    browser,  # noqa: F401 (fixture)
    ext_module,
    notebook_entries,
    site,  # noqa: F401 (fixture)
    slug,
)

pytestmark = pytest.mark.book

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "test-artifacts" / "screenshots"
# The repository the session's build finds (the same environment): its buttons, or none.
REPOSITORY = ext_module("course_repository").find_repository(ROOT, branch_of(ROOT))
MAX_SCREENSHOT_HEIGHT = 24000  # px; longer pages are cut there
MATH_TIMEOUT = 30  # s


# JavaScript run in the page --------------------------------------------------------------------

RENDERED = "mjx-container, .MathJax_CHTML, .MathJax, .MathJax_SVG, .MathJax_Display"
UNRENDERED_MATH_JS = f"""
return Array.from(document.querySelectorAll('main .math'))
  .filter(el => !el.querySelector('{RENDERED}'))
  .map(el => el.textContent.trim().slice(0, 80));
"""
MATH_ERRORS_JS = """
return Array.from(document.querySelectorAll('mjx-merror, .MathJax_Error, .noError, merror'))
  .map(el => (el.getAttribute('data-mjx-error') || el.textContent || '').trim().slice(0, 120));
"""
# Display equations (no equation number) whose typeset box is off the centre of its block.
OFF_CENTRE_MATH_JS = """
const out = [];
for (const block of document.querySelectorAll('main div.math')) {
  if (block.querySelector('.eqno')) continue;
  const eq = block.querySelector('mjx-math, .MJXc-display > .MathJax_CHTML, .MathJax_Display > .MathJax');
  if (!eq) continue;
  const b = block.getBoundingClientRect(), e = eq.getBoundingClientRect();
  if (b.width === 0 || e.width >= 0.7 * b.width) continue;
  const offset = (e.left + e.width / 2) - (b.left + b.width / 2);
  if (Math.abs(offset) > 0.15 * b.width) out.push(block.textContent.trim().slice(0, 60));
}
return out;
"""
MATHJAX_BUSY_JS = """
const mj = window.MathJax;
if (!mj) return true;
if (mj.Hub) return !(mj.isReady && mj.Hub.queue.pending === 0 && mj.Hub.queue.running === 0);
return !(mj.startup && mj.startup.document && mj.typesetPromise);
"""
IMAGES_JS = """
return Array.from(document.querySelectorAll('main img')).map(img => ({
  src: img.getAttribute('src') || '', url: img.currentSrc || img.src,
  complete: img.complete, width: img.naturalWidth}));
"""
LAUNCH_LINKS_JS = """
return Array.from(document.querySelectorAll('.dropdown-launch-buttons a, a.btn-launch'))
  .map(a => a.href);
"""


def _wait(driver, script, timeout, until=lambda value: not value):
    deadline = time.monotonic() + timeout
    while True:
        value = driver.execute_script(script)
        if until(value) or time.monotonic() > deadline:
            return value
        time.sleep(0.25)


def _screenshot(driver, path: Path) -> None:
    """A full-page PNG: the window is made as tall as the page, so that sticky parts
    (the header, the page's table of contents) sit where a reader sees them."""
    height_js = "return Math.ceil(document.documentElement.scrollHeight);"
    height = driver.execute_script(height_js)
    for _ in range(3):  # a taller window can change the layout: measure again
        driver.set_window_size(1280, min(max(height, 900), MAX_SCREENSHOT_HEIGHT))
        time.sleep(0.3)
        new_height = driver.execute_script(height_js)
        if new_height == height:
            break
        height = new_height
    driver.execute_script("window.scrollTo(0, 0);")
    path.write_bytes(driver.get_screenshot_as_png())


def _console_errors(driver, base_url: str) -> list[str]:
    errors = []
    for entry in driver.get_log("browser"):
        if entry.get("level") != "SEVERE":
            continue
        message = entry.get("message", "")
        urls = re.findall(r"(?:https?|wss?)://[^\s\"')]+", message)
        if urls and not any(url.startswith(base_url) for url in urls):
            continue  # an external host: unreachable from an offline machine, not the site's fault
        if "net::ERR_INTERNET_DISCONNECTED" in message or "net::ERR_NAME_NOT_RESOLVED" in message:
            if base_url not in message:
                continue
        errors.append(message)
    return errors


@pytest.fixture(scope="module", autouse=True)
def _fresh_screenshot_folder():
    shutil.rmtree(SCREENSHOTS, ignore_errors=True)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)


@pytest.mark.parametrize("entry", PAGES)
def test_page_renders_in_chromium(entry, browser, site):  # noqa: F811 (fixtures)
    base_url, html = site
    driver = browser
    driver.get_log("browser")  # drop what an earlier page left
    driver.set_window_size(1280, 900)
    driver.get(f"{base_url}{entry}.html")
    _wait(driver, "return document.readyState !== 'complete';", 30)
    local_mathjax = (html / "_static" / "mathjax").is_dir()
    page_math = driver.execute_script("return document.querySelectorAll('main .math').length;")
    problems = []

    # Math --------------------------------------------------------------------------------------
    if page_math:
        scripts = driver.execute_script(
            "return Array.from(document.scripts).map(s => s.getAttribute('src') || '');"
        )
        mathjax_scripts = [s for s in scripts if "mathjax" in s.lower()]
        if not mathjax_scripts:
            problems.append(f"{page_math} math elements but no MathJax script")
        if local_mathjax:
            unrendered = _wait(driver, UNRENDERED_MATH_JS, MATH_TIMEOUT)
            _wait(driver, MATHJAX_BUSY_JS, MATH_TIMEOUT)
            if unrendered:
                problems.append(f"{len(unrendered)} of {page_math} not typeset: {unrendered[:3]}")
            errors = driver.execute_script(MATH_ERRORS_JS)
            if errors:
                problems.append(f"MathJax errors: {errors[:5]}")
            off_centre = driver.execute_script(OFF_CENTRE_MATH_JS)
            if off_centre:
                problems.append(f"display equations not centred: {off_centre[:3]}")

    # Full-page screenshot (before the image check, which it helps: the whole page is laid out) --
    _screenshot(driver, SCREENSHOTS / f"{slug(entry)}.png")

    # Figures -----------------------------------------------------------------------------------
    images = _wait(driver, IMAGES_JS, 15, until=lambda imgs: all(i["complete"] for i in imgs))
    for img in images:
        external = re.match(r"(?:https?:)?//", img["src"]) and not img["url"].startswith(base_url)
        if not external and (not img["complete"] or img["width"] == 0):
            problems.append(f"figure not loaded: {img['src']}")
    source = ROOT / f"{entry}.ipynb"
    if not images and source.is_file() and "plt." in source.read_text(encoding="utf-8"):
        # A warning, not a failure: e.g. chapter 08 draws only once benchmark results are committed.
        warnings.warn(f"{entry}: the notebook plots with matplotlib but its page has no figure", stacklevel=1)

    # Launch links ------------------------------------------------------------------------------
    # The session's site was built for the repository this environment gives (COURSE_REPOSITORY
    # or a GitHub remote), or for none: then it must have no launch button at all (test_launch.py
    # checks both cases on unexecuted builds, whatever the environment).
    if entry in notebook_entries(ROOT):
        hrefs = driver.execute_script(LAUNCH_LINKS_JS)
        buttons = driver.find_elements("css selector", "button[aria-label='Launch interactive content']")
        services = (
            ("mybinder.org", "Binder", REPOSITORY.url is not None),
            ("colab.research.google.com", "Colab", REPOSITORY.url is not None),
            ("/hub/user-redirect/git-pull", "JupyterHub", bool(REPOSITORY.url and REPOSITORY.jupyterhub)),
        )
        for host, name, wanted in services:
            present = any(host in href for href in hrefs)
            if wanted and not present:
                problems.append(f"no {name} launch link in the page (found {hrefs})")
            if present and not wanted:
                problems.append(f"a {name} launch link without a repository or hub ({REPOSITORY.source})")
        visible = any(b.is_displayed() for b in buttons)
        if REPOSITORY.url is not None and not visible:
            problems.append("the launch button (rocket) is not visible in the header")
        if REPOSITORY.url is None and visible:
            problems.append(f"a launch button (rocket) on a site with no repository ({REPOSITORY.source})")

    # Console -----------------------------------------------------------------------------------
    problems += [f"console: {message}" for message in _console_errors(driver, base_url)]

    assert not problems, f"{entry}.html:\n  " + "\n  ".join(problems)


def test_screenshots_cover_every_page(browser, site):  # noqa: F811 (fixtures)
    """Runs after the pages (pytest keeps file order): one screenshot per _toc.yml entry,
    and an index.html in the screenshot folder to look through them."""
    missing = [e for e in PAGES if not (SCREENSHOTS / f"{slug(e)}.png").is_file()]
    rows = "\n".join(
        f'<h2>{entry}</h2><a href="{slug(entry)}.png"><img src="{slug(entry)}.png" width="640"></a>'
        for entry in PAGES
        if entry not in missing
    )
    (SCREENSHOTS / "index.html").write_text(
        f"<!doctype html><meta charset=utf-8><title>Screenshots</title>\n{rows}\n", encoding="utf-8"
    )
    assert not missing, f"no screenshot for {missing}"
