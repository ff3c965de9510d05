"""The notebook's side of the checks: ``check("ex-02-1", my_function)`` prints feedback.

:func:`check` runs the visible cases (:func:`attnlib.checks.judge.evaluate`)
and prints one line per case with what was expected, what came back and a
hint, folded to the notebook's width (:func:`wrap_feedback`). It keeps, per
process, how many checks of each exercise have failed, to show one more tier
of hints each time.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from typing import Any

from attnlib.checks.judge import evaluate

__all__ = ["check", "wrap_feedback"]


_FAILED_CHECKS: dict[str, int] = {}


def check(exercise_id: str, func: Callable[..., Any]) -> None:
    """Run the visible cases of an exercise on ``func`` and print specific feedback.

    A function that still raises the stub's ``NotImplementedError`` prints
    "not attempted yet" instead of raising, so an exercise notebook runs from
    top to bottom before it is done. Each failed check of the same exercise
    shows one more tier of its hints.
    """
    if not callable(func):
        print(f"{exercise_id}: expected a function, got {type(func).__name__}")
        return
    result = evaluate(exercise_id, func)
    if result.attempted and result.fraction < 1.0:
        _FAILED_CHECKS[exercise_id] = _FAILED_CHECKS.get(exercise_id, 0) + 1
        result.shown_hints = _FAILED_CHECKS[exercise_id]
    print(wrap_feedback(result.report()))


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
