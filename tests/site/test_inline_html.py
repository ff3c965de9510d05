"""The built pages as a reader's browser gets them: no stray inline HTML, every figure described.

A token such as ``<s>`` written unescaped in a caption reaches the HTML as an
unclosed strikethrough tag, and the browser then strikes through the rest of
the page (chapter 05 had exactly that). These checks read the built HTML of
every page in _toc.yml: inline tags must be balanced inside the article, the
course never means a strikethrough or underline element, and every image in
the article has a text alternative that is not a file path.
"""

import re
from html.parser import HTMLParser

import pytest
import yaml

INLINE = {
    "s",
    "u",
    "del",
    "strike",
    "b",
    "i",
    "em",
    "strong",
    "code",
    "span",
    "a",
    "sub",
    "sup",
    "kbd",
    "mark",
}
NEVER_INTENDED = {"s", "u", "del", "strike"}


class _ArticleScan(HTMLParser):
    """Counts inline tags opened and closed inside <main>, and collects the article's images."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.inside = 0
        self.balance: dict[str, int] = {}
        self.unintended: list[str] = []
        self.images: list[tuple[str, str | None]] = []

    def handle_starttag(self, tag, attrs):
        if tag == "main":
            self.inside += 1
        if not self.inside:
            return
        if tag in INLINE:
            self.balance[tag] = self.balance.get(tag, 0) + 1
        if tag in NEVER_INTENDED:
            self.unintended.append(self.get_starttag_text() or tag)
        if tag == "img":
            found = dict(attrs)
            self.images.append((found.get("src", ""), found.get("alt")))

    def handle_startendtag(self, tag, attrs):
        if tag == "img" and self.inside:
            found = dict(attrs)
            self.images.append((found.get("src", ""), found.get("alt")))

    def handle_endtag(self, tag):
        if tag == "main":
            self.inside -= 1
        elif self.inside and tag in INLINE:
            self.balance[tag] = self.balance.get(tag, 0) - 1


def _pages(root):
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    files = [toc["root"]]
    for part in toc.get("parts", []):
        files += [c["file"] for c in part.get("chapters", [])]
    return files


def _scan(html_dir, page):
    scan = _ArticleScan()
    scan.feed((html_dir / f"{page}.html").read_text(encoding="utf-8"))
    return scan


@pytest.mark.book
def test_inline_tags_are_balanced_and_no_strikethrough(built_book, repo_root):
    html_dir, _log = built_book
    problems = []
    for page in _pages(repo_root):
        scan = _scan(html_dir, page)
        unbalanced = {tag: n for tag, n in scan.balance.items() if n}
        if unbalanced:
            problems.append(f"{page}: inline tags opened more often than closed: {unbalanced}")
        if scan.unintended:
            problems.append(f"{page}: elements the sources never intend: {scan.unintended[:3]}")
    assert not problems, "\n".join(problems)


@pytest.mark.book
def test_every_article_image_has_a_text_alternative(built_book, repo_root):
    html_dir, _log = built_book
    problems = []
    for page in _pages(repo_root):
        for src, alt in _scan(html_dir, page).images:
            if not alt or not alt.strip():
                problems.append(f"{page}: {src} has no alt text")
            elif re.search(r"(^|/)_images/|\.(png|svg|jpe?g)$", alt.strip()):
                problems.append(f"{page}: {src} has a file path as its alt text: {alt!r}")
    assert not problems, "\n".join(problems)


def test_the_scan_catches_an_unescaped_token():
    """The case that struck chapter 05 through: ``<s>`` in a caption."""
    scan = _ArticleScan()
    scan.feed("<main><p>the <s> token starts a sentence</p><img src='a.png' alt='../_images/a.png'></main>")
    assert scan.balance == {"s": 1} and scan.unintended
    assert scan.images == [("a.png", "../_images/a.png")]
    clean = _ArticleScan()
    clean.feed("<main><p>the <code>&lt;s&gt;</code> token</p></main>")
    assert not any(clean.balance.values()) and not clean.unintended
