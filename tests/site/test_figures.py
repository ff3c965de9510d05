"""Figures readable at the page's width: the on-screen height of every figure's smallest text.

Every chapter draws with ``attnlib.figures.plotting.use_course_style()`` (checked in the
notebooks' source, without a build), which records in each figure's PNG its
smallest font size in points and its dpi. On the strictly built site
(``built_book``), in Chromium, every figure image of every page is measured at a
laptop width (1366 px) and a phone width (390 px)::

    text height (CSS px) = smallest font (pt) * dpi / 72 * rendered width / natural width

(the font size is the height of the text's em box; a PNG pixel is a CSS pixel when
the image is shown at its natural size). Asserted: at least 9 CSS px at 1366 px
and 8 CSS px at 390 px (:data:`MIN_TEXT_PX`). A figure too wide for a phone could
pass only by being shown at a readable size inside its own scrolling box (the
page itself must not scroll sideways: test_accessibility.py); today none needs
to. Every figure image must carry the record, so none escapes the check. The
measurements go to ``test-artifacts/site-checks/figures.json``.

``python tests/site/test_figures.py SITE_HTML_FOLDER [OUT.json]`` measures any
built site the same way (used for the before/after figures of issue 18.3).
"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path
from urllib.parse import unquote, urlsplit

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from attnlib.figures import plotting  # noqa: E402

sys.path[0] = str(Path(__file__).resolve().parent)  # as pytest does for this folder
if str(ROOT / "tests") not in sys.path:  # run as a script: helpers_chromium lives in tests/
    sys.path.append(str(ROOT / "tests"))
from helpers_site import PAGES, browser, site  # noqa: E402,F401 (fixtures)

sys.path.pop(0)

ARTIFACTS = ROOT / "test-artifacts" / "site-checks"
WIDTHS = (1366, 390)
MIN_TEXT_PX = {1366: 9.0, 390: 8.0}  # CSS px: the em height of a figure's smallest text

# Every image of the article with where it sits: its size on screen, its natural size, and
# whether a scrolling box around it (narrower than the image) lets a reader pan it.
FIGURES_JS = """
const out = [];
for (const img of document.querySelectorAll('main article img')) {
  const r = img.getBoundingClientRect();
  let p = img.parentElement, scrolls = false;
  while (p && p.tagName !== 'ARTICLE') {
    const o = getComputedStyle(p).overflowX;
    if ((o === 'auto' || o === 'scroll') && p.scrollWidth > p.clientWidth + 1) { scrolls = true; break; }
    p = p.parentElement;
  }
  out.push({src: img.getAttribute('src') || '', url: img.currentSrc || img.src,
            complete: img.complete, natural: img.naturalWidth, rendered: r.width,
            scrolls: scrolls, column: img.closest('article').getBoundingClientRect().width});
}
return out;
"""


def png_record(path: Path) -> dict[str, str]:
    """The PNG's text chunks (tEXt, iTXt keys and values; zTXt skipped), read without Pillow."""
    data = path.read_bytes()
    if not data.startswith(b"\x89PNG\r\n\x1a\n"):
        return {}
    record, pos = {}, 8
    while pos + 8 <= len(data):
        length = int.from_bytes(data[pos : pos + 4], "big")
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"tEXt" and b"\0" in body:
            key, value = body.split(b"\0", 1)
            record[key.decode("latin-1")] = value.decode("latin-1")
        elif kind == b"iTXt" and b"\0" in body:
            key, rest = body.split(b"\0", 1)
            if rest[:1] == b"\0":  # not compressed: flag, method, language\0, translated\0, text
                parts = rest[2:].split(b"\0", 2)
                if len(parts) == 3:
                    record[key.decode("latin-1")] = parts[2].decode("utf-8")
        elif kind == b"IEND":
            break
        pos += 12 + length
    return record


def text_px(record: dict[str, str], natural: float, rendered: float) -> float | None:
    """On-screen height of the figure's smallest text in CSS px; None without the record."""
    try:
        points = float(record[plotting.MIN_FONT_KEY])
        dpi = float(record[plotting.DPI_KEY])
    except (KeyError, ValueError):
        return None
    if natural <= 0:
        return None
    return points * dpi / 72 * rendered / natural


