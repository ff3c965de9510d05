"""Every page as readers meet it: accessibility, phone width, code width, page weight.

Runs the current axe-core (the npm package, pinned in tools/setup.sh, which installs
it into ``.venv/axe`` as it installs the Python packages; nothing is downloaded at test
time) with the WCAG 2.1 A and AA rules on every page of
_toc.yml in Debian's Chromium, and measures at a laptop width (1366 px) and a
phone width (390 px). Everything found is written to ``test-artifacts/site-checks/``
(axe.json, layout.json, weight.json) and phone screenshots to
``test-artifacts/screenshots-phone/``. Asserted: no serious or critical axe
violation; no element of any article reaches past a 390 px screen unless it
sits in a scrolling container; under 5% of the code blocks are wider than the
column at 1366 px.
"""

import json
import time
from pathlib import Path

import pytest
from helpers_site import AXE_RUN_JS, PAGES, axe_source, browser, site, slug  # noqa: F401 (fixtures)

pytestmark = pytest.mark.book

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts" / "site-checks"
PHONE_SHOTS = ROOT / "test-artifacts" / "screenshots-phone"  # test_browser.py empties screenshots/
RESULTS: dict[str, dict] = {"axe": {}, "layout": {}, "weight": {}}

# elements of the article that reach past the viewport without a scrolling container around them
PAST_THE_EDGE_JS = """
const W = document.documentElement.clientWidth, out = [];
for (const el of document.querySelectorAll('main article *')) {
  const r = el.getBoundingClientRect();
  if (r.width === 0 || r.right <= W + 1) continue;
  let p = el.parentElement, contained = false;
  while (p && !contained) {
    contained = ['auto', 'scroll', 'hidden', 'clip'].includes(getComputedStyle(p).overflowX)
      && p.getBoundingClientRect().right <= W + 1;
    p = p.parentElement;
  }
  if (!contained) out.push(el.tagName.toLowerCase() + ': ' + (el.textContent || '').trim().slice(0, 60));
}
return out.slice(0, 5);
"""
WIDE_CODE_JS = """
return Array.from(document.querySelectorAll('main article pre'))
  .map(p => p.scrollWidth > p.clientWidth + 1);
"""
WEIGHT_JS = """
const nav = performance.getEntriesByType('navigation')[0];
const res = performance.getEntriesByType('resource');
const size = e => e.encodedBodySize || e.transferSize || 0;
return {html: nav ? size(nav) : 0, resources: res.length,
        bytes: (nav ? size(nav) : 0) + res.reduce((a, e) => a + size(e), 0),
        largest: res.sort((a, b) => size(b) - size(a)).slice(0, 3)
                    .map(e => [e.name.split('/').pop(), size(e)])};
"""


@pytest.fixture(scope="module", autouse=True)
def _write_results():
    yield
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for name, data in RESULTS.items():
        if data:
            (ARTIFACTS / f"{name}.json").write_text(json.dumps(data, indent=1), encoding="utf-8")


def _open(driver, url, width):
    driver.set_window_size(width, 900)
    driver.get(url)
    time.sleep(0.3)  # layout settles (fonts, MathJax's first pass)


@pytest.mark.parametrize("entry", PAGES)
def test_page_is_accessible_and_fits(entry, browser, site):  # noqa: F811 (fixtures imported above)
    base, _html = site
    url = f"{base}{entry}.html"
    _open(browser, url, 1366)
    browser.execute_script(axe_source())
    browser.set_script_timeout(120)
    violations = browser.execute_async_script(AXE_RUN_JS)
    RESULTS["axe"][entry] = violations
    wide = browser.execute_script(WIDE_CODE_JS)
    weight = browser.execute_script(WEIGHT_JS)
    RESULTS["weight"][entry] = weight
    _open(browser, url, 390)
    past_edge = browser.execute_script(PAST_THE_EDGE_JS)
    PHONE_SHOTS.mkdir(parents=True, exist_ok=True)
    browser.execute_script("window.scrollTo(0, 0);")
    (PHONE_SHOTS / f"{slug(entry)}.png").write_bytes(browser.get_screenshot_as_png())  # the first screen
    RESULTS["layout"][entry] = {
        "code_blocks": len(wide),
        "wider_than_column_1366": sum(wide),
        "past_the_edge_390": past_edge,
    }
    serious = [v for v in violations if v["impact"] in ("serious", "critical")]
    assert not serious, f"{entry}: serious or critical accessibility violations: {serious}"
    assert not past_edge, f"{entry}: at 390 px these reach past the screen: {past_edge}"


