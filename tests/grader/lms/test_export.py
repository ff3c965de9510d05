"""Back to the LMS: the intake zips of test_canvas.py and test_moodle.py in, Canvas and Moodle files out.

The exported files are checked against the formats' published column names (Canvas's
gradebook export; Moodle's grading worksheet and its importer, which needs
``Identifier``, ``Grade`` and ``Last modified (grade)``), against the students of the
intake, and against ``grades.csv``: every learner has the same final score in every
file, overrides and late penalties included.
"""

from __future__ import annotations

import csv
import io
import subprocess
import sys
import zipfile
from pathlib import Path

import fixtures
import pytest
from fixtures import STEM, _nb, _zip, exported

from coursetools.grade.lms import export, intake
from coursetools.grade.lms.canvas import CANVAS
from coursetools.grade.lms.moodle import MOODLE_FOLDER
from coursetools.grade.lms.roster import write_roster
from coursetools.grade.records.roster import read_roster

ROOT = Path(__file__).resolve().parents[3]

CANVAS_MEMBERS = {
    f"lovelaceada_12345_67890_{STEM}.ipynb": _nb(),
    f"hoppergrace_LATE_23456_78901_{STEM}.ipynb": _nb(),
    f"turingalan_34567_11111_{STEM}.ipynb": _nb(fixtures.ZEROS),
    f"turingalan_34567_22222_{STEM}-1.ipynb": _nb(),
    "knuthdonald_45678_33333_answers.pdf": b"%PDF-1.4",
}
MOODLE_MEMBERS = {
    f"Ada Lovelace_12345_assignsubmission_file_/{STEM}.ipynb": _nb(),
    f"Jörg Müller-Lüdenscheidt_34567_assignsubmission_file_/{STEM}.ipynb": _nb(),
    f"Grace Hopper_23456_assignsubmission_file_/{STEM}.ipynb": _nb(),
    f"Grace Hopper_23456_assignsubmission_file_/{STEM} (1).ipynb": _nb(fixtures.ZEROS),
}
SCORES = {"lovelaceada-12345": 1.0, "hoppergrace-23456": 1.0, "turingalan-34567": 0.0}


def _graded_class(
    tmp_path: Path, members: dict, scores: dict[str, float | None]
) -> tuple[Path, intake.Intake]:
    """A download staged by the intake and graded (records made here: the scores are given)."""
    out = tmp_path / "out"
    staged = intake.prepare(_zip(tmp_path / "download.zip", members), out, STEM, quiet=True)
    result = intake.Intake(staged, [], [])
    result.entries = [e for e in intake.find_entries(staged)]
    records = []
    for path in sorted(p for p in staged.iterdir() if not p.name.startswith(".")):
        key = path.name.removesuffix(".ipynb")
        score = scores.get(key, 1.0)
        record = fixtures.record(key, {"ex-00-1": score}, {"ex-00-1": 1.0})
        if path.suffix != ".ipynb":
            record.update(status="unreadable", total=None, notes=[f"not a notebook: {path.name}"])
            record["exercises"]["ex-00-1"]["score"] = None
        records.append(record)
    fixtures.write_graded(out, records, assignment=STEM)
    return out, result


def _read(path: Path) -> list[list[str]]:
    return list(csv.reader(io.StringIO(path.read_text(encoding="utf-8"))))


def _gradebook(out: Path) -> dict[str, dict]:
    with open(out / "grades.csv", newline="", encoding="utf-8") as fh:
        return {r["student"]: r for r in csv.DictReader(fh)}


