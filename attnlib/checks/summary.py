"""Check everything at once: the last cell of every exercise notebook.

:func:`check_all` runs the visible cases of every exercise of a notebook on the
learner's functions as they are defined now, and prints one table: for each
exercise its function, its points and whether it passes, fails, is not
attempted yet (the stub still raises ``NotImplementedError``) or is not defined
(its cell has not been run, or the function was renamed). :func:`summarize`
returns the same rows without printing.

Neither uses up a hint tier of :func:`attnlib.checks.check` (they call
:func:`attnlib.checks.judge.evaluate`, which keeps no state, and show no
hints), and neither raises on an unfinished notebook. The cell that
``python -m coursetools.assign`` appends to every exercise notebook is::

    from attnlib.checks import check_all

    check_all(points={"ex-04-1": 2, "ex-04-2": 2})  # the namespace: the caller's globals
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from attnlib.checks.exercise import _REGISTRY, _import_check_modules, get_exercise
from attnlib.checks.judge import FORBIDDEN_MISCONCEPTION, evaluate

__all__ = [
    "FAILS",
    "NOT_ATTEMPTED",
    "NOT_DEFINED",
    "PASSES",
    "ExerciseStatus",
    "Summary",
    "check_all",
    "summarize",
]

PASSES = "passes"
FAILS = "fails"
NOT_ATTEMPTED = "not attempted"
NOT_DEFINED = "not defined"

_EXERCISE_ID = re.compile(r"^ex-(\d{2})-(\d+)$")
_CHAPTER = re.compile(r"^\d{2}$")
WIDTH = 79  # a notebook's output column

HIDDEN_CASES_NOTE = (
    "The grader adds hidden cases to these visible ones: passing here is needed\n"
    "for full marks, not a promise of them."
)


@dataclass(frozen=True)
class ExerciseStatus:
    """One row of the table: an exercise and where the learner's function stands.

    ``status`` is one of :data:`PASSES`, :data:`FAILS`, :data:`NOT_ATTEMPTED`,
    :data:`NOT_DEFINED`; ``passed`` and ``cases`` count the visible cases
    (both 0 unless the function ran); ``note`` says why, in a few words.
    """

    exercise: str
    function: str
    points: float | None
    status: str
    passed: int = 0
    cases: int = 0
    note: str = ""


@dataclass
class Summary:
    """The rows of :func:`summarize`, in notebook order; ``str()`` is the printed table."""

    rows: list[ExerciseStatus] = field(default_factory=list)

    def by_status(self, status: str) -> list[str]:
        """The ids of the exercises with this status."""
        return [r.exercise for r in self.rows if r.status == status]

    def table(self, width: int = WIDTH) -> str:
        """The summary as text, every line at most ``width`` characters."""
        from attnlib.checks.notebook import wrap_feedback

        if not self.rows:
            return "Check all: no exercises to check."
        has_points = any(r.points is not None for r in self.rows)
        fn = max(len("function"), *(len(r.function) for r in self.rows))
        ex = max(len("exercise"), *(len(r.exercise) for r in self.rows))
        header = f"{'exercise':<{ex}}  {'function':<{fn}}  " + ("points  " if has_points else "") + "result"
        lines = [header]
        for r in self.rows:
            points = f"{_number(r.points):>6}  " if has_points else ""
            result = r.status
            if r.status in (PASSES, FAILS):
                result += f" ({r.passed}/{r.cases} cases)"
            lines.append(f"{r.exercise:<{ex}}  {r.function:<{fn}}  {points}{result}")
        lines.insert(1, "-" * min(width, max(len(line) for line in lines)))
        total = len(self.rows)
        passing = self.by_status(PASSES)
        line = f"{len(passing)} of {total} exercises pass their visible cases"
        if has_points:
            earned = sum(r.points or 0 for r in self.rows if r.status == PASSES)
            worth = sum(r.points or 0 for r in self.rows)
            line += f" (worth {_number(earned)} of {_number(worth)} points)"
        lines += ["", line + "."]
        lines += [f"{r.exercise}: {r.note}" for r in self.rows if r.status != PASSES and r.note]
        lines += ["", HIDDEN_CASES_NOTE]
        return wrap_feedback("\n".join(lines), width=width)

    def __str__(self) -> str:
        return self.table()


def _number(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:g}"


def _chapter_exercises(chapter: str) -> list[str]:
    """The registered exercises of one chapter (``"04"``), in exercise order."""
    _import_check_modules(f"ch{chapter}_")
    ids = [i for i in _REGISTRY if i.startswith(f"ex-{chapter}-")]
    return sorted(ids, key=lambda i: int(i.rsplit("-", 1)[1]))


def _exercises(chapter: Any, points: Any) -> list[tuple[str, float | None]]:
    if points is not None:
        if not isinstance(points, Mapping):
            raise TypeError(f"points must be a dict {{exercise id: points}}, got {type(points).__name__}")
        for ex_id, value in points.items():
            if not isinstance(ex_id, str) or not _EXERCISE_ID.match(ex_id):
                raise ValueError(f"points: {ex_id!r} is not an exercise id of the form 'ex-NN-k'")
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ValueError(f"points: {ex_id} is worth {value!r}; expected a number >= 0")
        if chapter is not None:
            other = [i for i in points if not i.startswith(f"ex-{chapter}-")]
            if other:
                raise ValueError(f"points: {other} are not exercises of chapter {chapter}")
        return [(ex_id, float(value)) for ex_id, value in points.items()]
    if chapter is None:
        raise TypeError("give chapter (such as '04') or points ({exercise id: points})")
    ids = _chapter_exercises(chapter)
    if not ids:
        raise ValueError(f"chapter: no exercises registered for chapter {chapter!r}")
    return [(ex_id, None) for ex_id in ids]


def _status(ex_id: str, points: float | None, namespace: Mapping[str, Any]) -> ExerciseStatus:
    exercise = get_exercise(ex_id)
    name = exercise.function
    if name not in namespace:
        note = f"no function {name} here: run its cell (or check its name)"
        return ExerciseStatus(ex_id, name, points, NOT_DEFINED, note=note)
    func = namespace[name]
    if not callable(func):
        note = f"{name} is a {type(func).__name__}, not a function: run its cell again"
        return ExerciseStatus(ex_id, name, points, NOT_DEFINED, note=note)
    try:
        result = evaluate(ex_id, func)
    except Exception as exc:  # the check itself broke on this answer: say so, never crash
        note = f"the check could not judge it ({type(exc).__name__}): run check({ex_id!r}, {name})"
        return ExerciseStatus(ex_id, name, points, FAILS, note=note)
    cases = len(result.cases)
    if not result.attempted:
        note = "still raises NotImplementedError: replace the stub with your answer"
        return ExerciseStatus(ex_id, name, points, NOT_ATTEMPTED, 0, cases, note)
    passed = sum(c.passed for c in result.cases)
    if passed == cases:
        return ExerciseStatus(ex_id, name, points, PASSES, passed, cases)
    if any(c.misconception == FORBIDDEN_MISCONCEPTION for c in result.cases):
        note = f'uses a call that is not allowed: run check("{ex_id}", {name})'
    else:
        note = f'run check("{ex_id}", {name}) for the feedback'
    return ExerciseStatus(ex_id, name, points, FAILS, passed, cases, note)


def summarize(
    namespace: Mapping[str, Any],
    chapter: str | None = None,
    points: Mapping[str, float] | None = None,
) -> Summary:
    """Judge every exercise on the function of that name in ``namespace``.

    Parameters
    ----------
    namespace : mapping of str to object
        where the learner's functions live: a notebook's ``globals()``.
    chapter : str, optional
        two digits, such as ``"04"``: every registered exercise of that chapter.
    points : mapping of str to float, optional
        ``{exercise id: points}`` in notebook order (what the generated cell
        passes); the exercises checked when given.

    Returns
    -------
    Summary
        one :class:`ExerciseStatus` per exercise, in order. Only the visible
        cases run; no hint tier of :func:`attnlib.checks.check` is used up.

    Raises
    ------
    TypeError
        ``namespace`` is not a mapping, ``points`` not a dict, or neither
        ``chapter`` nor ``points`` is given.
    ValueError
        ``chapter`` is not two digits or has no exercises; ``points`` names
        an id not of the form ``ex-NN-k`` or a negative worth.
    """
    if not isinstance(namespace, Mapping):
        raise TypeError(f"namespace must be a mapping such as globals(), got {type(namespace).__name__}")
    if chapter is not None and (not isinstance(chapter, str) or not _CHAPTER.match(chapter)):
        raise ValueError(f"chapter must be two digits such as '04', got {chapter!r}")
    return Summary([_status(ex_id, worth, namespace) for ex_id, worth in _exercises(chapter, points)])


def check_all(
    namespace: Mapping[str, Any] | None = None,
    chapter: str | None = None,
    points: Mapping[str, float] | None = None,
) -> None:
    """Print the table of :func:`summarize`: every exercise, passes / fails / not attempted / not defined.

    Parameters
    ----------
    namespace : mapping of str to object, optional
        where the learner's functions live; the caller's ``globals()`` when omitted.
    chapter, points
        which exercises, as in :func:`summarize`.

    Returns
    -------
    None
        the table is printed (a notebook shows nothing else).
    """
    if namespace is None:
        namespace = sys._getframe(1).f_globals
    print(summarize(namespace, chapter=chapter, points=points).table())