def test_code_blocks_fit_the_column_at_a_laptop_width(browser, site):  # noqa: F811
    """Under 5% of all code blocks of the site are wider than the column at 1366 px."""
    base, _html = site
    total = wide = 0
    for entry in PAGES:
        if entry in RESULTS["layout"]:
            total += RESULTS["layout"][entry]["code_blocks"]
            wide += RESULTS["layout"][entry]["wider_than_column_1366"]
            continue
        _open(browser, f"{base}{entry}.html", 1366)
        flags = browser.execute_script(WIDE_CODE_JS)
        total, wide = total + len(flags), wide + sum(flags)
    RESULTS["layout"]["_share_wider_than_column_1366"] = {"wide": wide, "total": total}
    assert total and wide / total < 0.05, f"{wide} of {total} code blocks are wider than the column"


# --- the explorers, opened (book/_ext/course_explorers.py; tests/site/test_explorers.py checks their numbers)

OPEN_EXPLORERS_JS = """
const done = arguments[arguments.length - 1];
const all = Array.from(document.querySelectorAll('details.course-explorer'));
all.forEach(d => { d.open = true; });
const state = d => d.querySelector('.course-explorer-body').dataset.state;
const ready = () => all.every(d => ['ready', 'error'].includes(state(d)));
const t0 = Date.now();
(function wait() {
  if (ready() || Date.now() - t0 > 60000) done(all.map(d => [d.dataset.explorer, state(d)]));
  else setTimeout(wait, 100); })();
"""
# every control of the open explorers and self-checks: its accessible name, and whether keyboard
# focus draws a visible outline
CONTROLS_JS = """
const out = [];
for (const el of document.querySelectorAll('.course-explorer input, .course-explorer select,'
    + ' .course-explorer button, .course-explorer summary, .course-quiz input, .course-quiz button')) {
  const id = el.id, label = id ? document.querySelector('label[for="' + id + '"]') : null;
  const name = (el.getAttribute('aria-label') || (label && label.textContent) || el.textContent || '').trim();
  el.focus();
  const s = getComputedStyle(el);
  out.push({tag: el.tagName.toLowerCase(), type: el.type || '', name: name,
            focused: document.activeElement === el,
            outline: s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) >= 2});
}
return out;
"""


def _explorer_pages() -> list[str]:
    import sys

    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    try:
        from course_explorers import load_placements
    finally:
        sys.path.pop(0)
    return sorted(f"book/{stem}" for stem in load_placements(ROOT))


@pytest.mark.parametrize("entry", _explorer_pages())
def test_open_explorers_are_accessible_operable_and_fit(entry, browser, site):  # noqa: F811
    """Every explorer of the page opened: axe-core 0 serious/critical, every control named and
    reachable by keyboard with a visible focus outline, nothing past the edge at 390 px."""
    from selenium.webdriver.common.keys import Keys

    base, _html = site
    _open(browser, f"{base}{entry}.html", 1366)
    browser.set_script_timeout(120)
    states = browser.execute_async_script(OPEN_EXPLORERS_JS)
    assert states and all(state == "ready" for _, state in states), f"{entry}: {states}"
    browser.execute_script(axe_source())
    violations = browser.execute_async_script(AXE_RUN_JS)
    RESULTS["axe"][f"{entry} (explorers open)"] = violations
    serious = [v for v in violations if v["impact"] in ("serious", "critical")]
    assert not serious, f"{entry}, explorers open: serious or critical accessibility violations: {serious}"
    # keyboard: Tab from the page's start reaches the first explorer's summary
    browser.find_element("tag name", "body").send_keys(Keys.TAB)
    controls = browser.execute_script(CONTROLS_JS)
    unnamed = [c for c in controls if not c["name"]]
    assert not unnamed, f"{entry}: controls without a name: {unnamed[:5]}"
    unfocusable = [c for c in controls if not c["focused"] and c["type"] != "radio"]
    assert not unfocusable, f"{entry}: controls that cannot take focus: {unfocusable[:5]}"
    # :focus-visible applies to keyboard focus; programmatic focus after a key press counts as such
    no_outline = [
        c for c in controls if not c["outline"] and c["type"] not in ("radio", "checkbox", "range", "file")
    ]
    assert not no_outline, f"{entry}: focused controls without a visible outline: {no_outline[:5]}"
    _open(browser, f"{base}{entry}.html", 390)
    browser.execute_async_script(OPEN_EXPLORERS_JS)
    past_edge = browser.execute_script(PAST_THE_EDGE_JS)
    PHONE_SHOTS.mkdir(parents=True, exist_ok=True)
    browser.execute_script(
        "const d = document.querySelector('details.course-explorer');"
        "if (d) d.scrollIntoView({block: 'start'});"
    )
    (PHONE_SHOTS / f"{slug(entry)}--explorer.png").write_bytes(browser.get_screenshot_as_png())
    assert not past_edge, f"{entry}, explorers open: at 390 px these reach past the screen: {past_edge}"
