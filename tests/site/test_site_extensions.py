"""The book's small Sphinx extensions (book/_ext/), without building the book."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "book" / "_ext"))
import course_icons  # noqa: E402
import course_mathjax  # noqa: E402
import course_site  # noqa: E402

sys.path.pop(0)

CDN = "https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-mml-chtml.js"


def _fake_app(mode="auto"):
    config = SimpleNamespace(
        course_mathjax=mode, mathjax_path=CDN, mathjax3_config=None, mathjax2_config=None
    )
    return SimpleNamespace(config=config), config


def _mathjax2_tree(folder: Path) -> Path:
    for rel in (
        "MathJax.js",
        "config/TeX-AMS_CHTML.js",
        "config/TeX-AMS-MML_SVG.js",
        "jax/output/CommonHTML/jax.js",
        "jax/output/SVG/jax.js",
        "unpacked/MathJax.js",
        "fonts/HTML-CSS/TeX/woff/MathJax_Main-Regular.woff",
        "fonts/HTML-CSS/TeX/otf/x.otf",
        "localization/en/en.js",
        "localization/de/de.js",
    ):
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text("//", encoding="utf-8")
    return folder


@pytest.fixture
def no_debian_mathjax(monkeypatch, tmp_path):
    monkeypatch.setattr(course_mathjax, "DEBIAN_MATHJAX", tmp_path / "absent")
    monkeypatch.delenv("COURSE_MATHJAX", raising=False)
    monkeypatch.delenv("COURSE_MATHJAX_DIR", raising=False)


def test_auto_without_a_local_mathjax_keeps_the_cdn(no_debian_mathjax):
    app, config = _fake_app("auto")
    course_mathjax.choose_mathjax(app, config)
    assert config.mathjax_path == CDN and app.course_mathjax_local is None


def test_local_without_a_local_mathjax_is_an_error(no_debian_mathjax):
    from sphinx.errors import ConfigError

    app, config = _fake_app("local")
    with pytest.raises(ConfigError, match="libjs-mathjax"):
        course_mathjax.choose_mathjax(app, config)


def test_a_mathjax2_folder_is_used_and_the_environment_wins(no_debian_mathjax, monkeypatch, tmp_path):
    folder = _mathjax2_tree(tmp_path / "mj")
    monkeypatch.setenv("COURSE_MATHJAX_DIR", str(folder))
    app, config = _fake_app("auto")
    course_mathjax.choose_mathjax(app, config)
    assert config.mathjax_path == "mathjax/MathJax.js?config=TeX-AMS_CHTML"
    assert app.course_mathjax_local == (folder, 2)

    monkeypatch.setenv("COURSE_MATHJAX", "cdn")
    app, config = _fake_app("auto")
    course_mathjax.choose_mathjax(app, config)
    assert config.mathjax_path == CDN


def test_a_mathjax3_es5_folder_is_recognised(no_debian_mathjax, monkeypatch, tmp_path):
    (tmp_path / "mathjax" / "es5").mkdir(parents=True)
    (tmp_path / "mathjax" / "es5" / "tex-mml-chtml.js").write_text("//", encoding="utf-8")
    monkeypatch.setenv("COURSE_MATHJAX_DIR", str(tmp_path / "mathjax"))
    app, config = _fake_app("local")
    course_mathjax.choose_mathjax(app, config)
    assert config.mathjax_path == "mathjax/tex-mml-chtml.js"


def test_mathjax2_gets_a_hub_config_that_processes_myst_math(no_debian_mathjax, monkeypatch, tmp_path):
    monkeypatch.setenv("COURSE_MATHJAX_DIR", str(_mathjax2_tree(tmp_path / "mj")))
    app, config = _fake_app("auto")
    course_mathjax.choose_mathjax(app, config)
    myst_classes = "tex2jax_process|mathjax_process|math|output_area"
    config.mathjax3_config = {"options": {"processHtmlClass": myst_classes}}
    course_mathjax.configure_mathjax2(app)
    assert config.mathjax3_config is None
    assert "math" in config.mathjax2_config["tex2jax"]["processClass"].split("|")


def test_the_copy_keeps_what_the_pages_load_and_skips_the_rest(tmp_path):
    import shutil

    source = _mathjax2_tree(tmp_path / "mj")
    shutil.copytree(source, tmp_path / "out", ignore=course_mathjax._ignore_mathjax2)
    kept = {p.relative_to(tmp_path / "out").as_posix() for p in (tmp_path / "out").rglob("*") if p.is_file()}
    assert kept == {
        "MathJax.js",
        "config/TeX-AMS_CHTML.js",
        "jax/output/CommonHTML/jax.js",
        "fonts/HTML-CSS/TeX/woff/MathJax_Main-Regular.woff",
        "localization/en/en.js",
    }


def test_duplicate_inline_scripts_are_dropped_once_per_page():
    def script(filename, **attributes):
        return SimpleNamespace(filename=filename, attributes=attributes)

    scripts = [
        script("_static/a.js"),
        script(None, body="const X = 1"),
        script("", body="const X = 1"),
        script("_static/a.js"),
        script(None, body="const Y = 2"),
    ]
    context = {"script_files": scripts}
    course_site.drop_duplicate_inline_scripts(None, "page", "page.html", context, None)
    bodies = [s.attributes.get("body") for s in context["script_files"]]
    assert bodies.count("const X = 1") == 1 and bodies.count("const Y = 2") == 1
    assert len(context["script_files"]) == 4, "files are left to Sphinx's own deduplication"


def test_the_theme_mode_defaults_to_auto():
    context = {}
    course_site.default_theme_mode(None, "page", "page.html", context, None)
    assert context["default_mode"] == "auto"
    context = {"default_mode": "dark"}
    course_site.default_theme_mode(None, "page", "page.html", context, None)
    assert context["default_mode"] == "dark"


# course_icons: no fontawesome.js, the icon fonts cut to the icons in use --------------------------


def _theme_static() -> Path:
    import pydata_sphinx_theme

    return Path(pydata_sphinx_theme.__file__).parent / "theme" / "pydata_sphinx_theme" / "static"


def _small_site(tmp_path: Path) -> Path:
    """A built site in miniature: two pages, the theme's stylesheet and its three fonts."""
    import shutil

    out = tmp_path / "html"
    static = _theme_static()
    (out / course_icons.THEME_CSS).parent.mkdir(parents=True)
    shutil.copy(static / "styles" / "pydata-sphinx-theme.css", out / course_icons.THEME_CSS)
    (out / course_icons.WEBFONTS).mkdir(parents=True)
    for name in course_icons.FONTS:
        shutil.copy(
            static / "vendor" / "fontawesome" / "webfonts" / f"{name}.ttf", out / course_icons.WEBFONTS
        )
    head = (
        "<head>\n    <!-- So that users can add custom icons -->\n"
        '    <script defer src="../_static/scripts/fontawesome.js?digest=55c26ed414f5f8a31ebb"></script>\n'
        "</head>\n"
    )
    (out / "book").mkdir()
    (out / "book" / "a.html").write_text(head + '<i class="fa-solid fa-bars"></i>', encoding="utf-8")
    (out / "index.html").write_text(head + '<i class="fab fa-github"></i>', encoding="utf-8")
    (out / "_static" / "theme.js").write_text('e.classList="fa-solid fa-xmark"', encoding="utf-8")
    macros = "<script defer src=\"{{ pathto('_static/scripts/fontawesome.js', 1) }}\"></script>"
    (out / "_static" / "webpack-macros.html").write_text(macros, encoding="utf-8")  # a template
    return out


