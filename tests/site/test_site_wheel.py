"""The site ships the learner's attnlib wheel, and the notebooks it offers install it (issue 38.4).

book/_ext/course_wheel.py builds the wheel offline into the site's ``_static/`` and
rewrites the setup cell (tools/setup_cell.py) of every downloadable notebook for the
site. Checked here:

* the rule, without Sphinx: the wheel's name, the site's address, the setup cell's code
  for each case (run as if attnlib were missing: what pip gets, or the one line that
  says what to do), and what the build does to a site folder;
* the whole book built with its notebooks unexecuted (test_launch.build_unexecuted) for
  an address and no repository: the wheel is in the site and every downloadable
  notebook installs it from there.

tests/test_binder.py installs a served wheel with the rewritten cell in a fresh,
Colab-like environment; tests/site/test_book_build.py checks the session's built site.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import nbformat
import pytest
from helpers_setup_cell import run_setup_cell
from helpers_site import NO_REPOSITORY, REPOSITORY, SITE, build_unexecuted, ext_module, tool_module

ROOT = Path(__file__).resolve().parents[2]
course_wheel = ext_module("course_wheel")
setup_cell = tool_module("setup_cell")


def test_the_wheel_is_named_as_pip_names_it_from_pyproject():
    import tomllib

    version = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    assert course_wheel.wheel_filename(ROOT) == f"attnlib-{version}-py3-none-any.whl"
    assert setup_cell.wheel_filename(ROOT) == course_wheel.wheel_filename(ROOT)
    assert course_wheel.wheel_url(SITE, "w.whl") == SITE + "_static/w.whl"


def test_the_sites_address_comes_from_the_environment_then_baseurl():
    assert course_wheel.site_url("", {}) is None
    assert course_wheel.site_url(None, {"COURSE_SITE_URL": " "}) is None
    assert course_wheel.site_url(SITE.rstrip("/"), {}) == SITE
    assert course_wheel.site_url("https://old.example.org/", {"COURSE_SITE_URL": SITE}) == SITE
    for bad in ("example.github.io/course", "ftp://example.org/", "https://example.org/?x=1", "/course/"):
        with pytest.raises(course_wheel.SiteUrlError, match="COURSE_SITE_URL"):
            course_wheel.site_url(bad, {})


def test_the_setup_cell_for_each_case(tmp_path, monkeypatch):
    colab = tmp_path / "content"
    checkout = tmp_path / "course"
    for folder in (colab, checkout / "exercises", checkout / "attnlib"):
        folder.mkdir(parents=True)
    (checkout / "attnlib" / "__init__.py").write_text("", encoding="utf-8")
    wheel = course_wheel.wheel_filename(ROOT)
    url = course_wheel.wheel_url(SITE, wheel)

    # A repository known: pip from git, as the committed notebooks; the site's wheel is not used.
    known = course_wheel.site_setup_source(ROOT, SITE, REPOSITORY)
    assert known == setup_cell.setup_source(ROOT, REPOSITORY)
    (pip,) = run_setup_cell(known, colab, monkeypatch)
    assert pip[-1] == "git+https://github.com/example/attention-course.git@main", pip

    # No repository, the site's address known: the site's wheel; a checkout's own attnlib first.
    from_site = course_wheel.site_setup_source(ROOT, SITE, NO_REPOSITORY)
    (pip,) = run_setup_cell(from_site, colab, monkeypatch)
    assert pip[1:] == ["-m", "pip", "install", "--quiet", url], pip
    (pip,) = run_setup_cell(from_site, checkout / "exercises", monkeypatch)
    assert pip[-1] == str(checkout), pip

    # Neither: the committed cell of this checkout; one line names the file and the command.
    beside = course_wheel.site_setup_source(ROOT, None, NO_REPOSITORY)
    assert beside == setup_cell.setup_source(ROOT, NO_REPOSITORY)
    assert "<org>" not in beside and "http" not in beside
    with pytest.raises(ModuleNotFoundError) as stopped:
        run_setup_cell(beside, colab, monkeypatch)
    message = str(stopped.value)
    assert "\n" not in message and message.startswith(f"attnlib is not installed: download {wheel} ")
    assert message.endswith(f"run: %pip install {wheel}"), message
    (colab / wheel).write_bytes(b"")
    (pip,) = run_setup_cell(beside, colab, monkeypatch)
    assert pip[-1] == str(colab / wheel), pip

    for source in (known, from_site, beside):
        compile(source, "setup-cell", "exec")
    assert all(len(line) <= 80 for line in beside.splitlines()), "the committed cell fits 80 columns"


def _notebook(path: Path, setup: str | None) -> Path:
    cells = [nbformat.v4.new_markdown_cell("# A chapter"), nbformat.v4.new_code_cell("import attnlib")]
    nb = nbformat.v4.new_notebook(cells=cells)
    if setup is not None:
        setup_cell.apply(nb, setup)
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def test_the_build_copies_the_wheel_and_rewrites_every_downloadable_setup_cell(tmp_path):
    out = tmp_path / "html"
    old = setup_cell.setup_source(ROOT, NO_REPOSITORY)
    chapter = _notebook(out / "_sources" / "book" / "01-a.ipynb", old)
    exercise = _notebook(out / "_exercises" / "01-a.ipynb", old)
    other = _notebook(out / "_sources" / "book" / "plain.ipynb", None)  # not a course notebook
    elsewhere = _notebook(out / "_images" / "01-a.ipynb", old)  # not offered for download
    untouched = {p: p.read_bytes() for p in (other, elsewhere)}
    wheel = tmp_path / "wheel" / course_wheel.wheel_filename(ROOT)
    wheel.parent.mkdir()
    wheel.write_bytes(b"PK")
    source = course_wheel.site_setup_source(ROOT, SITE, NO_REPOSITORY)

    changed = course_wheel.publish(ROOT, out, wheel, source)
    assert sorted(changed) == sorted([chapter, exercise])
    assert (out / "_static" / wheel.name).read_bytes() == b"PK"
    for path in (chapter, exercise):
        nb = nbformat.read(path, as_version=4)
        cell = nb.cells[setup_cell.find_setup_cell(nb)]
        assert setup_cell.cell_is_current(cell, source) and nb.cells[-1].source == "import attnlib"
    assert all(p.read_bytes() == b for p, b in untouched.items())
    assert course_wheel.publish(ROOT, out, wheel, source) == [], "a second build changes nothing"


@pytest.mark.slow
def test_the_wheel_is_built_offline_and_holds_attnlib(tmp_path):
    wheel = course_wheel.build_wheel(ROOT, tmp_path)
    assert wheel.name == course_wheel.wheel_filename(ROOT)
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    assert "attnlib/__init__.py" in names and "attnlib/checks/core.py" in names
    assert not [n for n in names if n.startswith(("coursetools/", "tests/"))]


@pytest.mark.book
@pytest.mark.slow
def test_a_site_with_an_address_ships_the_wheel_its_notebooks_install(tmp_path):
    environ = {"COURSE_SITE_URL": SITE.rstrip("/"), "GIT_DIR": str(tmp_path / "no-checkout")}
    html, log = build_unexecuted(tmp_path / "site", environ)
    name = course_wheel.wheel_filename(ROOT)
    url = course_wheel.wheel_url(SITE, name)
    assert (
        f"course_wheel: _static/{name}; the downloadable notebooks install attnlib with pip install {url}"
        in log
    )
    with zipfile.ZipFile(html / "_static" / name) as archive:
        assert "attnlib/__init__.py" in archive.namelist()
    source = course_wheel.site_setup_source(ROOT, SITE, NO_REPOSITORY)
    check_downloads(html, source)


def check_downloads(html: Path, source: str) -> int:
    """Every chapter and exercise notebook the site offers has the setup cell ``source``; return the count."""
    found = 0
    for stem in sorted(p.stem for p in (ROOT / "exercises").glob("[0-9][0-9]-*.ipynb")):
        for path in (html / "_exercises" / f"{stem}.ipynb", html / "_sources" / "book" / f"{stem}.ipynb"):
            nb = nbformat.read(path, as_version=4)
            index = setup_cell.find_setup_cell(nb)
            assert index is not None, f"{path.relative_to(html)}: no setup cell"
            assert nb.cells[index].source == source, f"{path.relative_to(html)}: not the site's setup cell"
            found += 1
    assert found >= 20, found
    return found


def sites_setup_source(environ=os.environ) -> str:
    """The setup cell a build in ``environ`` gives its downloads (repository, address from _config.yml)."""
    import yaml

    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    site = course_wheel.site_url((config.get("html") or {}).get("baseurl"), environ)
    return course_wheel.site_setup_source(ROOT, site, setup_cell.course_repository(ROOT, environ))


@pytest.mark.book
@pytest.mark.slow
def test_the_built_site_ships_the_wheel_its_notebooks_install(built_book):
    """The session's strictly built site: the wheel in ``_static/``, and its downloads' setup cell."""
    html, log = built_book
    name = course_wheel.wheel_filename(ROOT)
    assert f"course_wheel: _static/{name}" in log, "the build did not say which wheel it shipped"
    with zipfile.ZipFile(html / "_static" / name) as archive:
        assert "attnlib/__init__.py" in archive.namelist()
    check_downloads(html, sites_setup_source())
    for page in sorted((html / "book").glob("[0-9][0-9]-*.html")):
        if (ROOT / "exercises" / f"{page.stem}.ipynb").is_file():
            assert f'href="../_static/{name}"' in page.read_text(encoding="utf-8"), (
                f"{page.name}: no wheel link"
            )
