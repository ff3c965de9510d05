"""The exercise format: generation from the solutions, registry, checks and feedback."""

import re
from pathlib import Path

import nbformat
import numpy as np
import pytest

from attnlib.checks import Case, Exercise, Misconception, all_exercises, evaluate
from attnlib.checks.core import compare_outputs, to_arrays
from coursetools import assign

ROOT = Path(__file__).resolve().parents[2]
SOLUTIONS = sorted((ROOT / "solutions").glob("*.ipynb"))
EXERCISES = sorted((ROOT / "exercises").glob("*.ipynb"))
CHECK_CALL = re.compile(r'check\(\s*"(ex-\d{2}-\d+)"\s*,\s*([A-Za-z_]\w*)\s*\)')


def _ids():
    return [p.stem for p in SOLUTIONS]


# ----------------------------------------------------------------- notebooks in the repository


@pytest.mark.parametrize("solution", SOLUTIONS, ids=_ids())
def test_committed_exercise_matches_generator(solution):
    target = ROOT / "exercises" / solution.name
    assert target.exists(), f"{target.name} missing: run python -m coursetools.assign"
    assert target.read_text(encoding="utf-8") == assign.render(solution), (
        f"exercises/{solution.name} is stale: run python -m coursetools.assign"
    )


def test_every_exercise_notebook_has_a_solution():
    orphans = {p.name for p in EXERCISES} - {p.name for p in SOLUTIONS}
    assert not orphans, f"exercise notebooks without a solution source: {sorted(orphans)}"


def test_every_chapter_notebook_pair_shares_a_stem_with_the_book():
    for solution in SOLUTIONS:
        assert list((ROOT / "book").glob(f"{solution.stem}.*")), f"no book chapter for {solution.name}"


@pytest.mark.parametrize("solution", SOLUTIONS, ids=_ids())
def test_exercise_cells_are_registered_and_checked(solution):
    nb = nbformat.read(solution, as_version=4)
    registry = all_exercises()
    cells = nb.cells
    for i, cell in enumerate(cells):
        ex_id = cell.metadata.get("attnlib", {}).get("exercise")
        if cell.cell_type != "code" or not ex_id:
            continue
        assert ex_id in registry, f"{solution.name}: {ex_id} is not registered in attnlib/checks"
        assert ex_id.startswith(f"ex-{solution.stem[:2]}-"), f"{ex_id} in the wrong chapter"
        exercise = registry[ex_id]
        assert re.search(rf"^def {exercise.function}\(", cell.source, re.M), (
            f"{ex_id}: the answer cell must define {exercise.function}()"
        )
        following = cells[i + 1] if i + 1 < len(cells) else None
        assert following is not None and following.metadata.get("attnlib", {}).get("check") == ex_id
        match = CHECK_CALL.search(following.source)
        assert match and match.groups() == (ex_id, exercise.function), following.source
        text = "".join(o.get("text", "") for o in following.get("outputs", []))
        assert "All cases pass" in text, f"{solution.name}: the stored check of {ex_id} does not pass"


def test_every_registered_exercise_is_in_a_notebook():
    used = set()
    for solution in SOLUTIONS:
        used |= set(assign.exercise_ids(nbformat.read(solution, as_version=4)))
    unused = set(all_exercises()) - used
    assert not unused, f"registered but in no solution notebook: {sorted(unused)}"


@pytest.mark.parametrize("exercise", list(all_exercises().values()), ids=lambda e: e.id)
def test_reference_passes_every_case_and_misconceptions_are_recognised(exercise):
    result = evaluate(exercise.id, exercise.reference, include_hidden=True)
    assert result.fraction == 1.0, result.report()
    assert any(c.hidden for c in exercise.cases), f"{exercise.id} has no hidden case for grading"
    for mis in exercise.misconceptions:
        verdict = evaluate(exercise.id, mis.wrong, include_hidden=True, apply_forbidden=False)
        assert verdict.fraction < 1.0, f"{exercise.id}: misconception {mis.name!r} passes every case"
        assert any(c.misconception == mis.name for c in verdict.cases), (
            f"{exercise.id}: misconception {mis.name!r} is never recognised:\n{verdict.report()}"
        )


