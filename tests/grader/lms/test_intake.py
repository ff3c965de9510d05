"""Submissions as an LMS hands them over: Canvas and Moodle zips, folders, duplicates, unsafe zips."""

from __future__ import annotations

import csv
import subprocess
import sys
import zipfile
from pathlib import Path

import fixtures
import pytest
from fixtures import STEM, _nb, _zip

from coursetools.grade.lms import intake
from coursetools.grade.lms.archive import safe_extract

ROOT = Path(__file__).resolve().parents[3]


def _staged(result: intake.Intake) -> set[str]:
    return {p.name for p in result.folder.iterdir() if not p.name.startswith(".")}  # not the intake's mark


def test_a_zip_of_a_folder_and_a_plain_folder(tmp_path):
    members = {"class/ada.ipynb": _nb(), "class/grace/ps00/00-how-to-use.ipynb": _nb()}
    result = intake.collect(_zip(tmp_path / "z.zip", members), tmp_path / "staged", STEM)
    assert _staged(result) == {"ada.ipynb", "grace.ipynb"}
    assert all(e.student_id == "" and e.lms == "folder" for e in result.entries)
    folder = tmp_path / "plain"
    folder.mkdir()
    (folder / f"lovelaceada_12345_67890_{STEM}.ipynb").write_bytes(_nb())
    (folder / "bob.ipynb").write_bytes(_nb())
    result = intake.collect(folder, tmp_path / "staged2", STEM)
    assert {(e.student, e.student_id) for e in result.entries} == {
        ("bob", ""),
        ("lovelaceada-12345", "12345"),
    }


