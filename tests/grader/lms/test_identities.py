"""Who a learner is: LMS ids no upload can take, names the output folder keeps for itself, and
spreadsheet fields no name can turn into a formula (issue 34, items 2 and 5).

The attack bank of the identities: in each LMS's download the learner chooses the tail of a
file name (Canvas keeps the upload's name after its own prefix, Moodle's flat download too).
Every upload below is named to look like the *other* LMS's pattern, or like another learner of
the same LMS, or puts ids in odd places; none may create a learner carrying an id that is not
the one the LMS wrote in its own prefix. An id that two keys carry anyway is never applied by
id (overrides, manual scores, exports): refused, with both keys named.
"""

from __future__ import annotations

import csv
import io
import os
import signal
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import fixtures
import pytest
from fixtures import STEM, _nb, _zip, exported

from coursetools.grade import batch
from coursetools.grade.grading.submission import find_submissions
from coursetools.grade.lms import export, intake
from coursetools.grade.lms.layouts import layout_of
from coursetools.grade.outputs import manual, overrides, scores
from coursetools.grade.records.escape import FORMULA_START, csv_cell, uncell
from coursetools.grade.records.paths import RESERVED, reserved
from coursetools.grade.records.record import Record
from coursetools.grade.records.roster import ids_to_keys, read_roster

pytestmark = pytest.mark.grader

ROOT = Path(__file__).resolve().parents[3]
VICTIM = f"lovelaceada_12345_67890_{STEM}.ipynb"  # Canvas: Ada, user 12345
MOODLE_VICTIM = f"Ada Lovelace_12345_assignsubmission_file_/{STEM}.ipynb"


def _collect(tmp_path: Path, members: dict[str, bytes]) -> intake.Intake:
    return intake.collect(_zip(tmp_path / "download.zip", members), tmp_path / "staged", STEM)


def _ids(result: intake.Intake) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for entry in result.entries:
        found.setdefault(entry.student_id, []).append(entry.student)
    return found


# uploads a learner of the download names; each must keep the learner's own id (99999)
CANVAS_ATTACKS = {
    "moodle file name": f"mallory_99999_55555_Ada Lovelace_12345_assignsubmission_file_{STEM}.ipynb",
    "moodle folder name": "mallory_99999_55555_Ada Lovelace_12345_assignsubmission_file_",
    "another canvas file": f"mallory_99999_55555_{VICTIM}",
    "a late canvas file": f"mallory_99999_55555_lovelaceada_LATE_12345_67890_{STEM}.ipynb",
    "digits everywhere": f"mallory_99999_55555_12345_67890_12345_{STEM}.ipynb",
    "a path in the name": f"mallory_99999_55555_..%2Flovelaceada_12345_67890_{STEM}.ipynb",
}


@pytest.mark.parametrize("upload", CANVAS_ATTACKS.values(), ids=CANVAS_ATTACKS.keys())
def test_a_canvas_upload_never_takes_another_id(tmp_path, upload):
    result = _collect(
        tmp_path, {VICTIM: _nb(), f"hoppergrace_23456_78901_{STEM}.ipynb": _nb(), upload: _nb()}
    )
    ids = _ids(result)
    assert ids["12345"] == ["lovelaceada-12345"]  # the victim alone carries her id
    assert ids["99999"] == ["mallory-99999"]  # the attacker carries the one Canvas wrote
    assert {e.lms for e in result.entries} == {"canvas"}
    assert intake.shared_ids(result.entries) == {}


MOODLE_ATTACKS = {
    "canvas file name": f"Mallory Evil_99999_assignsubmission_file_lovelaceada_12345_67890_{STEM}.ipynb",
    "another moodle file": (
        f"Mallory Evil_99999_assignsubmission_file_Ada Lovelace_12345_assignsubmission_file_{STEM}.ipynb"
    ),
    "a moodle folder": "Mallory Evil_99999_assignsubmission_file_Ada Lovelace_12345_assignsubmission_file_",
}


