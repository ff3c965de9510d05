"""A downloaded notebook installs itself, or the site says loudly that it cannot (issue 45).

book/_ext/course_wheel.py decides where the notebooks the site offers for download
install attnlib from: the course's repository, else the site's address
(``COURSE_SITE_URL`` or ``html.baseurl``), else the wheel saved beside them. In the last
case a build that was not told so (``COURSE_SITE_URL=none``) writes a Sphinx warning,
which fails the strict build, and in every such site the exercise box under each
chapter's title (book/_ext/course_exercises.py) tells the reader to save the wheel
beside the notebook before running it.

Checked here without the book: the rule, the box, and a tiny Sphinx project built in
this process with both extensions (the wheel itself is stubbed: test_site_wheel.py
builds the real one). tests/site/test_site_wheel.py checks the whole built site.
"""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import nbformat
import pytest
from helpers_site import EXAMPLE_REPOSITORY, NO_REPOSITORY, REPOSITORY, SITE, ext_module, tool_module

ROOT = Path(__file__).resolve().parents[2]
course_exercises = ext_module("course_exercises")
course_wheel = ext_module("course_wheel")
setup_cell = tool_module("setup_cell")
WHEEL = course_wheel.wheel_filename(ROOT)
BEFORE = "Before you run it where attnlib is missing"


def test_the_rule_self_installs_from_the_repository_or_the_address_and_warns_only_when_not_told():
    plan = course_wheel.plan_downloads
    from_git = plan(REPOSITORY, SITE, WHEEL, meant_without_address=False)
    assert from_git.source == course_wheel.FROM_REPOSITORY
    assert from_git.pip_source == f"git+{EXAMPLE_REPOSITORY}.git@main"
    from_site = plan(NO_REPOSITORY, SITE, WHEEL, meant_without_address=False)
    assert from_site.source == course_wheel.FROM_SITE
    assert from_site.pip_source == f"{SITE}_static/{WHEEL}"
    for downloads in (from_git, from_site):
        assert downloads.self_installing and not downloads.warns

    stranded = plan(NO_REPOSITORY, None, WHEEL, meant_without_address=False)
    meant = plan(NO_REPOSITORY, None, WHEEL, meant_without_address=True)
    for downloads in (stranded, meant):
        assert downloads.source == course_wheel.FROM_BESIDE and downloads.pip_source is None
        assert not downloads.self_installing
    assert stranded.warns and not meant.warns

    warning = course_wheel.build_warning(WHEEL)
    assert "cannot install attnlib by themselves" in warning and WHEEL in warning
    assert "COURSE_SITE_URL=https://<org>.github.io/<repo>/" in warning and "COURSE_SITE_URL=none" in warning
    assert "COURSE_SITE_URL=none" in course_wheel.log_message(meant, WHEEL, 3)
    assert "no COURSE_SITE_URL or html.baseurl" in course_wheel.log_message(stranded, WHEEL, 3)
    assert f"pip install {SITE}_static/{WHEEL};" in course_wheel.log_message(from_site, WHEEL, 3)


def test_an_address_of_none_is_meant_and_overrides_baseurl():
    assert course_wheel.no_address_meant({"COURSE_SITE_URL": " None "})
    assert not course_wheel.no_address_meant({}) and not course_wheel.no_address_meant(
        {"COURSE_SITE_URL": SITE}
    )
    assert course_wheel.site_url(SITE, {"COURSE_SITE_URL": "none"}) is None
    assert course_wheel.site_url(SITE, {}) == SITE


def _box(downloads: str):
    return course_exercises.exercise_box("01-demo", [("Colab", "https://colab.example/x")], WHEEL, downloads)


def test_the_box_asks_for_the_wheel_first_only_where_the_notebook_cannot_install_itself():
    from docutils import nodes

    for downloads, where in (("repository", "the course's repository"), ("site", "this website")):
        box = _box(downloads)
        text = " ".join(box.astext().split())
        assert f"its first cell installs it from {where}" in text, text
        assert BEFORE not in text and not list(box.findall(nodes.strong))
        (wheel,) = [r for r in box.findall(nodes.reference) if "course-wheel" in r["classes"]]
        assert wheel["refuri"] == f"../_static/{WHEEL}"

    box = _box("beside")
    (first,) = [p for p in box.findall(nodes.paragraph) if "course-wheel-first" in p["classes"]]
    text = " ".join(first.astext().split())
    assert text.startswith(BEFORE), text
    assert f"download the attnlib wheel ({WHEEL}) and save it beside the notebook" in text
    assert "upload it to /content" in text and "installs it from" not in box.astext()
    (wheel,) = [r for r in first.findall(nodes.reference) if "course-wheel" in r["classes"]]
    assert wheel["refuri"] == f"../_static/{WHEEL}"
    # The download and the launch links come first, as in every box.
    refs = [r["refuri"] for r in box.findall(nodes.reference)]
    assert refs == ["../_exercises/01-demo.ipynb", "https://colab.example/x", f"../_static/{WHEEL}"]


