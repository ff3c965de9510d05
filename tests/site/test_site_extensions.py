"""The book's small Sphinx extensions (book/_ext/), without building the book."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "book" / "_ext"))
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
