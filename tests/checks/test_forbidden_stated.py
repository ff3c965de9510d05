"""Every exercise whose check forbids calls says so in its exercise notebook.

An answer that uses one of an exercise's forbidden calls (``Exercise.forbidden``)
scores 0 for that exercise, in the learner's ``check()`` and in the class grader
(``attnlib/checks/judge.py``, ``coursetools/grade/grading/verdict.py``), and a learner
must be able to know what costs marks. ``coursetools/assign.py`` writes one line
into the text above each such exercise's answer cell. This test reads the
committed exercise notebooks back with its own parsing, not assign's code:

* the exercise's text holds the line once, and an exercise without a list none;
* every family the line names ("softmax", "log-sum-exp", "attention") is in
  the check's list, and every family of the list is named;
* every call the line shows in backticks is one the check flags
  (:func:`attnlib.checks.rules.find_forbidden`): it never names an allowed call;
* every other entry of the list is shown (under one of attnlib's spellings of it);
* the line holds no line of the answer.
"""

import ast
import copy
import re
from pathlib import Path

import nbformat
import pytest

from attnlib.checks.exercise import all_exercises
from attnlib.checks.rules import FAMILY_NAMES, find_forbidden
from coursetools import assign

ROOT = Path(__file__).resolve().parents[2]
MARKER = "**Not allowed in this answer**"
EXERCISES = sorted((ROOT / "exercises").glob("*.ipynb"))


def _forbidden(exercise_id: str) -> tuple[str, ...]:
    exercises = all_exercises()
    return tuple(exercises[exercise_id].forbidden) if exercise_id in exercises else ()


def _normalise(code: str) -> str:
    return re.sub(r"\s+", "", code)


def _answer_lines(solution: nbformat.NotebookNode) -> dict[str, list[str]]:
    """The answer lines (between the solution markers) of each exercise, long enough to tell apart."""
    lines: dict[str, list[str]] = {}
    for cell in solution.cells:
        exercise_id = (cell.metadata.get("attnlib") or {}).get("exercise")
        if cell.cell_type != "code" or not exercise_id:
            continue
        body = cell.source.split(assign.BEGIN, 1)[-1].split(assign.END, 1)[0]
        lines[exercise_id] = [line.split("#")[0] for line in body.splitlines()]
    return {ex: [line for line in body if len(_normalise(line)) >= 16] for ex, body in lines.items()}


def _as_source(shown: str) -> str:
    """Python source for a call as the line shows it: ``.forward(...)`` is a method of any object."""
    return f"x{shown}" if shown.startswith(".") else shown


def _entry_as_source(entry: str) -> str:
    """Python source that uses a forbidden entry: ``module()`` is called, ``.backward`` is a method."""
    return f"x{entry}()" if entry.startswith(".") else entry


def _flags(shown: str, forbidden) -> bool:
    """True when the check flags the source ``shown`` under the list ``forbidden``."""
    try:
        ast.parse(_as_source(shown))
    except SyntaxError:
        return False
    return bool(find_forbidden(_as_source(shown), forbidden))


def _shows(entry: str, codes: list[str]) -> bool:
    """True when one of the shown ``codes`` names ``entry``: the check flags the code under the entry,
    or (attnlib's spellings of one function) the entry under the code."""
    for code in codes:
        if _flags(code, [entry]):
            return True
        if re.fullmatch(r"[A-Za-z_][\w.]*", code) and find_forbidden(_entry_as_source(entry), [code]):
            return True
    return False


def _text_cell_above(cells: list, index: int):
    """The markdown cell nearest above ``cells[index]`` (None when an exercise or check cell comes first)."""
    for cell in reversed(cells[:index]):
        meta = cell.metadata.get("attnlib") or {}
        if cell.cell_type == "markdown" and not meta:
            return cell
        if "exercise" in meta or "check" in meta:
            return None
    return None