@pytest.mark.parametrize("exercise_nb", EXERCISES, ids=[p.stem for p in EXERCISES])
def test_exercise_notebooks_hold_no_answers_or_outputs(exercise_nb):
    nb = nbformat.read(exercise_nb, as_version=4)
    for cell in nb.cells:
        assert assign.BEGIN not in cell.source and assign.END not in cell.source
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None


# ----------------------------------------------------------------- the generator


def _nb(*cells):
    nb = nbformat.v4.new_notebook()
    nb.cells = list(cells)
    return nb


def _answer_cell(source, ex_id="ex-00-1", points=2):
    """An answer cell; its default exercise forbids no call, so the generator needs no text above it
    (tests/checks/test_forbidden_stated.py covers the line it writes for a forbidden list)."""
    return nbformat.v4.new_code_cell(source, metadata={"attnlib": {"exercise": ex_id, "points": points}})


def test_strip_keeps_indentation_and_signature():
    src = "def f(x):\n    y = 1\n    ### BEGIN SOLUTION\n    return x + y\n    ### END SOLUTION\n"
    out = assign.make_exercise(_nb(_answer_cell(src))).cells[0].source
    assert out.splitlines() == [
        "def f(x):",
        "    y = 1",
        "    # YOUR CODE HERE",
        '    raise NotImplementedError("ex-00-1: replace this line with your answer")',
    ]
    ns = {}
    exec(out, ns)
    with pytest.raises(NotImplementedError, match="ex-00-1"):
        ns["f"](1)


def test_generator_clears_outputs_and_does_not_touch_the_solution():
    cell = _answer_cell("def f():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION")
    cell.outputs = [nbformat.v4.new_output("stream", text="hello")]
    cell.execution_count = 3
    solution = _nb(cell)
    exercise = assign.make_exercise(solution)
    assert exercise.cells[0].outputs == [] and exercise.cells[0].execution_count is None
    assert "return 1" in solution.cells[0].source and solution.cells[0].execution_count == 3


@pytest.mark.parametrize(
    "cell, message",
    [
        (nbformat.v4.new_code_cell("### BEGIN SOLUTION\nx = 1\n### END SOLUTION"), "without metadata"),
        (_answer_cell("### BEGIN SOLUTION\nx = 1"), "never closed"),
        (_answer_cell("x = 1\n### END SOLUTION"), "without ### BEGIN"),
        (_answer_cell("### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION"), "nested"),
        (_answer_cell("x = 1"), "has no ### BEGIN SOLUTION"),
        (_answer_cell("### BEGIN SOLUTION\n### END SOLUTION", ex_id="ex-1-1"), "not of the form"),
        (_answer_cell("### BEGIN SOLUTION\n### END SOLUTION", points=0), "positive"),
    ],
)
def test_generator_rejects_malformed_solutions(cell, message):
    with pytest.raises(assign.AssignError, match=message):
        assign.make_exercise(_nb(cell))


def test_generator_rejects_duplicate_ids():
    src = "### BEGIN SOLUTION\nx = 1\n### END SOLUTION"
    with pytest.raises(assign.AssignError, match="used twice"):
        assign.make_exercise(_nb(_answer_cell(src), _answer_cell(src)))


@pytest.mark.parametrize("solution", SOLUTIONS, ids=_ids())
def test_generated_notebook_ends_with_the_check_all_cell(solution):
    """assign appends the "check all" cells (#26 item 8); the solution itself holds none."""
    from coursetools.assign import CHECK_ALL, CHECK_ALL_IDS

    nb = nbformat.read(solution, as_version=4)
    assert not any(cell.get("id") in CHECK_ALL_IDS for cell in nb.cells)
    assert not any(assign.exercise_meta(c).get("check") == CHECK_ALL for c in nb.cells)
    exercise = assign.make_exercise(nb, solution.name)
    intro, last = exercise.cells[-2:]
    assert intro.cell_type == "markdown" and intro.id == "check-all-intro"
    assert last.cell_type == "code" and last.id == "check-all"
    assert assign.exercise_meta(last) == {"check": "all"} and "check" in last.metadata.tags
    points = assign.exercise_ids(nb)
    namespace = {}
    exec(last.source.replace("from attnlib.checks import check_all", ""), {"check_all": _record(namespace)})
    assert namespace == {"points": points}, "the cell checks every exercise, with its points"
    assert all(len(line) <= 79 for line in last.source.splitlines())
    nbformat.validate(exercise)