def test_stylesheet_icons_reads_class_rules_and_drawn_icons():
    css = (
        '.fa-bars:before,.fa-navicon:before{content:"\\f0c9"}'
        ".fa-lg{font-size:1.25em}"
        ':root{--pst-icon-info:"\\f05a"}.x:after{content:"\\f35d"}.y:before{content:"a"}'
    )
    by_class, drawn = course_icons.stylesheet_icons(css)
    assert by_class == {"fa-bars": "\uf0c9", "fa-navicon": "\uf0c9"}
    assert drawn == {"\uf05a", "\uf35d"}


def test_the_site_loses_the_script_and_its_fonts_keep_only_the_icons_in_use(tmp_path):
    pytest.importorskip("fontTools", reason="fontTools (installed with matplotlib) cuts the fonts")
    from fontTools.ttLib import TTFont

    out = _small_site(tmp_path)
    report = course_icons.slim_site(out)
    assert report["pages"] == 2 and report["cut"]
    assert course_icons.site_pages(out) == [out / "book" / "a.html", out / "index.html"]
    for page in (out / "index.html", out / "book" / "a.html"):
        text = page.read_text(encoding="utf-8")
        assert "fontawesome.js" not in text and "custom icons" not in text
    assert {"fa-bars", "fa-github", "fa-xmark"} <= set(report["icons"])
    css = (out / course_icons.THEME_CSS).read_text(encoding="utf-8")
    assert ".woff2" not in css and css.count('.site.woff) format("woff")') == 3
    solid = TTFont(str(out / course_icons.WEBFONTS / "fa-solid-900.site.woff"))
    brands = TTFont(str(out / course_icons.WEBFONTS / "fa-brands-400.site.woff"))
    assert solid.flavor == "woff"
    assert {0xF0C9, 0xF00D} <= set(solid.getBestCmap())  # bars, xmark
    assert 0xF09B in brands.getBestCmap()  # github
    assert 0xF135 not in solid.getBestCmap()  # the rocket: no page shows it
    assert "Font Awesome" in solid["name"].getDebugName(1)  # the name and copyright records stay
    assert "Font Awesome" in solid["name"].getDebugName(0), "the cut font lost its copyright record"
    sizes = sum(f.stat().st_size for f in (out / course_icons.WEBFONTS).glob("*.site.woff"))
    assert sizes < 40_000, sizes

    again = course_icons.slim_site(out)  # a second pass (an incremental build) changes nothing
    assert again["pages"] == 0 and again["cut"]
    assert (out / course_icons.THEME_CSS).read_text(encoding="utf-8") == css


def test_without_fonttools_only_the_script_goes(tmp_path, monkeypatch):
    out = _small_site(tmp_path)
    monkeypatch.setattr(course_icons, "cut_font", lambda *args: False)
    report = course_icons.slim_site(out)
    assert report["pages"] == 2 and not report["cut"]
    assert ".woff2" in (out / course_icons.THEME_CSS).read_text(encoding="utf-8")


def test_accessibility_fixes_name_collapsed_cells_by_their_visible_text():
    """axe-core 4.14's label-content-name-mismatch: a summary named other than what it shows."""
    page = (
        '<summary aria-label="Toggle hidden content">\n<p class="collapsed admonition-title">'
        "Show code cell source</p></summary>"
        '<li role="doc-biblioentry">x</li>'
    )
    fixed = course_site.fix_accessibility(page)
    assert "<summary>\n" in fixed and "Toggle hidden content" not in fixed
    assert 'role="listitem"' in fixed and "doc-biblioentry" not in fixed
    assert course_site.fix_accessibility(fixed) == fixed
