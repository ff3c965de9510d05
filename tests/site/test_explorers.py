"""The explorers and self-checks of the chapter pages, driven in Chromium, against attnlib.

book/_ext/course_explorers.py puts an explorer (a closed ``<details>``) into chapters 03-10 and
a self-check into chapters 01-10. Here each explorer is opened, its knobs are set (by script
and, for some, by keyboard), and every number it shows is read from the cells' ``data-value``
and compared with what attnlib computes for the page's own inputs (``data-inputs``): float64
to 1e-9 (the page computes in float64) and float32 to 1e-5 relative. Chapter 10's model runs
in the page: its logits and every head's attention for the tokens it generated match torch's
(float64 on the same float32 weights to 1e-9, float32 to 1e-4), and its greedy tokens are
torch's; a model exported in Python (``attnlib.chapters.web_export``) is loaded through the
page's file picker and checked the same way. Every question is answered wrong (each explained
mistake) and right, and the numbers in the quiz files are recomputed here.

Screenshots go to ``test-artifacts/explorers/``. ``python tests/site/test_explorers.py HTML``
runs the browser checks on any built site folder.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "tests") not in sys.path:  # run as a script: helpers_chromium lives in tests/
    sys.path.append(str(ROOT / "tests"))
if str(ROOT / "tests" / "site") not in sys.path:
    sys.path.append(str(ROOT / "tests" / "site"))
from helpers_site import (  # noqa: E402
    assert_captions_fit_a_phone,
    browser,  # noqa: F401 (fixture)
    inputs,
    live_text,
    loaded_scripts,
    open_explorer,
    open_page,
    press,
    run_in_node,
    served,
    set_knob,
    shoot,
    site,  # noqa: F401 (fixture)
    table,
    wait_for,
)

import attnlib  # noqa: E402
from attnlib import functional, variants  # noqa: E402
from attnlib.chapters import tiny_lm, web_export  # noqa: E402
from attnlib.efficient.online import online_attention_row_numpy  # noqa: E402
from attnlib.modules import split_heads  # noqa: E402
from attnlib.positions import alibi_bias, alibi_slopes, apply_rope  # noqa: E402

QUIZ_DIR = ROOT / "attnlib" / "quizzes"
QUIZZES = sorted(QUIZ_DIR.glob("ch[0-9][0-9].yml"))
F32_RTOL = 1e-5


# --- page helpers ------------------------------------------------------------------------------


def shown(driver, root, name) -> str:
    """The value a slider shows beside it (its <output>), as the reader sees it."""
    return driver.execute_script(
        "const el = arguments[0].querySelector('[data-knob=\"' + arguments[1] + '\"]');"
        "return el.parentNode.querySelector('output').textContent;",
        root,
        name,
    )


def assert_labels_on_top(driver, root, what):
    """The figure's labels are drawn after every line, circle and cross, with a white halo, and
    end inside the figure: no arrow hides a label."""
    order = driver.execute_script(
        "const svg = arguments[0].querySelector('.ce-figure svg'), box = svg.getBoundingClientRect();"
        "return Array.from(svg.children).map(e => [e.tagName, e.getAttribute('paint-order') || '',"
        " e.tagName !== 'text' || (e.getBoundingClientRect().left >= box.left - 1"
        " && e.getBoundingClientRect().right <= box.right + 1)]);",
        root,
    )
    tags = [tag for tag, _, _ in order]
    assert "text" in tags, what
    first_text = tags.index("text")
    assert all(tag == "text" for tag in tags[first_text:]), f"{what}: a shape drawn over a label: {tags}"
    assert all(halo == "stroke" and inside for tag, halo, inside in order if tag == "text"), (what, order)


def assert_course(page, ref64, ref32=None, what="", rtol32=F32_RTOL):
    """The page's numbers equal attnlib's: float64 to 1e-9, float32 to rtol32 (NaN where NaN)."""
    page = np.asarray(page, dtype=np.float64)
    ref64 = np.asarray(torch.as_tensor(ref64).double(), dtype=np.float64).reshape(page.shape)
    np.testing.assert_allclose(
        page, ref64, rtol=1e-9, atol=1e-12, equal_nan=True, err_msg=f"{what} (float64)"
    )
    if ref32 is not None:
        ref32 = np.asarray(torch.as_tensor(ref32).double(), dtype=np.float64).reshape(page.shape)
        finite = np.isfinite(ref32)
        scale = np.abs(ref32[finite]).max() if finite.any() else 1.0
        np.testing.assert_allclose(
            page, ref32, rtol=rtol32, atol=1e-7 * max(scale, 1.0), equal_nan=True, err_msg=f"{what} (float32)"
        )


def _both(fn):
    """fn(dtype) in float64 and in float32."""
    return fn(torch.float64), fn(torch.float32)


# --- the explorers -----------------------------------------------------------------------------


def check_ch03(driver, base):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    open_page(driver, base, "03")
    assert not {"common.js", "ch03.js"} & set(loaded_scripts(driver)), (
        "explorer code loaded before it was opened"
    )
    root = open_explorer(driver, "ch03-query-keys")
    assert {"common.js", "ch03.js"} <= set(loaded_scripts(driver))
    temperature = root.find_element(By.CSS_SELECTOR, '[data-knob="T"]')
    before = live_text(driver, root)
    temperature.send_keys(Keys.ARROW_RIGHT)  # keyboard: 1.0 -> 1.1
    assert inputs(driver, root)["temperature"] == pytest.approx(1.1)
    assert live_text(driver, root) != before, "the live region did not announce the change"
    for knobs in ({"qx": -1.2, "T": 0.5}, {"key": 2}, {"kx": 2.5, "T": 3.0}, {"qy": 2.9, "T": 0.1}):
        for name, value in knobs.items():
            set_knob(driver, root, name, value)
        s = inputs(driver, root)

        def ref(dtype, s=s):
            q = torch.tensor([s["query"]], dtype=dtype)
            k, v = torch.tensor(s["keys"], dtype=dtype), torch.tensor(s["values"], dtype=dtype)
            out, w = attnlib.scaled_dot_product_attention(
                q, k, v, scale=1 / s["temperature"], return_weights=True
            )
            return q @ k.T / s["temperature"], w, out

        (s64, w64, o64), (s32, w32, o32) = _both(ref)
        assert_course(table(driver, root, "scores"), s64, s32, "ch03 scores")
        assert_course(table(driver, root, "weights"), w64, w32, "ch03 weights")
        assert_course(table(driver, root, "output"), o64, o32, "ch03 output")
        assert_labels_on_top(driver, root, f"ch03 {knobs}")
    assert inputs(driver, root)["keys"][2][0] == pytest.approx(2.5)
    # "key to move": both coordinate sliders show the chosen key's own values, not the last key's
    for key in (1, 2, 0, 3):
        set_knob(driver, root, "key", key)
        kx, ky = inputs(driver, root)["keys"][key]
        assert (shown(driver, root, "kx"), shown(driver, root, "ky")) == (f"{kx:.1f}", f"{ky:.1f}"), key
    shoot(driver, root, "ch03")


def check_ch04(driver, base):
    open_page(driver, base, "04")
    root = open_explorer(driver, "ch04-scale")
    for log_dk, scaled in ((0, True), (6, False), (6, True), (10, False), (10, True)):
        set_knob(driver, root, "dk", log_dk)
        set_knob(driver, root, "scaled", scaled)
        s = inputs(driver, root)
        assert s["d_k"] == 2**log_dk and s["scaled"] == scaled

        def ref(dtype, s=s):
            q, k = torch.tensor([s["query"]], dtype=dtype), torch.tensor(s["keys"], dtype=dtype)
            scale = 1 / math.sqrt(s["d_k"]) if s["scaled"] else 1.0
            scores = attnlib.scores.scaled_dot_scores(q, k, scale=scale)  # (1, 8)
            w = functional.softmax(scores, dim=-1)
            entropy = -(w * torch.log(w.clamp_min(torch.finfo(dtype).tiny))).sum()
            sd = scores.std(unbiased=False)
            summary = torch.stack([sd, entropy, (w * (1 - w)).max()])
            return scores, w, summary

        (sc64, w64, su64), (sc32, w32, su32) = _both(ref)
        assert_course(table(driver, root, "scores"), sc64, sc32, f"ch04 scores d_k={s['d_k']}")
        assert_course(table(driver, root, "weights"), w64, w32, f"ch04 weights d_k={s['d_k']}", rtol32=1e-4)
        assert_course(
            table(driver, root, "summary"), su64, None, f"ch04 spread/entropy/gradient d_k={s['d_k']}"
        )
    for x in (10, 88, 89, 90, 120):
        set_knob(driver, root, "x", x)
        row32 = torch.tensor([x, x - 1, x - 2], dtype=torch.float32)
        e = torch.exp(row32)
        naive = e / e.sum()
        page = table(driver, root, "overflow")
        np.testing.assert_allclose(page[0], e.double().numpy(), rtol=1e-6, equal_nan=True)
        np.testing.assert_allclose(page[1], naive.double().numpy(), rtol=F32_RTOL, equal_nan=True)
        assert_course(
            page[2], functional.softmax(row32.double(), -1), functional.softmax(row32, -1), "stable"
        )
        assert np.isnan(page[1]).any() == (x >= 89), f"x={x}: naive softmax {page[1]}"
        assert np.isfinite(page[2]).all()
        # the words count the NaN weights the table shows: one at x = 89 (inf / inf), not "the weights"
        said = {
            0: "still works",
            1: "one weight is NaN",
            2: "two weights are NaN",
            3: "all three weights are NaN",
        }
        nans = int(np.isnan(page[1]).sum())
        assert said[nans] in live_text(driver, root), (x, nans, live_text(driver, root))
        assert (nans, x) in ((0, 10), (0, 88), (1, 89), (2, 90), (3, 120))
    assert "overflows" in live_text(driver, root)
    shoot(driver, root, "ch04")


def _mask_reference(s, dtype):
    q, k, v = (torch.tensor(s[n], dtype=dtype) for n in ("query", "key", "value"))
    mask = torch.tensor(s["mask"])
    scores = q @ k.T / math.sqrt(q.shape[-1])
    if s["policy"] == "attnlib":
        out, w = attnlib.scaled_dot_product_attention(q, k, v, attn_mask=mask, return_weights=True)
        return w, out
    if s["policy"] == "neg-inf":
        w = torch.softmax(scores.masked_fill(~mask, -math.inf), -1)
    elif s["policy"] == "neg-large":
        w = torch.softmax(scores.masked_fill(~mask, -1e9), -1)
    else:
        w = torch.softmax(scores, -1) * mask
    return w, w @ v


def check_mask(driver, base, chapter):
    open_page(driver, base, chapter)
    root = open_explorer(driver, "ch05-mask")
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    # chapter 07 opens it without the causal mask: cross attention has none
    causal = driver.execute_script(
        "return arguments[0].querySelector('[data-knob=\"causal\"]').checked;", root
    )
    mask = np.array(inputs(driver, root)["mask"])
    assert causal == (chapter == "05") and bool(np.triu(mask, 1).any()) == (chapter == "07"), (
        chapter,
        causal,
    )
    # the grid is one Tab stop; the arrow keys move between its 20 cells
    tab_stops = driver.execute_script(
        "return Array.from(arguments[0].querySelectorAll('.ce-cell')).map(c => c.tabIndex);", root
    )
    assert len(tab_stops) == 20 and sorted(tab_stops) == [-1] * 19 + [0], tab_stops
    active = "return [document.activeElement.dataset.row, document.activeElement.dataset.col].join(',');"
    first = root.find_element(By.CSS_SELECTOR, '.ce-cell[tabindex="0"]')
    first.send_keys(Keys.ARROW_DOWN, Keys.ARROW_DOWN, Keys.ARROW_DOWN, Keys.ARROW_RIGHT, Keys.ARROW_RIGHT)
    assert driver.execute_script(active) == "3,2"
    cell = root.find_element(By.CSS_SELECTOR, '.ce-cell[data-row="3"][data-col="2"]')
    assert cell.get_attribute("tabindex") == "0"
    was = inputs(driver, root)["mask"][3][2]
    cell.send_keys(Keys.ENTER)  # a button: Enter toggles it
    assert inputs(driver, root)["mask"][3][2] == (not was)
    assert "query 4, key 3" in cell.get_attribute("aria-label")
    # a forbidden cell keeps its focus ring: the "forbidden" mark is a border, the ring an outline
    assert cell.get_attribute("aria-pressed") == "true"
    cell.send_keys(Keys.ARROW_LEFT)
    cell.find_element(By.XPATH, "preceding-sibling::button[1]").send_keys(Keys.ARROW_RIGHT)
    assert driver.execute_script(active) == "3,2"
    ring = driver.execute_script(
        "const s = getComputedStyle(document.activeElement); return [s.outlineStyle, s.outlineWidth];"
    )
    assert ring == ["solid", "3px"], ring
    cell.send_keys(Keys.ENTER)  # allowed again, as the checks below expect
    assert inputs(driver, root)["mask"][3][2] == was
    for settings in (
        {"length": 4, "causal": True},
        {"length": 2, "causal": False},
        {"length": 0, "causal": True},
    ):
        for name, value in settings.items():
            set_knob(driver, root, name, value)
        for policy in ("attnlib", "neg-inf", "neg-large", "after"):
            set_knob(driver, root, "policy", policy)
            s = inputs(driver, root)
            mask = np.array(s["mask"])
            assert mask[:, settings["length"] :].sum() == 0
            if settings["length"] == 4:
                assert not mask[1].any(), "the fully masked row of the default setting"
            (w64, o64), (w32, o32) = (_mask_reference(s, torch.float64), _mask_reference(s, torch.float32))
            assert_course(
                table(driver, root, "weights"), w64, w32, f"ch{chapter} weights {policy} {settings}"
            )
            assert_course(table(driver, root, "output"), o64, o32, f"ch{chapter} output {policy} {settings}")
            empty = ~mask.any(1)
            page_w = table(driver, root, "weights")
            if policy == "attnlib":
                assert (page_w[empty] == 0).all()
            elif policy == "neg-inf":
                assert np.isnan(page_w[empty]).all()
            elif policy == "neg-large":
                np.testing.assert_allclose(page_w[empty], 1 / mask.shape[1], rtol=1e-12)
            if empty.any():
                assert "attend to nothing" in live_text(driver, root)
    shoot(driver, root, f"ch{chapter}-mask")


def check_ch05(driver, base):
    check_mask(driver, base, "05")


def check_ch07(driver, base):
    check_mask(driver, base, "07")


def check_ch06(driver, base):
    open_page(driver, base, "06")
    root = open_explorer(driver, "ch06-heads")
    for h in (1, 2, 4, 8):
        set_knob(driver, root, "heads", str(h))
        s = inputs(driver, root)
        x = torch.tensor(s["x"], dtype=torch.float64)  # (L, D)
        right = split_heads(x[None], h)[0]  # (h, L, d)
        wrong = x.reshape(h, x.shape[0], -1)
        for a in range(h):
            assert_course(
                table(driver, root, f"right-{a}"), right[a], split_heads(x.float()[None], h)[0][a], "right"
            )
            assert_course(
                table(driver, root, f"wrong-{a}"), wrong[a], x.float().reshape(h, x.shape[0], -1)[a], "wrong"
            )
        mixed = sum(int((wrong[a].floor() != torch.arange(1, 4)[:, None]).any(1).sum()) for a in range(h))
        assert f"Wrong split: {mixed} of {h * 3} rows" in live_text(driver, root)
        assert live_text(driver, root).startswith(f"{h} head{'s' if h > 1 else ''} of {8 // h} features")
        assert (mixed == 0) == (h == 1)
    shoot(driver, root, "ch06")


def check_ch08(driver, base):
    open_page(driver, base, "08")
    root = open_explorer(driver, "ch08-online")
    for tile, spread in ((3, 2.0), (4, 10.0), (1, 0.5), (12, 2.0)):
        set_knob(driver, root, "tile", str(tile))
        set_knob(driver, root, "spread", spread)
        s = inputs(driver, root)
        scores = np.array(s["scores"])
        values = np.array(s["value"])
        _, states = online_attention_row_numpy(
            np.ones(1), scores[:, None], values, block_size=tile, scale=1.0
        )
        steps = math.ceil(12 / tile)
        for step in range(1, steps + 1):
            press(driver, root, "next")
            page = table(driver, root, "steps")
            assert page.shape[0] == step
            seen = min(step * tile, 12)
            state = states[step - 1]
            assert page[-1, 0] == seen == state.seen
            shown_count = driver.execute_script(
                "const r = arguments[0].querySelector('table[data-name=\"steps\"]').tBodies[0].rows;"
                "return r[r.length - 1].querySelector('td').textContent;",
                root,
            )
            assert shown_count == str(seen), f"keys read shown as {shown_count!r}, a count"
            np.testing.assert_allclose(page[-1, [1, 3]], [state.m, state.l], rtol=1e-9)
            np.testing.assert_allclose(page[-1, 4:6], state.acc, rtol=1e-9, atol=1e-12)
            so_far = (
                functional.softmax(torch.tensor(scores[:seen]), -1) @ torch.tensor(values[:seen]),
                functional.softmax(torch.tensor(scores[:seen], dtype=torch.float32), -1)
                @ torch.tensor(values[:seen], dtype=torch.float32),
            )
            assert_course(page[-1, 6:8], *so_far, f"ch08 output after {seen} keys")
        q = torch.ones(1, 1, dtype=torch.float64)
        full = attnlib.scaled_dot_product_attention(
            q, torch.tensor(scores)[:, None], torch.tensor(values), scale=1.0
        )
        full32 = attnlib.scaled_dot_product_attention(
            q.float(),
            torch.tensor(scores, dtype=torch.float32)[:, None],
            torch.tensor(values).float(),
            scale=1.0,
        )
        assert_course(table(driver, root, "full"), full, full32, "ch08 full softmax")
        assert_course(table(driver, root, "steps")[-1, 6:8], full, full32, "ch08 last tile = full softmax")
        assert "the full softmax gives" in live_text(driver, root)
        press(driver, root, "reset")
    press(driver, root, "all")
    assert_captions_fit_a_phone(driver, root, "ch08")
    shoot(driver, root, "ch08")


def check_ch09(driver, base):
    open_page(driver, base, "09")
    root = open_explorer(driver, "ch09-rope")
    scores = []
    for m, n, shift in ((7, 3, 0), (7, 3, 40), (3, 7, 0), (20, 0, 13), (5, 5, 0)):
        set_knob(driver, root, "m", m)
        set_knob(driver, root, "n", n)
        set_knob(driver, root, "shift", shift)
        s = inputs(driver, root)
        assert (s["m"], s["n"]) == (m + shift, n + shift)

        def ref(dtype, s=s):
            q = apply_rope(torch.tensor([[s["query"]]], dtype=dtype), torch.tensor([s["m"]]))[0, 0]
            k = apply_rope(torch.tensor([[s["key"]]], dtype=dtype), torch.tensor([s["n"]]))[0, 0]
            return torch.stack([q, k]), q @ k

        (r64, d64), (r32, d32) = _both(ref)
        assert_course(table(driver, root, "rotated"), r64, r32, "ch09 rotated q, k")
        page = table(driver, root, "score")
        assert page[0, 0] == m - n
        offset_text = driver.execute_script(
            "return arguments[0].querySelector('table[data-name=\"score\"] tbody td').textContent;", root
        )
        assert offset_text == f"{m - n}".replace("-", "\u2212"), offset_text  # an offset, not 3.0000
        assert_course(page[0, 1], d64, d32, "ch09 score")
        scores.append(page[0, 1])
        assert_labels_on_top(driver, root, f"ch09-rope m={m} n={n} shift={shift}")
    assert scores[0] == pytest.approx(scores[1], abs=1e-12), "shifting both positions changed the score"
    shoot(driver, root, "ch09-rope")
    root = open_explorer(driver, "ch09-alibi")
    # the chapter's notation: h counts the heads, r = 0, ..., h - 1 names one, lambda_r its slope
    set_knob(driver, root, "heads", 4)
    heads = driver.execute_script(
        "return Array.from(arguments[0].querySelectorAll('[data-knob=\"head\"] option')).map(o => o.text);",
        root,
    )
    assert heads == ["r = 0", "r = 1", "r = 2", "r = 3"], heads
    columns = driver.execute_script(
        "return Array.from(arguments[0].querySelectorAll('table[data-name=\"slopes\"] thead th'))"
        ".map(th => th.textContent);",
        root,
    )
    assert columns == ["r = 0", "r = 1", "r = 2", "r = 3"], columns
    assert "h = 4 heads; head r = 0" in live_text(driver, root)
    for heads, length, head in ((8, 5, 2), (1, 3, 0), (16, 8, 15), (6, 4, 5)):
        set_knob(driver, root, "heads", heads)
        set_knob(driver, root, "L", length)
        set_knob(driver, root, "head", str(head))
        assert inputs(driver, root) == {"heads": heads, "L": length, "head": head}
        slopes = alibi_slopes(heads)
        assert_course(table(driver, root, "slopes")[0], slopes.double(), slopes, "ch09 slopes")
        bias = alibi_bias(heads, length, length)[head]
        page = table(driver, root, "bias")
        np.testing.assert_array_equal(np.isinf(page), torch.isinf(bias).numpy())
        finite = ~np.isinf(page)
        np.testing.assert_allclose(page[finite], bias.double().numpy()[finite], rtol=1e-7, atol=0)
    assert_captions_fit_a_phone(driver, root, "ch09-alibi")
    shoot(driver, root, "ch09-alibi")


def _lm_state(driver, root):
    tokens = inputs(driver, root)["tokens"]
    logits = table(driver, root, "logits")
    layers = heads = 0
    maps = {}
    for name in driver.execute_script(
        "return Array.from(arguments[0].querySelectorAll('table[data-name^=\"attn-\"]'))"
        ".map(t => t.dataset.name);",
        root,
    ):
        _, layer, head = name.split("-")
        maps[(int(layer), int(head))] = table(driver, root, name)
        layers, heads = max(layers, int(layer) + 1), max(heads, int(head) + 1)
    attention = np.stack([np.stack([maps[(layer, h)] for h in range(heads)]) for layer in range(layers)])
    cache = int(driver.execute_script("return arguments[0].querySelector('.ce-cache').dataset.cache;", root))
    return tokens, logits, attention, cache


def _check_model_in_page(driver, root, model32, words):
    model64 = web_export.load_model(web_export.model_to_dict(model32), dtype=torch.float64)
    from selenium.webdriver.common.by import By

    word_box = root.find_element(By.CSS_SELECTOR, '[data-knob="word"]')
    for word in words:
        word_box.clear()
        word_box.send_keys(word)
        press(driver, root, "start")
        press(driver, root, "run")
        tokens, logits, attention, cache = _lm_state(driver, root)
        prompt = [tiny_lm.COPY_BOS, *[tiny_lm.ALPHABET.index(c) for c in word], tiny_lm.COPY_SEP]
        assert tokens[: len(prompt)] == prompt
        assert cache == len(tokens), "the KV cache should hold every position"
        new = len(tokens) - len(prompt)
        torch_tokens = tiny_lm.generate(model32, torch.tensor([prompt]), new, use_cache=True)[0].tolist()
        assert tokens == torch_tokens, f"{word}: page {tokens}, torch {torch_tokens}"
        t = torch.tensor([tokens])
        l64, a64 = web_export.forward_with_attention(model64, t)
        l32, a32 = web_export.forward_with_attention(model32, t)
        np.testing.assert_allclose(
            logits, l64[0].numpy(), rtol=1e-9, atol=1e-9, err_msg=f"{word}: logits float64"
        )
        np.testing.assert_allclose(
            logits, l32[0].double().numpy(), rtol=1e-4, atol=1e-4, err_msg=f"{word}: float32"
        )
        np.testing.assert_allclose(
            attention, a64[:, 0].numpy(), rtol=1e-9, atol=1e-12, err_msg=f"{word}: attention"
        )
        np.testing.assert_allclose(
            attention, a32[:, 0].double().numpy(), atol=1e-5, err_msg=f"{word}: attention f32"
        )
    return tokens


def check_ch10(driver, base, html: Path, tmp: Path):
    open_page(driver, base, "10")
    root = open_explorer(driver, "ch10-model")
    model = web_export.load_model(html / "_static" / "explorers" / "models" / "ch10-copy.json")
    _check_model_in_page(driver, root, model, ["abcde", "hgfedcba", "aab"])
    # off track, as the chapter does it: abcde|a, then c instead of b
    from selenium.webdriver.common.by import By

    word_box = root.find_element(By.CSS_SELECTOR, '[data-knob="word"]')
    word_box.clear()
    word_box.send_keys("abcde")
    press(driver, root, "start")
    press(driver, root, "step")
    set_knob(driver, root, "force", "2")
    press(driver, root, "write")
    press(driver, root, "step")
    tokens, logits, _, cache = _lm_state(driver, root)
    assert tokens[:9] == [9, 0, 1, 2, 3, 4, 10, 0, 2] and cache == len(tokens), (tokens, cache)
    with torch.no_grad():
        expected = int(model(torch.tensor([tokens[:9]]))[0, -1].argmax())
    assert tokens[9] == expected
    assert "You wrote" in live_text(driver, root) or "Copy so far" in live_text(driver, root)
    shoot(driver, root, "ch10")
    # the learner's own model: exported in Python, loaded through the file picker
    own = tiny_lm.build_model(3, d_model=32, num_heads=2, d_ff=64, num_layers=2)
    tiny_lm.train(own, steps=60, seed=3)
    path = web_export.export_model(own, tmp / "my-copy-model.json")
    root.find_element(By.CSS_SELECTOR, '[data-knob="file"]').send_keys(str(path))
    assert wait_for(driver, "return arguments[0].dataset.model === 'own';", 30, root), live_text(driver, root)
    assert "my-copy-model.json" in live_text(driver, root)
    _check_model_in_page(driver, root, web_export.load_model(path), ["abcd", "hhgg"])
    shoot(driver, root, "ch10-own-model")
    # the block's other wirings that the page runs: post-norm (no final LayerNorm), no residuals
    for i, switches in enumerate(({"norm_first": False}, {"residual": False, "feed_forward": False})):
        other = tiny_lm.build_model(4 + i, d_model=16, num_heads=2, d_ff=32, num_layers=3, **switches).eval()
        path = web_export.export_model(other, tmp / f"other-{i}.json")
        root.find_element(By.CSS_SELECTOR, '[data-knob="file"]').send_keys(str(path))
        assert wait_for(driver, f"return arguments[0].textContent.includes('other-{i}.json');", 30, root)
        _check_model_in_page(driver, root, web_export.load_model(path), ["abc"])
    _check_bad_files(driver, root, model, other, tmp)


def _check_bad_files(driver, root, chapter_model, loaded, tmp: Path):
    """A file the page cannot run is refused in words, and the model it had keeps running;
    "Back to the chapter's model" returns to it; Enter in the word box starts the word."""
    import base64
    import os

    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    driver.execute_script(
        "window.__errors = []; window.addEventListener('error', e => window.__errors.push(e.message));"
        "window.addEventListener('unhandledrejection', e => window.__errors.push(String(e.reason)));"
    )
    good = web_export.model_to_dict(loaded, "other-1")
    wrong_shape = json.loads(json.dumps(good))
    wrong_shape["config"]["d_model"] = 32  # its tensors are 16 wide
    missing = json.loads(json.dumps(good))
    del missing["tensors"]["blocks.1.attn.k_proj.bias"]
    nan = json.loads(json.dumps(good))
    bias = np.frombuffer(base64.b64decode(nan["tensors"]["head.bias"]["data"]), dtype="<f4").copy()
    bias[3] = np.nan
    nan["tensors"]["head.bias"]["data"] = base64.b64encode(bias.tobytes()).decode("ascii")
    cases = {
        "wrong-shape.json": (
            json.dumps(wrong_shape),
            "tensor embed.weight has shape [12,16] but its config needs [12,32]",
        ),
        "missing.json": (json.dumps(missing), "it has no tensor blocks.1.attn.k_proj.bias"),
        "nan.json": (json.dumps(nan), "tensor head.bias holds a NaN or infinite value"),
        "random.json": (os.urandom(300), "it is not JSON text"),
        "other-format.json": (
            json.dumps({"hello": 1}),
            "it is not a file written by attnlib.chapters.web_export",
        ),
    }
    before = _lm_state(driver, root)
    for name, (content, words) in cases.items():
        path = tmp / name
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
        root.find_element(By.CSS_SELECTOR, '[data-knob="file"]').send_keys(str(path))
        assert wait_for(driver, "return arguments[0].dataset.loadError !== undefined;", 30, root), name
        said = live_text(driver, root)
        assert f"Could not load {name}: {words}" in said and "Still running other-1" in said, (name, said)
        assert driver.execute_script("return arguments[0].dataset.model;", root) == "own"
        after = _lm_state(driver, root)
        assert after[0] == before[0] and np.array_equal(after[1], before[1]), (
            f"{name} changed the running model"
        )
        assert np.isfinite(table(driver, root, "next")).all(), name
        driver.execute_script("delete arguments[0].dataset.loadError;", root)
    assert driver.execute_script("return window.__errors;") == [], "raw JavaScript errors"
    # back to the chapter's model
    press(driver, root, "chapter-model")
    assert driver.execute_script("return arguments[0].dataset.model;", root) == "chapter"
    assert "Back to the chapter's model" in live_text(driver, root)
    _check_model_in_page(driver, root, chapter_model, ["abc"])
    # Enter in the word box starts that word
    word_box = root.find_element(By.CSS_SELECTOR, '[data-knob="word"]')
    word_box.clear()
    word_box.send_keys("hgf", Keys.ENTER)
    tokens = inputs(driver, root)["tokens"]
    assert tokens[:5] == [tiny_lm.COPY_BOS, 7, 6, 5, tiny_lm.COPY_SEP], tokens


EXPLORER_CHECKS = {
    "03": check_ch03,
    "04": check_ch04,
    "05": check_ch05,
    "06": check_ch06,
    "07": check_ch07,
    "08": check_ch08,
    "09": check_ch09,
}


# --- the self-checks ---------------------------------------------------------------------------


def check_quiz(driver, base, chapter):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    quiz = yaml.safe_load((QUIZ_DIR / f"ch{chapter}.yml").read_text(encoding="utf-8"))
    open_page(driver, base, chapter)
    assert "loader.js" in loaded_scripts(driver)
    ids = driver.execute_script("return Array.from(document.querySelectorAll('section[id]')).map(s => s.id);")
    for q in quiz["questions"]:
        assert q["section"] in ids, (
            f"ch{chapter} question {q['id']} links to a missing section {q['section']}"
        )
        form = driver.find_element(By.ID, f"question-{chapter}-{q['id']}")
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", form)
        check = form.find_element(By.CSS_SELECTOR, ".course-check")
        feedback = form.find_element(By.CSS_SELECTOR, ".course-feedback")
        assert feedback.get_attribute("aria-live") == "polite"
        back = form.find_element(By.CSS_SELECTOR, "a.course-back")
        assert back.get_attribute("href").endswith(f"#{q['section']}")

        def verdict(form=form):
            return driver.execute_script("return arguments[0].dataset.result;", form)

        if q["kind"] == "choice":
            radios = form.find_elements(By.CSS_SELECTOR, "input[type=radio]")
            assert len(radios) == len(q["options"])
            for i, (radio, option) in enumerate(zip(radios, q["options"], strict=True)):
                if i == 0:  # by keyboard: focus, Space, then Enter on "Check"
                    driver.execute_script("arguments[0].focus();", radio)
                    radio.send_keys(Keys.SPACE)
                    check.send_keys(Keys.ENTER)
                else:
                    radio.click()
                    check.click()
                assert verdict() == ("right" if option.get("correct") else "wrong"), (chapter, q["id"], i)
                # as the page shows it: no code backticks, no emphasis asterisks, math typeset
                first_words = " ".join(str(option["why"]).split()[:3]).replace("`", "").replace("*", "")
                first_words = first_words.split("$")[0].strip()
                assert first_words[:12] in feedback.text.replace("\n", " "), (first_words, feedback.text)
        else:
            box = form.find_element(By.CSS_SELECTOR, "input[type=text]")
            for mistake in q.get("mistakes", []):
                box.clear()
                box.send_keys(str(mistake["value"]), Keys.ENTER)
                assert verdict() == "wrong"
                words = " ".join(str(mistake["why"]).split()[:2]).replace("*", "").split("$")[0].strip()
                assert words[:8] in feedback.text, (mistake, feedback.text)
            box.clear()
            box.send_keys("not a number")
            check.click()
            assert verdict() == "none" and "Type a number" in feedback.text
            box.clear()
            box.send_keys(str(q["answer"]))
            check.click()
            assert verdict() == "right", (chapter, q["id"], feedback.text)
            # digits grouped as people write them: "1,050,624", "1 050 624", "1_050_624"
            if abs(q["answer"]) >= 1000 and float(q["answer"]).is_integer():
                grouped = f"{int(q['answer']):,}"
                for text in (grouped, grouped.replace(",", " "), grouped.replace(",", "_")):
                    box.clear()
                    box.send_keys(text, Keys.ENTER)
                    assert verdict() == "right", (chapter, q["id"], text, feedback.text)
    shoot(driver, driver.find_element(By.ID, f"self-check-{chapter}"), f"quiz-ch{chapter}")


# --- the tests ---------------------------------------------------------------------------------


@pytest.mark.book  # builds the site (slow)
@pytest.mark.parametrize("chapter", sorted(EXPLORER_CHECKS))
def test_explorer_shows_attnlibs_numbers(chapter, browser, site):  # noqa: F811 (fixtures)
    base, _ = site
    EXPLORER_CHECKS[chapter](browser, base)


@pytest.mark.book  # builds the site (slow)
def test_chapter_10_model_and_own_model_in_the_page(browser, site, tmp_path):  # noqa: F811
    base, html = site
    check_ch10(browser, base, html, tmp_path)


@pytest.mark.book  # builds the site (slow)
@pytest.mark.parametrize("chapter", [p.stem[2:] for p in QUIZZES])
def test_self_check_explains_every_answer(chapter, browser, site):  # noqa: F811
    base, _ = site
    check_quiz(browser, base, chapter)


@pytest.mark.book  # builds the site (slow)
def test_every_chapter_page_with_an_explorer_or_quiz_loads_only_the_loader(browser, site):  # noqa: F811
    """A first visit loads loader.js and explorers.css, none of the explorers' code or the model."""
    base, _ = site
    for chapter in [f"{n:02d}" for n in range(1, 14)]:
        open_page(browser, base, chapter)
        names = set(loaded_scripts(browser))
        assert {"loader.js", "explorers.css"} <= names, (chapter, names)
        lazy = {"common.js", f"ch{chapter}.js", "ch10-copy.json"} & names
        assert not lazy, f"chapter {chapter} loads {lazy} before any explorer is opened"


