"""Chapter 11's explorer (book/_static/explorers/ch11.js) against attnlib, in Chromium.

The page runs the chapter's ViT (``attnlib.chapters.vit_export``, written at the build) on a
test digit or a drawn one. For every exported test digit and for digits drawn by keyboard, the
class token's attention in each head, its rollout and the logits read from the page's cells
(``data-value``) equal attnlib's (``vit_export.forward_with_attention``): float64 on the same
float32 weights to 1e-9, float32 to 1e-5; the prediction is torch's argmax. The mean maps equal
those recomputed over the test set, and the share on ink equals ``vit_controls``' measure. The
drawing grid is one Tab stop with arrow keys, Space and Enter and a visible focus ring; the
explorer fits a 390 px screen and loads nothing until it is opened.

Without the built site the page is a minimal one (the loader, the explorer's ``<details>`` as
book/_ext/course_explorers.py writes it, the chapter's model exported here); with it
(``@pytest.mark.book``) the chapter's own page. ``python tests/site/test_explorer_ch11.py HTML``
runs the browser check on a built site folder.
"""

from __future__ import annotations

import json
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
    assert_captions_fit_a_phone,
    browser,  # noqa: F401 (fixture)
    ext_module,
    inputs,
    live_text,
    loaded_scripts,
    open_explorer,
    run_in_node,
    served,
    set_knob,
    shoot,
    site,  # noqa: F401 (fixture)
    table,
    wait_for,
)

from attnlib.chapters import vit, vit_controls, vit_export  # noqa: E402

NAME = "ch11-vit"
MODEL = "ch11-vit.json"
F32_RTOL = 1e-5
F32_ATOL = 1e-5  # float32 rounding through two blocks: logits of size ~7 differ by ~2e-6


# --- without a browser --------------------------------------------------------------------------


def test_export_round_trips_and_refuses_other_models():
    """An untrained ViT (no training: quick) written and read back gives the same logits; the
    examples are the first test image of each class, as grey levels; a CNN is refused."""
    model = vit.build("vit", 5).eval()
    data = vit.digits()
    xt, yt = data["test"]
    images, labels = xt[:40], yt[:40]
    exported = json.loads(json.dumps(vit_export.model_to_dict(model, "t", test=(images, labels))))
    back = vit_export.load_model(exported)
    with torch.no_grad():
        assert torch.equal(back(images), model(images))
    test = vit_export.load_test(exported)
    assert [e["label"] for e in test["examples"]] == sorted(set(labels.tolist()))
    for e in test["examples"]:
        assert int(labels[e["index"]]) == e["label"]
        assert (labels[: e["index"]] != e["label"]).all(), "not the first image of its class"
        assert torch.equal(torch.tensor(e["pixels"], dtype=torch.float32) / 16, images[e["index"], 0])
    means = vit_export.mean_maps(model, images)
    assert torch.equal(test["mean_rollout"], means["rollout"])
    assert test["mean_attention"].shape == (2, 4, 17)
    torch.testing.assert_close(test["mean_attention"].sum(-1), torch.ones(2, 4))
    with pytest.raises(TypeError):
        vit_export.model_to_dict(vit.build("cnn", 0))
    with pytest.raises(ValueError):
        vit_export.load_model({"format": "attnlib-tiny-lm"})


def _node_forward(data: dict, images: list) -> list[dict]:
    """ch11.js's forward pass in Node (common.js and ch11.js, no page) on ``images`` (grey levels)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "in.json").write_text(json.dumps({"model": data, "images": images}), encoding="utf-8")
        return run_in_node(
            ["common.js", "ch11.js"],
            f"const inp = JSON.parse(require('fs').readFileSync({json.dumps(str(Path(tmp) / 'in.json'))}));"
            "const m = new window.CourseExplorers.ch11.Model(inp.model);"
            "console.log(JSON.stringify(inp.images.map(px => m.run(px))));",
            "the browser test checks the same forward pass",
        )


def test_the_pages_forward_pass_is_attnlibs_in_node():
    """ch11.js's forward pass (Node, an untrained ViT: no training) equals attnlib's: logits, every
    head's attention, the rollout and the patches, float64 to 1e-9 and float32 to 1e-5."""
    model = vit.build("vit", 7).eval()
    xt, yt = vit.digits()["test"]
    data = vit_export.model_to_dict(model, "t", test=(xt[:30], yt[:30]))
    images = [e["pixels"] for e in data["test"]["examples"][:4]] + [
        [[16 * ((r + c) % 3 == 0) for c in range(8)] for r in range(8)]
    ]
    pages = _node_forward(data, images)
    model64 = vit_export.load_model(data, dtype=torch.float64)
    x = torch.tensor(images, dtype=torch.float64)[:, None] / 16
    ref64 = vit_export.forward_with_attention(model64, x)
    ref32 = vit_export.forward_with_attention(model, x.float())
    for b, page in enumerate(pages):
        for key in ("logits", "attention", "rollout", "patches"):
            got = np.asarray(page[key], dtype=np.float64)
            want64 = ref64[key][:, b] if key == "attention" else ref64[key][b]
            want32 = ref32[key][:, b] if key == "attention" else ref32[key][b]
            _close(got, want64.numpy(), f"image {b}: {key} (float64)")
            _close(got, want32.double().numpy(), f"image {b}: {key} (float32)", rtol=F32_RTOL, atol=F32_ATOL)


