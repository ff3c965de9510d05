"""Written answers graded by hand (issue 27, item 3): handed out without the model answer,
collected into one review page and score sheet per question (anonymised on request),
scored by the instructor and merged into every output through the one source of truth."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest
from fixtures import MODEL, QUESTION, _class, _fill, _grades, _sheet, _solution

from coursetools import assign
from coursetools.grade.outputs import manual
from coursetools.grade.outputs.publish import publish

ROOT = Path(__file__).resolve().parents[3]


def test_the_exercise_notebook_hands_out_the_question_without_its_answer():
    exercise = assign.make_exercise(_solution(), "00-test.ipynb")
    cell = exercise.cells[1]
    assert cell.source == "Your answer:\n\nYOUR ANSWER HERE" and MODEL not in nbformat.writes(exercise)
    assert cell.metadata["attnlib"] == {"manual": QUESTION, "points": 2}
    assert assign.written_questions(exercise) == {QUESTION: 2} == manual.questions(exercise)


@pytest.mark.parametrize(
    "metadata,source,error",
    [
        ({}, f"### BEGIN SOLUTION\n{MODEL}\n### END SOLUTION", "without metadata attnlib.manual"),
        (
            {"attnlib": {"manual": "question-1", "points": 1}},
            "### BEGIN SOLUTION\nx\n### END SOLUTION",
            "q-NN-k",
        ),
        (
            {"attnlib": {"manual": QUESTION, "points": 0}},
            "### BEGIN SOLUTION\nx\n### END SOLUTION",
            "positive",
        ),
        ({"attnlib": {"manual": QUESTION, "points": 1}}, "no region", "no ### BEGIN SOLUTION region"),
        ({"attnlib": {"manual": QUESTION, "points": 1}}, "### BEGIN SOLUTION\nx", "never closed"),
    ],
)
def test_a_malformed_written_question_is_refused(metadata, source, error):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(source, metadata=metadata)]
    with pytest.raises(assign.AssignError, match=error):
        assign.make_exercise(nb, "00-test.ipynb")


def test_nbgraders_manually_graded_answer_cells_are_read_too():
    cell = nbformat.v4.new_markdown_cell(
        "YOUR ANSWER HERE",
        metadata={"nbgrader": {"grade": True, "solution": True, "grade_id": "q-a", "points": 3}},
    )
    assert manual.question_of(cell) == ("q-a", 3.0)


@pytest.mark.slow
def test_answers_are_collected_scored_by_hand_and_merged_everywhere(tmp_path):
    out = _class(
        tmp_path, {"ada": "Yes: 64 numbers are plenty.", "grace": "<script>alert(1)</script>", "alan": ""}
    )
    manual.collect(out)
    page = (out / "manual" / f"{QUESTION}.md").read_text(encoding="utf-8")
    assert "## ada" in page and "64 numbers are plenty" in page
    assert "```text\n<script>alert(1)</script>\n```" in page  # learner text in a fenced block
    assert "*(no answer)*" in page and "YOUR ANSWER HERE" not in page  # alan left the stub
    assert [r["student"] for r in _sheet(out)] == ["ada", "alan", "grace"]
    # before scoring: the written question is not graded yet, so no total is final
    publish(out)
    assert _grades(out)["ada"]["total"] == "" and _grades(out)["ada"][QUESTION] == ""
    _fill(
        out,
        {
            "ada": ("1.5", "right idea; say why training fails"),
            "grace": ("0", "no answer"),
            "alan": ("0", ""),
        },
    )
    publish(out)
    rows = _grades(out)
    assert rows["ada"][QUESTION] == "1.5" and rows["ada"]["total"] == "2.5" and rows["ada"]["max"] == "3"
    assert "q-00-1:" in rows["ada"]["adjustments"] and "say why training fails" in rows["ada"]["adjustments"]
    feedback = (out / "feedback" / "ada.md").read_text(encoding="utf-8")
    assert "## Written answers, graded by hand" in feedback and "q-00-1: 1.5 / 2: right idea" in feedback
    assert "Score: **2.5** out of 3." in feedback
    results = json.loads((out / "ada" / "results.json").read_text())
    assert results["score"] == pytest.approx(2.5)
    written = [t for t in results["tests"] if "written answer" in t["name"]]
    assert (
        written and written[0]["score"] == pytest.approx(1.5) and written[0]["max_score"] == pytest.approx(2)
    )
    assert "class mean 1.5 of 3 (over 3 submissions with a total)" in (out / "report.html").read_text()
    # collecting again keeps the scores entered
    manual.collect(out)
    assert {r["student"]: r["points"] for r in _sheet(out)} == {"ada": "1.5", "alan": "0", "grace": "0"}


@pytest.mark.slow
def test_anonymised_sheets_hide_who_wrote_each_answer(tmp_path):
    out = _class(tmp_path, {"ada": "first answer", "grace": "second answer"})
    manual.collect(out, anonymise=True)
    page = (out / "manual" / f"{QUESTION}.md").read_text(encoding="utf-8")
    rows = _sheet(out)
    assert "ada" not in page and "grace" not in page and "ada" not in str(rows)
    assert sorted(r["answer"] for r in rows) == ["answer-001", "answer-002"]
    label = next(line[3:] for line in page.splitlines() if line.startswith("## ") and "first answer" in page)
    _fill(out, {r["answer"]: ("2", "well argued") for r in rows}, column="answer")
    publish(out)
    assert {k: r[QUESTION] for k, r in _grades(out).items()} == {"ada": "2", "grace": "2"}
    assert label.startswith("answer-")


@pytest.mark.slow
def test_a_score_out_of_range_or_an_unknown_learner_is_reported(tmp_path):
    out = _class(tmp_path, {"ada": "x"})
    manual.collect(out)
    (out / "manual" / f"{QUESTION}.csv").write_text(
        "student,points,comment\nada,3,too many\nnobody,1,x\nada,two,x\n", encoding="utf-8"
    )
    problems = publish(out).problems
    text = "\n".join(problems)
    assert (
        "3 points is outside 0 .. 2" in text
        and "'two' is not a number" in text
        and "no student 'nobody'" in text
    )
    assert _grades(out)["ada"][QUESTION] == ""


def test_a_written_question_is_added_to_a_solution_notebook_keeping_its_cells(tmp_path):
    path = tmp_path / "01-test.ipynb"
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("intro"), nbformat.v4.new_code_cell("x = 1")]
    nbformat.write(nb, path)
    ids = [c.id for c in nbformat.read(path, as_version=4).cells]
    assert assign.add_written_question(path, "q-01-1", 1, "Is 64 enough for 53 bits?", MODEL, after=ids[0])
    assert not assign.add_written_question(path, "q-01-1", 1, "again", MODEL)  # once only
    cells = nbformat.read(path, as_version=4).cells
    assert [c.id for c in cells][::3] == ids and len(cells) == 4
    assert cells[2].metadata["attnlib"] == {"manual": "q-01-1", "points": 1} and MODEL in cells[2].source
    exercise = assign.make_exercise(nbformat.read(path, as_version=4), "01-test.ipynb")
    assert exercise.cells[2].source == "YOUR ANSWER HERE" and manual.questions(exercise) == {"q-01-1": 1}
    with pytest.raises(assign.AssignError, match="q-NN-k"):
        assign.add_written_question(path, "question", 1, "p", "a")


@pytest.mark.slow
def test_the_written_answer_loop_says_what_to_run_next_and_what_it_merged(tmp_path, capsys):
    """Issue 43.6: no "the scores are final" while a written answer waits, the next commands
    named; ``overrides`` confirms the written scores it merged; report.html shows the question."""
    from coursetools.grade import commands
    from coursetools.grade.outputs import progress
    from coursetools.grade.outputs.scores import compute

    out = _class(tmp_path, {"ada": "Yes: 64 numbers are plenty.", "grace": "No.", "alan": "Maybe."})
    text = progress.summary(compute(out), "none", 1.0, out=out)
    assert "the scores are final" not in text
    assert "written answers not scored yet: q-00-1 (3 of 3)" in text
    assert f"python -m coursetools.grade manual {out}" in text
    assert f"python -m coursetools.grade overrides {out}" in text
    page = (out / "report.html").read_text(encoding="utf-8")
    assert '<th scope="row">q-00-1</th><td>written answer, graded by hand</td><td class=num>2</td>' in page
    assert "q-00-1 (3 of 3 not scored yet)" in page and "coursetools.grade manual OUT" in page
    by_name = {c.name: c for c in commands.COMMANDS}
    assert by_name["manual"].main([str(out)]) == 0
    assert f"next: fill points and comment in {out}/manual/<question>.csv" in capsys.readouterr().out
    _fill(out, {"ada": ("1.5", "right idea"), "grace": ("0", "no reason given"), "alan": ("1", "")})
    assert by_name["overrides"].main([str(out)]) == 0
    said = capsys.readouterr().out
    assert "0 overrides applied; 3 written scores merged (q-00-1 3 of 3); 0 problem(s) below" in said
    assert "merged: ada q-00-1: not judged -> 1.5 (right idea) (written answer, graded by hand)" in said
    assert "not scored yet" not in said
    text = progress.summary(compute(out), "none", 1.0, out=out)
    assert "ran to the end; the scores are final" in text and "not scored yet" not in text
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "not scored yet" not in page
    assert '<th scope="row">q-00-1</th><td>written answer, graded by hand</td><td class=num>2</td>' in page