# --- the quiz files, without a browser ---------------------------------------------------------

# Every number a question states or asks for, recomputed (chapter-question -> value).
RECOMPUTED = {
    "01-1": 64,  # the context vector's size d_h in the question
    "02-2": float(torch.tensor([0.5, 0.25, 0.25, 0, 0]) @ torch.tensor([2.0, 4, 6, 8, 10])),
    "03-2": float(functional.softmax(torch.tensor([0.0, math.log(3)], dtype=torch.float64), -1)[1]),
    "04-1": 64,  # the variance of a sum of 64 independent unit-variance products
    "04-2": math.sqrt(512) / math.sqrt(64),
    "04-3": next(x for x in range(200) if torch.isinf(torch.exp(torch.tensor(float(x))))),
    "05-2": int(attnlib.masks.causal_mask(4).sum()),
    "06-1": 512 // 8,
    "06-2": sum(p.numel() for p in attnlib.MultiHeadAttention(512, 8).parameters()),
    "07-3": 5,
    "08-1": 4096 * 4096 * torch.finfo(torch.float32).bits // 8,
    "08-4": 32 // 8,
    "09-3": float(alibi_bias(8, 5, 5)[0, 4, 0]),
    "10-2": sum(
        p.numel()
        for m in (
            attnlib.transformer.TransformerBlock(64, 4, 128).linear1,
            attnlib.transformer.TransformerBlock(64, 4, 128).linear2,
        )
        for p in m.parameters()
    ),
    "11-1": attnlib.patchify(torch.zeros(1, 1, 8, 8), 2).shape[-2] + 1,  # patches and the class token
    "11-2": sum(p.numel() for p in attnlib.PatchEmbedding(1, 2, 32).parameters()),
    "12-1": math.log(65),
    "12-2": float(torch.softmax(torch.tensor([2.0, 1.0, float("-inf"), float("-inf")]), -1)[0]),
    "12-4": 65 * 128,
    "13-1": int(variants.receptive_field(variants.sliding_window_mask(16, 4), 3)[-1].sum()),
    "13-4": variants.cache_bytes_per_token("mla", num_heads=128, head_dim=128, latent_dim=512, rope_dim=64),
}


