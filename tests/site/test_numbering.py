"""The "Check your understanding" questions are numbered per chapter: "Check 11.1"."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "book" / "_ext"))
from course_numbering import chapter_numbers  # noqa: E402


def test_a_chapters_exercises_count_from_one_under_its_number():
    # Sphinx's book-wide numbers, as it left them for chapter 11 (after chapter 10's two)
    fignumbers = {"exercise": {"check-11-shuffle": (13,), "check-11": (12,)}, "figure": {"f": (4,)}}
    assert chapter_numbers(fignumbers, "book/11-vision-transformer") == {
        "check-11": (11, 1),
        "check-11-shuffle": (11, 2),
    }


def test_a_page_without_a_chapter_number_keeps_sphinxs_numbers():
    fignumbers = {"exercise": {"a": (3,)}}
    assert chapter_numbers(fignumbers, "book/glossary") == {"a": (3,)}
    assert chapter_numbers({}, "book/05-masks") == {}


@pytest.mark.book
def test_the_built_pages_number_their_exercises_per_chapter(built_book):
    html, _ = built_book
    seen = {}
    for page in sorted((html / "book").glob("[0-9][0-9]-*.html")):
        chapter = int(page.name[:2])
        text = page.read_text(encoding="utf-8")
        # the question's own title and its solution's link ("Solution to Check 10.1")
        titles = re.findall(r'(?:caption-number">|href="#check[^"]*">\s*)Check\s+([\d.]+)', text)
        assert "Exercise" not in "".join(re.findall(r'caption-number">[^<]*', text)), page.name
        if titles:
            seen[chapter] = titles
            expected = {f"{chapter}.{k}" for k in range(1, len(set(titles)) + 1)}
            assert set(titles) == expected, f"{page.name}: exercises numbered {sorted(set(titles))}"
    assert {10, 11, 12} <= set(seen), f"pages with numbered exercises: {sorted(seen)}"