# --- a tiny Sphinx project with both extensions, built in this process --------------------------

CONF = """\
extensions = ["course_exercises", "course_wheel"]
html_theme = "basic"
html_baseurl = {baseurl!r}
exclude_patterns = ["_build", "tools", "exercises"]
"""


def _project(tmp_path: Path, baseurl: str) -> Path:
    src = tmp_path / "src"
    (src / "book").mkdir(parents=True)
    (src / "exercises").mkdir()
    (src / "conf.py").write_text(CONF.format(baseurl=baseurl), encoding="utf-8")
    (src / "_config.yml").write_text("repository:\n  branch: main\n", encoding="utf-8")
    shutil.copyfile(ROOT / "pyproject.toml", src / "pyproject.toml")
    (src / "tools").symlink_to(ROOT / "tools")  # setup_cell.py, the one rule for the cell
    (src / "index.rst").write_text("Course\n======\n\n.. toctree::\n\n   book/01-demo\n", encoding="utf-8")
    (src / "book" / "01-demo.rst").write_text("A chapter\n=========\n\nText.\n", encoding="utf-8")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import attnlib")])
    setup_cell.apply(nb, setup_cell.setup_source(ROOT, NO_REPOSITORY))
    nbformat.write(nb, src / "exercises" / "01-demo.ipynb")
    return src


def _build(tmp_path: Path, monkeypatch, environ: dict[str, str], baseurl: str = ""):
    """Build the tiny project strictly (-W --keep-going); return (status code, log, warnings, html)."""
    from sphinx.application import Sphinx
    from sphinx.util.docutils import docutils_namespace, patch_docutils

    src = _project(tmp_path, baseurl)
    for name in ("COURSE_REPOSITORY", "COURSE_SITE_URL", "COURSE_BRANCH", "COURSE_JUPYTERHUB"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "no-checkout"))  # no git remote to find
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    monkeypatch.syspath_prepend(str(ROOT / "book" / "_ext"))

    def stub_wheel(root, dest, python=None):  # the real one: test_site_wheel.py (slow)
        dest.mkdir(parents=True, exist_ok=True)
        (dest / WHEEL).write_bytes(b"PK")
        return dest / WHEEL

    monkeypatch.setattr(course_wheel, "build_wheel", stub_wheel)
    status, warning = io.StringIO(), io.StringIO()
    out = tmp_path / "_build"
    # As sphinx-build does: docutils' registries are restored afterwards (one build per test here).
    with patch_docutils(src), docutils_namespace():
        app = Sphinx(
            src, src, out / "html", out / "doctrees", "html",
            status=status, warning=warning, freshenv=True, warningiserror=True, keep_going=True,
        )  # fmt: skip
        app.build()
    return app.statuscode, status.getvalue(), warning.getvalue(), out / "html"


def _exercise_setup_source(html: Path) -> str:
    nb = nbformat.read(html / "_exercises" / "01-demo.ipynb", as_version=4)
    return nb.cells[setup_cell.find_setup_cell(nb)].source