# --- the chapter's model ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def chapter_file(tmp_path_factory) -> Path:
    """The chapter's ViT as the build writes it (trained here: about 20 s of one core)."""
    return vit_export.export_chapter_model(tmp_path_factory.mktemp("ch11") / MODEL)


@pytest.mark.slow
def test_chapter_export_is_the_chapters_model_and_its_controls(chapter_file):
    """The exported weights are vit.trained('vit', 0)'s; the mean maps and accuracy are attnlib's;
    the normalised mean map on each test image's ink is vit_controls' 'mean_map' control."""
    model = vit_export.load_model(chapter_file)
    data = json.loads(chapter_file.read_text(encoding="utf-8"))
    test = vit_export.load_test(data)
    xt, yt = vit.digits()["test"]
    assert data["test"]["accuracy"] == vit.accuracy(model, xt, yt)
    assert data["test"]["n_images"] == len(yt)
    means = vit_export.mean_maps(model, xt)
    for key, exported in (
        ("attention", test["mean_attention"]),
        ("rollout", test["mean_rollout"]),
        ("rollout_normalised", test["mean_rollout_normalised"]),
    ):
        torch.testing.assert_close(exported, means[key], rtol=1e-6, atol=1e-7)
    ink = vit_controls.ink_patches(xt).flatten(1).float()  # (B, 16)
    on_mean = (ink * test["mean_rollout_normalised"]).sum(1).mean().item()
    assert on_mean == pytest.approx(vit_controls.rollout_baselines(model, xt)["mean_map"], abs=1e-6)
    fresh = vit_export.chapter_model()
    for key, value in fresh.state_dict().items():
        assert torch.equal(model.state_dict()[key], value), f"{key} is not the chapter's"


# --- in Chromium ---------------------------------------------------------------------------------


def _mini_site(folder: Path, model_file: Path) -> Path:
    """A page with the loader and the explorer's closed <details>, as the build writes them."""
    course_explorers = ext_module("course_explorers")
    item = next(
        i for items in course_explorers.load_placements(ROOT).values() for i in items if i["explorer"] == NAME
    )
    static = folder / "_static" / "explorers"
    shutil.copytree(ROOT / "book" / "_static" / "explorers", static)
    (static / "models").mkdir(exist_ok=True)
    shutil.copy2(model_file, static / "models" / MODEL)
    (folder / "index.html").write_text(
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1"><link rel="icon" href="data:,">'
        '<link rel="stylesheet" href="_static/explorers/explorers.css">'
        '<script defer src="_static/explorers/loader.js"></script><title>ch11</title></head>'
        f"<body><main>{course_explorers.explorer_html(item, '11', 0)}</main></body></html>",
        encoding="utf-8",
    )
    return folder


def _page_state(driver, root) -> dict:
    classes = table(driver, root, "classes")  # (classes, 2): probability, logit
    state = {"inputs": inputs(driver, root), "probs": classes[:, 0], "logits": classes[:, 1]}
    state["patches"] = table(driver, root, "patches")
    state["attention"] = np.stack(
        [np.stack([table(driver, root, f"attn-{l}-{h}").ravel() for h in range(4)]) for l in range(2)]
    )
    state["mean_attention"] = np.stack(
        [np.stack([table(driver, root, f"mean-attn-{l}-{h}").ravel() for h in range(4)]) for l in range(2)]
    )
    state["self"] = table(driver, root, "attn-self")
    state["mean_self"] = table(driver, root, "mean-attn-self")
    state["rollout"] = table(driver, root, "rollout").ravel()
    state["mean_rollout"] = table(driver, root, "mean-rollout").ravel()
    state["diff"] = table(driver, root, "rollout-minus-mean").ravel()
    state["ink"] = table(driver, root, "ink")[0]
    return state