@pytest.mark.parametrize("upload", MOODLE_ATTACKS.values(), ids=MOODLE_ATTACKS.keys())
def test_a_moodle_upload_never_takes_another_id(tmp_path, upload):
    members = {
        f"Ada Lovelace_12345_assignsubmission_file_{STEM}.ipynb": _nb(),
        f"Grace Hopper_23456_assignsubmission_file_{STEM}.ipynb": _nb(),
        upload: _nb(),
    }
    result = _collect(tmp_path, members)
    ids = _ids(result)
    assert ids["12345"] == ["ada-lovelace-12345"]
    assert ids["99999"] == ["mallory-evil-99999"]
    assert {e.lms for e in result.entries} == {"moodle"}


def test_files_inside_a_moodle_folder_never_name_a_learner(tmp_path):
    members = {
        MOODLE_VICTIM: _nb(),
        f"Mallory Evil_99999_assignsubmission_file_/{VICTIM}": _nb(),
        f"Mallory Evil_99999_assignsubmission_file_/{MOODLE_VICTIM.replace('/', '/x/')}": _nb(),
    }
    ids = _ids(_collect(tmp_path, members))
    assert ids == {"12345": ["ada-lovelace-12345"], "99999": ["mallory-evil-99999"]}


def test_the_layout_is_decided_once_for_the_whole_download(tmp_path):
    def layout(names: list[str]) -> str:
        folder = tmp_path / f"l{len(list(tmp_path.iterdir()))}"
        folder.mkdir()
        for name in names:
            (folder / name).mkdir() if name.endswith("_") else (folder / name).write_bytes(b"{}")
        return layout_of(sorted(folder.iterdir()))

    assert layout([VICTIM, CANVAS_ATTACKS["moodle file name"]]) == "canvas"
    assert layout([VICTIM, CANVAS_ATTACKS["moodle file name"], "notes.txt"]) == "canvas"
    assert layout(["Ada Lovelace_12345_assignsubmission_file_", "lovelaceada_1_2_x.ipynb"]) == "folder"
    assert layout(["Ada Lovelace_12345_assignsubmission_file_", "B_2_assignsubmission_file_"]) == "moodle"
    assert layout(["ada.ipynb", "ada_12345.ipynb"]) == "folder"
    problems: list[str] = []
    folder = tmp_path / "both"
    folder.mkdir()
    (folder / CANVAS_ATTACKS["moodle file name"]).write_bytes(b"{}")
    assert layout_of([folder / CANVAS_ATTACKS["moodle file name"]], problems) == "canvas"
    assert problems and "both" in problems[0]


def test_a_plain_folder_takes_no_id_from_any_name(tmp_path):
    members = {f"class/{VICTIM}": _nb(), "class/ada_12345.ipynb": _nb(), "class/notes.txt": b"x"}
    result = _collect(tmp_path, members)
    # the one Canvas name makes the layout Canvas's; a name that does not carry Canvas's prefix
    # is a learner without an id (its digits are never read as one)
    by_key = {e.student: e for e in result.entries}
    assert by_key["ada_12345"].student_id == "" and by_key["ada_12345"].lms == "folder"


# --------------------------------------------------------------------------- an id two keys carry


def _graded(tmp_path: Path, members: dict[str, bytes]) -> Path:
    out = tmp_path / "out"
    staged = intake.prepare(_zip(tmp_path / "download.zip", members), out, STEM, quiet=True)
    records = []
    for path in sorted(p for p in staged.iterdir() if not p.name.startswith(".")):
        records.append(fixtures.record(path.name.removesuffix(".ipynb"), {"ex-00-1": 1.0}, {"ex-00-1": 1.0}))
    fixtures.write_graded(out, records, assignment=STEM)
    return out


SHARED = {
    # one Moodle participant in two folders under two full names (a renamed account)
    f"Ada Lovelace_12345_assignsubmission_file_/{STEM}.ipynb": _nb(),
    f"Ada King_12345_assignsubmission_file_/{STEM}.ipynb": _nb(),
    f"Grace Hopper_23456_assignsubmission_file_/{STEM}.ipynb": _nb(),
}