def _local_file(html: Path, base_url: str, url: str) -> Path | None:
    if not url.startswith(base_url):
        return None
    path = html / unquote(urlsplit(url).path.lstrip("/"))
    return path if path.is_file() else None


def measure_page(driver, base_url: str, html: Path, entry: str, width: int) -> list[dict]:
    """Every article image of one page at one window width, with its smallest text's height."""
    driver.set_window_size(width, 900)
    driver.get(f"{base_url}{entry}.html")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        images = driver.execute_script(FIGURES_JS)
        if driver.execute_script("return document.readyState") == "complete" and all(
            i["complete"] for i in images
        ):
            break
        time.sleep(0.25)
    time.sleep(0.3)  # layout settles (fonts, MathJax)
    images = driver.execute_script(FIGURES_JS)
    rows = []
    for img in images:
        local = _local_file(html, base_url, img["url"])
        record = png_record(local) if local is not None else {}
        rows.append(
            {
                "page": entry,
                "width": width,
                "src": img["src"].rsplit("/", 1)[-1],
                "natural_px": img["natural"],
                "rendered_px": round(img["rendered"], 1),
                "column_px": round(img["column"], 1),
                "scale": round(img["rendered"] / img["natural"], 3) if img["natural"] else None,
                "scrolls": img["scrolls"],
                "min_font_pt": float(record[plotting.MIN_FONT_KEY])
                if plotting.MIN_FONT_KEY in record
                else None,
                "dpi": float(record[plotting.DPI_KEY]) if plotting.DPI_KEY in record else None,
                "text_px": None
                if (px := text_px(record, img["natural"], img["rendered"])) is None
                else round(px, 2),
            }
        )
    return rows


def failures(rows: list[dict]) -> list[str]:
    """What a reader could not read: figures without the record or with text below the minimum."""
    out = []
    for row in rows:
        where = f"{row['page']} {row['src']} at {row['width']} px"
        if row["text_px"] is None:
            out.append(f"{where}: no font record (not drawn with figures.plotting.use_course_style())")
        elif row["text_px"] < MIN_TEXT_PX[row["width"]]:
            out.append(
                f"{where}: smallest text {row['text_px']:.1f} px < {MIN_TEXT_PX[row['width']]:g} px "
                f"({row['min_font_pt']:g} pt at {row['dpi']:g} dpi, drawn {row['natural_px']} px wide, "
                f"shown {row['rendered_px']:g} px)"
            )
    return out


def summary(rows: list[dict]) -> dict:
    out = {}
    for width in WIDTHS:
        at = [r for r in rows if r["width"] == width]
        sizes = sorted(r["text_px"] for r in at if r["text_px"] is not None)
        out[str(width)] = {
            "figures": len(at),
            "below_minimum": sum(
                1 for r in at if r["text_px"] is not None and r["text_px"] < MIN_TEXT_PX[width]
            ),
            "without_record": sum(1 for r in at if r["text_px"] is None),
            "minimum_px": MIN_TEXT_PX[width],
            "smallest_text_px": sizes[0] if sizes else None,
            "median_text_px": sizes[len(sizes) // 2] if sizes else None,
            "scrolling": sum(1 for r in at if r["scrolls"]),
        }
    return out


# --- the chapters' source (no build) -----------------------------------------------------------

NOTEBOOK_ROOMS = ("book", "solutions", "exercises")
DRAWS = re.compile(r"\bplt\.|\bplot_attention\(|\bplot_mask\(|\.subplots\(")
SMALL_FONT = re.compile(
    r"\b(?:fontsize|labelsize|titlesize)\s*=\s*(?:[\"'](?:xx?-small|small|smaller)[\"']|(\d+(?:\.\d+)?))"
)


def _code_cells(path: Path) -> list[str]:
    nb = json.loads(path.read_text(encoding="utf-8"))
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]


def _notebooks() -> list[Path]:
    return sorted(p for room in NOTEBOOK_ROOMS for p in (ROOT / room).glob("[0-9][0-9]-*.ipynb"))


