"""What a first visit to each page costs, and the icons drawn without Font Awesome's 1.5 MB script.

The theme loads ``fontawesome.js`` (1.49 MB: every Font Awesome icon as SVG
path data) on every page; book/_ext/course_icons.py drops it and cuts the icon
fonts to the icons the site shows. Checked on the strictly built site
(``built_book``):

* no page loads ``fontawesome.js``; the theme's ``@font-face`` rules use the cut
  fonts, and every icon class used by a page or a script, and every icon that a
  stylesheet draws, has its glyph in them (read with fontTools);
* in Chromium, each page opened with an empty cache (a first visit): every
  byte it loads, by kind, with the gzip size a web server would send; the icon
  fonts load (``document.fonts``) and every visible icon has a width. The
  figures go to ``test-artifacts/site-checks/page-weight.json``.

``python tests/site/test_page_weight.py SITE_HTML_FOLDER [OUT.json]`` measures
any built site the same way (used for the before/after figures).
"""

from __future__ import annotations

import gzip
import json
import re
import sys
import time
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "book" / "_ext"))
import course_icons  # noqa: E402

sys.path.pop(0)
if str(ROOT / "tests") not in sys.path:  # run as a script: helpers_chromium lives in tests/
    sys.path.append(str(ROOT / "tests"))
from helpers_site import PAGES, browser, site  # noqa: E402,F401 (fixtures)

ARTIFACTS = ROOT / "test-artifacts" / "site-checks"
# A page's icon fonts together, cut to the site's icons (the three whole WOFF2 fonts are 300 KB).
MAX_ICON_FONT_BYTES = 40_000

RESOURCES_JS = """
const nav = performance.getEntriesByType('navigation')[0];
const entries = [nav, ...performance.getEntriesByType('resource')].filter(e => e);
return entries.map(e => ({url: e.name, kind: e.initiatorType || 'navigation',
                          bytes: e.encodedBodySize || e.transferSize || 0}));
"""
FONTS_JS = """
const done = arguments[arguments.length - 1];
document.fonts.ready.then(() => done(Array.from(document.fonts)
  .filter(f => f.family.includes('Font Awesome'))
  .map(f => ({family: f.family, weight: f.weight, status: f.status}))));
"""
# Every icon the page shows: a visible element whose ::before or ::after is drawn with a Font
# Awesome font (the theme's <i class="fa-..."> and <span class="fa-...">, the admonitions'
# and external links' icons), with the character, the font and the size it is drawn at.
ICONS_JS = """
const out = [];
for (const el of document.querySelectorAll('body *')) {
  const box = el.getBoundingClientRect();
  if (el.offsetParent === null && getComputedStyle(el).position !== 'fixed') continue;
  for (const pseudo of ['::before', '::after']) {
    const s = getComputedStyle(el, pseudo);
    if (!s.fontFamily.includes('Font Awesome') || !s.content || s.content === 'none'
        || s.content === 'normal' || s.display === 'none') continue;
    out.push({cls: String(el.className.baseVal ?? el.className), pseudo: pseudo,
              content: s.content, family: s.fontFamily, weight: s.fontWeight,
              width: box.width, height: box.height, visible: s.visibility !== 'hidden'});
  }
}
return out;
"""
# (font family, weight) -> the Font Awesome font that draws it
FONT_FILES = {
    ("Font Awesome 6 Free", "900"): "fa-solid-900",
    ("Font Awesome 6 Free", "400"): "fa-regular-400",
    ("Font Awesome 6 Brands", "400"): "fa-brands-400",
}


def icon_font(family: str, weight: str) -> str | None:
    """The Font Awesome font (fa-solid-900, ...) a computed font-family and weight select."""
    for name in re.findall(r'"([^"]*Font Awesome[^"]*)"|(Font Awesome [^,]+)', family):
        name = (name[0] or name[1]).strip().replace("\\ ", " ")
        font = FONT_FILES.get((name, "900" if int(weight) >= 600 else "400"))
        if font:
            return font
    return None


