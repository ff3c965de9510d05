"""Honest answers are scored in full and never held (issue 43): a bank of at least 150 right
answers in the styles a class writes (tests/checks/honest_bank.py, written from the exercise
texts, not from the references), each

* right on every case, visible and hidden, and clean in ``check()`` (attnlib.checks.judge
  .evaluate: the forbidden-call rule on the function, no review reason), and
* clean on the grader's static side: the handed-out exercise notebook with the answer cell
  replaced (and the learner's cells before it) goes through ``submission.build_plan``, and the
  exercise is neither forbidden nor held, with no review reason about it.
"""

from __future__ import annotations

import linecache
import sys
from pathlib import Path

import nbformat
import numpy as np
import pytest

from attnlib.checks import get_exercise
from attnlib.checks.judge import evaluate
from coursetools.grade import batch
from coursetools.grade.grading import submission

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from honest_bank import BANK, Honest  # noqa: E402

pytestmark = pytest.mark.slow
PRELUDE = "import numpy as np\n"


def _id(entry: Honest) -> str:
    return f"{entry.exercise}-{BANK.index(entry)}-{entry.style}"


def _stem(exercise: str) -> str:
    return next(p.stem for p in (HERE.parents[1] / "exercises").glob(f"{exercise[3:5]}-*.ipynb"))


def _function(entry: Honest):
    """Run the prelude, the learner's cells before and the answer, as a notebook would (each
    cell's source registered as its file, so its source can be read), and return the function."""
    namespace: dict = {"__name__": "__main__"}
    for number, source in enumerate((PRELUDE, *entry.before, entry.answer)):
        filename = f"<honest {BANK.index(entry)} cell {number}>"
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        exec(compile(source, filename, "exec"), namespace)  # noqa: S102 - the bank's own answers
    return namespace[get_exercise(entry.exercise).function]


_ASSIGNMENTS: dict[str, object] = {}


def _plan(entry: Honest):
    stem = _stem(entry.exercise)
    if stem not in _ASSIGNMENTS:
        _ASSIGNMENTS[stem] = batch.load_assignment(stem)
    assignment = _ASSIGNMENTS[stem]
    nb = nbformat.read(assignment.path, as_version=4)
    index = next(
        i for i, c in enumerate(nb.cells) if c.metadata.get("attnlib", {}).get("exercise") == entry.exercise
    )
    nb.cells[index].source = entry.answer
    for extra in reversed(entry.before):
        nb.cells.insert(index, nbformat.v4.new_code_cell(extra))
    return submission.build_plan(nb, assignment)


def test_the_bank_is_large_and_varied():
    assert len(BANK) >= 150, len(BANK)
    exercises = {e.exercise for e in BANK}
    assert len(exercises) >= 30, sorted(exercises)
    assert all(sum(e.exercise == ex for e in BANK) >= 3 for ex in exercises)
    assert len({e.answer for e in BANK}) == len(BANK), "every answer is different"
    text = "\n".join(e.answer + "\n".join(e.before) for e in BANK)
    for style in (
        "np.subtract",
        "np.divide",
        "torch.meshgrid",
        "torch.kthvalue",
        "itertools.product",
        "functools.reduce",
        "@functools.lru_cache",
        "@dataclass",
        "from typing import Tuple",
        "NEG_INF = -np.inf",
        "np.finfo(",
        "lambda",
        ".diagonal(",
        "np.apply_along_axis",
        "np.longdouble",
    ):
        assert style in text, style


@pytest.mark.parametrize("entry", BANK, ids=_id)
def test_an_honest_answer_passes_check_on_every_case(entry):
    func = _function(entry)
    with np.errstate(all="ignore"):
        result = evaluate(entry.exercise, func, include_hidden=True)
    failed = [(c.case, c.status, c.message) for c in result.cases if c.status != "passed"]
    assert failed == [] and result.cases, failed
    assert not result.review, result.review


@pytest.mark.parametrize("entry", BANK, ids=_id)
def test_an_honest_answer_is_clean_in_the_grader(entry):
    plan, _notes, review = _plan(entry)
    assert entry.exercise not in plan.get("forbidden", {}), plan["forbidden"]
    assert entry.exercise not in plan.get("held", {}), plan["held"]
    assert review == [], review