def _record(into):
    def check_all(**kwargs):
        into.update(kwargs)

    return check_all


def test_generator_adds_no_check_all_cell_without_exercises_and_refuses_one_in_a_solution():
    plain = assign.make_exercise(_nb(nbformat.v4.new_code_cell("x = 1")))
    assert [c.source for c in plain.cells] == ["x = 1"]
    src = "def f():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION"
    generated = assign.make_exercise(_nb(_answer_cell(src)))
    assert generated.cells[-1].id == "check-all"
    kept = _nb(_answer_cell(src), *generated.cells[-2:])  # a solution that kept the generated cells
    with pytest.raises(assign.AssignError, match="check-all cells are generated"):
        assign.make_exercise(kept)


def test_check_mode_reports_stale_notebooks(tmp_path, capsys):
    out = tmp_path / "exercises"
    assert assign.main([str(SOLUTIONS[0]), "--out", str(out), "--check"]) == 1
    assert "stale" in capsys.readouterr().err
    assert assign.main([str(SOLUTIONS[0]), "--out", str(out)]) == 0
    assert assign.main([str(SOLUTIONS[0]), "--out", str(out), "--check"]) == 0


# ----------------------------------------------------------------- checks and feedback

_TOY = Exercise(
    id="ex-99-1",
    function="double",
    reference=lambda x: 2 * x,
    cases=[
        Case("vector", lambda: (np.arange(3.0),)),
        Case("matrix", lambda: (np.ones((2, 3)),), hidden=True),
    ],
    misconceptions=[Misconception("squared instead of doubled", lambda x: x**2, "multiply by two")],
    hint="return twice the input",
)


@pytest.fixture
def toy_exercise(monkeypatch):
    from attnlib.checks import exercise as registry

    registry._discover()
    monkeypatch.setitem(registry._REGISTRY, _TOY.id, _TOY)
    return _TOY


def test_check_prints_pass(toy_exercise, capsys):
    from attnlib.checks import check

    check("ex-99-1", lambda x: x + x)
    assert "1/1 cases passed" in capsys.readouterr().out


def test_not_attempted_does_not_raise(toy_exercise, capsys):
    from attnlib.checks import check

    def stub(x):
        raise NotImplementedError("ex-99-1: replace this line with your answer")

    check("ex-99-1", stub)
    assert "not attempted yet" in capsys.readouterr().out


def test_misconception_is_named_with_its_hint(toy_exercise):
    result = evaluate("ex-99-1", lambda x: x**2, include_hidden=True)
    assert [c.status for c in result.cases] == ["failed", "failed"]
    assert result.cases[0].misconception == "squared instead of doubled"
    assert "multiply by two" in result.report()


def test_exceptions_are_reported_not_raised(toy_exercise):
    result = evaluate("ex-99-1", lambda x: x.missing_method())
    assert result.cases[0].status == "error" and "AttributeError" in result.cases[0].message


def test_partial_credit_counts_cases(toy_exercise):
    result = evaluate("ex-99-1", lambda x: 2 * x if x.ndim == 1 else x, include_hidden=True)
    assert result.fraction == 0.5


