"""The class at a glance: report.html for a small graded class, checked as text and in Chromium.

A class of chapter 00 (right answers, named mistakes, two renamed copies of one
distinctive answer, an unreadable file) is graded once; the report is checked
for its sections, its accessibility (alt text, headings, table headers), that it
needs no network, and opened from disk in headless Chromium (Selenium and
Debian's chromedriver, as tests/site/test_browser.py) with a screenshot in
``test-artifacts/class-report/``. The browser part is skipped, saying why, where
Chromium, chromedriver or Selenium is missing.
"""

from __future__ import annotations

import os
import re
from html.parser import HTMLParser
from pathlib import Path

import fixtures
import nbformat
import pytest
from helpers_chromium import chromium_or_skip, headless_chromium

from coursetools.grade.commands import write_report
from coursetools.grade.grading import similarity
from coursetools.grade.outputs import class_report

ROOT = Path(__file__).resolve().parents[3]

STEM = "00-how-to-use"


def _screenshot_folder(tmp_path: Path) -> Path:
    """``test-artifacts/class-report/`` where this user may write (the checkout's owner), else
    ``tmp_path`` (the grader's tests also run as an unprivileged user, issue 17)."""
    try:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        probe = SCREENSHOTS / f".write-probe-{os.getpid()}"
        probe.touch()
        probe.unlink()
        return SCREENSHOTS
    except OSError:
        return tmp_path


SCREENSHOTS = ROOT / "test-artifacts" / "class-report"
LOOP = '''def pairwise_dot(a, b):
    """All dot products between rows."""
    out = np.zeros(a.shape[:-1] + b.shape[-2:-1])
    for i in range(a.shape[-2]):
        for j in range(b.shape[-2]):
            out[..., i, j] = (a[..., i, :] * b[..., j, :]).sum(-1)
    return out
'''
LOOP_RENAMED = """def pairwise_dot(x, y):
    # my own loop version
    result = np.zeros(x.shape[:-1] + y.shape[-2:-1])
    for row in range(x.shape[-2]):

        for col in range(y.shape[-2]):   # every key
            result[..., row, col] = (x[..., row, :] * y[..., col, :]).sum(-1)
    return result
"""
LOOP_NEAR = LOOP.replace("    return out\n", "    out = out + 0.0\n    return out\n")


# --------------------------------------------------------------------------- similarity alone


def test_renaming_comments_and_layout_do_not_hide_a_copy():
    assert similarity.normalise(LOOP) == similarity.normalise(LOOP_RENAMED)
    assert similarity.normalise(LOOP) != similarity.normalise(LOOP.replace("* b", "+ b"))
    assert similarity.normalise("def f(:\n") is None


def test_pairs_are_flagged_but_never_the_common_short_or_starter_answer():
    common = fixtures.CORRECT
    answers = {f"s{i}": {"ex": common} for i in range(30)}  # the textbook answer, shared by many
    answers["copy-a"] = {"ex": LOOP}
    answers["copy-b"] = {"ex": LOOP_RENAMED}
    answers["near"] = {"ex": LOOP_NEAR}
    answers["other"] = {"ex": LOOP.replace("out[..., i, j] = ", "out[..., i, j] = 2 * ")}
    answers["broken"] = {"ex": "def pairwise_dot(a, b:\n"}
    answers["starter-1"] = {"ex": "def pairwise_dot(a, b):\n    raise NotImplementedError\n" + "#" * 50}
    answers["starter-2"] = {"ex": "def pairwise_dot(x, y):\n    raise NotImplementedError\n"}
    starters = {"ex": "def pairwise_dot(a, b):\n    raise NotImplementedError\n"}
    flags = similarity.flag_pairs(answers, starters, min_tokens=20)
    pairs = {(f.first, f.second): f.similarity for f in flags}
    assert pairs[("copy-a", "copy-b")] == 1.0
    assert 0.85 <= pairs[("copy-a", "near")] < 1.0
    assert not [p for p in pairs if p[0].startswith("s") or p[1].startswith("s")]  # common answer
    assert not [p for p in pairs if "starter" in p[0] or "broken" in p[0]]
    # short answers are never flagged, even when identical
    short = {"a": {"ex": common}, "b": {"ex": common}}
    assert similarity.flag_pairs(short) == []


# --------------------------------------------------------------------------- a graded class


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    from coursetools.grade import batch
    from coursetools.grade.grading import runner

    base = tmp_path_factory.mktemp("class")
    subs, out = base / "submissions", base / "grades"
    subs.mkdir()
    answers = {
        "ada": fixtures.CORRECT,
        "grace": fixtures.CORRECT,
        "alan": fixtures.HEADER + "    return b @ np.swapaxes(a, -1, -2)\n",
        "barbara": fixtures.HEADER + "    return a @ b.T\n",
        "edsger": fixtures.HEADER + "    return a @ b.T\n",
        "copy-one": LOOP,
        "copy-two": LOOP_RENAMED,
    }
    for student, source in answers.items():
        nbformat.write(fixtures.with_answer(source), subs / f"{student}.ipynb")
    (subs / "broken.ipynb").write_bytes(b"not json")
    settings = runner.Settings(out=out, timeout_total=60, timeout_setup=120, isolation="auto")
    batch.grade(STEM, subs, out, jobs=2, settings=settings, quiet=True)
    return write_report(out, STEM, ROOT / "exercises" / f"{STEM}.ipynb")


