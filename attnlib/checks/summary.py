"""Check everything at once: the last cell of every exercise notebook.

:func:`check_all` runs the visible cases of every exercise of a notebook on the
learner's functions as they are defined now, and prints one table: for each
exercise its function, its points and whether it passes, fails, is not
attempted yet (the stub still raises ``NotImplementedError``) or is not defined
(its cell has not been run, or the function was renamed). The written
questions of the chapter, graded by hand, come after the exercises with their
points (:data:`WRITTEN`), so that the total is the notebook's; whether one is
answered is read from the notebook's saved file when the kernel knows where it
is (Jupyter and VS Code say so), and is otherwise left to the learner.
:func:`summarize` returns the same rows without printing.

Neither uses up a hint tier of :func:`attnlib.checks.check` (they call
:func:`attnlib.checks.judge.evaluate`, which keeps no state, and show no
hints), and neither raises on an unfinished notebook. The cell that
``python -m coursetools.assign`` appends to every exercise notebook is::

    from attnlib.checks import check_all

    check_all(points={"ex-04-1": 2, "ex-04-2": 2})  # the namespace: the caller's globals
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attnlib.checks.exercise import _REGISTRY, _import_check_modules, get_exercise, written_questions
from attnlib.checks.judge import FORBIDDEN_MISCONCEPTION, evaluate

__all__ = [
    "FAILS",
    "NOT_ATTEMPTED",
    "NOT_DEFINED",
    "PASSES",
    "WRITTEN",
    "ExerciseStatus",
    "Summary",
    "check_all",
    "summarize",
]

PASSES = "passes"
FAILS = "fails"
NOT_ATTEMPTED = "not attempted"
NOT_DEFINED = "not defined"
WRITTEN = "graded by hand"  # a written question: read by the instructor, never checked here
ANSWER_STUB = "YOUR ANSWER HERE"  # what a written answer's cell holds before the learner writes

_EXERCISE_ID = re.compile(r"^ex-(\d{2})-(\d+)$")
_CHAPTER = re.compile(r"^\d{2}$")
_QUESTION_ID = re.compile(r"^q-(\d{2})-(\d+)$")
WIDTH = 79  # a notebook's output column

HIDDEN_CASES_NOTE = (
    "The grader adds hidden cases to these visible ones: passing here is needed\n"
    "for full marks, not a promise of them."
)


@dataclass(frozen=True)
class ExerciseStatus:
    """One row of the table: an exercise and where the learner's function stands.

    ``status`` is one of :data:`PASSES`, :data:`FAILS`, :data:`NOT_ATTEMPTED`,
    :data:`NOT_DEFINED`, or :data:`WRITTEN` for a written question (``exercise``
    is its id, ``q-NN-k``; ``answered`` is True or False when the saved notebook
    was read, None when it could not be); ``passed`` and ``cases`` count the
    visible cases (both 0 unless the function ran); ``note`` says why, in a few words.
    """

    exercise: str
    function: str
    points: float | None
    status: str
    passed: int = 0
    cases: int = 0
    note: str = ""
    answered: bool | None = None


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
            elif r.status == WRITTEN and r.answered is not None:
                result += " (answered)" if r.answered else " (not answered yet)"
            lines.append(f"{r.exercise:<{ex}}  {r.function:<{fn}}  {points}{result}")
        lines.insert(1, "-" * min(width, max(len(line) for line in lines)))
        checked = [r for r in self.rows if r.status != WRITTEN]
        written = [r for r in self.rows if r.status == WRITTEN]
        passing = self.by_status(PASSES)
        line = f"{len(passing)} of {len(checked)} exercises pass their visible cases"
        if has_points:
            earned = sum(r.points or 0 for r in checked if r.status == PASSES)
            worth = sum(r.points or 0 for r in checked)
            line += f" (worth {_number(earned)} of {_number(worth)} points)"
        lines += ["", line + "."]
        if written:
            line = f"{len(written)} written answer{'s' if len(written) > 1 else ''}, graded by hand"
            if has_points:
                hand = sum(r.points or 0 for r in written)
                total = sum(r.points or 0 for r in self.rows)
                line += f": {_number(hand)} more point{'s' if hand != 1 else ''}, {_number(total)} in all"
            lines.append(line + ".")
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
    written: Mapping[str, float] | None = None,
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
    written : mapping of str to float, optional
        ``{question id: points}`` of the written questions graded by hand;
        by default those registered for the exercises' chapter
        (:func:`attnlib.checks.exercise.register_written`).

    Returns
    -------
    Summary
        one :class:`ExerciseStatus` per exercise, in order, then one per
        written question (:data:`WRITTEN`). Only the visible cases run; no
        hint tier of :func:`attnlib.checks.check` is used up.

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
    exercises = _exercises(chapter, points)
    rows = [_status(ex_id, worth, namespace) for ex_id, worth in exercises]
    return Summary(rows + _written_rows(chapter, exercises, points is not None, written, namespace))


def _written_rows(
    chapter: str | None,
    exercises: list[tuple[str, float | None]],
    with_points: bool,
    written: Mapping[str, float] | None,
    namespace: Mapping[str, Any],
) -> list[ExerciseStatus]:
    """The rows of the written questions: ``written`` when given, else the chapter's registered ones."""
    if written is None:
        chapters = {chapter} if chapter is not None else {ex_id[3:5] for ex_id, _ in exercises}
        written = {q: p for c in sorted(chapters) for q, p in written_questions(c).items()}
    elif not isinstance(written, Mapping) or not all(_QUESTION_ID.match(str(q)) for q in written):
        raise ValueError(f"written must be a dict {{question id 'q-NN-k': points}}, got {written!r}")
    if not written:
        return []
    answers = _saved_answers(namespace)
    rows = []
    for q_id, worth in written.items():
        answered = answers.get(q_id) if answers is not None else None
        if answered is None:
            note = "a written answer, read by your instructor: make sure its cell holds your answer"
        elif answered:
            note = ""
        else:
            note = "its cell still says YOUR ANSWER HERE (in the notebook as last saved)"
        points = float(worth) if with_points else None
        rows.append(ExerciseStatus(q_id, "written answer", points, WRITTEN, note=note, answered=answered))
    return rows