def test_quiz_files_are_well_formed_and_their_numbers_recomputed():
    seen = set()
    for path in QUIZZES:
        quiz = yaml.safe_load(path.read_text(encoding="utf-8"))
        chapter = path.stem[2:]
        assert quiz["chapter"].startswith(chapter)
        assert 3 <= len(quiz["questions"]) <= 6, f"{path.name}: {len(quiz['questions'])} questions"
        for q in quiz["questions"]:
            key = f"{chapter}-{q['id']}"
            assert q["kind"] in ("choice", "number") and q["section"] and q["prompt"], key
            if q["kind"] == "choice":
                correct = [o for o in q["options"] if o.get("correct")]
                assert len(correct) == 1 and len(q["options"]) >= 3, key
                assert all(o.get("why") for o in q["options"]), f"{key}: an option without its explanation"
            else:
                assert q.get("why") and q.get("mistakes"), key
                assert all(m.get("why") for m in q["mistakes"]), key
                assert all(abs(m["value"] - q["answer"]) > q.get("tolerance", 0) for m in q["mistakes"]), key
                assert key in RECOMPUTED, f"{key}: a number question whose answer is not recomputed here"
                assert RECOMPUTED[key] == pytest.approx(q["answer"], abs=q.get("tolerance", 0) + 1e-9), key
            seen.add(chapter)
    assert seen == {f"{n:02d}" for n in range(1, 14)}