class _Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def _parse(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


@pytest.mark.grader
@pytest.mark.slow
def test_the_report_shows_scores_statuses_mistakes_time_and_pairs(report):
    text = " ".join(_parse(report).text)
    for heading in ("Scores per exercise", "Statuses", "Most frequent named mistakes", "Grading time"):
        assert heading in text
    assert "8 submissions" in text and "unreadable" in text
    assert "the result is transposed" in text or "transposed" in text  # alan's named mistake
    assert "b.T swaps the batch axes too" in text  # barbara's and edsger's
    row = re.search(r"b\.T swaps the batch axes too\s+2\b", text)
    assert row, "the mistake is counted once per student: 2"
    assert "copy-one" in text and "copy-two" in text and "identical" in text
    assert "no grade is changed" in text
    assert not re.search(r"\b(ada|grace)\b.*identical", text.split("Near-identical answers")[-1])


@pytest.mark.grader
@pytest.mark.slow
def test_the_report_is_self_contained_and_accessible(report):
    page = _parse(report)
    raw = report.read_text(encoding="utf-8")
    assert ("html", {"lang": "en"}) in page.tags
    assert not [t for t, a in page.tags if t in ("script", "link", "iframe")]
    for tag, attrs in page.tags:
        for key in ("src", "href"):
            value = attrs.get(key) or ""
            assert not value.startswith(("http:", "https:", "//")), f"{tag} {key}={value[:60]}"
    images = [a for t, a in page.tags if t == "img"]
    assert len(images) == 3
    assert all(
        a["src"].startswith("data:image/svg+xml;base64,") and len(a.get("alt", "")) > 20 for a in images
    )
    headings = [t for t, _ in page.tags if re.fullmatch(r"h[1-6]", t)]
    assert headings.count("h1") == 1 and headings.count("h2") == 5
    assert all(a.get("scope") in ("col", "row") for t, a in page.tags if t == "th")
    assert raw.count("<caption>") == raw.count("<table>")
    assert "url(" not in raw and "@import" not in raw


# --------------------------------------------------------------------------- in Chromium


@pytest.fixture(scope="module")
def browser():
    with headless_chromium(*chromium_or_skip(), "class-report-chromium-") as driver:
        yield driver


@pytest.mark.grader
@pytest.mark.slow
def test_the_report_opens_from_disk_in_chromium(report, browser, tmp_path):
    browser.get(report.resolve().as_uri())
    assert browser.title == f"Class report: {STEM}"
    images = browser.execute_script(
        "return Array.from(document.images).map(i => [i.complete, i.naturalWidth, i.alt.length]);"
    )
    assert len(images) == 3 and all(done and width > 0 and alt > 20 for done, width, alt in images), images
    remote = browser.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name)"
        ".filter(n => !n.startsWith('data:') && !n.startsWith('file:'));"
    )
    assert remote == []
    errors = [e for e in browser.get_log("browser") if e.get("level") == "SEVERE"]
    assert errors == []
    height = browser.execute_script("return document.documentElement.scrollHeight;")
    browser.set_window_size(1280, min(int(height) + 40, 16000))
    shot = _screenshot_folder(tmp_path) / "report.png"
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 10_000


@pytest.mark.slow
def test_the_report_covers_the_students_of_the_class_only(tmp_path):
    points = {"ex-9-1": 2.0}
    records = [
        fixtures.record("ada", {"ex-9-1": 2.0}, points),
        fixtures.record("gone", {"ex-9-1": 0.0}, points),
    ]
    for record in records:
        record["seconds"] = 1.5
    # "gone" has a record from an earlier run, but is no longer in the class (class.json)
    fixtures.write_graded(tmp_path, records, students=["ada"])
    text = write_report(tmp_path, "09-test").read_text(encoding="utf-8")
    assert "1 submission;" in text and "gone" not in text
    assert "class mean 2 of 2 (over 1 submission with a total)" in text
    assert "gone" not in (tmp_path / "grades.csv").read_text()


@pytest.mark.slow
def test_a_stray_file_is_listed_in_the_report_not_as_a_learner(tmp_path):
    records = [fixtures.record("ada", {"ex-9-1": 2.0}, {"ex-9-1": 2.0})]
    fixtures.write_graded(tmp_path, records, strays=["notes.txt", "\x1b[2J.txt"])
    text = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert "Files that are not submissions" in text and "<code>notes.txt</code>" in text
    assert (tmp_path / "strays.txt").read_text() == "notes.txt\n\\x1b[2J.txt\n"
    assert not (tmp_path / "feedback" / "notes.txt.md").exists()


@pytest.mark.slow
def test_a_section_that_fails_leaves_a_note_not_a_missing_report(tmp_path, monkeypatch):
    records = [fixtures.record(s, {"ex-9-1": 1.0}, {"ex-9-1": 2.0}) for s in ("ada", "grace")]
    for record in records:
        record["seconds"] = 1.0

    def broken(*args, **kwargs):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(similarity, "flag_normals", broken)
    monkeypatch.setattr(class_report, "_time_figure", broken)
    fixtures.write_graded(tmp_path, records)
    text = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert "The search for near-identical answers failed (RecursionError)" in text
    assert "This figure could not be drawn (RecursionError)" in text
    assert "Scores per exercise" in text and "class mean 1 of 2" in text