def test_an_id_two_learners_carry_is_reported_at_intake(tmp_path):
    result = _collect(tmp_path, SHARED)
    assert intake.shared_ids(result.entries) == {"12345": ["ada-king-12345", "ada-lovelace-12345"]}
    assert any("LMS id 12345 is carried by 2 learners" in p for p in result.problems)


@pytest.mark.slow
def test_overrides_and_manual_never_apply_a_row_by_a_shared_id(tmp_path):
    out = _graded(tmp_path, SHARED)
    (out / "overrides.csv").write_text(
        "student,exercise,points,reason\n12345,ex-00-1,0,by id\nada-king-12345,ex-00-1,0.5,by key\n"
        "23456,ex-00-1,0.25,unique id\n"
    )
    final = scores.compute(out)
    by = final.by_student()
    assert by["ada-lovelace-12345"].total == 1.0  # the row by the shared id landed on nobody
    assert by["ada-king-12345"].total == 0.5  # the row by key did
    assert by["grace-hopper-23456"].total == 0.25  # a unique id is applied
    assert any("LMS id '12345' names 2 learners" in p and "not applied" in p for p in final.problems)
    # the same rule for manual score sheets
    records = {k: Record.from_dict(fixtures.record(k, {}, {})) for k in by}
    chosen, problems = manual.resolve(
        {"q-00-1": {"12345": manual.ManualScore(1.0, ""), "23456": manual.ManualScore(1.0, "")}},
        records,
        *ids_to_keys(read_roster(out)),
    )
    assert set(chosen) == {"grace-hopper-23456"}
    assert problems and "names 2 learners" in problems[0]
    # and overrides.resolve alone
    rows, _ = overrides.read(out / "overrides.csv")
    chosen, _ = overrides.resolve(rows, records, read_roster(out))
    assert "ada-lovelace-12345" not in chosen


@pytest.mark.slow
def test_an_export_never_writes_a_shared_id(tmp_path):
    out = _graded(tmp_path, SHARED)
    written, problems = exported("moodle", out)
    rows = list(csv.reader(io.StringIO(written[0].read_text(encoding="utf-8"))))
    assert [r[0] for r in rows[1:]] == ["Participant 23456"]
    assert sum("not exported: LMS id 12345 is carried by 2 learners" in p for p in problems) == 2


# --------------------------------------------------------------------------- the wrong LMS


@pytest.mark.slow
def test_export_to_the_other_lms_refuses_and_writes_nothing(tmp_path):
    out = _graded(tmp_path, {VICTIM: _nb(), f"hoppergrace_23456_78901_{STEM}.ipynb": _nb()})
    with pytest.raises(export.WrongLMS, match="Canvas download"):
        exported("moodle", out)
    assert not (out / "export" / "moodle").exists()
    command = [sys.executable, "-m", "coursetools.grade", "export", "moodle", str(out)]
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "export canvas" in proc.stderr
    assert not (out / "export" / "moodle").exists()


@pytest.mark.slow
def test_export_refreshes_the_report(tmp_path):
    out = _graded(tmp_path, {VICTIM: _nb()})
    (out / "report.html").write_text("stale", encoding="utf-8")
    exported("canvas", out)
    assert "Class report" in (out / "report.html").read_text(encoding="utf-8")