def icon_chars(content: str) -> str:
    """The characters of a computed ``content`` value (a quoted string)."""
    value = content.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        value = value[1:-1]
    return course_icons.css_unescape(value)


def unglyphed_icons(icons: list[dict], cmaps: dict[str, set[int]]) -> list[str]:
    """The icons drawn with no glyph in their font (a box instead of the icon), or with no size."""
    bad = []
    for icon in icons:
        where = f"{icon['cls'] or '?'}{icon['pseudo']}"
        font = icon_font(icon["family"], icon["weight"])
        chars = [c for c in icon_chars(icon["content"]) if course_icons.is_icon_char(c)]
        if font is None:
            bad.append(f"{where}: font {icon['family']} {icon['weight']} is not one of the icon fonts")
        elif not chars:
            continue  # plain text drawn with the icon font's fallback
        elif missing := [f"U+{ord(c):04X}" for c in chars if ord(c) not in cmaps[font]]:
            bad.append(f"{where}: {missing} not in {font}")
        elif icon["visible"] and icon["width"] < 1:
            bad.append(f"{where}: drawn with no width")
    return bad


def _kind(url: str) -> str:
    path = urlsplit(url).path.lower()
    if "fontawesome" in path or "/webfonts/" in path:
        return "icons"
    if "mathjax" in path:
        return "mathjax"
    for suffix, kind in ((".html", "html"), (".js", "scripts"), (".css", "styles")):
        if path.endswith(suffix):
            return kind
    if re.search(r"\.(png|svg|jpg|jpeg|gif|webp|ico)$", path):
        return "images"
    if re.search(r"\.(woff2?|ttf|otf)$", path):
        return "fonts"
    return "other"


def _gzip_size(html: Path, base_url: str, url: str) -> int | None:
    if not url.startswith(base_url):
        return None
    path = html / unquote(urlsplit(url).path.lstrip("/"))
    if path.is_dir():
        path = path / "index.html"
    if not path.is_file():
        return None
    data = path.read_bytes()
    if re.search(r"\.(png|jpg|jpeg|gif|webp|woff2?)$", path.name):
        return len(data)  # already compressed: a server sends them as they are
    return len(gzip.compress(data, compresslevel=6))


def measure_page(driver, base_url: str, html: Path, entry: str) -> dict:
    """Open one page with an empty cache, wait until it stops loading, and return its weight."""
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd("Network.setCacheDisabled", {"cacheDisabled": True})
    driver.execute_cdp_cmd("Network.clearBrowserCache", {})
    driver.set_window_size(1366, 900)
    driver.get(f"{base_url}{entry}.html")
    deadline, last = time.monotonic() + 30, -1
    while time.monotonic() < deadline:  # MathJax and fonts load after the load event
        time.sleep(0.5)
        count = driver.execute_script("return performance.getEntriesByType('resource').length;")
        if count == last and driver.execute_script("return document.readyState") == "complete":
            break
        last = count
    driver.set_script_timeout(30)
    fonts = driver.execute_async_script(FONTS_JS)
    icons = driver.execute_script(ICONS_JS)
    resources = driver.execute_script(RESOURCES_JS)
    by_kind: dict[str, int] = {}
    gzipped = 0
    for res in resources:
        res["kind"] = _kind(res["url"])
        by_kind[res["kind"]] = by_kind.get(res["kind"], 0) + res["bytes"]
        size = _gzip_size(html, base_url, res["url"])
        gzipped += res["bytes"] if size is None else size
    largest = sorted(resources, key=lambda r: -r["bytes"])[:5]
    return {
        "bytes": sum(r["bytes"] for r in resources),
        "gzip_bytes": gzipped,
        "requests": len(resources),
        "by_kind": dict(sorted(by_kind.items(), key=lambda kv: -kv[1])),
        "largest": [[urlsplit(r["url"]).path.rsplit("/", 1)[-1], r["bytes"]] for r in largest],
        "urls": sorted(urlsplit(r["url"]).path for r in resources),
        "icon_fonts": fonts,
        "icons": icons,
    }


