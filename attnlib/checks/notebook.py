"""The notebook's side of the checks: ``check("ex-02-1", my_function)`` prints feedback.

:func:`check` runs the visible cases (:func:`attnlib.checks.judge.evaluate`)
and prints one line per case with what was expected, what came back and a
hint, folded to the notebook's width (:func:`wrap_feedback`). It keeps, per
process, the hint tier each exercise has reached and the results of the answer
that reached it: a tier advances only when the answer changed.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from typing import Any

from attnlib.checks.exercise import get_exercise
from attnlib.checks.judge import evaluate

__all__ = ["check", "wrap_feedback"]


# Per exercise: the hint tier shown so far, and what the answer that earned it gave.
_FAILED_CHECKS: dict[str, int] = {}
_LAST_FAILURE: dict[str, tuple] = {}


def check(exercise_id: str, func: Callable[..., Any]) -> None:
    """Run the visible cases of an exercise on ``func`` and print specific feedback.

    A function that still raises the stub's ``NotImplementedError`` prints
    "not attempted yet" instead of raising, so an exercise notebook runs from
    top to bottom before it is done.

    The hints come in tiers. A failed check shows one more tier than the last
    one, but only when the answer changed since then (its results on the
    visible cases differ): running the same answer again shows the same
    tiers. A check of a function not named as the exercise asks (a
    ``lambda``, or a chapter's demonstration of a wrong answer) is a tour of
    the feedback: its report comes under a heading that says so
    (``TOUR_HEADING``), and it shows the first tier and uses up none of the
    learner's.
    """
    if not callable(func):
        print(f"{exercise_id}: expected a function, got {type(func).__name__}")
        return
    result = evaluate(exercise_id, func)
    if result.attempted and result.fraction < 1.0:
        result.shown_hints = _hint_tier(exercise_id, func, result)
    report = result.report()
    if _is_tour(exercise_id, func):
        report = f"{TOUR_HEADING}\n{report}"
    elif result.attempted and result.fraction == 1.0:
        report = f"{report}\n{HIDDEN_CASES_NOTE}"
    print(wrap_feedback(report))


# Said after a pass: the visible cases are not the whole grade.
HIDDEN_CASES_NOTE = "When your instructor grades it, hidden cases of the same kind are added."


# The heading of a tour's report: a learner must not read it as their own failure.
TOUR_HEADING = "A tour of the checker's feedback, on an example answer (not yours):"


def _is_tour(exercise_id: str, func: Callable[..., Any]) -> bool:
    """A check of a function not named as the exercise asks: a demonstration, not the learner's answer."""
    return getattr(func, "__name__", None) != get_exercise(exercise_id).function


def _hint_tier(exercise_id: str, func: Callable[..., Any], result) -> int:
    """How many hint tiers a failed check shows (see :func:`check`)."""
    if _is_tour(exercise_id, func):
        return 1  # the learner's own answer is named as the exercise asks
    answer = tuple((c.case, c.status, c.message) for c in result.cases)
    if _LAST_FAILURE.get(exercise_id) != answer:
        _FAILED_CHECKS[exercise_id] = _FAILED_CHECKS.get(exercise_id, 0) + 1
        _LAST_FAILURE[exercise_id] = answer
    return _FAILED_CHECKS[exercise_id]


def wrap_feedback(text: str, width: int = 79) -> str:
    """Fold the feedback's long lines to ``width`` columns, continuation lines indented.

    A notebook shows printed output in a column about 80 characters wide (and
    narrower on a phone); a folded line keeps the indentation of its own line
    plus two spaces, so the case it belongs to stays clear.
    """
    out = []
    for line in text.split("\n"):
        if len(line) <= width:
            out.append(line)
            continue
        indent = " " * (len(line) - len(line.lstrip()) + 2)
        out.extend(
            textwrap.wrap(
                line, width=width, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False
            )
        )
    return "\n".join(out)