@pytest.mark.grader
@pytest.mark.slow
def test_a_canvas_zip_is_graded_end_to_end_with_overrides_and_report(tmp_path):
    members = {
        f"lovelaceada_12345_67890_{STEM}.ipynb": _nb(),
        f"turingalan_34567_11111_{STEM}.ipynb": _nb(),  # older: not graded
        f"turingalan_34567_22222_{STEM}.ipynb": _nb(fixtures.ZEROS),
    }
    when = {f"turingalan_34567_22222_{STEM}.ipynb": (2026, 11, 2, 0, 0, 0)}
    download = _zip(tmp_path / "c.zip", members, when)
    out = tmp_path / "grades"
    out.mkdir()
    (out / "overrides.csv").write_text("student,exercise,points,reason\n34567,ex-00-1,0.5,shape right\n")
    command = [sys.executable, "-m", "coursetools.grade", STEM, str(download), "--out", str(out), "--quiet"]
    for _ in range(2):  # the second run keeps every student and the override
        proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        with open(out / "grades.csv", newline="") as fh:
            rows = {r["student"]: r for r in csv.DictReader(fh)}
        assert (
            rows["lovelaceada-12345"]["student_id"] == "12345" and rows["lovelaceada-12345"]["total"] == "1"
        )
        turing = rows["turingalan-34567"]
        assert (
            turing["duplicates"] == "2"
            and turing["total"] == "0.5"
            and "shape right" in turing["adjustments"]
        )
        assert (out / "report.html").is_file() and "turingalan-34567" in (out / "roster.csv").read_text()
    (out / "report.html").unlink()
    report = [sys.executable, "-m", "coursetools.grade", "report", str(out), "--assignment", STEM]
    assert subprocess.run(report, cwd=ROOT, capture_output=True, timeout=120).returncode == 0
    assert "lovelaceada-12345" in (out / "report.html").read_text()
    # the one command line stages the download again and prints the duplicates
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "coursetools.grade",
            STEM,
            str(download),
            "--out",
            str(tmp_path / "g2"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0 and "turingalan-34567: 2 files" in proc.stderr


def test_only_a_zip_or_lms_names_go_through_intake(tmp_path):
    plain = tmp_path / "plain"
    (plain / "grace" / "ps00").mkdir(parents=True)
    (plain / "ada.ipynb").write_bytes(_nb())
    assert not intake.needs_intake(plain)
    assert intake.prepare(plain, tmp_path / "out", STEM, quiet=True) == plain
    (plain / f"lovelaceada_12345_67890_{STEM}.ipynb").write_bytes(_nb())
    assert intake.needs_intake(plain)
    moodle = tmp_path / "moodle" / "Ada Lovelace_12345_assignsubmission_file_"
    moodle.mkdir(parents=True)
    assert intake.needs_intake(moodle.parent)
    zipped = _zip(tmp_path / "d.zip", {"ada.ipynb": _nb()})
    assert intake.needs_intake(zipped)
    staged = intake.prepare(zipped, tmp_path / "out", STEM, quiet=True)
    assert staged == tmp_path / "out" / "submissions" and (staged / "ada.ipynb").is_file()
    assert (tmp_path / "out" / "roster.csv").is_file()


# --------------------------------------------------------------------------- no learner lost (issue 43.6)


def test_a_name_longer_than_255_bytes_is_staged_under_its_key(tmp_path):
    """A long upload name (Canvas keeps it after its prefix) and a 100-character CJK full name
    (Moodle's folder, 300 bytes): each learner is staged as a notebook under the computed key."""
    cjk = "山田" * 50
    members = {
        f"lovelaceada_12345_67890_{'my answers to the exercises ' * 9}{STEM}.ipynb": _nb(),
        f"hoppergrace_23456_78901_{STEM}.ipynb": _nb(),
    }
    result = intake.collect(_zip(tmp_path / "canvas.zip", members), tmp_path / "staged", STEM)
    assert _staged(result) == {"lovelaceada-12345.ipynb", "hoppergrace-23456.ipynb"}
    ada = next(e for e in result.entries if e.student == "lovelaceada-12345")
    assert ada.student_id == "12345" and not ada.refused and ada.file.startswith("lovelaceada_12345_67890_my")
    assert (result.folder / "lovelaceada-12345.ipynb").read_bytes() == _nb()
    members = {
        f"{cjk}_34567_assignsubmission_file_/{STEM}.ipynb": _nb(),
        f"Grace Hopper_23456_assignsubmission_file_/{'x' * 300}.ipynb": _nb(),
    }
    assert len(f"{cjk}_34567_assignsubmission_file_".encode()) > 255
    result = intake.collect(_zip(tmp_path / "moodle.zip", members), tmp_path / "staged2", STEM)
    by = {e.student: e for e in result.entries}
    assert set(by) == {"student-34567", "grace-hopper-23456"}
    assert by["student-34567"].name == cjk and by["student-34567"].student_id == "34567"
    assert _staged(result) == {"student-34567.ipynb", "grace-hopper-23456.ipynb"}
    assert not any("refused" in p for p in result.problems), result.problems
    # safe_extract alone (no aliases asked for) still refuses such a member
    problems = safe_extract(tmp_path / "moodle.zip", tmp_path / "plain-extract")
    assert sum("longer than 255 bytes" in p for p in problems) == 2


def test_a_refused_member_whose_path_carries_an_lms_id_is_its_learners_row(tmp_path):
    archive = tmp_path / "download.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr(f"lovelaceada_12345_67890_{STEM}.ipynb", _nb())
        zf.writestr(f"/turingalan_34567_11111_{STEM}.ipynb", _nb())
        zf.writestr(f"../knuthdonald_45678_22222_{STEM}.ipynb", _nb())
        zf.writestr(f"sub/../../hoppergrace_23456_33333_{STEM}.ipynb", _nb())
        zf.writestr(f"C:\\Users\\x\\borgani_56789_44444_{STEM}.ipynb", _nb())
    result = intake.collect(archive, tmp_path / "staged", STEM)
    rows = {e.student: (e.student_id, e.refused) for e in result.entries}
    assert rows == {
        "lovelaceada-12345": ("12345", ""),
        "turingalan-34567": ("34567", "an absolute path"),
        "knuthdonald-45678": ("45678", "a path that leaves the folder (..)"),
        "hoppergrace-23456": ("23456", "a path that leaves the folder (..)"),
        "borgani-56789": ("56789", "an absolute path"),
    }
    assert _staged(result) == {
        "lovelaceada-12345.ipynb",
        "turingalan-34567",
        "knuthdonald-45678",
        "hoppergrace-23456",
        "borgani-56789",
    }
    assert sum("graded unreadable" in p for p in result.problems) == 4
    # a refused member of a zip of one folder keeps its row too
    with zipfile.ZipFile(tmp_path / "folder.zip", "w") as zf:
        zf.writestr(f"course/lovelaceada_12345_67890_{STEM}.ipynb", _nb())
        zf.writestr(f"course/hoppergrace_23456_78901_{STEM}.ipynb", _nb())
        zf.writestr(f"../turingalan_34567_11111_{STEM}.ipynb", _nb())
    result = intake.collect(tmp_path / "folder.zip", tmp_path / "staged2", STEM)
    assert {e.student for e in result.entries} == {
        "lovelaceada-12345",
        "hoppergrace-23456",
        "turingalan-34567",
    }


def test_a_link_in_an_unzipped_download_is_a_row_and_a_message(tmp_path):
    canvas = tmp_path / "canvas"
    canvas.mkdir()
    (canvas / f"lovelaceada_12345_67890_{STEM}.ipynb").write_bytes(_nb())
    (canvas / f"turingalan_34567_11111_{STEM}.ipynb").symlink_to("/etc/passwd")
    (canvas / f"hoppergrace_23456_78901_{STEM}.ipynb").symlink_to(canvas / "missing")  # dangling
    assert intake.needs_intake(canvas)
    result = intake.collect(canvas, tmp_path / "staged", STEM)
    rows = {e.student: (e.student_id, e.refused) for e in result.entries}
    assert rows == {
        "lovelaceada-12345": ("12345", ""),
        "turingalan-34567": ("34567", "a symbolic link"),
        "hoppergrace-23456": ("23456", "a symbolic link"),
    }
    assert f"turingalan_34567_11111_{STEM}.ipynb: refused (a symbolic link)" in result.problems
    assert (result.folder / "turingalan-34567").read_bytes() == b""  # graded unreadable, never followed
    moodle = tmp_path / "moodle"
    (moodle / "Ada Lovelace_12345_assignsubmission_file_").mkdir(parents=True)
    (moodle / "Ada Lovelace_12345_assignsubmission_file_" / f"{STEM}.ipynb").write_bytes(_nb())
    (moodle / "Alan Turing_34567_assignsubmission_file_").mkdir()
    (moodle / "Alan Turing_34567_assignsubmission_file_" / f"{STEM}.ipynb").symlink_to("/etc/passwd")
    (moodle / "Grace Hopper_23456_assignsubmission_file_").symlink_to("/etc")
    result = intake.collect(moodle, tmp_path / "staged2", STEM)
    rows = {e.student: (e.student_id, e.refused) for e in result.entries}
    assert rows == {
        "ada-lovelace-12345": ("12345", ""),
        "alan-turing-34567": ("34567", "a symbolic link"),
        "grace-hopper-23456": ("23456", "a symbolic link"),
    }
    assert sum(p.endswith(": refused (a symbolic link)") for p in result.problems) == 2
    assert sum(p.endswith("refused (a symbolic link): graded unreadable") for p in result.problems) == 2
    # a link in a plain folder has no LMS id: no row, but never without a message
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "ada.ipynb").write_bytes(_nb())
    (plain / "bob_1_2_x.ipynb").symlink_to(plain / "ada.ipynb")
    result = intake.collect(plain, tmp_path / "staged3", STEM)
    assert "bob_1_2_x.ipynb: refused (a symbolic link)" in result.problems
