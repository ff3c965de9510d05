"""overrides.csv: manual adjustments merged into grades.csv and Gradescope's results, kept on regrading."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import fixtures
import nbformat
import pytest

from coursetools.grade.commands import apply_overrides, write_report

ROOT = Path(__file__).resolve().parents[3]

STEM = "00-how-to-use"


_record = fixtures.record


@pytest.fixture
def graded_out(tmp_path) -> Path:
    """An output folder as the grader writes it, for three students and two exercises."""
    points = {"ex-9-1": 2.0, "ex-9-2": 1.0}
    records = [
        _record("ada", {"ex-9-1": 2.0, "ex-9-2": 0.0}, points),
        _record("grace", {"ex-9-1": 1.0, "ex-9-2": 1.0}, points),
        _record("alan", {"ex-9-1": 0.0, "ex-9-2": None}, points),
    ]
    out = tmp_path / "out"
    out.mkdir()
    (out / "roster.csv").write_text(
        "student,student_id,name,lms,late,file,duplicate_of\nada,12345,lovelaceada,canvas,,a.ipynb,\n"
        "grace,23456,hoppergrace,canvas,,g.ipynb,\nalan,34567,turingalan,canvas,,t.ipynb,\n"
    )
    return fixtures.write_graded(out, records)


def _grades(out: Path) -> dict[str, dict]:
    with open(out / "grades.csv", newline="") as fh:
        return {r["student"]: r for r in csv.DictReader(fh)}


def _results(out: Path, student: str) -> dict:
    return json.loads((out / student / "results.json").read_text())


@pytest.mark.slow
def test_an_override_replaces_one_exercise_in_the_gradebook_and_gradescope(graded_out):
    out = graded_out
    (out / "overrides.csv").write_text(
        "student,exercise,points,reason\nada,ex-9-2,0.5,partly right: the mask is transposed\n"
        "23456,ex-9-1,2,regraded by hand\n"
    )
    before = _results(out, "ada")
    alan_before = _results(out, "alan")
    assert apply_overrides(out) == []
    rows = _grades(out)
    assert rows["ada"]["ex-9-2"] == "0.5" and rows["ada"]["total"] == "2.5"
    assert rows["ada"]["adjustments"] == "ex-9-2: 0 -> 0.5 (partly right: the mask is transposed)"
    assert rows["grace"]["ex-9-1"] == "2" and rows["grace"]["total"] == "3"  # found by student id
    assert rows["alan"]["total"] == "" and rows["alan"]["adjustments"] == ""
    after = _results(out, "ada")
    assert after["score"] == pytest.approx(2.5)
    extra = [t for t in after["tests"] if t["name"] == "ex-9-2: adjusted by your instructor"]
    assert len(extra) == 1 and extra[0]["score"] == pytest.approx(0.5) and extra[0]["max_score"] == 0
    assert "mask is transposed" in extra[0]["output"]
    assert after["tests"][: len(before["tests"])] == before["tests"]  # the grader's tests are kept
    assert _results(out, "alan") == alan_before  # no override: untouched


@pytest.mark.slow
def test_applying_twice_changes_nothing_and_removing_a_row_restores(graded_out):
    out = graded_out
    (out / "overrides.csv").write_text("student,exercise,points,reason\nada,ex-9-2,1,ok\n")
    apply_overrides(out)
    first = ((out / "grades.csv").read_text(), _results(out, "ada"))
    apply_overrides(out)
    assert ((out / "grades.csv").read_text(), _results(out, "ada")) == first
    (out / "overrides.csv").write_text("student,exercise,points,reason\n")
    apply_overrides(out)
    assert _grades(out)["ada"]["total"] == "2" and _grades(out)["ada"]["ex-9-2"] == "0"
    assert _results(out, "ada")["score"] == pytest.approx(2.0)
    assert not [t for t in _results(out, "ada")["tests"] if "adjusted" in t["name"]]


@pytest.mark.slow
def test_rows_that_cannot_apply_are_reported_and_skipped(graded_out):
    out = graded_out
    (out / "overrides.csv").write_text(
        "student,exercise,points,reason\n"
        "nobody,ex-9-1,1,x\n"
        "ada,ex-7-7,1,x\n"
        "ada,ex-9-1,3,too many\n"
        "ada,ex-9-1,-1,negative\n"
        "ada,ex-9-1,two,words\n"
        "grace,ex-9-2,0,first\n"
        "grace,ex-9-2,0.25,second\n"
    )
    problems = apply_overrides(out)
    text = "\n".join(problems)
    assert "no student 'nobody'" in text and "no exercise 'ex-7-7'" in text
    assert text.count("outside 0 .. 2") == 2 and "'two' is not a number" in text
    assert "this later row counts" in text
    rows = _grades(out)
    assert rows["ada"]["ex-9-1"] == "2" and rows["grace"]["ex-9-2"] == "0.25"
    (out / "overrides.csv").write_text("who,what\nada,1\n")
    assert any("no column" in p for p in apply_overrides(out))


def _outputs(out: Path) -> dict[str, str]:
    """Every rendered file of an output folder (what learners and the instructor read)."""
    files = [out / "grades.csv", out / "report.html", *out.glob("feedback/*.md"), *out.glob("*/results.json")]
    return {str(p.relative_to(out)): p.read_text(encoding="utf-8") for p in files if p.is_file()}


@pytest.mark.grader
@pytest.mark.slow
def test_overrides_survive_a_regrade_and_every_order_gives_the_same_files(tmp_path, capsys):
    from coursetools.grade import batch
    from coursetools.grade.grading import runner

    subs = tmp_path / "subs"
    subs.mkdir()
    nbformat.write(fixtures.with_answer(fixtures.ZEROS), subs / "ada.ipynb")
    nbformat.write(fixtures.with_answer(fixtures.CORRECT), subs / "grace.ipynb")
    out = tmp_path / "out"
    (tmp_path / "out").mkdir()
    (out / "overrides.csv").write_text("student,exercise,points,reason\nada,ex-00-1,0.5,shape right\n")
    seen = []
    for force in (False, True):  # first grading, then a full regrade
        settings = runner.Settings(out=out, timeout_total=60, timeout_setup=120, isolation="auto")
        batch.grade(STEM, subs, out, jobs=2, force=force, settings=settings, quiet=False)
        summary = capsys.readouterr().out
        graded = _outputs(out)
        rows = _grades(out)
        assert rows["ada"]["total"] == "0.5" and rows["ada"]["ex-00-1"] == "0.5"  # the grader applies it
        assert rows["ada"]["adjustments"] == "ex-00-1: 0 -> 0.5 (shape right)"
        assert rows["grace"]["total"] == "1"
        assert _results(out, "ada")["score"] == pytest.approx(0.5)
        feedback = (out / "feedback" / "ada.md").read_text()
        assert "Score: **0.5** out of 1." in feedback and "What your instructor changed" in feedback
        assert "ex-00-1: 0 -> 0.5 (shape right)" in feedback
        # one class mean, named the same way in the summary and the report
        mean = "class mean 0.75 of 1 (over 2 submissions with a total)"
        assert mean in summary and mean in (out / "report.html").read_text()
        # any order of the commands gives the same files
        assert apply_overrides(out) == []
        assert _outputs(out) == graded
        write_report(out)
        assert _outputs(out) == graded
        assert apply_overrides(out) == []
        assert _outputs(out) == graded
        seen.append(graded)
    # a regrade of the same notebooks gives the same gradebook and feedback (results.json and
    # the report also hold the grading time, which is measured anew)
    same = [k for k in seen[0] if k == "grades.csv" or k.startswith("feedback/")]
    assert len(same) == 3 and all(seen[0][k] == seen[1][k] for k in same)
    assert (out / "overrides.csv").read_text().startswith("student,exercise,points,reason")


def test_an_unreadable_upload_graded_by_hand_gets_a_total(tmp_path):
    points = {"ex-9-1": 2.0}
    pdf = _record("knuth", {"ex-9-1": None}, points)
    pdf.update(status="unreadable", total=None)
    out = tmp_path / "out"
    out.mkdir()
    (out / "overrides.csv").write_text(
        "student,exercise,points,reason\nknuth,ex-9-1,1.5,read the PDF by hand\n"
    )
    fixtures.write_graded(out, [pdf])
    row = _grades(out)["knuth"]
    assert (
        row["total"] == "1.5"
        and row["status"] == "unreadable"
        and "read the PDF by hand" in row["adjustments"]
    )
    assert _results(out, "knuth")["score"] == pytest.approx(1.5)