def line_problems(exercise_id: str, line: str, forbidden, answer_lines=()) -> list[str]:
    """What is wrong with one exercise's line against its forbidden list (``[]`` when nothing)."""
    problems = []
    codes = re.findall(r"`([^`]+)`", line)
    prose = re.sub(r"`[^`]*`", "", line)
    named = {
        family
        for family, name in FAMILY_NAMES.items()
        if re.search(rf"(?<![\w-]){re.escape(name.label)}(?![\w-])", prose)
    }
    listed = {family for family in FAMILY_NAMES if f"~{family}" in forbidden}
    problems += [
        f"{exercise_id}: the line names {FAMILY_NAMES[f].label}, which is allowed" for f in named - listed
    ]
    problems += [f"{exercise_id}: the line does not name {FAMILY_NAMES[f].label}" for f in listed - named]
    problems += [
        f"{exercise_id}: the line shows `{code}`, which the check does not flag"
        for code in codes
        if not _flags(code, forbidden)
    ]
    family_entries = [f"~{family}" for family in listed]
    for entry in forbidden:
        if entry.startswith("~") or find_forbidden(_entry_as_source(entry), family_entries):
            continue  # a family the line names already covers it
        if not _shows(entry, codes):
            problems.append(f"{exercise_id}: the line does not show the forbidden {entry!r}")
    problems += [
        f"{exercise_id}: the line holds the answer's line {answer!r}"
        for answer in answer_lines
        if _normalise(answer) in _normalise(line)
    ]
    return problems


def stated_problems(nb: nbformat.NotebookNode, forbidden_of=_forbidden, answers=None) -> list[str]:
    """What an exercise notebook fails to state about its exercises' forbidden calls (``[]`` when nothing)."""
    problems = []
    answers = answers or {}
    stated_cells = set()
    for index, cell in enumerate(nb.cells):
        exercise_id = (cell.metadata.get("attnlib") or {}).get("exercise")
        if cell.cell_type != "code" or not exercise_id:
            continue
        forbidden = tuple(forbidden_of(exercise_id))
        text = _text_cell_above(nb.cells, index)
        lines = [line for line in (text.source if text else "").splitlines() if line.startswith(MARKER)]
        if text is not None:
            stated_cells.add(id(text))
        if not forbidden:
            if lines:
                problems.append(f"{exercise_id}: forbids nothing, but its text says {lines[0]!r}")
            continue
        if len(lines) != 1:
            problems.append(f"{exercise_id}: its text holds {len(lines)} lines starting {MARKER!r}, not 1")
            continue
        problems += line_problems(exercise_id, lines[0], forbidden, answers.get(exercise_id, ()))
    for cell in nb.cells:
        if id(cell) not in stated_cells and MARKER in cell.source:
            problems.append(f"a cell that states no exercise holds {MARKER!r}: {cell.source[:60]!r}")
    return problems


def _read(name: str) -> nbformat.NotebookNode:
    return nbformat.read(ROOT / "exercises" / name, as_version=4)


def _line_of(nb: nbformat.NotebookNode, exercise_id: str) -> tuple[nbformat.NotebookNode, str]:
    """The text cell of ``exercise_id`` and its line."""
    for index, cell in enumerate(nb.cells):
        if (cell.metadata.get("attnlib") or {}).get("exercise") == exercise_id:
            text = _text_cell_above(nb.cells, index)
            return text, next(line for line in text.source.splitlines() if line.startswith(MARKER))
    raise KeyError(exercise_id)


# ----------------------------------------------------------------- the committed notebooks


@pytest.mark.parametrize("path", EXERCISES, ids=[p.stem for p in EXERCISES])
def test_every_forbidden_list_is_stated_in_the_exercise_notebook(path):
    solution = nbformat.read(ROOT / "solutions" / path.name, as_version=4)
    problems = stated_problems(nbformat.read(path, as_version=4), answers=_answer_lines(solution))
    assert not problems, "\n".join(problems)


def test_every_exercise_with_a_forbidden_list_is_in_a_checked_notebook():
    """The parametrised test above sees every exercise that forbids calls (33 of 38 today)."""
    stated = set()
    for path in EXERCISES:
        stated |= {ex for ex in assign.exercise_ids(nbformat.read(path, as_version=4)) if _forbidden(ex)}
    assert stated == {ex for ex, exercise in all_exercises().items() if exercise.forbidden}
    assert len(stated) >= 30


