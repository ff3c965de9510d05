"""The instructor guide's whole loop, run as written (issue 27, "done when"): a class downloaded
from Canvas or Moodle is graded, given overrides, written answers scored by hand and a late
penalty, exported back, and every learner has the same score in every file."""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import fixtures
import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[3]

STEM = "00-how-to-use"
QUESTION = "q-00-1"
GUIDE = ROOT / "book" / "instructor-guide.md"


def guide_commands() -> list[str]:
    """The commands of the guide's section *The whole loop, step by step*."""
    text = GUIDE.read_text(encoding="utf-8")
    section = text.split("### The whole loop, step by step", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block, "the guide's whole loop has no bash block"
    return [line for line in block.group(1).splitlines() if line.strip()]


def _assignment(folder: Path) -> Path:
    """Chapter 00's exercise notebook with a written question graded by hand."""
    nb = nbformat.read(ROOT / "exercises" / f"{STEM}.ipynb", as_version=4)
    nb.cells.append(nbformat.v4.new_markdown_cell("Why is `a @ b.T` wrong with a batch axis?"))
    nb.cells.append(
        nbformat.v4.new_markdown_cell(
            "YOUR ANSWER HERE", metadata={"attnlib": {"manual": QUESTION, "points": 1}}
        )
    )
    folder.mkdir()
    path = folder / f"{STEM}.ipynb"
    nbformat.write(nb, path)
    return path


def _learner(answer: str, written: str) -> bytes:
    nb = fixtures.with_answer(answer)
    nb.cells.append(
        nbformat.v4.new_markdown_cell(written, metadata={"attnlib": {"manual": QUESTION, "points": 1}})
    )
    return nbformat.writes(nb).encode()


def _download(path: Path, lms: str) -> Path:
    learners = [
        ("lovelaceada", "Ada Lovelace", "12345", fixtures.CORRECT, "b.T swaps the batch axes too", ""),
        ("hoppergrace", "Grace Hopper", "23456", fixtures.CORRECT, "the batch axes move", "LATE_"),
        ("turingalan", "Alan Turing", "34567", fixtures.ZEROS, "no idea", ""),
    ]
    with zipfile.ZipFile(path, "w") as zf:
        for login, name, uid, answer, written, late in learners:
            if lms == "canvas":
                member = f"{login}_{late}{uid}_{uid}9_{STEM}.ipynb"
                stamp = (2026, 11, 1, 12, 0, 0)
            else:
                member = f"{name}_{uid}_assignsubmission_file_/{STEM}.ipynb"
                stamp = (2026, 11, 23, 12, 0, 0) if late else (2026, 11, 1, 12, 0, 0)
            zf.writestr(zipfile.ZipInfo(member, date_time=stamp), _learner(answer, written))
    return path


def _rows(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.grader
@pytest.mark.slow
@pytest.mark.parametrize("lms", ["canvas", "moodle"])
def test_the_whole_loop_of_the_guide(tmp_path, lms):
    commands = guide_commands()
    assert [c.split()[3] for c in commands] == [STEM, "manual", "overrides", "export", "report"]
    notebook = _assignment(tmp_path / "assignment")
    download = _download(tmp_path / f"{lms}-download.zip", lms)
    grades = tmp_path / "grades"
    grades.mkdir()
    (grades / "overrides.csv").write_text("student,exercise,points,reason\n34567,ex-00-1,0.5,shape right\n")
    (grades / "late.toml").write_text(
        "deadline = 2026-11-20T23:59:00+00:00\npenalty_per_day = 0.1\nmax_penalty = 0.5\nlms_late_days = 1\n"
    )
    for command in commands:
        argv = command.split()
        assert argv[:3] == ["python", "-m", "coursetools.grade"], command
        argv[0] = sys.executable
        argv = [str(notebook) if a == STEM else a for a in argv]
        argv = [download.name if a == "canvas-download.zip" else a for a in argv]
        argv = [lms if a == "canvas" else a for a in argv]
        proc = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, (command, proc.stdout[-2000:], proc.stderr[-2000:])
        assert "problem:" not in proc.stdout + proc.stderr, (command, proc.stdout, proc.stderr)
        if argv[3] == "manual":  # the instructor scores the written answers
            sheet = grades / "manual" / f"{QUESTION}.csv"
            rows = _rows(sheet)
            page = (grades / "manual" / f"{QUESTION}.md").read_text()
            assert len(rows) == 3 and "b.T swaps the batch axes too" in page
            given = {"lovelaceada-12345": "1", "ada-lovelace-12345": "1"}
            with open(sheet, "w", newline="", encoding="utf-8") as fh:
                writer = csv.DictWriter(fh, fieldnames=["student", "points", "comment"])
                writer.writeheader()
                for row in rows:
                    writer.writerow({**row, "points": given.get(row["student"], "0.5"), "comment": "read"})
    gradebook = {r["student"]: r for r in _rows(grades / "grades.csv")}
    roster = {r["student"]: r for r in _rows(grades / "roster.csv") if not r["duplicate_of"]}
    assert set(gradebook) == set(roster) and len(gradebook) == 3
    if lms == "canvas":
        exported = {
            r["ID"]: r[STEM] for r in _rows(grades / "export" / "canvas" / "canvas-gradebook.csv")[1:]
        }
    else:
        table = _rows(grades / "export" / "moodle" / "moodle-grading-worksheet.csv")
        exported = {r["Identifier"].removeprefix("Participant "): r["Grade"] for r in table}
    totals = []
    for key, row in gradebook.items():
        total = row["total"]
        assert total, (key, row)
        totals.append(float(total))
        results = json.loads((grades / key / "results.json").read_text())
        feedback = (grades / "feedback" / f"{key}.md").read_text()
        assert results["score"] == pytest.approx(float(total)), key
        assert f"Score: **{total}** out of 2." in feedback, key
        assert exported[roster[key]["student_id"]] == total, key
    by_id = {roster[k]["student_id"]: gradebook[k] for k in gradebook}
    assert by_id["12345"]["total"] == "2"  # right, and the written answer scored 1
    assert by_id["34567"]["total"] == "1"  # override 0 -> 0.5, written answer 0.5
    # 1.5, then late: Canvas's LATE mark counts as one day, Moodle's stored time is 3 days
    # (started) after the deadline; 10% of the maximum (2) per day
    assert by_id["23456"]["total"] == ("1.3" if lms == "canvas" else "0.9")
    assert "late penalty" in by_id["23456"]["adjustments"]
    mean = sum(totals) / len(totals)
    assert (
        f"class mean {round(mean, 2):g} of 2 (over 3 submissions with a total)"
        in (grades / "report.html").read_text()
    )