def _close(page, ref, what, rtol=1e-9, atol=1e-12):
    np.testing.assert_allclose(page, np.asarray(ref, dtype=np.float64), rtol=rtol, atol=atol, err_msg=what)


def _check_numbers(driver, root, model32, model64, test, what):
    """Every number the page shows for its current image against attnlib's."""
    st = _page_state(driver, root)
    pixels = torch.tensor(st["inputs"]["pixels"], dtype=torch.float64)[None, None] / 16  # (1, 1, 8, 8)
    ref64 = vit_export.forward_with_attention(model64, pixels)
    ref32 = vit_export.forward_with_attention(model32, pixels.float())
    for name, page, pick in (
        ("logits", st["logits"], lambda r: r["logits"][0]),
        ("attention", st["attention"], lambda r: r["attention"][:, 0, :, 0, 1:]),
        ("self", st["self"], lambda r: r["attention"][:, 0, :, 0, 0]),
        ("rollout", st["rollout"], lambda r: r["rollout"][0, 1:]),
        ("patches", st["patches"], lambda r: r["patches"][0]),
    ):
        _close(page, pick(ref64).numpy(), f"{what}: {name} (float64)")
        _close(page, pick(ref32).double().numpy(), f"{what}: {name} (float32)", rtol=F32_RTOL, atol=F32_ATOL)
    _close(st["probs"], torch.softmax(ref64["logits"][0], -1).numpy(), f"{what}: probabilities")
    best = int(ref32["logits"][0].argmax())
    assert int(np.argmax(st["logits"])) == best, what
    assert f"the model says {best} with" in live_text(driver, root), (what, live_text(driver, root))
    # the baseline: the exported mean maps, as attnlib computes them on the test set
    _close(st["mean_attention"], test["mean_attention"][:, :, 1:].double().numpy(), f"{what}: mean maps")
    _close(st["mean_self"], test["mean_attention"][:, :, 0].double().numpy(), f"{what}: mean self")
    _close(st["mean_rollout"], test["mean_rollout"][1:].double().numpy(), f"{what}: mean rollout")
    _close(st["diff"], st["rollout"] - st["mean_rollout"], f"{what}: rollout minus mean", atol=1e-15)
    # the share on ink, as vit_controls measures it: own map, the mean map, an even spread
    grid = vit.rollout_to_image(model32, pixels.float()).flatten(1)  # (1, 16)
    ink = vit_controls.ink_patches(pixels.float()).flatten(1).float()  # (1, 16)
    own = ((grid / grid.sum(1, keepdim=True)) * ink).sum().item()
    by_mean = (test["mean_rollout_normalised"] * ink[0]).sum().item()
    _close(
        st["ink"], [own, by_mean, ink.mean().item()], f"{what}: share on ink", rtol=F32_RTOL, atol=F32_ATOL
    )
    return st


def _active(driver):
    return driver.execute_script(
        "const a = document.activeElement; return a && a.classList.contains('ce-pixel') ?"
        " [Number(a.dataset.row), Number(a.dataset.col), getComputedStyle(a).outlineStyle,"
        " getComputedStyle(a).outlineWidth] : null;"
    )