@pytest.mark.parametrize("given", ["COURSE_SITE_URL", "baseurl", "COURSE_REPOSITORY"])
def test_a_site_with_an_address_or_repository_self_installs_and_does_not_warn(tmp_path, monkeypatch, given):
    environ = {"COURSE_SITE_URL": SITE} if given == "COURSE_SITE_URL" else {}
    if given == "COURSE_REPOSITORY":
        environ = {"COURSE_REPOSITORY": EXAMPLE_REPOSITORY}
    code, log, warnings, html = _build(tmp_path, monkeypatch, environ, SITE if given == "baseurl" else "")
    assert code == 0 and "course_wheel" not in warnings, warnings
    page = (html / "book" / "01-demo.html").read_text(encoding="utf-8")
    assert BEFORE not in page and f'href="../_static/{WHEEL}"' in page
    repository = REPOSITORY if given == "COURSE_REPOSITORY" else NO_REPOSITORY
    site = None if given == "COURSE_REPOSITORY" else SITE
    assert _exercise_setup_source(html) == course_wheel.site_setup_source(ROOT, site, repository)
    if given == "COURSE_REPOSITORY":
        assert "first cell installs it from the course's repository" in page
        assert f"install attnlib with pip install git+{EXAMPLE_REPOSITORY}.git@main (the repository)" in log
    else:
        assert "first cell installs it from this website" in page
        assert f"install attnlib with pip install {SITE}_static/{WHEEL};" in log
    assert (html / "_static" / WHEEL).read_bytes() == b"PK"


@pytest.mark.parametrize("meant", [False, True])
def test_a_site_without_either_warns_unless_told_and_its_box_asks_for_the_wheel(tmp_path, monkeypatch, meant):
    environ = {"COURSE_SITE_URL": "none"} if meant else {}
    code, log, warnings, html = _build(tmp_path, monkeypatch, environ, SITE if meant else "")
    if meant:  # COURSE_SITE_URL=none wins over html.baseurl: a local build, said so
        assert code == 0 and "course_wheel" not in warnings, warnings
        assert "the wheel saved beside the notebook, else a message (COURSE_SITE_URL=none;" in log
    else:
        assert code == 1, "the strict build passed although its downloads cannot install attnlib"
        assert "WARNING: course_wheel: the notebooks this site offers for download cannot install" in warnings
        assert "COURSE_SITE_URL=none bash tools/build-book.sh" in warnings
    page = (html / "book" / "01-demo.html").read_text(encoding="utf-8")
    assert f"<strong>{BEFORE}</strong>" in page and "save it beside the notebook" in page
    assert f'href="../_static/{WHEEL}"' in page
    source = _exercise_setup_source(html)
    assert source == course_wheel.site_setup_source(ROOT, None, NO_REPOSITORY) and "http" not in source


# --- the session's built site -------------------------------------------------------------------


def check_boxes(html: Path, downloads) -> int:
    """Every chapter's exercise box asks for the wheel first exactly when ``downloads`` cannot
    install attnlib by themselves; return the number of boxes checked."""
    from bs4 import BeautifulSoup

    checked = 0
    for stem in sorted(p.stem for p in (ROOT / "exercises").glob("[0-9][0-9]-*.ipynb")):
        page = html / "book" / f"{stem}.html"
        box = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser").select_one(".course-exercises")
        assert box is not None, f"{page.name}: no exercise box"
        first = box.select_one(".course-wheel-first")
        if downloads.self_installing:
            assert first is None, f"{page.name}: asks for the wheel although the notebook installs itself"
        else:
            assert first is not None, f"{page.name}: does not ask for the wheel before the notebook runs"
            text = " ".join(first.get_text().split())
            assert text.startswith(BEFORE) and "save it beside the notebook" in text, text
            assert first.select_one(f'a.course-wheel[href="../_static/{WHEEL}"]') is not None
        checked += 1
    assert checked >= 10, checked
    return checked


def sites_downloads(environ) -> object:
    """What a build in ``environ`` decides (the repository and _config.yml's baseurl, as course_wheel)."""
    import yaml

    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    site = course_wheel.site_url((config.get("html") or {}).get("baseurl"), environ)
    repository = setup_cell.course_repository(ROOT, environ)
    return course_wheel.plan_downloads(repository, site, WHEEL, course_wheel.no_address_meant(environ))


@pytest.mark.book
def test_the_built_sites_boxes_say_what_its_downloads_need(built_book):
    """The session's strictly built site (tests/conftest.py builds it with COURSE_SITE_URL=none
    unless the environment gives an address): it did not warn, and its boxes match its downloads."""
    import os

    html, log = built_book
    environ = {**os.environ}
    environ.setdefault("COURSE_SITE_URL", "none")
    downloads = sites_downloads(environ)
    assert not downloads.warns
    assert "cannot install attnlib by themselves" not in log
    assert course_wheel.log_message(downloads, WHEEL, 0).rsplit(";", 1)[0] in log
    check_boxes(html, downloads)
