"""Link check of the built site: internal links resolve, external links are listed (not fetched).

Every HTML page of the strictly built site (``built_book``) is parsed. Each
``href``/``src`` that stays inside the site must name a file of the site and,
when it has an anchor into an HTML page, an ``id`` (or ``<a name>``) of that
page: glossary terms, citations, section anchors and the theme's own links
included. External links cannot be checked on the offline machine; they go to
``test-artifacts/external-links.txt`` (one URL a line, with the pages using it)
for a person or an online job to look at.
"""

from __future__ import annotations

import re
from collections import defaultdict
from functools import cache
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXTERNAL_LIST = ROOT / "test-artifacts" / "external-links.txt"
LINK_ATTRIBUTES = {
    "a": "href",
    "link": "href",
    "area": "href",
    "img": "src",
    "script": "src",
    "iframe": "src",
    "source": "src",
    "video": "src",
    "audio": "src",
    "object": "data",
}
# Not links to anything: schemes a browser handles without a request.
IGNORED_SCHEMES = {"mailto", "javascript", "data", "tel", "about", "blob"}
# Folders of the site that are copied assets, not pages written by the build.
ASSET_DIRS = {"_static", "_sources", "_images"}


def site_pages(html: Path) -> list[Path]:
    return sorted(p for p in html.rglob("*.html") if not ASSET_DIRS.intersection(p.relative_to(html).parts))


@cache
def _soup(path: Path):
    from bs4 import BeautifulSoup

    return BeautifulSoup(path.read_text(encoding="utf-8", errors="replace"), "html.parser")


@cache
def anchors(path: Path) -> frozenset[str]:
    soup = _soup(path)
    found = {tag["id"] for tag in soup.find_all(id=True)}
    found |= {tag["name"] for tag in soup.find_all("a", attrs={"name": True})}
    return frozenset(found)


def links_of(page: Path):
    """(tag, attribute value) of every link-like attribute of ``page``."""
    soup = _soup(page)
    for tag, attribute in LINK_ATTRIBUTES.items():
        for element in soup.find_all(tag):
            value = element.get(attribute)
            if value and isinstance(value, str):
                yield tag, value.strip()
    for element in soup.find_all(srcset=True):
        for candidate in element["srcset"].split(","):
            if candidate.strip():
                yield element.name, candidate.strip().split()[0]