def summary(results: dict[str, dict]) -> dict:
    pages = [v for k, v in results.items() if not k.startswith("_")]
    total = [p["bytes"] for p in pages]
    return {
        "pages": len(pages),
        "bytes_min": min(total),
        "bytes_median": sorted(total)[len(total) // 2],
        "bytes_max": max(total),
        "gzip_bytes_median": sorted(p["gzip_bytes"] for p in pages)[len(pages) // 2],
        "icons_bytes_max": max(p["by_kind"].get("icons", 0) for p in pages),
    }


# --- the written site (no browser) -------------------------------------------------------------


@pytest.mark.book
def test_no_page_loads_the_icon_script_and_the_cut_fonts_hold_every_icon(built_book):
    from fontTools.ttLib import TTFont

    html, _ = built_book
    pages = course_icons.site_pages(html)
    assert pages
    with_script = [
        str(p.relative_to(html)) for p in pages if "fontawesome.js" in p.read_text(encoding="utf-8")
    ]
    assert not with_script, f"pages that still load fontawesome.js: {with_script}"

    css = (html / course_icons.THEME_CSS).read_text(encoding="utf-8")
    faces = re.findall(r"@font-face\{[^}]*Font Awesome[^}]*\}", css)
    assert len(faces) == 3 and all(".site.woff)" in face and ".woff2" not in face for face in faces), faces

    static = html / "_static"
    by_class, drawn = {}, set()
    for sheet in static.rglob("*.css"):
        classes, chars = course_icons.stylesheet_icons(sheet.read_text(encoding="utf-8", errors="replace"))
        by_class.update(classes)
        drawn |= chars
    used = set()
    for page in pages:
        used |= course_icons.icon_classes(page.read_text(encoding="utf-8")) & set(by_class)
    for script in static.rglob("*.js"):
        if script.name != "fontawesome.js" and "mathjax" not in script.parts:
            used |= course_icons.icon_classes(script.read_text(encoding="utf-8", errors="replace")) & set(
                by_class
            )
    assert {"fa-bars", "fa-magnifying-glass", "fa-download"} <= used, sorted(used)

    webfonts = html / course_icons.WEBFONTS
    cmaps = {
        name: set(TTFont(str(webfonts / f"{name}.site.woff")).getBestCmap()) for name in course_icons.FONTS
    }
    solid, brands = cmaps["fa-solid-900"], cmaps["fa-brands-400"]
    missing = [name for name in sorted(used) if ord(by_class[name]) not in solid | brands]
    missing += [f"U+{ord(c):04X} (a stylesheet's)" for c in sorted(drawn) if ord(c) not in solid | brands]
    assert not missing, f"icons without a glyph in the cut fonts: {missing}"
    sizes = {name: (webfonts / f"{name}.site.woff").stat().st_size for name in course_icons.FONTS}
    assert sum(sizes.values()) < MAX_ICON_FONT_BYTES, sizes


# --- a first visit, in Chromium ----------------------------------------------------------------


@pytest.fixture(scope="module")
def _weight_results():
    results: dict[str, dict] = {}
    yield results
    if results:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        results["_summary"] = summary(results)
        (ARTIFACTS / "page-weight.json").write_text(json.dumps(results, indent=1), encoding="utf-8")


@pytest.fixture(scope="module")
def _served_cmaps(site):  # noqa: F811 (fixture imported above)
    """The character sets of the fonts the site serves (the cut ones when course_icons cut them)."""
    from fontTools.ttLib import TTFont

    _, html = site
    webfonts = html / course_icons.WEBFONTS
    cmaps = {}
    for name in course_icons.FONTS:
        path = webfonts / f"{name}.site.woff"
        path = path if path.is_file() else webfonts / f"{name}.ttf"
        cmaps[name] = set(TTFont(str(path)).getBestCmap())
    return cmaps


@pytest.mark.book
@pytest.mark.parametrize("entry", PAGES)
def test_first_visit_weight(entry, browser, site, _weight_results, _served_cmaps):  # noqa: F811
    base_url, html = site
    result = measure_page(browser, base_url, html, entry)
    _weight_results[entry] = {k: v for k, v in result.items() if k not in ("urls", "icons")}
    assert not [u for u in result["urls"] if u.endswith("fontawesome.js")], f"{entry}: loads fontawesome.js"
    icon_bytes = result["by_kind"].get("icons", 0)
    assert icon_bytes < MAX_ICON_FONT_BYTES, f"{entry}: {icon_bytes} bytes of icons"
    failed = [f for f in result["icon_fonts"] if f["status"] == "error"]
    assert not failed, f"{entry}: icon fonts that did not load: {failed}"
    header = [i for i in result["icons"] if "fa-bars" in i["cls"] or "fa-magnifying-glass" in i["cls"]]
    assert header, f"{entry}: no sidebar toggle or search icon drawn (found {result['icons'][:5]})"
    bad = unglyphed_icons(result["icons"], _served_cmaps)
    assert not bad, f"{entry}: icons that would not draw: {bad[:5]}"


def main(argv: list[str]) -> int:
    """Measure a built site folder: python tests/site/test_page_weight.py HTML [OUT.json]."""
    from helpers_chromium import chromium_paths, headless_chromium
    from helpers_site import served

    html = Path(argv[0]).resolve()
    results = {}
    with served(html) as base_url, headless_chromium(*chromium_paths(), "course-weight-") as driver:
        for entry in PAGES:
            if (html / f"{entry}.html").is_file():
                results[entry] = measure_page(driver, base_url, html, entry)
    from fontTools.ttLib import TTFont

    webfonts = html / course_icons.WEBFONTS
    cmaps = {}
    for name in course_icons.FONTS:
        path = webfonts / f"{name}.site.woff"
        cmaps[name] = set(TTFont(str(path if path.is_file() else webfonts / f"{name}.ttf")).getBestCmap())
    for entry, result in results.items():
        for problem in unglyphed_icons(result["icons"], cmaps):
            print(f"{entry}: {problem}")
    results["_summary"] = summary(results)
    if len(argv) > 1:
        Path(argv[1]).write_text(json.dumps(results, indent=1), encoding="utf-8")
    print(json.dumps(results["_summary"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


# --- the explorers and self-checks (book/_ext/course_explorers.py) -------------------------------
#
# Measured with main() above on the same checkout built without and with them (execution off,
# 2026-11-27): a chapter page's first visit grew by 22-31 kB (6-8 kB gzipped), 2 requests
# (loader.js, explorers.css), and every other page by 5 kB (the theme's searchindex.js, which now
# indexes the questions). Of that, loader.js + explorers.css + the questions' and closed
# explorers' HTML were 16.7-22.1 kB per chapter page; opening every explorer of a page added
# 10-13 kB (chapter 10: 395 kB, its model). The budgets below hold the first visit to that: the
# explorers' code and chapter 10's model load only when the reader opens an explorer.
MAX_EXPLORER_FIRST_VISIT_BYTES = 32_000  # loader.js + explorers.css + the questions' and explorers' HTML
MAX_OPENED_EXPLORERS_BYTES = 480_000  # what opening every explorer of a page adds (ch10: its 375 kB model)
# Chapter 12's explorer runs the shipped checkpoint: 3.3 MB of float32 weights, fetched only when the
# reader opens that explorer (checked below: not loaded on a first visit), counted on their own.
OPENED_WEIGHT_FILES = ("ch12-char-model.bin",)
MAX_OPENED_WEIGHTS_BYTES = 5_000_000  # the checkpoint's own limit (issue 45: at most 5 MB)
LAZY_FILES = (
    "common.js",
    "ch03.js",
    "ch04.js",
    "ch05.js",
    "ch06.js",
    "ch08.js",
    "ch09.js",
    "ch10.js",
    "ch10-copy.json",
    "ch11.js",
    "ch11-vit.json",
    "ch12.js",
    "ch12-char-model.bin",
    "ch13.js",
)
EXPLORER_RESOURCES_JS = """
return performance.getEntriesByType('resource')
  .filter(e => e.name.includes('/_static/explorers/'))
  .map(e => [e.name.split('/').pop().split('?')[0], e.encodedBodySize || e.transferSize || 0]);
"""


def explorer_html_bytes(page: Path) -> int:
    """Bytes of the page's HTML that course_explorers wrote: its questions and closed explorers."""
    text = page.read_text(encoding="utf-8")
    parts = re.findall(r'<section class="course-quiz".*?</section>', text, flags=re.S)
    parts += re.findall(r'<details class="course-explorer".*?</details>', text, flags=re.S)
    return sum(len(part.encode("utf-8")) for part in parts)


OPEN_ALL_JS = """
const done = arguments[arguments.length - 1];
const all = Array.from(document.querySelectorAll('details.course-explorer'));
all.forEach(d => { d.open = true; });
const t0 = Date.now();
(function wait() {
  const ready = all.every(d => d.querySelector('.course-explorer-body').dataset.state === 'ready');
  if (ready || Date.now() - t0 > 60000)
    done(all.length); else setTimeout(wait, 100); })();
"""


def _chapter_entries() -> list[str]:
    return [e for e in PAGES if re.match(r"^book/\d\d-", e) and not e.startswith("book/00-")]


@pytest.mark.book
@pytest.mark.parametrize("entry", _chapter_entries())
def test_explorers_load_only_when_opened_within_budget(entry, browser, site):  # noqa: F811
    base_url, html = site
    measure_page(browser, base_url, html, entry)  # a first visit, empty cache
    first = dict(browser.execute_script(EXPLORER_RESOURCES_JS))
    page_html = explorer_html_bytes(html / f"{entry}.html")
    lazy = sorted(set(first) & set(LAZY_FILES))
    assert not lazy, f"{entry}: loads {lazy} before the reader opens an explorer"
    if not page_html:
        return  # a chapter without explorer or questions
    assert set(first) == {"loader.js", "explorers.css"}, first
    first_visit = sum(first.values()) + page_html
    RESULTS_EXPLORERS[entry] = {"first_visit_bytes": first_visit, "files": first, "html": page_html}
    assert first_visit <= MAX_EXPLORER_FIRST_VISIT_BYTES, (
        f"{entry}: {first_visit} bytes for the explorers ({first})"
    )
    browser.set_script_timeout(90)
    if browser.execute_async_script(OPEN_ALL_JS):
        opened = dict(browser.execute_script(EXPLORER_RESOURCES_JS))
        added = sum(v for k, v in opened.items() if k not in first and k not in OPENED_WEIGHT_FILES)
        weights = sum(v for k, v in opened.items() if k in OPENED_WEIGHT_FILES)
        RESULTS_EXPLORERS[entry]["opened_bytes"] = added
        RESULTS_EXPLORERS[entry]["opened_weights_bytes"] = weights
        assert added <= MAX_OPENED_EXPLORERS_BYTES, f"{entry}: opening its explorers loads {added} bytes"
        assert weights <= MAX_OPENED_WEIGHTS_BYTES, f"{entry}: its explorers load {weights} bytes of weights"


RESULTS_EXPLORERS: dict[str, dict] = {}


@pytest.fixture(scope="module", autouse=True)
def _write_explorer_weights():
    yield
    if RESULTS_EXPLORERS:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        (ARTIFACTS / "explorer-weight.json").write_text(
            json.dumps(RESULTS_EXPLORERS, indent=1), encoding="utf-8"
        )
