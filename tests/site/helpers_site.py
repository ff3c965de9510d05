"""What the site tests share: helpers and fixtures, so that no test module imports another.

* the book's pages: ``toc_entries`` (every file of _toc.yml, in order), ``PAGES`` (read once, at
  collection), ``notebook_entries``, ``config``, ``branch_of``, ``slug`` (a page's file name);
* modules of ``book/_ext`` and ``tools`` imported without leaving their folder on ``sys.path``
  (``ext_module``, ``tool_module``);
* a folder served on 127.0.0.1 (``served``), and the fixtures ``browser`` (headless Chromium)
  and ``site`` (the strictly built site, ``built_book``, served); import them into a test module
  as ``from helpers_site import browser, site  # noqa: F401 (fixtures)``;
* the book built with its notebooks unexecuted (``build_unexecuted``);
* axe-core's run with the WCAG 2.1 A and AA rules (``AXE_JS``, ``AXE_TAGS``, ``AXE_RUN_JS``,
  ``axe_source``);
* driving an explorer in a page: open it with the keyboard, set its knobs, read its tables'
  exact values (``data-value``) and ``data-inputs``, its live text; a screenshot;
* the example repository and site address of the download and wheel tests.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "tests") not in sys.path:  # run as a script: helpers_chromium lives in tests/
    sys.path.append(str(ROOT / "tests"))
from helpers_chromium import chromium_or_skip, headless_chromium  # noqa: E402

SHOTS = ROOT / "test-artifacts" / "explorers"
EXPLORERS = ROOT / "book" / "_static" / "explorers"


def _module_from(folder: Path, name: str):
    sys.path.insert(0, str(folder))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(folder))


def ext_module(name: str):
    """The module ``name`` of book/_ext (a Sphinx extension of the book, or its helper)."""
    return _module_from(ROOT / "book" / "_ext", name)


def tool_module(name: str):
    """The module ``name`` of tools/."""
    return _module_from(ROOT / "tools", name)


# --- the book's pages --------------------------------------------------------------------------


def toc_entries(root: Path = ROOT) -> list[str]:
    """Every file of _toc.yml (root, parts, chapters and nested sections), in order."""
    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))
    found = [toc["root"]]

    def walk(items):
        for item in items or []:
            if "file" in item:
                found.append(item["file"])
            walk(item.get("sections"))
            walk(item.get("chapters"))

    for part in toc.get("parts", []):
        walk(part.get("chapters"))
    walk(toc.get("chapters"))
    walk(toc.get("sections"))
    return [str(Path(f).with_suffix("")) if Path(f).suffix in {".md", ".ipynb"} else f for f in found]


def config(root: Path = ROOT) -> dict:
    return yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8"))


def branch_of(root: Path = ROOT) -> str:
    return str((config(root).get("repository") or {}).get("branch") or "main")


def notebook_entries(root: Path = ROOT) -> list[str]:
    """The toc entries stored as .ipynb: the pages that must have launch buttons."""
    return [e for e in toc_entries(root) if (root / f"{e}.ipynb").is_file()]


PAGES = toc_entries(ROOT)  # read once, at collection: chapters may land while the tests run


def slug(entry: str) -> str:
    return entry.replace("/", "__")


# --- serving a site, the browser --------------------------------------------------------------


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format, *args):
        pass


@contextmanager
def served(html: Path):
    """The base URL of ``html`` served on 127.0.0.1, a random free port, while the block runs."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_QuietHandler, directory=str(html)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def browser():
    with headless_chromium(*chromium_or_skip()) as driver:
        yield driver


@pytest.fixture(scope="module")
def site(built_book):
    """(base URL, html folder) of the built site served on 127.0.0.1, a random free port."""
    html, _ = built_book
    with served(html) as base_url:
        yield base_url, html


# --- the book built without running its notebooks ----------------------------------------------