def _saved_answers(namespace: Mapping[str, Any]) -> dict[str, bool] | None:
    """``{question id: answered}`` from the notebook's saved file, or None where it cannot be found.

    Jupyter tells the kernel its notebook's path (``__session__``, or the
    ``JPY_SESSION_NAME`` variable), VS Code in ``__vsc_ipynb_file__``; Colab
    does not. The file is what was last saved, which is what the grader reads.
    """
    candidates = [namespace.get("__session__"), namespace.get("__vsc_ipynb_file__")]
    candidates.append(os.environ.get("JPY_SESSION_NAME"))
    for candidate in candidates:
        if not isinstance(candidate, str) or not candidate.endswith(".ipynb"):
            continue
        try:
            cells = json.loads(Path(candidate).read_text(encoding="utf-8")).get("cells", [])
        except (OSError, ValueError, AttributeError):
            continue
        answers = {}
        for cell in cells if isinstance(cells, list) else []:
            meta = (cell.get("metadata") or {}).get("attnlib") or {} if isinstance(cell, dict) else {}
            q_id = meta.get("manual") if isinstance(meta, dict) else None
            if isinstance(q_id, str):
                source = cell.get("source", "")
                text = "".join(source) if isinstance(source, list) else str(source)
                answers[q_id] = text.strip() not in ("", ANSWER_STUB)
        return answers
    return None


def check_all(
    namespace: Mapping[str, Any] | None = None,
    chapter: str | None = None,
    points: Mapping[str, float] | None = None,
    written: Mapping[str, float] | None = None,
) -> None:
    """Print the table of :func:`summarize`: every exercise, passes / fails / not attempted / not defined.

    Parameters
    ----------
    namespace : mapping of str to object, optional
        where the learner's functions live; the caller's ``globals()`` when omitted.
    chapter, points, written
        which exercises and written questions, as in :func:`summarize`.

    Returns
    -------
    None
        the table is printed (a notebook shows nothing else).
    """
    if namespace is None:
        namespace = sys._getframe(1).f_globals
    print(summarize(namespace, chapter=chapter, points=points, written=written).table())
