"""The "check all" cell: ``attnlib.checks.check_all`` and the cell that assign appends (#26 item 8)."""

from pathlib import Path

import nbformat
import numpy as np
import pytest

from attnlib.checks import check, check_all, get_exercise, notebook
from attnlib.checks.summary import FAILS, NOT_ATTEMPTED, NOT_DEFINED, PASSES, summarize
from coursetools import assign

ROOT = Path(__file__).resolve().parents[2]
POINTS = {"ex-04-1": 2, "ex-04-2": 2, "ex-04-3": 1, "ex-04-4": 2}


def stable_softmax(x):  # right
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def log_sum_exp(x):  # wrong: forgets the log
    m = x.max(axis=-1)
    return m + np.exp(x - m[..., None]).sum(axis=-1)


def scaled_scores(q, k):  # the stub, as assign hands it out
    # YOUR CODE HERE
    raise NotImplementedError("ex-04-3: replace this line with your answer")


# attention_weights (ex-04-4) is not defined at all


def _namespace():
    return {
        "np": np,
        "stable_softmax": stable_softmax,
        "log_sum_exp": log_sum_exp,
        "scaled_scores": scaled_scores,
    }


def test_summary_sorts_a_right_a_wrong_a_stub_and_a_missing_function():
    summary = summarize(_namespace(), points=POINTS)
    rows = {r.exercise: r for r in summary.rows}
    assert [r.exercise for r in summary.rows] == list(POINTS)
    assert rows["ex-04-1"].status == PASSES and rows["ex-04-1"].passed == rows["ex-04-1"].cases > 0
    assert rows["ex-04-2"].status == FAILS and rows["ex-04-2"].passed < rows["ex-04-2"].cases
    assert rows["ex-04-3"].status == NOT_ATTEMPTED
    assert rows["ex-04-4"].status == NOT_DEFINED
    assert [r.function for r in summary.rows] == [get_exercise(i).function for i in POINTS]
    assert [r.points for r in summary.rows] == [2, 2, 1, 2]
    # the visible cases only: the grader's hidden ones are not counted here
    visible = len(get_exercise("ex-04-1").visible_cases())
    assert rows["ex-04-1"].cases == visible < len(get_exercise("ex-04-1").cases)


def test_the_printed_table_names_every_status_points_and_the_hidden_cases(capsys):
    check_all(_namespace(), points=POINTS)
    out = capsys.readouterr().out
    lines = out.splitlines()
    by_id = {line.split()[0]: line for line in lines if line.startswith("ex-04-") and "  " in line}
    assert by_id["ex-04-1"].split()[1:4] == ["stable_softmax", "2", "passes"]
    assert by_id["ex-04-2"].split()[1:4] == ["log_sum_exp", "2", "fails"]
    assert "not attempted" in by_id["ex-04-3"] and "scaled_scores" in by_id["ex-04-3"]
    assert "not defined" in by_id["ex-04-4"] and "attention_weights" in by_id["ex-04-4"]
    assert "1 of 4 exercises pass" in out and "worth 2 of 7 points" in out
    assert "hidden cases" in out
    assert 'check("ex-04-2", log_sum_exp)' in out, "a failing exercise points to its own check"
    assert "NotImplementedError" in out and "run its cell" in out
    assert max(len(line) for line in lines) <= 79, "the table fits the notebook's column"


def test_check_all_reads_the_callers_globals_when_no_namespace_is_given(capsys):
    check_all(points={"ex-04-1": 2})  # this module defines a right stable_softmax
    assert "passes" in capsys.readouterr().out


def test_check_all_uses_up_no_hint_tier(monkeypatch, capsys):
    monkeypatch.setattr(notebook, "_FAILED_CHECKS", {})
    monkeypatch.setattr(notebook, "_LAST_FAILURE", {}, raising=False)  # the answer that earned a tier
    for _ in range(3):
        check_all(_namespace(), points=POINTS)
    assert notebook._FAILED_CHECKS == {} and notebook._LAST_FAILURE == {}
    out = capsys.readouterr().out
    assert "hint 1/" not in out, "the table shows no hints"
    check("ex-04-2", log_sum_exp)  # the learner's first check after the table: the first tier
    first = capsys.readouterr().out
    hints = get_exercise("ex-04-2").hint_tiers()
    assert len(hints) > 1 and f"hint 1/{len(hints)}" in first and f"hint 2/{len(hints)}" not in first