def check_ch11(driver, url: str, model_file: Path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    driver.set_window_size(1280, 900)
    driver.get(url)
    wait_for(driver, "return document.readyState === 'complete';")
    names = set(loaded_scripts(driver))
    assert "loader.js" in names and not {"ch11.js", MODEL, "common.js"} & names, names
    root = open_explorer(driver, NAME)
    assert {"ch11.js", MODEL} <= set(loaded_scripts(driver))
    model32 = vit_export.load_model(model_file)
    model64 = vit_export.load_model(model_file, dtype=torch.float64)
    test = vit_export.load_test(model_file)
    predicted = []
    for i, example in enumerate(test["examples"]):
        set_knob(driver, root, "digit", str(i))
        st = _check_numbers(driver, root, model32, model64, test, f"test image {example['index']}")
        assert st["inputs"]["pixels"] == example["pixels"] and st["inputs"]["source"] == "test"
        assert driver.execute_script(
            "return arguments[0].querySelector('[data-knob=digit]').value;", root
        ) == str(i)
        predicted.append(int(np.argmax(st["logits"])))
    labels = [e["label"] for e in test["examples"]]
    assert sum(p == y for p, y in zip(predicted, labels, strict=True)) >= len(labels) // 2, (
        predicted,
        labels,
    )
    shoot(driver, root, "ch11")
    # the drawing grid by keyboard: one Tab stop, arrows move, Space and Enter switch a pixel
    clear = root.find_element(By.CSS_SELECTOR, '[data-knob="clear"]')
    clear.click()
    assert not any(any(row) for row in inputs(driver, root)["pixels"])
    _check_numbers(driver, root, model32, model64, test, "a blank grid")
    stops = driver.execute_script(
        "return arguments[0].querySelectorAll('.ce-pixel[tabindex=\"0\"]').length;", root
    )
    assert stops == 1, f"{stops} Tab stops in the drawing grid"
    driver.switch_to.active_element.send_keys(Keys.TAB)
    first = _active(driver)
    assert first is not None, "Tab from the Clear button does not reach the drawing grid"
    assert first[2] == "solid" and first[3] == "3px", f"no visible focus ring: {first}"
    # a "7": the top row, then the diagonal down to the left
    keys = [Keys.HOME, Keys.ARROW_RIGHT, Keys.SPACE]
    keys += [Keys.ARROW_RIGHT, Keys.SPACE] * 5
    for _ in range(5):
        keys += [Keys.ARROW_DOWN, Keys.ARROW_LEFT, Keys.ENTER]
    for key in keys:
        driver.switch_to.active_element.send_keys(key)
    drawn = np.array(inputs(driver, root)["pixels"])
    expected = np.zeros((8, 8), dtype=int)
    expected[0, 1:7] = 16
    for k in range(1, 6):
        expected[k, 6 - k] = 16
    assert (drawn == expected).all(), drawn
    assert inputs(driver, root)["source"] == "drawn"
    assert (
        driver.execute_script("return arguments[0].querySelector('[data-knob=digit]').value;", root)
        == "drawn"
    )
    _check_numbers(driver, root, model32, model64, test, "a drawn 7")
    driver.switch_to.active_element.send_keys(Keys.SPACE)  # rub the last pixel out again
    assert inputs(driver, root)["pixels"][5][1] == 0
    assert _active(driver)[:2] == [5, 1], "the focus left the pixel just switched"
    driver.switch_to.active_element.send_keys(Keys.TAB)
    assert _active(driver) is None, "the grid holds more than one Tab stop"
    # every pixel and control is labelled
    unlabelled = driver.execute_script(
        "return Array.from(arguments[0].querySelectorAll('.ce-pixel'))"
        ".filter(b => !b.getAttribute('aria-label')).length"
        " + Array.from(arguments[0].querySelectorAll('select, input')).filter(e => !e.labels.length).length;",
        root,
    )
    assert unlabelled == 0
    shoot(driver, root, "ch11-drawn")
    assert_captions_fit_a_phone(driver, root, NAME)
    driver.set_window_size(390, 900)
    try:
        time.sleep(0.2)
        wide = driver.execute_script(
            "return [document.documentElement.scrollWidth, document.documentElement.clientWidth,"
            " arguments[0].querySelector('.ce-pixels').getBoundingClientRect().right];",
            root,
        )
        assert wide[0] <= wide[1] + 1 and wide[2] <= wide[1], f"wider than a 390 px screen: {wide}"
        shoot(driver, root, "ch11-390px")
    finally:
        driver.set_window_size(1280, 900)
    errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert not errors, errors


@pytest.mark.slow  # trains the chapter's model and starts a browser
def test_the_explorer_shows_attnlibs_numbers_in_a_minimal_page(browser, chapter_file, tmp_path):  # noqa: F811
    folder = _mini_site(tmp_path / "site", chapter_file)
    with served(folder) as base:
        check_ch11(browser, base + "index.html", chapter_file)


@pytest.mark.book  # builds the site (slow)
def test_the_explorer_shows_attnlibs_numbers_in_the_chapters_page(browser, site):  # noqa: F811
    base, html = site
    check_ch11(browser, f"{base}book/11-vision-transformer.html", html / "_static/explorers/models" / MODEL)


def main(argv: list[str]) -> int:
    """python tests/site/test_explorer_ch11.py HTML: the browser check on a built site folder."""
    from helpers_chromium import chromium_paths, headless_chromium

    html = Path(argv[0]).resolve()
    with served(html) as base, headless_chromium(*chromium_paths(), "course-ch11-") as driver:
        check_ch11(
            driver, f"{base}book/11-vision-transformer.html", html / "_static/explorers/models" / MODEL
        )
    print("ok   explorer-11")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