@pytest.mark.slow
def test_canvas_gradebook_and_feedback_files_round_trip(tmp_path):
    out, _ = _graded_class(tmp_path, CANVAS_MEMBERS, SCORES)
    (out / "overrides.csv").write_text("student,exercise,points,reason\n34567,ex-00-1,0.5,shape right\n")
    (out / "late.toml").write_text("penalty_per_day = 0.2\nlms_late_days = 1\n")
    written, problems = exported("canvas", out)
    rows = _read(out / "export" / "canvas" / "canvas-gradebook.csv")
    # Canvas's gradebook export: Student, ID, SIS User ID, SIS Login ID, Section, then assignments
    assert rows[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", STEM]
    assert rows[1][0] == "Points Possible" and rows[1][5] == "1"
    by_id = {r[1]: r for r in rows[2:]}
    roster = read_roster(out)
    assert set(by_id) == {row["student_id"] for row in roster.values()}  # the intake's students
    gradebook = _gradebook(out)
    for key, row in roster.items():
        assert by_id[row["student_id"]][5] == gradebook[key]["total"], key  # the same final score
    assert by_id["34567"][5] == "0.5"  # the override
    assert by_id["23456"][5] == "0.8"  # Canvas's LATE mark: one day, 20% of the maximum
    assert by_id["45678"][5] == ""  # the PDF: not judged, never a 0
    assert "late penalty on the total: 1 -> 0.8" in gradebook["hoppergrace-23456"]["adjustments"]
    names = sorted(p.name for p in (out / "export" / "canvas" / "canvas-feedback").iterdir())
    # named like the graded file of the download: login, LATE mark, user id, attachment id
    assert names == sorted(
        [
            f"lovelaceada_12345_67890_feedback-{STEM}.md",
            f"hoppergrace_LATE_23456_78901_feedback-{STEM}.md",
            f"turingalan_34567_22222_feedback-{STEM}.md",
            f"knuthdonald_45678_33333_feedback-{STEM}.md",
        ]
    )
    for name in names:  # a bulk re-upload reads the ids from the prefix, as in the download
        match = CANVAS.match(name)
        assert match and roster[f"{match['login']}-{match['uid']}"]["file"].split("_")[-2] in name
    text = (
        out / "export" / "canvas" / "canvas-feedback" / f"hoppergrace_LATE_23456_78901_feedback-{STEM}.md"
    ).read_text()
    assert "Score: **0.8** out of 1." in text and "late penalty" in text
    assert problems == [] and len(written) == 1 + len(roster)


@pytest.mark.slow
def test_moodle_worksheet_and_feedback_zip_round_trip(tmp_path):
    out, _ = _graded_class(tmp_path, MOODLE_MEMBERS, {"jorg-muller-ludenscheidt-34567": 0.25})
    (out / "overrides.csv").write_text("student,exercise,points,reason\n12345,ex-00-1,0.75,regraded\n")
    exported("moodle", out)
    rows = _read(out / "export" / "moodle" / "moodle-grading-worksheet.csv")
    assert rows[0] == export.MOODLE_COLUMNS
    # what Moodle's importer looks up (importgradeslib.php: recordid, grade, lastmodifiedgrade)
    for needed in ("Identifier", "Grade", "Last modified (grade)", "Feedback comments"):
        assert needed in rows[0]
    table = [dict(zip(rows[0], r, strict=True)) for r in rows[1:]]
    roster = read_roster(out)
    assert {r["Identifier"] for r in table} == {f"Participant {row['student_id']}" for row in roster.values()}
    gradebook = _gradebook(out)
    by_id = {r["Identifier"].removeprefix("Participant "): r for r in table}
    for key, row in roster.items():
        assert by_id[row["student_id"]]["Grade"] == gradebook[key]["total"], key
    assert by_id["12345"]["Grade"] == "0.75" and "regraded" in by_id["12345"]["Feedback comments"]
    assert by_id["34567"]["Full name"] == "Jörg Müller-Lüdenscheidt"
    assert "jorg-muller-ludenscheidt-34567" in gradebook  # the key, transliterated
    with zipfile.ZipFile(out / "export" / "moodle" / "moodle-feedback-files.zip") as zf:
        names = zf.namelist()
    folders = {n.split("/")[0] for n in names}
    assert folders == {
        "Ada Lovelace_12345_assignsubmission_file_",
        "Jörg Müller-Lüdenscheidt_34567_assignsubmission_file_",
        "Grace Hopper_23456_assignsubmission_file_",
    }
    for name in folders:  # Moodle's importer: fullname_participantid_plugintype_pluginname
        parts = name.split("_", 4)
        assert parts[1].isdigit() and parts[2:4] == ["assignsubmission", "file"]
        assert MOODLE_FOLDER.match(name)


def test_moodle_duplicates_say_what_was_graded(tmp_path):
    out = tmp_path / "out"
    when = {f"Grace Hopper_23456_assignsubmission_file_/{STEM} (1).ipynb": (2026, 11, 3, 0, 0, 0)}
    members = {
        f"Grace Hopper_23456_assignsubmission_file_/{STEM}.ipynb": _nb(fixtures.ZEROS),
        f"Grace Hopper_23456_assignsubmission_file_/{STEM} (1).ipynb": _nb(),  # Moodle's re-upload: newer
        "Grace Hopper_23456_assignsubmission_file_/scratch.ipynb": _nb(),
    }
    result = intake.collect(_zip(tmp_path / "m.zip", members, when), out / "submissions", STEM)
    grace = result.entries[0]
    assert grace.file.endswith(f"{STEM} (1).ipynb")  # the re-upload is named like the assignment, and newest
    message = next(p for p in result.problems if p.startswith("grace-hopper-23456"))
    assert f"graded Grace Hopper_23456_assignsubmission_file_/{STEM} (1).ipynb" in message
    assert "the newest notebook named like the assignment" in message
    write_roster(out, result)
    rows = list(csv.DictReader(open(out / "roster.csv", encoding="utf-8")))
    reasons = {r["file"].rsplit("/", 1)[-1]: r["duplicate_of"] for r in rows}
    assert reasons == {
        f"{STEM} (1).ipynb": "",
        f"{STEM}.ipynb": "not graded (older)",
        "scratch.ipynb": ("not graded (not named like the assignment)"),
    }
    # an older file named like the assignment beats a newer one that is not: said so
    when = {"Grace Hopper_23456_assignsubmission_file_/scratch.ipynb": (2026, 11, 5, 0, 0, 0)}
    members = {k: v for k, v in members.items() if "(1)" not in k}
    result = intake.collect(_zip(tmp_path / "m2.zip", members, when), out / "submissions", STEM)
    message = next(p for p in result.problems if p.startswith("grace-hopper-23456"))
    assert "the notebook named like the assignment, though older" in message
    assert "scratch.ipynb (not named like the assignment though newer)" in message


@pytest.mark.slow
def test_the_export_command(tmp_path):
    out, _ = _graded_class(tmp_path, CANVAS_MEMBERS, SCORES)
    command = [sys.executable, "-m", "coursetools.grade", "export", "canvas", str(out), str(tmp_path / "c")]
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "c" / "canvas-gradebook.csv").is_file()
    proc = subprocess.run(
        [sys.executable, "-m", "coursetools.grade", "export", "blackboard", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "invalid choice" in proc.stderr


@pytest.mark.slow
def test_a_class_from_a_plain_folder_is_not_exported_and_says_what_to_do(tmp_path):
    """No learner carries an LMS id: no empty gradebook, no empty zip, no exit 0 (issue 43.6)."""
    out, _ = _graded_class(tmp_path, {"class/ada.ipynb": _nb(), "class/bob.ipynb": _nb()}, {})
    for lms in export.LMS:
        with pytest.raises(export.NoLMSIds, match="graded from a plain folder") as caught:
            exported(lms, out)
        assert "download.zip --out OUT" in str(caught.value) and export.DOWNLOADS[lms] in str(caught.value)
        assert not (out / "export" / lms).exists()
    command = [sys.executable, "-m", "coursetools.grade", "export", "canvas", str(out)]
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "Download Submissions" in proc.stderr, proc.stderr
    assert not (out / "export").exists()


@pytest.mark.slow
def test_learners_without_an_lms_id_are_listed_not_guessed(tmp_path):
    """A class of the LMS's download with one learner more from a plain name: listed, never guessed."""
    members = {f"lovelaceada_12345_67890_{STEM}.ipynb": _nb(), "bob.ipynb": _nb()}
    out, _ = _graded_class(tmp_path, members, {})
    written, problems = exported("canvas", out)
    rows = _read(written[0])
    assert [r[1] for r in rows[2:]] == ["12345"]
    assert problems == ["not in Canvas's download (no Canvas ID): bob"]


@pytest.mark.parametrize("lms", export.LMS)
@pytest.mark.slow
def test_an_export_is_the_same_twice(tmp_path, lms):
    out, _ = _graded_class(tmp_path, CANVAS_MEMBERS if lms == "canvas" else MOODLE_MEMBERS, SCORES)
    first, _ = exported(lms, out)
    before = {p: p.read_bytes() for p in first}
    second, _ = exported(lms, out)
    assert {p: p.read_bytes() for p in second} == before