@pytest.mark.slow
def test_moodle_maximum_grade_is_checked_against_the_notebook(tmp_path):
    out = _graded(tmp_path, {MOODLE_VICTIM: _nb()})
    sheet = tmp_path / "moodle-worksheet.csv"
    sheet.write_text(
        "Identifier,Full name,Status,Grade,Maximum Grade\nParticipant 12345,Ada Lovelace,Submitted,,100.00\n"
    )
    with pytest.raises(export.MaximumGrade, match="out of 100.*Maximum grade to 1"):
        exported("moodle", out, moodle_worksheet=sheet)
    command = [sys.executable, "-m", "coursetools.grade", "export", "moodle", str(out), "--moodle-worksheet"]
    proc = subprocess.run([*command, str(sheet)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "Maximum grade to 1" in proc.stderr
    sheet.write_text("Identifier,Grade,Maximum Grade\nParticipant 12345,,1.00\n")
    exported("moodle", out, moodle_worksheet=sheet)  # the right maximum: written
    proc = subprocess.run(command[:-1], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "out of 1 (Settings > Grade > Maximum grade)" in proc.stdout


# --------------------------------------------------------------------------- refused members


def test_a_refused_member_of_an_lms_download_is_an_unreadable_row(tmp_path):
    link = zipfile.ZipInfo(f"turingalan_34567_11111_{STEM}.ipynb")
    link.external_attr = (stat.S_IFLNK | 0o777) << 16
    archive = tmp_path / "download.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr(VICTIM, _nb())
        zf.writestr(link, "/etc/passwd")
        zf.writestr(f"hoppergrace_23456_78901_{STEM}.ipynb", b"x" * 2048)
    result = intake.collect(archive, tmp_path / "staged", STEM, max_file_bytes=1024 * 1024)
    turing = next(e for e in result.entries if e.student == "turingalan-34567")
    assert turing.student_id == "34567" and turing.refused == "a symbolic link"
    assert (result.folder / "turingalan-34567").read_bytes() == b""  # staged: graded unreadable
    assert any("turingalan-34567" in p and "graded unreadable" in p for p in result.problems)
    result = intake.collect(archive, tmp_path / "staged2", STEM, max_file_bytes=1024)
    # every upload refused (all larger than allowed): the class is still Canvas's, every learner a row
    refused = {e.student: e.student_id for e in result.entries if e.refused}
    assert refused == {
        "turingalan-34567": "34567",
        "hoppergrace-23456": "23456",
        "lovelaceada-12345": "12345",
    }


# --------------------------------------------------------------------------- reserved names


def test_every_name_of_the_output_folder_is_reserved_whatever_its_case():
    for name in RESERVED:
        for shown in (name, name.upper(), name.title(), f".{name}"):
            assert reserved(shown), shown
    assert not reserved("ada") and not reserved("strays")


def test_a_learner_named_like_an_output_file_gets_another_key(tmp_path):
    folder = tmp_path / "subs"
    folder.mkdir()
    names = ["strays.txt", "Class.json", "FEEDBACK", "manual", "export", "grades.csv", "learner-manual"]
    for name in names:
        (folder / f"{name}.ipynb").write_bytes(_nb())
    subs = find_submissions(folder, STEM)
    batch.safe_keys(subs)
    keys = {s.student for s in subs}
    assert not any(reserved(k) for k in keys), keys
    assert len({k.lower() for k in keys}) == len(names)


@pytest.mark.slow
def test_a_class_with_reserved_names_and_strays_grades_and_every_command_runs(tmp_path):
    folder = tmp_path / "subs"
    folder.mkdir()
    correct = _nb()
    for name in ("strays.txt", "class.json", "Report.html"):
        (folder / f"{name}.ipynb").write_bytes(correct)
    (folder / "notes.txt").write_text("a stray", encoding="utf-8")
    out = tmp_path / "out"
    run = [sys.executable, "-m", "coursetools.grade"]
    proc = subprocess.run(
        [*run, STEM, str(folder), "--out", str(out), "--quiet", "--jobs", "1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (out / "strays.txt").read_text(encoding="utf-8") == "notes.txt\n"
    assert (out / "class.json").is_file() and (out / "report.html").read_text().startswith("<!DOCTYPE")
    with open(out / "grades.csv", newline="", encoding="utf-8") as fh:
        rows = {r["student"]: r for r in csv.DictReader(fh)}
    assert len(rows) == 3 and not any(reserved(k) for k in rows), rows.keys()
    assert {"learner-strays.txt", "learner-class.json"} <= set(rows)
    assert all(r["total"] == "1" and r["status"] == "graded" for r in rows.values())
    for command in (["report", str(out)], ["overrides", str(out)], ["manual", str(out)]):
        proc = subprocess.run([*run, *command], cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, (command, proc.stderr[-2000:])


# --------------------------------------------------------------------------- spreadsheet fields

NAMES = ['Ada;=HYPERLINK("x")', "Grace; +1+cmd", "Alan;@SUM(A1)", "Bob;-2+3", "Eve;'=x"]


def _fields(cell: str) -> list[str]:
    """What a ``;``-separated spreadsheet makes of one cell: each piece, as it starts."""
    return [piece.lstrip(" ") for piece in cell.split(";")]


@pytest.mark.parametrize("name", NAMES)
def test_no_field_of_a_cell_starts_a_formula(name):
    cell = csv_cell(name)
    assert not any(field.startswith(FORMULA_START) for field in _fields(cell)), cell
    assert uncell(cell) == name  # read back as it was (the roster, the score sheets)
    assert csv_cell(uncell(cell)) == cell  # and never guarded twice


@pytest.mark.slow
def test_full_names_with_formulas_after_a_semicolon_are_guarded_everywhere(tmp_path):
    members = {
        f"{name}_{10000 + i}_assignsubmission_file_/{STEM}.ipynb": _nb() for i, name in enumerate(NAMES)
    }
    out = _graded(tmp_path, members)
    written, _ = exported("moodle", out)
    for path in (out / "roster.csv", out / "grades.csv", written[0]):
        for row in csv.reader(io.StringIO(path.read_text(encoding="utf-8"))):
            for cell in row:
                assert not any(f.startswith(FORMULA_START) for f in _fields(cell)), (path.name, cell)
    roster = read_roster(out)
    assert sorted(r["name"] for r in roster.values()) == sorted(NAMES)  # read back as the LMS wrote them


def test_a_comment_collected_again_is_never_guarded_twice(tmp_path):
    (tmp_path / "manual").mkdir()
    sheet = tmp_path / "manual" / "q-00-1.csv"
    sheet.write_text('student,points,comment\nada,1,"\'=see the proof; -1 for the sign"\n', encoding="utf-8")
    read, _ = manual.read_scores(tmp_path / "manual", {"q-00-1": 1.0})
    assert read["q-00-1"]["ada"].comment == "=see the proof; -1 for the sign"  # what the learner reads


# --------------------------------------------------------------------------- the trusted parent's signals


def test_the_trusted_parent_ignores_every_catchable_signal():
    from coursetools.grade.sandbox import harness

    pid = os.fork()
    if pid == 0:  # the trusted parent's part, in a child of the test
        harness._ignore_signals()
        for sig in (
            signal.SIGINT,
            signal.SIGTERM,
            signal.SIGHUP,
            signal.SIGQUIT,
            signal.SIGUSR1,
            signal.SIGALRM,
        ):
            os.kill(os.getpid(), sig)
        os._exit(7)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 7
    # SIGCHLD is kept: the parent still waits for the learner's process
    assert "SIGCHLD" in harness._KEPT_SIGNALS


KILL_THE_PARENT = (
    "import os, signal\n"
    "for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGALRM):\n"
    "    try:\n"
    "        os.kill(os.getppid(), sig)\n"
    "    except OSError:\n"
    "        pass\n"
)


@pytest.mark.slow
def test_in_userns_mode_the_learner_cannot_signal_the_trusted_parent_away(tmp_path):
    import json

    import nbformat

    folder = tmp_path / "subs"
    folder.mkdir()
    nb = fixtures.with_answer(fixtures.CORRECT, before=[KILL_THE_PARENT])
    (folder / "signaller.ipynb").write_text(nbformat.writes(nb), encoding="utf-8")
    out = tmp_path / "out"
    command = [sys.executable, "-m", "coursetools.grade", STEM, str(folder), "--out", str(out)]
    command += ["--isolation", "userns", "--quiet", "--jobs", "1", "--timeout-cell", "20"]
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    record = json.loads((out / "signaller" / "record.json").read_text())
    if (record.get("isolation") or {}).get("mode") != "userns":
        pytest.skip(f"no userns mode here: {proc.stderr[-300:]}")
    # before issue 34: kernel-died, "the process was killed by SIGINT"
    assert record["status"] == "graded" and record["total"] == 1, record.get("incidents")