def build_unexecuted(out: Path, environ: dict[str, str]) -> tuple[Path, str]:
    """Build the whole book into ``out`` with its notebooks unexecuted; return (html folder, log)."""
    cfg = config()
    cfg["execute"]["execute_notebooks"] = "off"
    extensions = cfg["sphinx"]["local_extensions"]
    for name, folder in extensions.items():
        extensions[name] = str(ROOT / folder)  # relative to the configuration file otherwise
    out.mkdir(parents=True, exist_ok=True)
    (out / "_config.yml").write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    jb = Path(sys.executable).with_name("jupyter-book")
    env = {k: v for k, v in os.environ.items() if not k.startswith("COURSE_") and k != "MPLBACKEND"}
    env.update(environ)
    cmd = [str(jb), "build", str(ROOT), "--config", str(out / "_config.yml"), "--path-output", str(out)]
    proc = subprocess.run([*cmd, "-n", "--keep-going"], capture_output=True, text=True, env=env, timeout=900)
    log = proc.stdout + proc.stderr
    (out / "build.log").write_text(log, encoding="utf-8")
    # Unexecuted notebooks have nothing to glue; any other warning (a theme's complaint about
    # the repository, a broken reference) is a failure.
    others = [line for line in log.splitlines() if "WARNING" in line and "[mystnb.glue]" not in line]
    assert not others, "\n".join(others[:10])
    assert (out / "_build" / "html" / "book" / "index.html").is_file(), log[-4000:]
    return out / "_build" / "html", log


# --- axe-core -----------------------------------------------------------------------------------

AXE_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
AXE_RUN_JS = """
const done = arguments[arguments.length - 1];
axe.run(document, {runOnly: {type: 'tag', values: AXE_TAGS}})
   .then(r => done(r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
      nodes: v.nodes.map(n => n.target.join(' ')).slice(0, 5)}))))
   .catch(e => done([{id: 'axe-error', impact: 'critical', help: String(e), nodes: []}]));
""".replace("AXE_TAGS", json.dumps(AXE_TAGS))
AXE_JS = ROOT / ".venv" / "axe" / "node_modules" / "axe-core" / "axe.min.js"


def axe_source() -> str:
    if not AXE_JS.is_file():
        where = AXE_JS.relative_to(ROOT)
        pytest.skip(f"accessibility test skipped: no {where} (tools/setup.sh installs it with npm)")
    return AXE_JS.read_text(encoding="utf-8")


# --- an explorer in a page (book/_ext/course_explorers.py, book/_static/explorers) ----------------


def run_in_node(scripts: list[str], body: str, why: str, timeout: int = 120):
    """What ``body`` prints (one ``console.log`` of JSON), read as JSON, run in Node after the
    explorers' ``scripts`` (file names in book/_static/explorers, common.js first) with no page
    (``window`` is Node's global object). Skipped, saying ``why`` the skip costs little, where
    Node is missing. The script goes on stdin: a long one may not fit a command line."""
    node = shutil.which("node") or shutil.which("nodejs")
    if node is None:
        pytest.skip(f"Node.js is not installed: {why}")
    script = "global.window = global;"
    script += "".join(f"require({json.dumps(str(EXPLORERS / name))});" for name in scripts) + body
    out = subprocess.run(
        [node, "-"], input=script, capture_output=True, text=True, timeout=timeout, check=True
    )
    return json.loads(out.stdout)


def chapter_page(chapter: str) -> str:
    return {
        "01": "01-bottleneck",
        "02": "02-additive-attention",
        "03": "03-queries-keys-values",
        "04": "04-scaling-softmax",
        "05": "05-masks",
        "06": "06-multi-head-attention",
        "07": "07-cross-attention",
        "08": "08-efficiency",
        "09": "09-positions",
        "10": "10-transformer",
        "11": "11-vision-transformer",
        "12": "12-real-text",
        "13": "13-attention-variants",
    }[chapter]


def wait_for(driver, script, timeout=30, *args):
    deadline = time.monotonic() + timeout
    while True:
        value = driver.execute_script(script, *args)
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.1)