def test_a_chapter_lists_its_registered_exercises_without_points(capsys):
    summary = summarize(_namespace(), chapter="04")
    assert [r.exercise for r in summary.rows] == list(POINTS)
    assert all(r.points is None for r in summary.rows)
    assert "points" not in summary.table().splitlines()[0]


def test_an_answer_that_breaks_never_crashes_the_table():
    def log_sum_exp(x):
        raise ZeroDivisionError("oops")

    def stable_softmax(x):
        raise NotImplementedError  # a bare raise, as a learner may write it

    summary = summarize(
        {"log_sum_exp": log_sum_exp, "stable_softmax": stable_softmax, "scaled_scores": 3}, "04"
    )
    rows = {r.exercise: r for r in summary.rows}
    assert rows["ex-04-2"].status == FAILS and rows["ex-04-2"].passed == 0
    assert rows["ex-04-1"].status == NOT_ATTEMPTED
    assert rows["ex-04-3"].status == NOT_DEFINED and "not a function" in rows["ex-04-3"].note


def test_a_forbidden_call_fails_with_the_reason():
    def stable_softmax(x):
        import scipy.special

        return scipy.special.softmax(x, axis=-1)

    forbidden = get_exercise("ex-04-1").forbidden
    assert forbidden, "ex-04-1 forbids existing softmax implementations"
    row = summarize({"stable_softmax": stable_softmax}, points={"ex-04-1": 2}).rows[0]
    assert row.status == FAILS and row.passed == 0 and "not allowed" in row.note


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"namespace": [1]}, TypeError, "namespace"),
        ({"namespace": {}}, TypeError, "chapter"),
        ({"namespace": {}, "chapter": "4"}, ValueError, "chapter"),
        ({"namespace": {}, "chapter": "99"}, ValueError, "chapter"),
        ({"namespace": {}, "points": ["ex-04-1"]}, TypeError, "points"),
        ({"namespace": {}, "points": {"ex-4-1": 2}}, ValueError, "points"),
        ({"namespace": {}, "points": {"ex-04-1": -1}}, ValueError, "points"),
        ({"namespace": {}, "chapter": "05", "points": {"ex-04-1": 1}}, ValueError, "points"),
    ],
)
def test_bad_arguments_are_named(kwargs, error, match):
    with pytest.raises(error, match=match):
        summarize(**kwargs)


# ----------------------------------------------------------------- the generated cell


def test_the_generated_cell_runs_in_an_unfinished_exercise_notebook(capsys):
    """The check-all cell of exercises/04, run after the notebook's stubs: a table, no crash."""
    solution = nbformat.read(ROOT / "solutions" / "04-scaling-softmax.ipynb", as_version=4)
    nb = assign.make_exercise(solution, "04-scaling-softmax.ipynb")
    namespace = {"__name__": "__main__"}
    for cell in nb.cells:
        meta = cell.metadata.get("attnlib", {})
        if cell.cell_type == "code" and "exercise" in meta:
            exec(cell.source, namespace)  # the stubs
    namespace.pop("attention_weights")  # one cell not run yet
    exec(nb.cells[-1].source, namespace)
    out = capsys.readouterr().out
    assert out.count("not attempted") == 3 and "not defined" in out and "0 of 4 exercises pass" in out


