"""Chapter 12's explorer: the shipped character model (or the reader's own) run in the page.

``book/_static/explorers/ch12.js`` runs :class:`~attnlib.chapters.tiny_lm.TinyDecoderLM` on
the binary file of :func:`attnlib.chapters.web_export.export_char_model`. Driven in Chromium,
its numbers are compared with attnlib's on the same weights: the logits for the next character
after several prompts and after generated text (float64 torch to 1e-9, float32 torch to 1e-5),
the chosen head's attention weights for the current character, and the greedy text, character
for character, with :func:`attnlib.chapters.char_lm.generate_text` (and past the 128-character
window, with the page's rule written out here in torch). Sampled characters are each within
the top-k of torch's logits, and a seed gives the same text twice. The reader's own model loads
through the file picker; broken files are refused in words and the running model stays.

Two ways to run: quickly, on a small site made here (the explorer's HTML as the book's
extension writes it, the explorers' scripts and the model file as the build writes it,
``test_ch12_explorer_on_a_small_site``); and on the strictly built book (``book`` mark).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "tests" / "site") not in sys.path:  # run as a script
    sys.path.append(str(ROOT / "tests" / "site"))
from helpers_site import (  # noqa: E402
    AXE_JS,
    AXE_TAGS,
    EXPLORERS,
    assert_captions_fit_a_phone,
    browser,  # noqa: F401 (fixture)
    ext_module,
    inputs,
    live_text,
    open_explorer,
    press,
    served,
    set_knob,
    shoot,
    site,  # noqa: F401 (fixture)
    table,
    wait_for,
)

from attnlib.chapters import char_lm, web_export  # noqa: E402

NAME = "ch12-char-model"
LAZY = {"common.js", "ch12.js", web_export.CHAR_MODEL_FILE}


def _placement():
    course_explorers = ext_module("course_explorers")
    items = [
        i for i in course_explorers.load_placements(ROOT).get("12-real-text", []) if i["explorer"] == NAME
    ]
    assert len(items) == 1, "book/_quizzes/explorers.yml should place ch12-char-model once in chapter 12"
    return items[0], course_explorers


@pytest.fixture(scope="module")
def small_site(tmp_path_factory):
    """A site of one page holding the explorer as the book's extension writes it, the explorers'
    files, and the chapter's model as the build writes it."""
    item, course_explorers = _placement()
    html = tmp_path_factory.mktemp("ch12-site")
    static = html / "_static" / "explorers"
    (static / "models").mkdir(parents=True)
    for f in ("loader.js", "common.js", "ch12.js", "explorers.css"):
        shutil.copy2(EXPLORERS / f, static / f)
    web_export.export_chapter_char_model(static / "models" / web_export.CHAR_MODEL_FILE)
    (html / "book").mkdir()
    (html / "book" / "12-real-text.html").write_text(
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1"><title>Chapter 12</title>'
        '<link rel="icon" href="data:,">'
        '<link rel="stylesheet" href="../_static/explorers/explorers.css">'
        '<script defer src="../_static/explorers/loader.js"></script></head>'
        f"<body><main><h1>A Transformer on real text</h1>{course_explorers.explorer_html(item, '12', 0)}"
        "</main></body></html>",
        encoding="utf-8",
    )
    with served(html) as base:
        yield base, html


def _models(path: Path):
    m32, chars = web_export.load_char_model(path)
    m64, _ = web_export.load_char_model(path, dtype=torch.float64)
    return m32, m64, chars


def _state(driver, root) -> dict:
    got = inputs(driver, root)
    got["logits"] = table(driver, root, "logits")[0]
    got["weights"] = np.array(
        driver.execute_script(
            "return Array.from(arguments[0].querySelectorAll('.ce-text .ce-char[data-value]'))"
            ".map(s => Number(s.dataset.value));",
            root,
        )
    )
    return got


def _window(got) -> list[int]:
    return got["ids"][got["from"] :]


