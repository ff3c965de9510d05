"""The website builds strictly (-W -n) and has a page for every entry of _toc.yml."""

import re

import pytest
import yaml

pytestmark = pytest.mark.book


def toc_files(root):
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    files = [toc["root"]]
    for part in toc.get("parts", []):
        files += [ch["file"] for ch in part.get("chapters", [])]
    return files


def test_every_toc_entry_has_a_page(built_book, repo_root):
    html, _ = built_book
    for entry in toc_files(repo_root):
        assert (html / f"{entry}.html").is_file(), f"no page for {entry} in the built site"


def test_build_log_has_no_warnings_or_execution_errors(built_book):
    _, log = built_book
    # Sphinx prints "path: WARNING: ..."; the kernel's own "[IPKernelApp] WARNING |" is not one.
    assert not re.search(r": WARNING:|CellExecutionError|Traceback \(most recent", log), log[-3000:]


def test_chapters_ran_their_code(built_book, repo_root):
    """Each executed chapter page contains cell outputs, so the notebooks really ran."""
    html, _ = built_book
    for entry in toc_files(repo_root):
        if (repo_root / f"{entry}.ipynb").exists():
            page = (html / f"{entry}.html").read_text(encoding="utf-8")
            assert "cell_output" in page, f"{entry}: no executed output in the built page"


def test_chapters_that_plot_show_their_figures(built_book, repo_root):
    """A chapter that draws with matplotlib has images in its page (a wrong backend shows none)."""
    html, _ = built_book
    for entry in toc_files(repo_root):
        source = repo_root / f"{entry}.ipynb"
        if source.exists() and "plt." in source.read_text(encoding="utf-8"):
            page = (html / f"{entry}.html").read_text(encoding="utf-8")
            assert "<img" in page, f"{entry} draws figures but its page shows none"