def classify(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme.lower() in IGNORED_SCHEMES:
        return "ignored"
    if parts.scheme or value.startswith("//"):
        return "external"
    return "internal"


def check_internal(page: Path, value: str, html: Path) -> str | None:
    """None when ``value`` (a link on ``page``) resolves inside the site, else why not."""
    parts = urlsplit(value)
    path, fragment = unquote(parts.path), unquote(parts.fragment)
    if path.startswith("/"):
        return "root-relative link (breaks when the site is served from a sub-folder)"
    target = (page.parent / path).resolve() if path else page
    try:
        target.relative_to(html.resolve())
    except ValueError:
        return "points outside the built site"
    if target.is_dir():
        target = target / "index.html"
    if not target.is_file():
        return f"no file {target.relative_to(html.resolve())}"
    if fragment and fragment != "top" and target.suffix == ".html":
        if fragment not in anchors(target):
            return f"no anchor #{fragment} in {target.relative_to(html.resolve())}"
    return None


@pytest.mark.book
def test_internal_links_resolve(built_book):
    html, _ = built_book
    html = html.resolve()
    pages = site_pages(html)
    assert pages, "the built site has no pages"
    broken = []
    checked = 0
    for page in pages:
        for tag, value in links_of(page):
            if classify(value) != "internal":
                continue
            checked += 1
            problem = check_internal(page, value, html)
            if problem:
                broken.append(f"{page.relative_to(html)}: <{tag}> {value!r}: {problem}")
    assert checked > 0
    assert not broken, f"{len(broken)} broken internal links:\n" + "\n".join(broken[:60])


@pytest.mark.book
def test_external_links_are_listed_not_fetched(built_book):
    html, _ = built_book
    html = html.resolve()
    used_by: dict[str, set[str]] = defaultdict(set)
    for page in site_pages(html):
        for _, value in links_of(page):
            if classify(value) == "external":
                used_by[value].add(str(page.relative_to(html)))
    EXTERNAL_LIST.parent.mkdir(parents=True, exist_ok=True)
    lines = [f"{url}\t{' '.join(sorted(pages))}" for url, pages in sorted(used_by.items())]
    EXTERNAL_LIST.write_text(
        "# External links of the built site (not fetched: the test machine is offline).\n"
        "# URL<TAB>pages that use it\n" + "\n".join(lines) + "\n",
        encoding="utf-8",
    )
    local = [url for url in used_by if re.match(r"(?:https?:)?//(?:localhost|127\.0\.0\.1)", url)]
    assert not local, f"links to a developer's own machine: {local}"
    file_urls = [url for url in used_by if url.lower().startswith("file:")]
    assert not file_urls, f"file: links cannot work on the published site: {file_urls}"


def _names_our_layout(repo_root: Path, path: str) -> bool:
    """Whether a path inside some GitHub tree would be one of this repository's: its first
    folder is one of ours (``book/``, ``exercises/`` ...) or the file itself is here."""
    first = path.split("/", 1)[0]
    return (repo_root / path).exists() or ("/" in path and (repo_root / first).is_dir())


def test_the_layout_filter_keeps_our_paths_and_drops_a_cited_file(tmp_path):
    (tmp_path / "book").mkdir()
    (tmp_path / "README.md").write_text("x")
    assert _names_our_layout(tmp_path, "book/99-missing.ipynb")  # ours, even when missing
    assert _names_our_layout(tmp_path, "README.md")
    assert not _names_our_layout(tmp_path, "model.py")  # nanoGPT's file, cited by chapter 12


@pytest.mark.book
def test_links_into_this_repository_name_files_that_exist(built_book, repo_root):
    """Links to the repository (.../blob|edit|tree|raw/<branch>/<path>) name real paths.

    The repository is the one the session's build found (COURSE_REPOSITORY or a GitHub
    remote); with none, no page may link into a GitHub tree at a path of this repository's
    own layout (a Colab, Binder or edit link made up for a repository that is not there).
    A cited source in another repository (nanoGPT's ``model.py``) is not such a link.
    """
    from helpers_site import branch_of, ext_module

    find_repository = ext_module("course_repository").find_repository

    html, _ = built_book
    repository = find_repository(repo_root, branch_of(repo_root))
    if repository.url is None:
        base = r"https://github\.com/[^/]+/[^/]+"
    else:
        base = re.escape(repository.url)
    pattern = re.compile(base + r"/(?:blob|edit|tree|raw)/([^/]+)/([^?#]+)")
    missing, linked = [], []
    for page in site_pages(html.resolve()):
        for _, value in links_of(page):
            match = pattern.match(value)
            if match and repository.url is None and not _names_our_layout(repo_root, unquote(match.group(2))):
                continue  # another project's file, cited (the pattern matched any GitHub tree)
            if match:
                linked.append(value)
                if not (repo_root / unquote(match.group(2))).exists():
                    missing.append(f"{page.relative_to(html.resolve())}: {value}")
    if repository.url is None:
        assert not linked, f"links into a repository on a site built without one: {sorted(set(linked))[:5]}"
    assert not missing, "links to files that are not in the repository:\n" + "\n".join(sorted(set(missing)))


def test_link_checker_catches_a_broken_anchor(tmp_path):
    """The checker itself: a missing file and a missing anchor are both reported."""
    (tmp_path / "a.html").write_text('<p id="here">x</p><a href="b.html#nowhere">b</a>', encoding="utf-8")
    (tmp_path / "b.html").write_text('<h1 id="title">b</h1>', encoding="utf-8")
    page = tmp_path / "a.html"
    assert check_internal(page, "#here", tmp_path) is None
    assert check_internal(page, "b.html#title", tmp_path) is None
    assert "no anchor #nowhere" in check_internal(page, "b.html#nowhere", tmp_path)
    assert "no file" in check_internal(page, "c.html", tmp_path)
    assert classify("https://example.org/x") == "external" and classify("mailto:a@b") == "ignored"
