"""The exercise checker, as one module (a facade over the four that hold it).

* :mod:`attnlib.checks.exercise`: :class:`Exercise`, :class:`Case`,
  :class:`Misconception` and the registry (:func:`register`, :func:`get_exercise`);
* :mod:`attnlib.checks.compare`: :func:`to_arrays`, :func:`compare_outputs`;
* :mod:`attnlib.checks.judge`: :func:`run_case`, :func:`judge_case`,
  :func:`judge_error`, :func:`evaluate` and the forbidden-call verdict;
* :mod:`attnlib.checks.notebook`: :func:`check` and :func:`wrap_feedback`.

The chapters' check modules and the grader import from here
(``from attnlib.checks.core import Exercise, Misconception, register``); new
code may import from the module that holds a name. ``reset_parameters`` is
:func:`attnlib.utils.reset_parameters` (chapter code can use it too).
"""

from __future__ import annotations

from attnlib.checks.compare import compare_outputs, to_arrays
from attnlib.checks.exercise import (
    Case,
    Exercise,
    Misconception,
    all_exercises,
    get_exercise,
    register,
)
from attnlib.checks.judge import (
    FORBIDDEN_MISCONCEPTION,
    CaseResult,
    CheckResult,
    NotAttempted,
    evaluate,
    forbidden_calls,
    forbidden_message,
    forbidden_result,
    judge_case,
    judge_error,
    name_mistakes,
    run_case,
)
from attnlib.checks.notebook import check, wrap_feedback
from attnlib.utils import reset_parameters

__all__ = [
    "Case",
    "CaseResult",
    "CheckResult",
    "Exercise",
    "Misconception",
    "NotAttempted",
    "all_exercises",
    "check",
    "compare_outputs",
    "evaluate",
    "forbidden_calls",
    "forbidden_message",
    "forbidden_result",
    "get_exercise",
    "judge_case",
    "judge_error",
    "name_mistakes",
    "register",
    "reset_parameters",
    "run_case",
    "to_arrays",
]
# Kept importable for the grader (coursetools.grade.grading.verdict imports them from here): the
# very objects of the modules above, not part of the learner's interface.
_INTERNALS = (FORBIDDEN_MISCONCEPTION, wrap_feedback)
