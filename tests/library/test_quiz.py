"""The self-checks in the exercise notebooks: attnlib.checks.quiz and the cells coursetools.assign adds.

Both ways: every option and every explained mistake of every chapter's quiz gets its own verdict
and explanation; the instructor's count reads the generated answer cell without running it and
sends anything it cannot read with certainty to review.
"""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from attnlib.checks import quiz as q
from coursetools import assign

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted(p.stem[2:] for p in (ROOT / "attnlib" / "quizzes").glob("ch[0-9][0-9].yml"))
SOLUTIONS = {p.stem[:2]: p for p in (ROOT / "solutions").glob("[0-9][0-9]-*.ipynb")}


def _printed(text: str) -> str:
    """A question's text as check_quiz prints it: one line, no markdown emphasis marks."""
    return " ".join(str(text).replace("**", "").replace("*", "").split())


def _right(question) -> object:
    if question["kind"] == "choice":
        return "abcdefgh"[[o.get("correct", False) for o in question["options"]].index(True)]
    return question["answer"]


def test_every_chapter_01_to_13_has_a_quiz():
    assert CHAPTERS == [f"{n:02d}" for n in range(1, 14)]


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_answer_gets_its_verdict_and_explanation(chapter):
    quiz = q.load_quiz(chapter)
    for question in quiz["questions"]:
        qid = str(question["id"])
        if question["kind"] == "choice":
            for letter, option in zip("abcdefgh", question["options"], strict=False):
                result = q.grade_quiz(chapter, {qid: letter.upper()}).questions[int(qid) - 1]
                assert result.status == ("right" if option.get("correct") else "wrong")
                assert result.explanation == _printed(option["why"])
        else:
            for mistake in question["mistakes"]:
                result = q.grade_quiz(chapter, {qid: mistake["value"]}).questions[int(qid) - 1]
                assert result.status == "wrong" and result.explanation == _printed(mistake["why"])
            result = q.grade_quiz(chapter, {qid: question["answer"]}).questions[int(qid) - 1]
            assert result.status == "right"
            assert q.grade_quiz(chapter, {qid: "twelve"}).questions[int(qid) - 1].status == "invalid"
            assert q.grade_quiz(chapter, {qid: [12]}).questions[int(qid) - 1].status == "invalid"
    everything = {str(x["id"]): _right(x) for x in quiz["questions"]}
    result = q.grade_quiz(chapter, everything)
    assert result.correct == result.total == len(quiz["questions"])


@pytest.mark.parametrize(
    "text, readings",
    [
        ("1,050,624", [1050624.0]),
        ("1 050 624", [1050624.0]),
        ("1\u202f050\u202f624", [1050624.0]),  # a narrow no-break space, as some keyboards group
        ("1_050_624", [1050624.0]),
        (1_050_624, [1050624.0]),
        ("1.050.624", [1050624.0]),
        ("1,050.5", [1050.5]),
        ("0,25", [0.25]),
        ("\u22122", [-2.0]),
        (" 64 ", [64.0]),
        ("1e-3", [0.001]),
        ("2,828", [2828.0, 2.828]),  # a lone comma before three digits: both readings
        ("2.828", [2.828]),
        ("1,05,0", []),
        ("1__0", []),
        ("twelve", []),
        ("", []),
        (True, []),
        (float("nan"), []),
    ],
)
def test_a_number_may_be_written_with_its_digits_grouped(text, readings):
    assert q.number_readings(text) == readings


def test_grouped_digits_are_graded_as_their_number():
    for text in ("1,050,624", "1 050 624", "1_050_624"):
        result = q.grade_quiz("06", {"2": text}).questions[1]
        assert result.status == "right", (text, result)
    assert q.grade_quiz("06", {"2": "1,048,576"}).questions[1].status == "wrong"
    assert "forgets the four biases" in q.grade_quiz("06", {"2": "1 048 576"}).questions[1].explanation
    assert q.grade_quiz("04", {"2": "2,828"}).questions[1].status == "right"  # 2.828 with a decimal comma
    assert q.grade_quiz("10", {"2": "16,576"}).questions[1].status == "right"  # 16576 grouped


def test_printed_explanations_show_no_markdown_asterisks(capsys):
    q.check_quiz("10", {"1": "b", "4": "b"})
    out = capsys.readouterr().out
    assert "That is the post-norm block" in out and "what reading on by content gives" in out
    assert "*" not in out


def test_bad_answers_are_named():
    with pytest.raises(ValueError, match="no question 9"):
        q.grade_quiz("04", {"9": "a"})
    with pytest.raises(TypeError, match="must be a dict"):
        q.grade_quiz("04", ["a"])
    with pytest.raises(ValueError, match="two-digit"):
        q.load_quiz("4x")
    assert q.grade_quiz("04", {"4": "z"}).questions[3].status == "invalid"
    assert q.grade_quiz("04", {"1": True}).questions[0].status == "invalid"


