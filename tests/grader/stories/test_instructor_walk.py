"""What an instructor and a learner read, walking the guide (issue 34, item 6): each text says
what holds, and no two texts of one learner contradict each other."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import fixtures
import pytest
from fixtures import QUESTION, STEM, _class, _fill, _grades, _nb, _sheet, _zip

from coursetools.grade.lms import intake
from coursetools.grade.outputs import manual, scores
from coursetools.grade.outputs.progress import Progress, summary
from coursetools.grade.outputs.publish import publish
from coursetools.grade.records.record import Record

pytestmark = pytest.mark.grader

ROOT = Path(__file__).resolve().parents[3]


def _feedback(out: Path, student: str) -> str:
    return (out / "feedback" / f"{student}.md").read_text(encoding="utf-8")


@pytest.mark.slow
def test_a_written_answer_graded_by_hand_is_not_a_change_of_the_instructor(tmp_path):
    out = _class(tmp_path, {"ada": "my answer", "grace": "hers"})
    manual.collect(out)
    _fill(out, {"ada": ("1.5", "right idea"), "grace": ("2", "")})
    final = publish(out)
    text = _feedback(out, "ada")
    assert "What your instructor changed" not in text
    assert "q-00-1: 1.5 / 2: right idea" in text  # it is graded where written answers are
    assert "changed by the instructor" not in summary(final, "", 1.0)
    assert "changed by the instructor" not in (out / "report.html").read_text(encoding="utf-8")
    # an override is a change: it alone is listed
    (out / "overrides.csv").write_text("student,exercise,points,reason\nada,ex-9-1,0.5,regraded\n")
    final = publish(out)
    text = _feedback(out, "ada")
    changed = text.split("## What your instructor changed", 1)[1].split("##", 1)[0]
    assert "ex-9-1: 1 -> 0.5 (regraded)" in changed and QUESTION not in changed
    assert "1 learners with a score changed by the instructor" in summary(final, "", 1.0)


@pytest.mark.slow
def test_a_comment_that_starts_like_a_formula_reaches_the_learner_as_written(tmp_path):
    out = _class(tmp_path, {"ada": "my answer"})
    manual.collect(out)
    _fill(out, {"ada": ("1", "=the sum of the weights; -1 for the sign")})
    for _ in range(3):  # collected again and again: guarded once in the sheet, never in the text
        manual.collect(out)
        publish(out)
        assert _sheet(out)[0]["comment"] == "'=the sum of the weights; '-1 for the sign"
    text = _feedback(out, "ada")
    assert "q-00-1: 1 / 2: =the sum of the weights; -1 for the sign" in text
    assert "'=" not in text and "'-1" not in text


@pytest.mark.slow
def test_a_score_not_final_is_never_beside_final_scores(tmp_path):
    out = _class(tmp_path, {"ada": "my answer"})
    publish(out)  # the written question is not graded yet
    text = _feedback(out, "ada")
    assert "Score: **not final** out of 3." in text
    status_line = next(line for line in text.splitlines() if line.startswith("Status:"))
    assert "graded" in status_line and "scores are final" not in status_line
    assert "the total is not final yet" in status_line
    results = json.loads((out / "ada" / "results.json").read_text())
    assert "scores are final" not in results["output"] and results["output"].startswith("Score: not final")


def test_an_unreadable_file_never_looks_graded(tmp_path):
    record = fixtures.record("ada", {"ex-9-1": None}, {"ex-9-1": 1.0})
    record.update(status="unreadable", total=None, notes=["not a notebook (not JSON)"])
    record["exercises"]["ex-9-1"]["cases"] = []
    fixtures.write_graded(tmp_path, [record])
    results = json.loads((tmp_path / "ada" / "results.json").read_text())
    assert results["output"].startswith(
        "Score: not final. Your file could not be read, so nothing was graded"
    )
    assert all("could not be read" in t["output"] for t in results["tests"])
    assert "Score: **not final** out of 1." in _feedback(tmp_path, "ada")


def test_a_damaged_notebook_is_not_called_another_kind_of_file(tmp_path):
    out = tmp_path / "out"
    members = {
        f"lovelaceada_12345_67890_{STEM}.ipynb": b'{"cells": [',  # damaged: cut in the middle
        "hoppergrace_23456_78901_answers.pdf": b"%PDF-1.4",
        f"turingalan_34567_11111_{STEM}.ipynb": _nb(),
    }
    staged = intake.prepare(_zip(tmp_path / "download.zip", members), out, STEM, quiet=True)
    records = []
    for path in sorted(p for p in staged.iterdir() if not p.name.startswith(".")):
        record = fixtures.record(path.name.removesuffix(".ipynb"), {"ex-00-1": None}, {"ex-00-1": 1.0})
        record.update(status="unreadable", total=None, notes=["not a notebook"])
        records.append(record)
    fixtures.write_graded(out, records, assignment=STEM)
    ada = _feedback(out, "lovelaceada-12345")
    assert f"Your notebook `{STEM}.ipynb` could not be read as a notebook (it is damaged" in ada
    assert "the grader needs your notebook (an `.ipynb` file)" not in ada
    grace = _feedback(out, "hoppergrace-23456")
    assert "You uploaded `answers.pdf`; the grader needs your notebook (an `.ipynb` file)." in grace


@pytest.mark.slow
def test_progress_lines_show_the_final_total_out_of_every_point(tmp_path):
    out = _class(tmp_path, {"ada": "my answer"})
    manual.collect(out)
    info = scores.ClassInfo.load(out)
    sources = scores.Sources.load(out, info)
    record = Record.from_dict(json.loads((out / "ada" / "record.json").read_text()))
    stream = io.StringIO()
    progress = Progress(2, stream)
    grade = scores.build(info, {"ada": record}, sources).by_student()["ada"]
    progress.update(record, grade=grade)
    assert stream.getvalue().rstrip().endswith("ada: graded -/3 (automatic 1/1)")
    _fill(out, {"ada": ("2", "")})
    sources = scores.Sources.load(out, info)
    grade = scores.build(info, {"ada": record}, sources).by_student()["ada"]
    progress.update(record, skipped=True, grade=grade)
    assert stream.getvalue().rstrip().endswith("ada: kept (already graded) 3/3 (automatic 1/1)")
    assert grade.total == 3 and f"{grade.total:g}/{grade.max:g}" == "3/3"  # the gradebook's numbers


@pytest.mark.slow
def test_the_overrides_command_prints_every_row_it_applied(tmp_path):
    records = [fixtures.record(s, {"ex-9-1": 1.0}, {"ex-9-1": 1.0}) for s in ("ada", "grace")]
    fixtures.write_graded(tmp_path, records)
    (tmp_path / "overrides.csv").write_text(
        "student,exercise,points,reason\nada,ex-9-1,0.5,off by one\ngrace,ex-9-1,7,too many\n"
    )
    command = [sys.executable, "-m", "coursetools.grade", "overrides", str(tmp_path)]
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1  # a row was refused
    assert "applied: ada ex-9-1: 1 -> 0.5 (off by one)" in proc.stdout
    assert "1 override applied; 1 problem(s) below" in proc.stdout
    assert "overrides: overrides.csv line 3: 7 points is outside 0 .. 1" in proc.stdout
    with open(tmp_path / "grades.csv", newline="", encoding="utf-8") as fh:
        assert {r["student"]: r["total"] for r in csv.DictReader(fh)} == {"ada": "0.5", "grace": "1"}
    assert _grades(tmp_path)["ada"]["total"] == "0.5"