def test_the_grader_does_not_run_the_check_all_cell(tmp_path):
    """The grader's plan leaves out the check-all cell, like every check cell (its metadata)."""
    from coursetools.grade.grading.submission import Assignment, build_plan, is_check_cell

    solution = nbformat.read(ROOT / "solutions" / "04-scaling-softmax.ipynb", as_version=4)
    nb = assign.make_exercise(solution, "04-scaling-softmax.ipynb")
    path = tmp_path / "04-scaling-softmax.ipynb"
    nbformat.write(nb, path)
    functions = {ex_id: get_exercise(ex_id).function for ex_id in POINTS}
    forbidden = {ex_id: tuple(get_exercise(ex_id).forbidden) for ex_id in POINTS}
    plan, notes, review = build_plan(nb, Assignment(path, dict(POINTS), functions, forbidden))
    last = len(nb.cells) - 1
    assert is_check_cell(nb.cells[last])
    assert last not in [index for index, _ in plan["cells"]]
    assert not any("check_all" in source for _, source in plan["cells"])
    assert not review, review


# ----------------------------------------------------------------- written answers (#33 item 12)

SOLUTIONS = sorted((ROOT / "solutions").glob("*.ipynb"))


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.stem)
def test_the_written_questions_registered_are_the_notebooks(path):
    """check_all lists the written questions registered with the checks: the same ids and points
    as the notebook's answer cells (metadata attnlib.manual)."""
    from attnlib.checks.exercise import written_questions

    nb = nbformat.read(path, as_version=4)
    assert written_questions(path.stem[:2]) == assign.written_questions(nb)


def _masks_exercise_notebook(tmp_path, answer=None):
    solution = nbformat.read(ROOT / "solutions" / "05-masks.ipynb", as_version=4)
    nb = assign.make_exercise(solution, "05-masks.ipynb")
    if answer is not None:
        for cell in nb.cells:
            if (cell.metadata.get("attnlib") or {}).get("manual") == "q-05-1":
                cell.source = answer
    path = tmp_path / "05-masks.ipynb"
    nbformat.write(nb, path)
    return nb, path


def test_the_written_answer_counts_in_the_total(tmp_path, capsys):
    """05-masks is worth 8 points: 7 from its exercises, 1 from its written question."""
    nb, _ = _masks_exercise_notebook(tmp_path)
    namespace = {"__name__": "__main__"}
    exec(nb.cells[-1].source, namespace)  # the generated cell, before any exercise cell ran
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("q-05-1"))
    assert row.split()[-4:] == ["1", "graded", "by", "hand"], row
    assert "worth 0 of 7 points" in out and "1 more point, 8 in all" in out
    assert "0 of 3 exercises pass" in out, "a written question is not counted as an exercise"
    summary = summarize(namespace, points={"ex-05-1": 2, "ex-05-2": 2, "ex-05-3": 3})
    assert sum(r.points for r in summary.rows) == 8


def test_a_written_answer_is_read_from_the_saved_notebook(tmp_path):
    points = {"ex-05-1": 2}
    _, path = _masks_exercise_notebook(tmp_path)
    row = summarize({"__session__": str(path)}, points=points).rows[-1]
    assert (row.exercise, row.answered) == ("q-05-1", False) and "YOUR ANSWER HERE" in row.note
    _, path = _masks_exercise_notebook(tmp_path, answer="Padding must not receive weight because ...")
    row = summarize({"__vsc_ipynb_file__": str(path)}, points=points).rows[-1]
    assert row.answered is True and not row.note
    row = summarize({}, points=points).rows[-1]  # Colab: no path known
    assert row.answered is None and "make sure its cell holds your answer" in row.note
    row = summarize({"__session__": str(tmp_path / "missing.ipynb")}, points=points).rows[-1]
    assert row.answered is None


def test_written_questions_can_be_given_and_are_checked():
    summary = summarize({}, points={"ex-04-1": 2}, written={"q-04-1": 3})
    assert [(r.exercise, r.points, r.status) for r in summary.rows][-1] == ("q-04-1", 3.0, "graded by hand")
    assert "5 in all" in summary.table()
    with pytest.raises(ValueError, match="written"):
        summarize({}, points={"ex-04-1": 2}, written={"ex-04-2": 1})
    assert not [r for r in summarize({}, chapter="04").rows if r.status == "graded by hand"]