def test_the_solutions_hold_no_generated_line():
    for path in sorted((ROOT / "solutions").glob("*.ipynb")):
        assert MARKER not in path.read_text(encoding="utf-8"), f"{path.name}: the line is generated by assign"


# ----------------------------------------------------------------- the check can fail


def test_a_removed_line_is_found():
    nb = _read("04-scaling-softmax.ipynb")
    text, line = _line_of(nb, "ex-04-2")
    text.source = text.source.replace(line, "")
    assert stated_problems(nb) == [f"ex-04-2: its text holds 0 lines starting {MARKER!r}, not 1"]


def test_a_family_the_list_does_not_hold_is_found():
    """ex-04-3 forbids attnlib's scaled scores only: a line that also names the softmax misleads."""
    nb = _read("04-scaling-softmax.ipynb")
    text, line = _line_of(nb, "ex-04-3")
    text.source = text.source.replace(line, line.rstrip(".") + "; any library softmax.")
    assert stated_problems(nb) == ["ex-04-3: the line names softmax, which is allowed"]


def test_a_family_left_out_and_an_allowed_call_are_found():
    """ex-08-4's answer may call torch.softmax; its line must not show it, and must name attention."""
    nb = _read("08-efficiency.ipynb")
    text, line = _line_of(nb, "ex-08-4")
    changed = line.replace("any library attention", "`torch.softmax`")
    text.source = text.source.replace(line, changed)
    problems = stated_problems(nb)
    assert "ex-08-4: the line does not name attention" in problems
    assert "ex-08-4: the line shows `torch.softmax`, which the check does not flag" in problems


def test_an_entry_left_out_is_found():
    nb = _read("09-positions.ipynb")
    text, line = _line_of(nb, "ex-09-1")
    text.source = text.source.replace(line, line.replace(", `attnlib.positions.alibi_bias`", ""))
    assert stated_problems(nb) == [
        "ex-09-1: the line does not show the forbidden 'attnlib.positions.alibi_bias'"
    ]


def test_a_line_on_an_exercise_without_a_list_is_found():
    nb = _read("02-additive-attention.ipynb")
    _, line = _line_of(nb, "ex-02-2")
    for index, cell in enumerate(nb.cells):
        if (cell.metadata.get("attnlib") or {}).get("exercise") == "ex-02-3":
            _text_cell_above(nb.cells, index).source += f"\n\n{line}"
    assert stated_problems(nb) == [f"ex-02-3: forbids nothing, but its text says {line!r}"]


def test_a_line_that_prints_the_answer_is_found():
    answer = "return (m + np.log(total))[..., 0]"
    problems = line_problems(
        "ex-04-2", f"{MARKER}: `torch.logsumexp`, {answer}", ("torch.logsumexp",), [answer]
    )
    assert problems == [f"ex-04-2: the line holds the answer's line {answer!r}"]


def test_a_changed_forbidden_list_makes_the_committed_notebook_fail():
    """The line follows the check's list: the committed notebook fails against a longer list, and
    the generator, given that list, writes a notebook that passes."""
    solution = nbformat.read(ROOT / "solutions" / "05-masks.ipynb", as_version=4)

    def longer(exercise_id):
        extra = ("attnlib.combine_masks",) if exercise_id == "ex-05-2" else ()
        return _forbidden(exercise_id) + extra

    committed = _read("05-masks.ipynb")
    assert stated_problems(committed, longer) == [
        "ex-05-2: the line does not show the forbidden 'attnlib.combine_masks'"
    ]
    regenerated = assign.make_exercise(solution, "05-masks.ipynb", forbidden_of=longer)
    assert stated_problems(regenerated, longer) == []
    assert stated_problems(regenerated) == [
        "ex-05-2: the line shows `attnlib.combine_masks`, which the check does not flag"
    ]


# ----------------------------------------------------------------- the generator


def _solution(*cells) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = list(cells)
    return nb


def _answer(ex_id="ex-05-1"):
    return nbformat.v4.new_code_cell(
        "def f(x):\n    ### BEGIN SOLUTION\n    return x\n    ### END SOLUTION",
        metadata={"attnlib": {"exercise": ex_id, "points": 1}},
    )