def open_page(driver, base, chapter):
    driver.set_window_size(1280, 900)
    driver.get(f"{base}book/{chapter_page(chapter)}.html")
    wait_for(driver, "return document.readyState === 'complete';")


def loaded_scripts(driver) -> list[str]:
    return driver.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name.split('/').pop().split('?')[0]);"
    )


def open_explorer(driver, name):
    """Open the explorer's <details> with the keyboard (focus its summary, press Enter); its root."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    details = driver.find_element(By.CSS_SELECTOR, f'details.course-explorer[data-explorer="{name}"]')
    summary = details.find_element(By.TAG_NAME, "summary")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'}); arguments[0].focus();", summary)
    summary.send_keys(Keys.ENTER)
    state = wait_for(
        driver,
        "const b = arguments[0].querySelector('.course-explorer-body');"
        "return ['ready', 'error'].includes(b.dataset.state) && b.dataset.state;",
        60,
        details,
    )
    assert state == "ready", f"{name}: explorer did not start: {details.text[:300]}"
    return details.find_element(By.CSS_SELECTOR, ".ce-root")


def set_knob(driver, root, name, value):
    found = driver.execute_script(
        """
        const el = arguments[0].querySelector('[data-knob="' + arguments[1] + '"]');
        if (!el) return false;
        if (el.type === 'checkbox') el.checked = arguments[2]; else el.value = arguments[2];
        el.dispatchEvent(new Event(el.tagName === 'SELECT' || el.type === 'checkbox' ? 'change' : 'input'));
        return true;""",
        root,
        name,
        value,
    )
    assert found, f"no knob {name!r}"


def press(driver, root, name):
    from selenium.webdriver.common.by import By

    root.find_element(By.CSS_SELECTOR, f'[data-knob="{name}"]').click()


def table(driver, root, name) -> np.ndarray:
    rows = driver.execute_script(
        """const t = arguments[0].querySelector('table[data-name="' + arguments[1] + '"]');
        if (!t) return null;
        return Array.from(t.tBodies[0].rows)
          .map(r => Array.from(r.querySelectorAll('td')).map(td => td.dataset.value));""",
        root,
        name,
    )
    assert rows is not None, f"no table {name!r}"
    return np.array([[float(v) for v in row] for row in rows], dtype=np.float64)


def inputs(driver, root) -> dict:
    return json.loads(driver.execute_script("return arguments[0].dataset.inputs;", root))


def assert_captions_fit_a_phone(driver, root, what):
    """At 390 px every caption the reader sees ends inside the screen (a wide table scrolls, its
    caption does not go with it)."""
    driver.set_window_size(390, 900)
    try:
        past = driver.execute_script(
            "return Array.from(arguments[0].querySelectorAll('caption, .ce-caption'))"
            ".filter(c => getComputedStyle(c).position !== 'absolute')"
            ".filter(c => c.getBoundingClientRect().right > document.documentElement.clientWidth + 1)"
            ".map(c => c.textContent.slice(0, 40));",
            root,
        )
        assert not past, f"{what}: captions cut off at 390 px: {past}"
    finally:
        driver.set_window_size(1280, 900)


def live_text(driver, root) -> str:
    return driver.execute_script(
        "return Array.from(arguments[0].querySelectorAll('.ce-live')).map(p => p.textContent).join(' | ');",
        root,
    )


def shoot(driver, root, name):
    SHOTS.mkdir(parents=True, exist_ok=True)
    driver.execute_script("arguments[0].scrollIntoView({block: 'start'});", root)
    time.sleep(0.2)
    (SHOTS / f"{name}.png").write_bytes(root.screenshot_as_png)


# --- the download and wheel tests' example site -------------------------------------------------

SITE = "https://example.github.io/attention-course/"
EXAMPLE_REPOSITORY = "https://github.com/example/attention-course"
_course_repository = ext_module("course_repository")
NO_REPOSITORY = _course_repository.CourseRepository(None, "main", "unknown")
REPOSITORY = _course_repository.CourseRepository(EXAMPLE_REPOSITORY, "main", "test")