def _check_numbers(got, m32, m64, what):
    """The page's logits and the chosen head's weights for its window equal torch's."""
    window = torch.tensor([_window(got)])
    l64, a64 = web_export.forward_with_attention(m64, window)
    l32, a32 = web_export.forward_with_attention(m32, window)
    np.testing.assert_allclose(
        got["logits"], l64[0, -1].numpy(), rtol=1e-9, atol=1e-9, err_msg=f"{what}: f64"
    )
    np.testing.assert_allclose(
        got["logits"], l32[0, -1].double().numpy(), rtol=1e-5, atol=1e-5, err_msg=f"{what}: float32"
    )
    layer, head = got["layer"], got["head"]
    np.testing.assert_allclose(got["weights"], a64[layer, 0, head, -1].numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(got["weights"], a32[layer, 0, head, -1].double().numpy(), atol=1e-5)
    assert abs(got["weights"].sum() - 1) < 1e-9, what


def _start(driver, root, text):
    set_knob(driver, root, "prompt", text)
    press(driver, root, "start")


def _run(driver, root):
    press(driver, root, "run")
    assert wait_for(driver, "return arguments[0].dataset.running === 'false';", 120, root), (
        "the run never ended"
    )


@torch.no_grad()
def _greedy_with_window(model, ids: list[int], new: int) -> list[int]:
    """The page's rule in torch: past max_len characters the model keeps the last half."""
    ids, start, cap = list(ids), max(0, len(ids) - model.positions.max_len), model.positions.max_len
    for _ in range(new):
        logits = model(torch.tensor([ids[start:]]))[0, -1]
        ids.append(int(logits.argmax()))
        if len(ids) - start > cap:
            start = len(ids) - cap // 2
    return ids


def check_ch12(driver, base, model_path: Path, tmp: Path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    driver.get_log("browser")
    driver.set_window_size(1280, 900)
    driver.get(f"{base}book/12-real-text.html")
    wait_for(driver, "return document.readyState === 'complete';")
    first = set(
        driver.execute_script(
            "return performance.getEntriesByType('resource').map(e => e.name.split('/').pop());"
        )
    )
    assert not LAZY & first, f"loaded before the explorer was opened: {LAZY & first}"
    driver.execute_script(
        "window.__errors = []; window.addEventListener('error', e => window.__errors.push(e.message));"
        "window.addEventListener('unhandledrejection', e => window.__errors.push(String(e.reason)));"
    )
    root = open_explorer(driver, NAME)  # by keyboard: focus the summary, press Enter
    m32, m64, chars = _models(model_path)
    vocab = char_lm.CharVocab(char_lm.load_text())
    assert chars == vocab.chars

    # logits and attention after prompts, on two heads
    for text, layer, head in (("ROMEO:\n", 0, 0), ("First Citizen:\nBefore we proceed", 2, 3), ("O", 3, 1)):
        set_knob(driver, root, "layer", str(layer))
        set_knob(driver, root, "head", str(head))
        _start(driver, root, text)
        got = _state(driver, root)
        assert got["ids"] == vocab.encode(text).tolist() and got["from"] == 0, text
        assert (got["layer"], got["head"]) == (layer, head)
        _check_numbers(got, m32, m64, repr(text))

    # greedy: attnlib's text, inside the window and past it
    set_knob(driver, root, "greedy", True)
    _start(driver, root, "ROMEO:\n")
    _run(driver, root)
    got = _state(driver, root)
    prompt = vocab.encode("ROMEO:\n").unsqueeze(0)
    expected = char_lm.generate_text(m32, prompt, 100, temperature=0)[0].tolist()
    assert got["ids"] == expected, f"page {vocab.decode(got['ids'])!r}\ntorch {vocab.decode(expected)!r}"
    _check_numbers(got, m32, m64, "after 100 greedy characters")
    _run(driver, root)
    got = _state(driver, root)
    assert len(got["ids"]) == 207 and got["from"] > 0, (len(got["ids"]), got["from"])
    assert got["ids"] == _greedy_with_window(m32, expected, 100), "greedy text past the window"
    _check_numbers(got, m32, m64, "past the window")
    greedy_text = vocab.decode(got["ids"])
    shoot(driver, root, "ch12-greedy")

    # sampling: each character within torch's top-k; a seed gives the same text twice
    set_knob(driver, root, "greedy", False)
    set_knob(driver, root, "temperature", "0.8")
    set_knob(driver, root, "top-k", "5")
    set_knob(driver, root, "seed", "7")
    texts = []
    for _ in range(2):
        _start(driver, root, "ROMEO:\n")
        _run(driver, root)
        texts.append(inputs(driver, root)["ids"])
    assert texts[0] == texts[1], "the same seed should give the same text"
    ids = texts[0]
    assert len(ids) == 107
    with torch.no_grad():
        logits = m32(torch.tensor([ids[:-1]]))[0, 6:]  # the logits each written character was drawn from
    written = torch.tensor(ids[7:])
    kth = torch.topk(logits, 5, dim=-1).values[:, -1]
    chosen = logits.gather(1, written[:, None])[:, 0]
    assert (chosen >= kth - 1e-4).all(), "a sampled character outside the top 5"
    assert vocab.decode(ids) != greedy_text[:107], "sampling at 0.8 wrote the greedy text"
    set_knob(driver, root, "seed", "8")
    _start(driver, root, "ROMEO:\n")
    _run(driver, root)
    assert inputs(driver, root)["ids"] != ids, "another seed should give another text"
    assert "sampled, seed 8" in live_text(driver, root)

    # the keyboard: Enter in the prompt box starts from it; a character the model lacks is said
    box = root.find_element(By.CSS_SELECTOR, '[data-knob="prompt"]')
    box.clear()
    box.send_keys("JULIET", Keys.ENTER)
    assert inputs(driver, root)["ids"] == vocab.encode("JULIET").tolist()
    box.clear()
    box.send_keys("caf\u00e9", Keys.ENTER)
    assert "has no character \u00e9" in live_text(driver, root)
    assert box.get_attribute("aria-invalid") == "true"
    assert inputs(driver, root)["ids"] == vocab.encode("JULIET").tolist(), "a refused prompt changed the text"

    # the reader's own model, from the exercise notebook's export cell
    torch.manual_seed(0)
    own = char_lm.build_char_model(3, len(vocab), 32, d_model=32, num_heads=2, d_ff=64, num_layers=2)
    data = vocab.encode(char_lm.load_text()[:20000])
    char_lm.train_lm(own, data, 20, context=32, batch_size=8, seed=3)
    path = web_export.export_char_model(own, vocab, tmp / "my-char-model.bin")
    root.find_element(By.CSS_SELECTOR, '[data-knob="file"]').send_keys(str(path))
    assert wait_for(driver, "return arguments[0].dataset.model === 'own';", 30, root), live_text(driver, root)
    assert "my-char-model.bin" in live_text(driver, root)
    o32, o64, _ = _models(path)
    set_knob(driver, root, "layer", "1")
    set_knob(driver, root, "head", "1")
    _start(driver, root, "To be, or not")
    _check_numbers(_state(driver, root), o32, o64, "own model")
    set_knob(driver, root, "greedy", True)
    _start(driver, root, "KING:\n")
    _run(driver, root)
    got = _state(driver, root)  # past its 32-character window
    assert got["ids"] == _greedy_with_window(o32, vocab.encode("KING:\n").tolist(), 100)
    _check_numbers(got, o32, o64, "own model past its window")
    _check_bad_files(driver, root, path, tmp)

    # back to the chapter's model
    press(driver, root, "chapter-model")
    assert driver.execute_script("return arguments[0].dataset.model;", root) == "chapter"
    assert "Back to the chapter's model" in live_text(driver, root)
    set_knob(driver, root, "layer", "3")
    _start(driver, root, "ROMEO:\n")
    _check_numbers(_state(driver, root), m32, m64, "back to the chapter's model")

    # every control has a label and takes focus
    unlabelled = driver.execute_script(
        "return Array.from(arguments[0].querySelectorAll('input, select, textarea, button'))"
        ".filter(e => !(e.labels && e.labels.length) && !e.textContent.trim())"
        ".map(e => e.outerHTML.slice(0, 80));",
        root,
    )
    assert not unlabelled, unlabelled
    unfocusable = driver.execute_script(
        "return Array.from(arguments[0].querySelectorAll('input, select, textarea, button'))"
        ".filter(e => { e.focus(); return document.activeElement !== e; })"
        ".map(e => e.outerHTML.slice(0, 80));",
        root,
    )
    assert not unfocusable, unfocusable
    # at 390 px: captions inside the screen, nothing wider than it
    assert_captions_fit_a_phone(driver, root, "ch12")
    driver.set_window_size(390, 900)
    try:
        wide = driver.execute_script(
            "const w = document.documentElement.clientWidth;"
            "return Array.from(arguments[0].querySelectorAll('*')).filter(e => !e.closest('.ce-table-wrap'))"
            ".filter(e => e.getBoundingClientRect().right > w + 1).map(e => e.className || e.tagName);",
            root,
        )
        assert not wide, f"past the screen at 390 px: {wide[:10]}"
        shoot(driver, root, "ch12-390px")
    finally:
        driver.set_window_size(1280, 900)
    assert driver.execute_script("return window.__errors;") == [], "raw JavaScript errors"
    severe = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert not severe, severe
    if AXE_JS.is_file():  # tools/setup.sh installs axe-core; the accessibility test skips without it
        driver.execute_script(AXE_JS.read_text(encoding="utf-8"))
        driver.set_script_timeout(120)
        violations = driver.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            "axe.run(document.querySelector('details.course-explorer'),"
            f" {{runOnly: {{type: 'tag', values: {json.dumps(AXE_TAGS)}}}}})"
            ".then(r => done(r.violations.map(v => [v.id, v.impact, v.nodes.length])));"
        )
        assert violations == [], violations


def _check_bad_files(driver, root, good: Path, tmp: Path):
    """A file the page cannot run is refused in words, and the model it had keeps running."""
    from selenium.webdriver.common.by import By

    data = good.read_bytes()
    n = int.from_bytes(data[8:12], "little")
    header, weights = json.loads(data[12 : 12 + n]), data[12 + n :]

    def rewrite(change) -> bytes:
        h = json.loads(json.dumps(header))
        change(h)
        text = json.dumps(h).encode()
        text += b" " * (-(12 + len(text)) % 4)
        return b"ATTNCHAR" + len(text).to_bytes(4, "little") + text + weights

    def wider(h):
        h["config"]["d_model"] = 64  # its tensors are 32 wide

    def drop(h):
        h["tensors"] = [t for t in h["tensors"] if t["name"] != "blocks.1.attn.k_proj.bias"]

    nan = bytearray(data)
    bias = next(t for t in header["tensors"] if t["name"] == "head.bias")
    at = 12 + n + 4 * (bias["offset"] + 3)
    nan[at : at + 4] = np.array([np.nan], dtype="<f4").tobytes()
    cases = {
        "wrong-shape.bin": (
            rewrite(wider),
            "tensor embed.weight has shape [65,32] but its config needs [65,64]",
        ),
        "missing.bin": (rewrite(drop), "it has no tensor blocks.1.attn.k_proj.bias"),
        "nan.bin": (bytes(nan), "tensor head.bias holds a NaN or infinite value"),
        "cut-short.bin": (data[: len(data) // 8 * 4], "lies past the end of the file"),
        "odd-bytes.bin": (data[:-2], "its weights end in the middle of a float32 value"),
        "random.bin": (os.urandom(3000), "it is not a file written by web_export.export_char_model"),
        "chapter-10.json": (b'{"format": "attnlib-tiny-lm"}', "it is JSON text"),
        "empty.bin": (b"", "it is too short to be a model file"),
    }
    before = _state(driver, root)
    for name, (content, words) in cases.items():
        path = tmp / name
        path.write_bytes(content)
        root.find_element(By.CSS_SELECTOR, '[data-knob="file"]').send_keys(str(path))
        assert wait_for(driver, "return arguments[0].dataset.loadError !== undefined;", 30, root), name
        said = live_text(driver, root)
        assert (
            f"Could not load {name}: " in said and words in said and "Still running my-char-model" in said
        ), (
            name,
            said,
        )
        assert driver.execute_script("return arguments[0].dataset.model;", root) == "own", name
        after = _state(driver, root)
        assert after["ids"] == before["ids"] and np.array_equal(after["logits"], before["logits"]), name
        driver.execute_script("delete arguments[0].dataset.loadError;", root)


@pytest.mark.slow  # starts a browser
def test_ch12_explorer_on_a_small_site(browser, small_site, tmp_path):  # noqa: F811 (fixtures)
    base, html = small_site
    started = time.monotonic()
    check_ch12(
        browser, base, html / "_static" / "explorers" / "models" / web_export.CHAR_MODEL_FILE, tmp_path
    )
    print(f"ch12 explorer checks: {time.monotonic() - started:.1f} s")


@pytest.mark.book  # builds the site (slow)
def test_ch12_explorer_in_the_built_book(browser, site, tmp_path):  # noqa: F811 (fixtures)
    base, html = site
    check_ch12(
        browser, base, html / "_static" / "explorers" / "models" / web_export.CHAR_MODEL_FILE, tmp_path
    )


def test_the_export_round_trips_and_refuses_what_the_page_cannot_run(tmp_path):
    """export_char_model -> load_char_model gives the same logits; a vocabulary of the wrong size
    and a block the page does not run are refused."""
    vocab = char_lm.CharVocab("abcdefgh \n")
    model = char_lm.build_char_model(0, len(vocab), 16, d_model=16, num_heads=2, d_ff=32, num_layers=2).eval()
    path = web_export.export_char_model(model, vocab, tmp_path / "m.bin")
    back, chars = web_export.load_char_model(path)
    x = vocab.encode("abc hag\nbe").unsqueeze(0)
    with torch.no_grad():
        assert torch.equal(back(x), model(x))
    assert chars == vocab.chars and path.read_bytes()[:8] == b"ATTNCHAR"
    assert (12 + int.from_bytes(path.read_bytes()[8:12], "little")) % 4 == 0
    with pytest.raises(ValueError, match="vocabulary has 9 characters"):
        web_export.export_char_model(model, vocab.chars[:-1], tmp_path / "x.bin")
    gelu = char_lm.build_char_model(0, len(vocab), 16, d_model=16, num_heads=2, d_ff=32, activation="gelu")
    with pytest.raises(ValueError, match="relu only"):
        web_export.export_char_model(gelu, vocab, tmp_path / "y.bin")
