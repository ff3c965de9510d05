"""Chapter 13's explorer (book/_static/explorers/ch13.js) against attnlib.variants, exactly.

Three layers of checks:

* In Node (fast, no browser): the script's pure functions (``window.CourseExplorers.ch13``) run
  over a grid of settings, with the browser's globals stubbed as in
  tests/site/test_explorers.py's Node tests. Every mask equals attnlib.variants' (sliding window,
  strided, fixed, global tokens, sinks; full causal is attnlib.causal_mask), every receptive
  field ``variants.receptive_field(mask, L)`` (the whole matrix, and the last query's row the
  page draws, layer by layer), and every count the page shows: allowed pairs against
  n(n + 1)/2, keys of the last query, the keys a generating model must keep cached at once, and
  the layers after which the last query has read every position.
* In Chromium on a page made here from the placement file (slow: it starts a browser, no book
  build): the explorer loads only when opened, opens with the keyboard, each knob setting's
  numbers (``data-inputs``, the grid's cells, the tables' ``data-value``) equal attnlib's, the
  grid is one Tab stop that the arrow keys walk with a visible focus ring, every control is
  named, axe-core finds nothing serious, and nothing reaches past a 390 px screen.
* The same browser checks on the built chapter page (marker ``book``).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "tests" / "site") not in sys.path:  # run as a script
    sys.path.append(str(ROOT / "tests" / "site"))
from helpers_site import (  # noqa: E402
    AXE_RUN_JS,
    EXPLORERS,
    SHOTS,
    axe_source,
    browser,  # noqa: F401 (fixture)
    ext_module,
    inputs,
    loaded_scripts,
    open_explorer,
    run_in_node,
    served,
    set_knob,
    site,  # noqa: F401 (fixture)
    wait_for,
)

import attnlib  # noqa: E402
from attnlib import variants  # noqa: E402

NAME = "ch13-patterns"


# --- the reference: the page's settings through attnlib -------------------------------------------


def global_positions(n: int, g: int, place: str) -> list[int]:
    """The explorer's placement of g global tokens: the first g, or spread evenly (its own choice,
    not attnlib's; written here independently of the script)."""
    if place == "first":
        return list(range(min(g, n)))
    return sorted({(k + 1) * n // (g + 1) for k in range(min(g, n))})


def reference_mask(s: dict) -> torch.Tensor:
    n = s["n"]
    if s["pattern"] == "causal":
        return attnlib.causal_mask(n)
    if s["pattern"] == "window":
        return variants.sliding_window_mask(n, s["window"])
    if s["pattern"] == "strided":
        return variants.strided_mask(n, s["stride"])
    if s["pattern"] == "fixed":
        return variants.fixed_mask(n, s["block"], s["summary"])
    if s["pattern"] == "sink":
        return variants.sink_mask(n, s["window"], sinks=s["sinks"])
    if s["place"] == "first":  # attnlib's own form: an int means the first g positions
        return variants.global_token_mask(n, s["window"], s["globals"])
    return variants.global_token_mask(n, s["window"], global_positions(n, s["globals"], s["place"]))


def most_cached(mask: torch.Tensor) -> int:
    """Keys held at once, at most: at step t every key j <= t that query t or a later one reads."""
    n = mask.shape[0]
    return max(int(mask[t:, : t + 1].any(0).sum()) for t in range(n))


def layers_to_read_all(mask: torch.Tensor) -> int | None:
    """As the chapter's layers_to_read_everything: the first L whose field of the last query is
    every position. The field only grows with L, and n layers suffice when any number does, so a
    binary search over L = 0..n finds it."""
    n = mask.shape[0]

    def reads_all(layers: int) -> bool:
        return bool(variants.receptive_field(mask, layers)[-1].all())

    if not reads_all(n):
        return None
    low, high = 0, n  # reads_all(high) holds
    while low < high:
        mid = (low + high) // 2
        low, high = (low, mid) if reads_all(mid) else (mid + 1, high)
    return high


def reference(s: dict) -> dict:
    mask = reference_mask(s)
    n = s["n"]
    field = variants.receptive_field(mask, s["layers"])[-1]
    return {
        "mask": mask.tolist(),
        "positions": global_positions(n, s["globals"], s["place"]) if s["pattern"] == "global" else [],
        "field": torch.nonzero(field).flatten().tolist(),
        "fieldCount": int(field.sum()),
        "pairs": int(mask.sum()),
        "full": int(attnlib.causal_mask(n).sum()),
        "lastKeys": int(mask[-1].sum()),
        "cache": most_cached(mask),
        "layersToAll": layers_to_read_all(mask),
    }


DEFAULTS = {"window": 4, "stride": 4, "block": 4, "summary": 1, "globals": 1, "place": "spread", "sinks": 2}


def settings_grid() -> list[dict]:
    out = []
    for n in (4, 7, 16, 33):
        for layers in (1, 2, 3, 5):
            out.append({**DEFAULTS, "pattern": "causal", "n": n, "layers": layers})
            for w in sorted({1, 2, 3, 5, n}):
                out.append({**DEFAULTS, "pattern": "window", "n": n, "window": w, "layers": layers})
                for sinks in (0, 1, 4):
                    out.append(
                        {**DEFAULTS, "pattern": "sink", "n": n, "window": w, "sinks": sinks, "layers": layers}
                    )
                for g in (0, 1, 3):
                    for place in ("first", "spread"):
                        knobs = {"window": w, "globals": g, "place": place, "layers": layers}
                        out.append({**DEFAULTS, "pattern": "global", "n": n, **knobs})
            for stride in sorted({1, 2, 3, 4, n}):
                out.append({**DEFAULTS, "pattern": "strided", "n": n, "stride": stride, "layers": layers})
            for block in sorted({1, 2, 4, 5, n}):
                for summary in sorted({1, 2, block} & set(range(1, block + 1))):
                    out.append(
                        {
                            **DEFAULTS,
                            "pattern": "fixed",
                            "n": n,
                            "block": block,
                            "summary": summary,
                            "layers": layers,
                        }
                    )
    return out


# --- Node: the script's functions -----------------------------------------------------------------


def run_node(body: str):
    return run_in_node(
        ["common.js", "ch13.js"],
        "const P = window.CourseExplorers.ch13;" + body,
        "the browser tests below read the same numbers from the page",
    )


def test_the_scripts_masks_are_attnlibs():
    """Each mask function of the script, over lengths, windows, strides, blocks, summaries,
    global positions and sinks, equals attnlib.variants' mask exactly."""
    cases = []
    for n in (1, 2, 5, 8, 13, 32):
        cases.append(("causal", [n], attnlib.causal_mask(n)))
        for w in sorted({1, 2, 3, 7, n, n + 3}):
            cases.append(("slidingWindow", [n, w], variants.sliding_window_mask(n, w)))
            for sinks in (0, 1, 4, n + 1):
                cases.append(("sink", [n, w, sinks], variants.sink_mask(n, w, sinks=sinks)))
            for positions in (
                [],
                [0],
                [n // 2],
                sorted({0, n - 1}),
                sorted({p for p in (1, n // 3, n - 1) if p < n}),
            ):
                cases.append(("globalTokens", [n, w, positions], variants.global_token_mask(n, w, positions)))
            cases.append(("strided", [n, w], variants.strided_mask(n, w)))
            for c in sorted({1, 2, w} & set(range(1, w + 1))):
                cases.append(("fixed", [n, w, c], variants.fixed_mask(n, w, c)))
    page = run_node(
        f"const cases = {json.dumps([[f, args] for f, args, _ in cases])};"
        "console.log(JSON.stringify(cases.map(c => P[c[0]].apply(null, c[1]))));"
    )
    assert len(page) == len(cases) > 300
    for (fn, args, ref), got in zip(cases, page, strict=True):
        assert got == ref.tolist(), (fn, args)
    # the cases are not all alike: a check that a constant script would pass is no check
    assert len({json.dumps(g) for g in page}) > 100


def test_the_scripts_receptive_field_is_attnlibs():
    """P.receptiveField (the whole matrix) and P.fieldRows (the last query's row after 1..L
    layers, what the page draws) equal variants.receptive_field for L = 0..6."""
    masks = {
        "window 3": variants.sliding_window_mask(20, 3),
        "window 1": variants.sliding_window_mask(9, 1),
        "strided 4": variants.strided_mask(20, 4),
        "fixed 5, 2": variants.fixed_mask(20, 5, 2),
        "global [10], window 2": variants.global_token_mask(20, 2, [10]),
        "global 2, window 3": variants.global_token_mask(20, 3, 2),
        "2 sinks, window 3": variants.sink_mask(20, 3, sinks=2),
        "causal": attnlib.causal_mask(6),
    }
    layers = list(range(7))
    page = run_node(
        f"const masks = {json.dumps({k: m.tolist() for k, m in masks.items()})};"
        f"const layers = {json.dumps(layers)}; const out = {{}};"
        "for (const k in masks) out[k] = {full: layers.map(L => P.receptiveField(masks[k], L)),"
        " rows: P.fieldRows(masks[k], layers[layers.length - 1])};"
        "console.log(JSON.stringify(out));"
    )
    for name, mask in masks.items():
        for L in layers:
            ref = variants.receptive_field(mask, L)
            assert page[name]["full"][L] == ref.tolist(), (name, L)
            if L:
                assert page[name]["rows"][L - 1] == ref[-1].tolist(), (name, L)
    # the window's field is L(w - 1) + 1 wide, as the chapter says; a window of 1 never grows
    assert [sum(r) for r in page["window 3"]["rows"]] == [3, 5, 7, 9, 11, 13]
    assert [sum(r) for r in page["window 1"]["rows"]] == [1] * 6


def test_every_number_the_page_shows_is_attnlibs():
    """P.build, the function behind everything the page shows, for a grid of settings: its mask,
    global positions, the last query's receptive field after L layers and its size, the pairs
    against n(n + 1)/2, the last query's keys, the most keys cached at once and the layers to
    read every position, each equal to what attnlib computes for the same setting."""
    grid = settings_grid()
    page = run_node(
        f"const grid = {json.dumps(grid)};"
        "console.log(JSON.stringify(grid.map(s => { const r = P.build(s);"
        " return {mask: r.mask, positions: r.positions, field: r.field, fieldCount: r.fieldCount,"
        " pairs: r.pairs, full: r.full, lastKeys: r.lastKeys, cache: r.cache, layersToAll: r.layersToAll,"
        " rows: r.rows.length}; })));"
    )
    assert len(page) == len(grid) > 1000
    for s, got in zip(grid, page, strict=True):
        ref = reference(s)
        assert got.pop("rows") == s["layers"], s
        assert got == ref, (s, {k: (got[k], ref[k]) for k in ref if got[k] != ref[k] and k != "mask"})
    # the numbers the chapter states, read from the same function
    by = {json.dumps(s, sort_keys=True): g for s, g in zip(grid, page, strict=True)}

    def at(**kw):
        return by[json.dumps({**DEFAULTS, **kw}, sort_keys=True)]

    assert at(pattern="window", n=16, window=5, layers=3)["fieldCount"] == 3 * 4 + 1
    assert at(pattern="window", n=33, window=5, layers=5)["cache"] == 5
    assert at(pattern="causal", n=33, layers=1)["pairs"] == 33 * 34 // 2
    # a global token at position 0 relays nothing under a causal mask (the chapter); 4 sinks are
    # read directly, so the window needs to come down only to position 4: 14 layers, not 16
    assert (
        at(pattern="global", n=33, window=3, globals=1, place="first", layers=1)["layersToAll"]
        == at(pattern="window", n=33, window=3, layers=1)["layersToAll"]
        == 16
    )
    assert at(pattern="sink", n=33, window=3, sinks=4, layers=1)["layersToAll"] == 14
    assert at(pattern="global", n=33, window=3, globals=1, place="spread", layers=1)["layersToAll"] < 16
    assert at(pattern="strided", n=33, stride=4, layers=2)["layersToAll"] == 2


def test_the_chapters_numbers_at_its_own_sizes():
    """The chapter's table on 256 positions (window 16: 17 layers to read all; strided and fixed
    16: 2; a global token at 128 fewer than the window; at 0 or 4 sinks as many), from P.build."""
    cases = {
        "window": {"pattern": "window", "window": 16},
        "strided": {"pattern": "strided", "stride": 16},
        "fixed": {"pattern": "fixed", "block": 16, "summary": 1},
        "global 0": {"pattern": "global", "window": 16, "globals": 1, "place": "first"},
        "global 128": {"pattern": "global", "window": 16, "globals": 1, "place": "spread"},
        "sinks": {"pattern": "sink", "window": 16, "sinks": 4},
    }
    grid = {k: {**DEFAULTS, **v, "n": 256, "layers": 1} for k, v in cases.items()}
    page = run_node(
        f"const grid = {json.dumps(grid)}; const out = {{}};"
        "for (const k in grid) { const r = P.build(grid[k]);"
        " out[k] = [r.lastKeys, r.layersToAll, r.positions]; }"
        "console.log(JSON.stringify(out));"
    )
    for name, s in grid.items():
        mask = reference_mask(s)
        assert page[name][:2] == [int(mask[-1].sum()), layers_to_read_all(mask)], name
    assert page["window"][1] == 17 == page["global 0"][1] == page["sinks"][1]
    assert page["strided"][1] == page["fixed"][1] == 2
    assert page["global 128"][2] == [128] and page["global 128"][1] < 17


# --- Chromium ---------------------------------------------------------------------------------------


BROWSER_SETTINGS = [
    {"pattern": "window", "n": 16, "window": 4, "layers": 3},
    {"pattern": "strided", "n": 30, "stride": 5, "layers": 2},
    {"pattern": "fixed", "n": 24, "block": 6, "summary": 2, "layers": 2},
    {"pattern": "global", "n": 20, "window": 3, "globals": 2, "place": "spread", "layers": 4},
    {"pattern": "global", "n": 20, "window": 3, "globals": 3, "place": "first", "layers": 4},
    {"pattern": "sink", "n": 64, "window": 8, "sinks": 4, "layers": 16},
    {"pattern": "causal", "n": 9, "layers": 1},
    {"pattern": "window", "n": 8, "window": 1, "layers": 5},
]


def check_explorer(driver, url: str, shot: str) -> None:
    """The explorer on the page at ``url``: lazy, keyboard-operable, attnlib's numbers, fits 390 px."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    driver.set_window_size(1280, 900)
    driver.get(url)
    wait_for(driver, "return document.readyState === 'complete';", 30)
    loaded = set(loaded_scripts(driver))
    assert "loader.js" in loaded
    assert not {"common.js", "ch13.js"} & loaded, "the explorer's code loaded before it was opened"
    root = open_explorer(driver, NAME)  # with the keyboard: its summary focused, Enter
    assert {"common.js", "ch13.js"} <= set(loaded_scripts(driver))

    # keyboard: a slider moves with the arrow keys
    layers = root.find_element(By.CSS_SELECTOR, '[data-knob="layers"]')
    before = inputs(driver, root)["layers"]
    layers.send_keys(Keys.ARROW_RIGHT)
    assert inputs(driver, root)["layers"] == before + 1
    for s in BROWSER_SETTINGS:
        for name in ("pattern", "n", *[k for k in s if k not in ("pattern", "n")]):
            set_knob(driver, root, name, s[name])
        shown = inputs(driver, root)
        full = {**DEFAULTS, **{k: shown[k] for k in DEFAULTS}, **s}
        assert {k: shown[k] for k in s} == s, (s, shown)
        ref = reference(full)
        assert {k: shown[k] for k in ref} == ref, s
        # the grid shows the mask: its cells' classes, one Tab stop among n * n cells
        cells = driver.execute_script(
            "return Array.from(arguments[0].querySelectorAll('[role=grid] .ce-pcell'))"
            ".map(c => [Number(c.dataset.row), Number(c.dataset.col),"
            " c.classList.contains('is-allowed'), c.tabIndex]);",
            root,
        )
        n = s["n"]
        assert len(cells) == n * n, s
        assert [[c[2] for c in cells[i * n : (i + 1) * n]] for i in range(n)] == ref["mask"], s
        assert sorted(c[3] for c in cells) == [-1] * (n * n - 1) + [0], "the grid must be one Tab stop"
        # the strips: the last query's field after 1..L layers, the last one the field above
        strips = driver.execute_script(
            "return Array.from(arguments[0].querySelectorAll('.ce-strip')).map(r =>"
            " Array.from(r.children).map(c => !c.classList.contains('is-future')));",
            root,
        )
        assert len(strips) == s["layers"]
        mask = reference_mask(full)
        for L, row in enumerate(strips, start=1):
            assert row == variants.receptive_field(mask, L)[-1].tolist(), (s, L)
        cost = driver.execute_script(
            "return Array.from(arguments[0].querySelectorAll('table[data-name=\"cost\"] tbody tr'))"
            ".map(r => Array.from(r.querySelectorAll('td')).map(td => Number(td.dataset.value)));",
            root,
        )
        assert cost[0][:2] == [ref["pairs"], n * (n + 1) // 2] and cost[2][:2] == [ref["cache"], n], s
        assert cost[0][2] == ref["pairs"] / (n * (n + 1) // 2)
        live = driver.execute_script("return arguments[0].querySelector('.ce-live').textContent;", root)
        assert (
            f"{ref['pairs']} of {n * (n + 1) // 2} query" in live
            and f"read {ref['fieldCount']} of {n}" in live
        )
        # only the pattern's own knobs are shown
        visible = driver.execute_script(
            "return Array.from(arguments[0].querySelectorAll('[data-knob]'))"
            ".filter(e => e.offsetParent !== null).map(e => e.dataset.knob);",
            root,
        )
        assert set(visible) == set(s) | {"pattern", "n", "layers"}, (s, visible)

    # the grid by keyboard: Tab lands on one cell, the arrows move, the focus ring shows
    set_knob(driver, root, "pattern", "window")
    set_knob(driver, root, "n", 16)
    set_knob(driver, root, "window", 4)
    first = root.find_element(By.CSS_SELECTOR, '[role=grid] .ce-pcell[tabindex="0"]')
    driver.execute_script("arguments[0].focus();", first)
    start = driver.execute_script(
        "return [document.activeElement.dataset.row, document.activeElement.dataset.col];"
    )
    first.send_keys(Keys.ARROW_DOWN, Keys.ARROW_DOWN, Keys.ARROW_RIGHT, Keys.END, Keys.HOME, Keys.ARROW_RIGHT)
    active = driver.execute_script(
        "return [document.activeElement.dataset.row, document.activeElement.dataset.col];"
    )
    assert active == [str(int(start[0]) + 2), "1"], (start, active)
    label = driver.execute_script("return document.activeElement.getAttribute('aria-label');")
    row = int(active[0])
    assert label.startswith(f"query {row}, key 1: ") and ("may attend" in label) == (0 <= row - 1 < 4), label
    assert label in root.text, "the focused cell's description is shown, not only announced"
    ring = driver.execute_script(
        "const s = getComputedStyle(document.activeElement); return [s.outlineStyle, s.outlineWidth];"
    )
    assert ring == ["solid", "3px"], ring
    tab_stops = driver.execute_script(
        "return arguments[0].querySelectorAll('[role=grid] [tabindex=\"0\"]').length;", root
    )
    assert tab_stops == 1
    # every control in the page takes focus (a pattern's unused knobs are taken out, not hidden)
    unfocusable = driver.execute_script(
        "return Array.from(arguments[0].querySelectorAll('input, select, button')).filter(e =>"
        " { e.focus(); return document.activeElement !== e; }).map(e => e.dataset.knob);",
        root,
    )
    assert not unfocusable, unfocusable
    # every control has a name
    unnamed = driver.execute_script(
        "return Array.from(arguments[0].querySelectorAll('input, select')).filter(e =>"
        " !(e.id && document.querySelector('label[for=\"' + e.id + '\"]'))).map(e => e.dataset.knob);",
        root,
    )
    assert not unnamed, unnamed
    assert driver.execute_script(
        "return arguments[0].querySelector('[role=grid]').getAttribute('aria-label');", root
    )
    SHOTS.mkdir(parents=True, exist_ok=True)
    driver.execute_script("arguments[0].scrollIntoView({block: 'start'});", root)
    (SHOTS / f"{shot}.png").write_bytes(root.screenshot_as_png)
    # 390 px: nothing of the explorer reaches past the screen, at the largest n too
    driver.set_window_size(390, 900)
    try:
        for n in (16, 64):
            set_knob(driver, root, "pattern", "global")
            set_knob(driver, root, "n", n)
            past = driver.execute_script(
                "const W = document.documentElement.clientWidth;"
                "return Array.from(arguments[0].querySelectorAll('*')).filter(e => {"
                " const r = e.getBoundingClientRect(); if (r.width === 0 || r.right <= W + 1) return false;"
                " for (let p = e.parentElement; p && p !== arguments[0]; p = p.parentElement)"
                "  if (getComputedStyle(p).overflowX === 'auto'"
                "   && p.getBoundingClientRect().right <= W + 1) return false;"
                " return true; }).map(e => e.tagName + '.' + e.className).slice(0, 5);",
                root,
            )
            assert not past, f"at 390 px, n = {n}: {past}"
            side = driver.execute_script(
                "return arguments[0].querySelector('[role=grid] .ce-pcell').getBoundingClientRect().width;",
                root,
            )
            assert side > 4, f"a cell is {side} px wide at n = {n}"
        driver.execute_script("arguments[0].scrollIntoView({block: 'start'});", root)
        (SHOTS / f"{shot}-390.png").write_bytes(driver.get_screenshot_as_png())
    finally:
        driver.set_window_size(1280, 900)


def _axe(driver) -> list[dict]:
    driver.execute_script(axe_source())
    driver.set_script_timeout(120)
    return driver.execute_async_script(AXE_RUN_JS)


def _standalone_page(folder: Path) -> None:
    """A page with the explorer as the build writes it (course_explorers.explorer_html of the
    placement file's entry) and the loader and stylesheet as the build links them."""
    course_explorers = ext_module("course_explorers")
    items = course_explorers.load_placements(ROOT)["13-attention-variants"]
    (item,) = [i for i in items if i["explorer"] == NAME]
    assert item["after"] == "sparse-patterns"
    static = folder / "_static" / "explorers"
    static.mkdir(parents=True)
    for path in EXPLORERS.glob("*.*"):
        if path.is_file():
            shutil.copy2(path, static / path.name)
    (folder / "index.html").write_text(
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        "<title>Chapter 13's explorer</title>"
        '<link rel="stylesheet" href="_static/explorers/explorers.css">'
        '<script defer src="_static/explorers/loader.js"></script></head>'
        '<body><main><article><h1>Sparse patterns</h1><section id="sparse-patterns"><p>Text.</p>'
        f"{course_explorers.explorer_html(item, '13', 0)}</section></article></main></body></html>",
        encoding="utf-8",
    )


@pytest.mark.slow  # starts a browser; no book build
def test_explorer_in_chromium_on_a_page_of_its_own(browser, tmp_path):  # noqa: F811 (fixture)
    _standalone_page(tmp_path)
    with served(tmp_path) as base:
        check_explorer(browser, f"{base}index.html", "ch13-patterns")
        violations = _axe(browser)
    serious = [v for v in violations if v["impact"] in ("serious", "critical")]
    assert not serious, serious


@pytest.mark.book  # builds the site (slow)
def test_explorer_on_the_chapter_page(browser, site):  # noqa: F811 (fixtures)
    base, _ = site
    check_explorer(browser, f"{base}book/13-attention-variants.html", "ch13-patterns-page")