def test_an_exercise_loads_only_its_own_chapters_checks():
    """A notebook's check (and the grader) never imports, or breaks on, another chapter's module."""
    import subprocess
    import sys

    code = (
        "import sys; from attnlib.checks import get_exercise; get_exercise('ex-00-1');"
        "print(sorted(m for m in sys.modules if m.startswith('attnlib.checks.ch')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['attnlib.checks.ch00_how_to_use']"


def test_unknown_exercise_names_the_known_ones():
    with pytest.raises(KeyError, match="known exercises: .*ex-00-1"):
        evaluate("ex-42-9", print)


@pytest.mark.parametrize(
    "expected, got, fragment",
    [
        (np.zeros((2, 3)), np.zeros((3, 2)), "transpose"),
        (np.zeros((2, 3)), np.zeros(6), "reshape"),
        (np.zeros((2, 3)), np.zeros(2), "axis is missing"),
        (np.zeros(3), np.array([0.0, np.nan, 0.0]), "NaN"),
        (np.zeros(3), np.array([0.0, 0.5, 0.0]), "the first at index (1,): expected 0, got 0.5"),
        (np.zeros(3), np.array([0.0, 0.5, 0.7]), "2 of 3 values differ; the first at index (1,)"),
        (np.zeros(3), np.array([0.0, 0.5, 0.7]), "largest difference 0.7 at index (2,)"),
        (
            np.zeros(2),
            np.array([True, False]),
            "floating-point numbers (dtype float64), got booleans",
        ),
        (np.array([True, False]), np.array([1.0, 0.0]), "expected booleans (dtype bool), got floating-point"),
        (np.array([True, False]), np.array([1, 0]), "expected booleans (dtype bool), got integers"),
        (np.zeros(2), np.zeros(2, dtype=complex), "got complex numbers"),
        (np.array([3, 4]), np.array([3.0, 4.0]), "expected integers"),
        ((np.zeros(1), np.zeros(1)), np.zeros(1), "expected a tuple of 2"),
        (np.array([True, False]), np.array([True, True]), "index (1,)"),
    ],
)
def test_comparison_messages_name_the_difference(expected, got, fragment):
    ok, message = compare_outputs(to_arrays(expected), to_arrays(got))
    assert not ok and fragment in message


def test_to_arrays_keeps_the_dtype():
    import torch

    out = to_arrays((torch.ones(2, dtype=torch.float16), [1, 2.0], torch.ones(1, dtype=torch.bfloat16), True))
    assert out[0].dtype == np.float16 and isinstance(out[1], tuple) and out[2].dtype == np.float32
    assert out[3].dtype == np.bool_


def test_integers_are_accepted_where_floats_are_expected():
    assert compare_outputs(np.array([0.0, 2.0]), np.array([0, 2]))[0]


def test_float32_answer_is_judged_at_float32_precision():
    """A correct float32 answer passes even a 1e-9 tolerance (ex-08-1 has one)."""
    exp = np.array([1 / 3, 2 / 3, 1000.1])
    assert compare_outputs(exp, exp.astype(np.float32), rtol=1e-9, atol=1e-12)[0]
    assert not compare_outputs(exp, exp.astype(np.float32) * 1.001, rtol=1e-9, atol=1e-12)[0]
    assert not compare_outputs(exp, exp + 1e-6, rtol=1e-9, atol=1e-12)[0]  # float64 stays strict


# Exercises whose text asks for the input's own dtype back (ex-09-4: "the same shape and dtype
# as x"; ex-09-2: "computed in x's precision", float64 values for a float64 x): there a float32
# answer to a float64 input breaks a stated rule and must fail, naming it.
KEEPS_INPUT_DTYPE = {"ex-09-2", "ex-09-4"}


def test_float32_answers_pass_every_exercise_with_large_inputs():
    """The reference computed in float32 by the checker itself passes: tolerances fit the dtype
    (except where the text asks to keep the input's dtype: there it fails and says so)."""
    from attnlib.checks.core import judge_case, run_case

    for exercise in all_exercises().values():
        for case in exercise.cases:

            def in_float32(*args, _ex=exercise):
                out = _ex.reference(*args)
                return _to32(out)

            verdict = judge_case(exercise, case, run_case(in_float32, case))
            if exercise.id in KEEPS_INPUT_DTYPE and _float64_output(exercise, case):
                assert not verdict.passed and "dtype is not kept" in verdict.message, (exercise.id, case.name)
            else:
                assert verdict.passed, f"{exercise.id} / {case.name}: {verdict.message}"


def _float64_output(exercise, case) -> bool:
    import torch

    out = exercise.reference(*case.make_inputs())
    return isinstance(out, torch.Tensor) and out.dtype == torch.float64


def _to32(out):
    import torch

    if isinstance(out, torch.Tensor) and out.is_floating_point():
        return out.float()
    if isinstance(out, np.ndarray) and out.dtype.kind == "f":
        return out.astype(np.float32)
    if isinstance(out, float):
        return np.float32(out)
    if isinstance(out, tuple | list):
        return type(out)(_to32(o) for o in out)
    return out


_TOY_FORBIDDEN = Exercise(
    id="ex-99-2",
    function="softmax_rows",
    reference=lambda x: np.exp(x) / np.exp(x).sum(-1, keepdims=True),
    cases=[
        Case("row", lambda: (np.arange(3.0)[None],)),
        Case("rows", lambda: (np.ones((2, 3)),), hidden=True),
    ],
    forbidden=("scipy.special.softmax", "torch.softmax"),
)


def _softmax_by_scipy(x):
    from scipy.special import softmax as sm

    return sm(x, axis=-1)


def test_forbidden_call_scores_zero_and_is_named(monkeypatch, capsys):
    from attnlib.checks import check
    from attnlib.checks import exercise as registry

    registry._discover()
    monkeypatch.setitem(registry._REGISTRY, _TOY_FORBIDDEN.id, _TOY_FORBIDDEN)
    result = evaluate("ex-99-2", _softmax_by_scipy, include_hidden=True)
    assert result.fraction == 0.0 and len(result.cases) == 2
    assert "not allowed" in result.report() and "scipy.special.softmax" in result.report()
    check("ex-99-2", _softmax_by_scipy)
    assert "scipy.special.softmax" in capsys.readouterr().out
    # the grader passes the answer cell's source
    source = "import torch\ndef softmax_rows(x):\n    return torch.softmax(torch.as_tensor(x), -1)\n"
    assert evaluate("ex-99-2", lambda x: x, source=source).fraction == 0.0
    assert evaluate("ex-99-2", lambda x: np.exp(x) / np.exp(x).sum(-1, keepdims=True)).fraction == 1.0


# ----------------------------------------------------------------- hints


def _hint_texts(exercise):
    return [*exercise.hint_tiers(), exercise.hint, *(m.hint for m in exercise.misconceptions)]


def _printed_forms(value):
    """How a reference output could appear in a hint: its non-trivial numbers and its rows."""
    forms = set()
    items = value if isinstance(value, tuple) else (value,)
    for item in items:
        if isinstance(item, tuple | dict):
            forms |= _printed_forms(tuple(item.values()) if isinstance(item, dict) else item)
            continue
        if not isinstance(item, np.ndarray):
            continue
        if item.dtype.kind in "fc":
            for x in np.real(item).ravel()[:200]:
                if np.isfinite(x) and abs(x - round(x)) > 1e-6:  # integers such as 0, 1, 2 are not a giveaway
                    forms |= {f"{x:.2f}", f"{x:.3f}", f"{x:.4f}"}
        elif item.ndim >= 1 and item.shape[-1] >= 3:
            for row in item.reshape(-1, item.shape[-1])[:50]:
                forms.add(str(row.tolist()))
    return forms


@pytest.mark.parametrize("exercise", list(all_exercises().values()), ids=lambda e: e.id)
def test_no_hint_prints_the_answer(exercise):
    texts = [t for t in _hint_texts(exercise) if t]
    assert texts, f"{exercise.id} has no hint"
    for text in texts:
        assert "tensor(" not in text and "array(" not in text, f"{exercise.id}: a hint prints a value: {text}"
    for case in exercise.cases:
        expected = to_arrays(exercise.reference(*case.make_inputs()))
        for form in _printed_forms(expected):
            for text in texts:
                found = re.search(rf"(?<![\d.]){re.escape(form)}(?!\d)", text)
                assert not found, f"{exercise.id}: a hint prints {form}, part of the answer to {case.name!r}"


@pytest.mark.parametrize("exercise", list(all_exercises().values()), ids=lambda e: e.id)
def test_hints_are_tiered(exercise):
    """The first hint names the idea; later ones come closer; only the last may show the formula."""
    tiers = exercise.hint_tiers()
    assert len(tiers) >= 2, f"{exercise.id}: {len(tiers)} hint tier(s), at least 2 needed"
    formula = re.compile(r"[=@]|\w\(")  # an assignment, a matrix product or a call such as exp(x - m)
    assert not formula.search(tiers[0]), f"{exercise.id}: the first hint shows a formula: {tiers[0]}"
    assert len(set(tiers)) == len(tiers), f"{exercise.id}: repeated hint tiers"


def test_check_shows_one_more_hint_tier_per_failed_check(toy_exercise, capsys, monkeypatch):
    from attnlib.checks import check
    from attnlib.checks import exercise as registry

    tiered = Exercise(
        id="ex-99-3",
        function="double",
        reference=lambda x: 2 * x,
        cases=[Case("vector", lambda: (np.arange(3.0),))],
        hints=("twice the input.", "add the input to itself.", "return x + x"),
    )
    from attnlib.checks import notebook

    monkeypatch.setitem(registry._REGISTRY, tiered.id, tiered)
    monkeypatch.setattr(notebook, "_FAILED_CHECKS", {})
    monkeypatch.setattr(notebook, "_LAST_FAILURE", {})
    # the learner's function, named as the exercise asks, changed before every check
    # (a tier advances only when the answer changed: tests/checks/test_check_fairness.py)
    answers = [lambda x: x, lambda x: x + 1, lambda x: x + 2, lambda x: x + 3]
    for answer in answers:
        answer.__name__ = "double"
    check("ex-99-3", answers[0])
    first = capsys.readouterr().out
    assert "hint 1/3: twice" in first and "hint 2/3" not in first and "next hint" in first
    check("ex-99-3", answers[1])
    second = capsys.readouterr().out
    assert "hint 2/3: add" in second and "hint 3/3" not in second
    check("ex-99-3", answers[2])
    check("ex-99-3", answers[3])
    assert "hint 3/3: return x + x" in capsys.readouterr().out
    # the grader's feedback (evaluate) shows the first tier only
    report = evaluate("ex-99-3", lambda x: x).report()
    assert "hint 1/3" in report and "hint 2/3" not in report


@pytest.mark.parametrize("exercise", list(all_exercises().values()), ids=lambda e: e.id)
def test_every_misconception_shows_in_a_hidden_case(exercise):
    """The grader runs the hidden cases too: each known mistake fails at least one of them, and at
    least two cases in all, so that no verdict rests on a single case."""
    for mis in exercise.misconceptions:
        failing = []
        for case in exercise.cases:
            expected = to_arrays(exercise.reference(*case.make_inputs()))
            try:
                with np.errstate(all="ignore"):
                    wrong = to_arrays(mis.wrong(*case.make_inputs()))
            except Exception:  # noqa: BLE001 - an error shows the mistake too
                failing.append(case)
                continue
            if not compare_outputs(expected, wrong, exercise.rtol, exercise.atol)[0]:
                failing.append(case)
        assert any(c.hidden for c in failing), f"{exercise.id}: no hidden case shows {mis.name!r}"
        assert len(failing) >= 2, f"{exercise.id}: only {len(failing)} case shows {mis.name!r}"


@pytest.mark.parametrize("solution", SOLUTIONS, ids=_ids())
def test_solution_cells_were_run_in_order(solution):
    """nbval fails a reference cell that has outputs but no execution count ("Unrun reference cell
    has outputs"): a cell added by hand must be run with the rest (``python tools/execute.py``)."""
    nb = nbformat.read(solution, as_version=4)
    counts = [c.execution_count for c in nb.cells if c.cell_type == "code"]
    unrun = [i for i, c in enumerate(counts) if c is None]
    assert not unrun, (
        f"{solution.name}: code cells {unrun} were not run: python tools/execute.py {solution.name}"
    )
    assert counts == list(range(1, len(counts) + 1)), f"{solution.name}: execution counts {counts}"