def test_the_line_goes_at_the_end_of_the_exercise_text_and_the_solution_is_untouched():
    solution = _solution(nbformat.v4.new_markdown_cell("## Exercise 05.1\n\nWrite `f`.\n"), _answer())
    original = copy.deepcopy(solution)
    exercise = assign.make_exercise(solution, "05-test.ipynb")
    assert exercise.cells[0].source == (
        "## Exercise 05.1\n\nWrite `f`.\n\n"
        f"{MARKER} (an answer that uses one scores 0): `attnlib.padding_mask`."
    )
    assert solution == original


def test_the_generator_refuses_an_exercise_with_a_list_and_no_text_above():
    code = nbformat.v4.new_code_cell("x = 1", metadata={"attnlib": {"check": "ex-05-1"}, "tags": ["check"]})
    nb = _solution(nbformat.v4.new_markdown_cell("intro"), code, _answer())
    with pytest.raises(assign.AssignError, match="no markdown text above its answer cell"):
        assign.make_exercise(nb)


def test_the_generator_refuses_a_solution_that_holds_the_line():
    nb = _solution(
        nbformat.v4.new_markdown_cell(f"Write `f`.\n\n{MARKER}: `attnlib.padding_mask`."), _answer()
    )
    with pytest.raises(assign.AssignError, match="generated by assign"):
        assign.make_exercise(nb)


@pytest.mark.parametrize(
    "forbidden, expected",
    [
        ((), None),
        (
            ("attnlib.scores.additive_scores", "attnlib.additive_scores", "attnlib.numpy.additive_scores"),
            f"{MARKER} (an answer that uses one scores 0): `attnlib.additive_scores`.",
        ),
        (
            ("module()", ".forward", "torch.autograd"),
            f"{MARKER} (an answer that uses one scores 0): calling `module(...)`, "
            "any `.forward(...)` method, anything in `torch.autograd`.",
        ),
    ],
)
def test_not_allowed_line_spells_entries_as_the_learner_writes_them(forbidden, expected):
    assert assign.not_allowed_line(forbidden) == expected


# --------------------------------------------------------------------------- the rule itself (issue 43)


def _intro_before(nb, index: int) -> str:
    j = index - 1
    while j >= 0 and nb.cells[j].cell_type != "markdown":
        j -= 1
    return nb.cells[j].source if j >= 0 else ""


@pytest.mark.parametrize("path", EXERCISES, ids=lambda p: p.stem)
def test_every_exercise_text_states_the_capability_rule(path):
    """Each exercise's text tells the learner what the grader admits and what it holds
    (attnlib.checks.rules.allowed.RULE_SENTENCE), before any "Not allowed" line."""
    from attnlib.checks.rules.allowed import RULE_SENTENCE

    nb = nbformat.read(path, as_version=4)
    for index, cell in enumerate(nb.cells):
        exercise_id = (cell.metadata.get("attnlib") or {}).get("exercise")
        if cell.cell_type != "code" or not exercise_id:
            continue
        text = _intro_before(nb, index)
        assert text.count(RULE_SENTENCE) == 1, (exercise_id, text[-300:])
        if MARKER in text:
            assert text.index(RULE_SENTENCE) < text.index(MARKER), exercise_id


def test_check_names_the_rule_and_the_reference_before_grading(capsys):
    """check() on an answer the grader would hold prints the rule and what it refused; on an
    answer that uses a forbidden call, the call and that it scores 0."""
    import numpy as np

    from attnlib.checks import check
    from attnlib.checks.notebook import wrap_feedback
    from attnlib.checks.rules.allowed import RULE_SENTENCE

    def stable_softmax(x):
        import sys  # noqa: F401 - the refused reference

        e = np.exp(x - x.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    check("ex-04-1", stable_softmax)
    out = " ".join(capsys.readouterr().out.split())
    assert "REVIEW" in out and "uses sys" in out, out
    assert " ".join(wrap_feedback(RULE_SENTENCE).split()) in out, out

    def log_sum_exp(x):
        import torch

        return torch.logsumexp(torch.as_tensor(x), -1).numpy()

    check("ex-04-2", log_sum_exp)
    out = " ".join(capsys.readouterr().out.split())
    assert "torch.logsumexp" in out and "scores 0" in out, out