@pytest.mark.parametrize("notebook", _notebooks(), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_plotting_notebook_uses_the_course_style(notebook):
    """A notebook that draws calls use_course_style() before its first figure, and sets no
    font smaller than plotting.MIN_FONT_SIZE."""
    cells = _code_cells(notebook)
    first_draw = next((i for i, src in enumerate(cells) if DRAWS.search(src)), None)
    if first_draw is None:
        return
    styled = next((i for i, src in enumerate(cells) if "use_course_style()" in src), None)
    assert styled is not None and styled <= first_draw, (
        f"{notebook.name} draws figures (code cell {first_draw}) but calls "
        "attnlib.figures.plotting.use_course_style() "
        + ("nowhere" if styled is None else f"only in code cell {styled}")
    )
    small = []
    for src in cells:
        for match in SMALL_FONT.finditer(src):
            if match.group(1) is None or float(match.group(1)) < plotting.MIN_FONT_SIZE:
                small.append(match.group(0))
    assert not small, f"{notebook.name}: fonts below {plotting.MIN_FONT_SIZE:g} pt: {small}"


def test_the_style_keeps_every_text_at_least_the_minimum():
    """The style's own sizes, and a figure drawn with it, respect MIN_FONT_SIZE."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with matplotlib.rc_context():
        plotting.use_course_style()
        sizes = {k: matplotlib.rcParams[k] for k in plotting.STYLE if k.endswith("size") and "fig" not in k}
        from matplotlib.font_manager import font_scalings

        for key, size in sizes.items():
            points = size if isinstance(size, (int, float)) else plotting.FONT_SIZE * font_scalings[size]
            assert points >= plotting.MIN_FONT_SIZE, (key, size)
        fig, axes = plt.subplots(1, 2, figsize=plotting.figure_size(3))
        plotting.plot_attention(np.eye(3) * 0.5 + 0.1, list("abc"), list("abc"), ax=axes[0])
        plotting.plot_mask(np.tril(np.ones((3, 3))), list("abc"), list("abc"), title="mask", ax=axes[1])
        axes[0].legend(handles=[], title="legend")
        assert plotting.smallest_font_size(fig) == plotting.MIN_FONT_SIZE
        assert fig.get_figwidth() == plotting.FIGURE_WIDTH and fig.dpi == plotting.FIGURE_DPI
        plt.close(fig)


# --- the built site, in Chromium ---------------------------------------------------------------


@pytest.fixture(scope="module")
def _figure_rows():
    rows: list[dict] = []
    yield rows
    if rows:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        data = {"minimum_text_px": {str(k): v for k, v in MIN_TEXT_PX.items()}, "summary": summary(rows)}
        data["figures"] = rows
        (ARTIFACTS / "figures.json").write_text(json.dumps(data, indent=1), encoding="utf-8")


@pytest.mark.book
@pytest.mark.parametrize("entry", PAGES)
def test_figure_text_is_readable_at_laptop_and_phone_width(entry, browser, site, _figure_rows):  # noqa: F811
    base_url, html = site
    rows = []
    for width in WIDTHS:
        rows += measure_page(browser, base_url, html, entry, width)
    _figure_rows.extend(rows)
    problems = failures(rows)
    assert not problems, f"{entry}:\n  " + "\n  ".join(problems)


def main(argv: list[str]) -> int:
    """Measure a built site folder: python tests/site/test_figures.py HTML [OUT.json]."""
    from helpers_chromium import chromium_paths, headless_chromium
    from helpers_site import served

    html = Path(argv[0]).resolve()
    rows = []
    with served(html) as base_url, headless_chromium(*chromium_paths(), "course-figures-") as driver:
        for entry in PAGES:
            if (html / f"{entry}.html").is_file():
                for width in WIDTHS:
                    rows += measure_page(driver, base_url, html, entry, width)
    data = {"minimum_text_px": {str(k): v for k, v in MIN_TEXT_PX.items()}, "summary": summary(rows)}
    data["figures"] = rows
    if len(argv) > 1:
        Path(argv[1]).write_text(json.dumps(data, indent=1), encoding="utf-8")
    print(json.dumps(data["summary"], indent=1))
    for problem in failures(rows):
        print(problem)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