def test_placement_file_names_existing_explorers():
    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    try:
        from course_explorers import load_placements
    finally:
        sys.path.pop(0)

    placements = load_placements(ROOT)
    chapters = {stem[:2] for stem in placements}
    assert {f"{n:02d}" for n in range(3, 11)} <= chapters
    for items in placements.values():
        for item in items:
            script = ROOT / "book" / "_static" / "explorers" / f"{item['explorer'][:4]}.js"
            assert f'registry["{item["explorer"]}"]' in script.read_text(encoding="utf-8"), item


def main(argv: list[str]) -> int:
    """Run the browser checks on a built site: python tests/site/test_explorers.py HTML [NAME...]."""
    import tempfile

    from helpers_chromium import chromium_paths, headless_chromium

    html = Path(argv[0]).resolve()
    only = set(argv[1:])
    failures = 0
    with served(html) as base, headless_chromium(*chromium_paths(), "course-explorers-") as driver:
        jobs = [(f"explorer-{c}", lambda c=c: EXPLORER_CHECKS[c](driver, base)) for c in EXPLORER_CHECKS]
        tmp = Path(tempfile.mkdtemp())
        jobs.append(("explorer-10", lambda: check_ch10(driver, base, html, tmp)))
        jobs += [(f"quiz-{p.stem[2:]}", lambda c=p.stem[2:]: check_quiz(driver, base, c)) for p in QUIZZES]
        for name, job in jobs:
            if only and name not in only:
                continue
            try:
                job()
                print(f"ok   {name}")
            except Exception as exc:  # noqa: BLE001 (a report of every check)
                failures += 1
                print(f"FAIL {name}: {type(exc).__name__}: {str(exc)[:1500]}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


def test_a_section_a_file_names_but_the_chapter_lacks_is_a_build_warning(monkeypatch):
    """A renamed heading must not drop an explorer or a quiz silently (the strict build fails)."""
    from docutils import nodes
    from docutils.frontend import get_default_settings
    from docutils.parsers.rst import Parser
    from docutils.utils import new_document

    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    try:
        import course_explorers
    finally:
        sys.path.pop(0)

    def doctree(*ids):
        doc = new_document("<test>", get_default_settings(Parser))
        for sid in ids:
            section = nodes.section(ids=[sid])
            section += nodes.title(text=sid)
            doc += section
        return doc

    class Env:
        docname = "book/03-queries-keys-values"

    class App:
        confdir = str(ROOT)
        env = Env()

    warnings = []
    monkeypatch.setattr(course_explorers.LOG, "warning", lambda msg, **kw: warnings.append(msg))
    complete = doctree(
        "a-lookup-that-can-be-differentiated",
        "queries-keys-and-values-from-learned-projections",
        "bahdanau-attention-is-a-q-k-v-instance",
        "check-your-understanding",
    )
    course_explorers.add_to_doctree(App(), complete)
    assert not warnings, warnings
    raw = [n.astext() for n in complete.findall(nodes.raw)]
    assert len(raw) == 2 and 'data-explorer="ch03-query-keys"' in raw[0] and 'id="self-check-03"' in raw[1]
    course_explorers.add_to_doctree(App(), doctree("check-your-understanding"))
    assert len(warnings) == 2 and "a-lookup-that-can-be-differentiated" in warnings[0], warnings


def test_question_text_becomes_html_and_words():
    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    try:
        import course_explorers
    finally:
        sys.path.pop(0)
    html = course_explorers.inline("The `view` of $d_k < 8$ is **bold** & <s>")
    assert html == (
        'The <code class="docutils literal notranslate">view</code> of '
        '<span class="math notranslate nohighlight">\\(d_k &lt; 8\\)</span> is '
        "<strong>bold</strong> &amp; &lt;s&gt;"
    )
    assert course_explorers.spoken_text("$3 \\times 5$: one row") == "3 times 5: one row"
    assert course_explorers.inline("the *post*-norm, $a * b$ and 2*3*4") == (
        'the <em>post</em>-norm, <span class="math notranslate nohighlight">\\(a * b\\)</span> and 2*3*4'
    )


def _course_explorers():
    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    try:
        import course_explorers
    finally:
        sys.path.pop(0)
    return course_explorers


def test_no_quiz_text_shows_a_raw_asterisk():
    """Every question as the page draws it: outside math, no markdown asterisk is left."""
    import re

    ce = _course_explorers()
    for path in QUIZZES:
        quiz = yaml.safe_load(path.read_text(encoding="utf-8"))
        sections = {q["section"]: q["section"] for q in quiz["questions"]}
        for q in quiz["questions"]:
            page = ce.question_html(path.stem[2:], q, sections)
            text = re.sub(r'<span class="math[^>]*>.*?</span>', "", page)
            assert "*" not in re.sub(r"<[^>]+>", "", text), (path.name, q["id"])


def test_every_script_the_explorer_extension_names_exists():
    """The extension's docstring names the scripts that do the work; each one is shipped."""
    import re

    ce = _course_explorers()
    named = set(re.findall(r"_static/explorers/([a-z0-9]+\.js)", ce.__doc__))
    assert named, "the docstring names no script"
    for name in named:
        assert (ROOT / "book" / "_static" / "explorers" / name).is_file(), f"{name} is named but missing"


NUMBER_TEXTS = [
    "1,050,624",
    "1 050 624",
    "1\u202f050\u202f624",
    "1_050_624",
    "1.050.624",
    "1,050.5",
    "1 050,5",
    "0,25",
    "\u22122",
    " 64 ",
    "1e-3",
    "2,828",
    "2.828",
    "16,576",
    "1,05,0",
    "1__0",
    "twelve",
    "",
]


def test_the_pages_answer_box_reads_numbers_as_the_notebook_does():
    """loader.js's readings() (the page's answer box) against attnlib.checks.quiz.number_readings
    (the exercise notebook's checker), run in Node with the browser's globals stubbed."""
    import shutil
    import subprocess

    from attnlib.checks.quiz import number_readings

    node = shutil.which("node") or shutil.which("nodejs")
    if node is None:
        pytest.skip("Node.js is not installed: the browser test (check_quiz) covers the answer box")
    script = (
        "global.window = {}; global.document = {currentScript: null, readyState: 'loading',"
        " addEventListener: function () {}};"
        f"require({json.dumps(str(ROOT / 'book' / '_static' / 'explorers' / 'loader.js'))});"
        f"const texts = {json.dumps(NUMBER_TEXTS)};"
        "console.log(JSON.stringify(texts.map(t => window.CourseQuiz.readings(t))));"
    )
    out = subprocess.run([node, "-e", script], capture_output=True, text=True, timeout=60, check=True).stdout
    page = json.loads(out)
    for text, got in zip(NUMBER_TEXTS, page, strict=True):
        assert got == number_readings(text), (text, got, number_readings(text))
    assert page[0] == page[1] == page[3] == [1050624]
    assert page[NUMBER_TEXTS.index("2,828")] == [2828, 2.828]


def test_explorer_numbers_use_minus_signs_exponents_included():
    """common.js's C.fmt: every minus, the exponent's too, is U+2212 (not a hyphen)."""
    out = run_in_node(
        ["common.js"],
        "const C = window.CourseExplorers;"
        "const xs = [-1.5e-5, -2.25, 3e-7, -Infinity, 0.5];"
        "console.log(JSON.stringify(xs.map(x => C.fmt(x))));",
        "the browser tests read the same numbers",
        timeout=60,
    )
    assert out == ["\u22121.500e\u22125", "\u22122.2500", "3.000e\u22127", "\u2212inf", "0.5000"]