def test_check_quiz_prints_each_verdict(capsys):
    result = q.check_quiz("04", {"1": 8, "4": "a"})
    out = capsys.readouterr().out
    assert "Question 1: not this one. 8 is the standard deviation" in out
    assert "Question 4: right." in out and "Question 2: not answered." in out
    assert "1 of 4 right (2 answered)." in out and result.correct == 1


def _exercise(chapter: str) -> nbformat.NotebookNode:
    path = SOLUTIONS[chapter]
    return assign.make_exercise(nbformat.read(path, as_version=4), path.name)


def _answer_cell(nb):
    cells = [c for c in nb.cells if (c.metadata.get("attnlib") or {}).get("check") == "quiz"]
    assert len(cells) == 1
    return cells[0]


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_the_generated_cells_ask_every_question_and_run(chapter, capsys):
    nb = _exercise(chapter)
    quiz = q.load_quiz(chapter)
    ids = [c.get("id") for c in nb.cells]
    assert ids[-4:-2] == list(assign.QUIZ_IDS) or ids[-2:] == list(assign.QUIZ_IDS)
    intro = nb.cells[ids.index("quiz-intro")]
    for question in quiz["questions"]:
        assert f"**Question {question['id']}.**" in intro.source
    cell = _answer_cell(nb)
    assert "check" in cell.metadata["tags"]
    exec(cell.source, {"__name__": "__main__"})
    assert f"0 of {len(quiz['questions'])} right (0 answered)." in capsys.readouterr().out


def test_the_grader_does_not_run_the_quiz_cell():
    from coursetools.grade.grading.submission import is_check_cell

    assert is_check_cell(_answer_cell(_exercise("04")))


def _submitted(tmp_path, chapter, source_change=None, answers=None):
    nb = _exercise(chapter)
    cell = _answer_cell(nb)
    if answers is not None:
        for qid, value in answers.items():
            cell.source = cell.source.replace(f'"{qid}": None', f'"{qid}": {json.dumps(value)}')
    if source_change:
        cell.source = source_change(cell.source)
    path = tmp_path / f"{chapter}.ipynb"
    nbformat.write(nb, path)
    return path


def test_the_instructor_counts_the_answers_without_running_them(tmp_path):
    quiz = q.load_quiz("05")
    right = {str(x["id"]): _right(x) for x in quiz["questions"]}
    right["2"] = 6  # one explained mistake
    path = _submitted(tmp_path, "05", answers=right)
    chapter, answers, review = q.answers_from_notebook(path)
    assert (chapter, review) == ("05", "") and answers["2"] == 6
    [row] = q.count_notebooks([path])
    assert row == {
        "notebook": str(path),
        "chapter": "05",
        "correct": 3,
        "total": 4,
        "answered": 4,
        "review": "",
    }


@pytest.mark.parametrize(
    "change, reason",
    [
        (
            lambda s: s.replace('"1": None', '"1": __import__("os").getcwd()'),
            "other than letters and numbers",
        ),
        (lambda s: s + '\nquiz_answers["1"] = "a"', "exactly one assignment"),
        (
            lambda s: s.replace("quiz_answers = {", "quiz_answers = dict({").replace("\n}\n", "\n})\n"),
            "not a plain dict",
        ),
        (lambda s: s.replace('"2": None', '"1": None'), "once, as a string"),
        (lambda s: s + "\n(", "does not parse"),
        (lambda s: s.replace('"1": None', "1: None"), "once, as a string"),
    ],
)
def test_what_cannot_be_read_with_certainty_goes_to_review(tmp_path, change, reason):
    path = _submitted(tmp_path, "05", source_change=change)
    [row] = q.count_notebooks([path])
    assert row["correct"] == 0 and reason in row["review"], row


def test_a_notebook_without_its_quiz_cell_goes_to_review(tmp_path):
    nb = _exercise("05")
    nb.cells = [c for c in nb.cells if (c.metadata.get("attnlib") or {}).get("check") != "quiz"]
    path = tmp_path / "05.ipynb"
    nbformat.write(nb, path)
    [row] = q.count_notebooks([path])
    assert "found 0" in row["review"] and row["correct"] == 0


def test_a_solution_may_not_keep_the_generated_cells():
    nb = nbformat.read(SOLUTIONS["04"], as_version=4)
    nb.cells += assign.quiz_cells("04-scaling-softmax")
    with pytest.raises(assign.AssignError, match="self-check cells are generated"):
        assign.make_exercise(nb, "04-scaling-softmax.ipynb")
