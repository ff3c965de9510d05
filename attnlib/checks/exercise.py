"""Exercises and their registry: what a check knows about one exercise.

An :class:`Exercise` names the function a learner writes, the reference
implementation that lives in attnlib, the cases it is tried on (:class:`Case`)
and the known wrong variants (:class:`Misconception`) that deserve a specific
hint. Every ``attnlib/checks/chNN_slug.py`` module calls :func:`register` for
its exercises; :func:`get_exercise` imports the module of an exercise's own
chapter on first use.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Case",
    "Exercise",
    "Misconception",
    "all_exercises",
    "get_exercise",
    "register",
    "register_written",
    "written_questions",
]


@dataclass(frozen=True)
class Case:
    """One input the learner's function is tried on.

    ``make_inputs`` returns the positional arguments as a tuple. It is called
    afresh for every call, so a function that modifies its inputs in place
    cannot change the reference, and it must be deterministic (seed inside).
    Hidden cases are run by the grader only.
    """

    name: str
    make_inputs: Callable[[], tuple]
    hidden: bool = False


@dataclass(frozen=True)
class Misconception:
    """A known wrong answer: a function with the reference's signature, and the hint it earns.

    ``variants`` are other ways of writing the same mistake that give other
    outputs on some cases (``e / e.sum(-1)`` with and without the max shift):
    an answer matches the mistake on a case when it matches any of its forms.
    The judge names a mistake only from the cases that tell it apart from the
    other registered mistakes (:func:`attnlib.checks.judge.name_mistakes`).
    """

    name: str
    wrong: Callable[..., Any]
    hint: str
    variants: Sequence[Callable[..., Any]] = ()

    def forms(self) -> tuple[Callable[..., Any], ...]:
        """``wrong`` and its ``variants``."""
        return (self.wrong, *self.variants)


@dataclass
class Exercise:
    """A graded exercise.

    Attributes
    ----------
    id
        the exercise id, ``"ex-NN-k"``, also stored in the notebook cell's metadata.
    function
        the name of the function the learner defines.
    reference
        attnlib's correct implementation, same signature.
    cases
        the inputs to try; at least one visible.
    misconceptions
        wrong variants recognised from their outputs.
    rtol, atol
        tolerances of :func:`numpy.allclose` on every output array.
    hint
        a general hint shown when a case fails and no misconception matches
        (the first tier of ``hints`` when those are given).
    hints
        tiered hints: the first names the idea, later ones come closer,
        only the last may show the formula; none prints the answer. The
        notebook's :func:`check` shows one more tier after each failed
        check; the grader's feedback shows the first.
    compare
        optional replacement for :func:`compare_outputs`.
    forbidden
        calls that already implement what the exercise asks for
        (dotted names, see :func:`attnlib.checks.rules.find_forbidden`);
        an answer that uses one scores 0 for the exercise.
    """

    id: str
    function: str
    reference: Callable[..., Any]
    cases: Sequence[Case]
    misconceptions: Sequence[Misconception] = ()
    rtol: float = 1e-5
    atol: float = 1e-6
    hint: str = ""
    compare: Callable[[Any, Any, Exercise], tuple[bool, str]] | None = None
    forbidden: Sequence[str] = ()
    hints: Sequence[str] = ()

    def __post_init__(self) -> None:
        if self.hints and not self.hint:
            self.hint = self.hints[0]
        if not self.cases or all(c.hidden for c in self.cases):
            raise ValueError(f"exercise {self.id!r} needs at least one visible case")
        names = [c.name for c in self.cases]
        if len(set(names)) != len(names):
            raise ValueError(f"exercise {self.id!r} has duplicate case names: {names}")
        mistakes = [m.name for m in self.misconceptions]
        if len(set(mistakes)) != len(mistakes):
            raise ValueError(f"exercise {self.id!r} has duplicate misconception names: {mistakes}")

    def visible_cases(self) -> list[Case]:
        return [c for c in self.cases if not c.hidden]

    def hint_tiers(self) -> tuple[str, ...]:
        """The tiered hints (``hints``, or the single ``hint``)."""
        return tuple(self.hints) or ((self.hint,) if self.hint else ())


_REGISTRY: dict[str, Exercise] = {}
_DISCOVERED = False


def register(exercise: Exercise) -> Exercise:
    """Add an exercise to the registry; ids are unique."""
    if exercise.id in _REGISTRY and _REGISTRY[exercise.id] is not exercise:
        raise ValueError(f"exercise id {exercise.id!r} is registered twice")
    _REGISTRY[exercise.id] = exercise
    return exercise


_WRITTEN: dict[str, float] = {}


def register_written(question_id: str, points: float) -> None:
    """Record a written question graded by hand (``"q-05-1"``) and its points.

    The question itself lives in the solution notebook (a markdown cell with
    metadata ``{"attnlib": {"manual": "q-05-1", "points": 1}}``); the checks
    only need its id and points, so that "check everything" lists it and counts
    its points (tests/checks/test_check_all.py keeps the two in step).
    """
    if _WRITTEN.get(question_id, points) != points:
        raise ValueError(f"written question {question_id!r} is registered twice with different points")
    _WRITTEN[question_id] = points


def written_questions(chapter: str) -> dict[str, float]:
    """The written questions of a chapter (``"05"``), ``{id: points}``, in question order."""
    _import_check_modules(f"ch{chapter}_")
    ids = sorted(
        (q for q in _WRITTEN if q.startswith(f"q-{chapter}-")), key=lambda q: int(q.rsplit("-", 1)[1])
    )
    return {q: _WRITTEN[q] for q in ids}


def _import_check_modules(prefix: str = "ch") -> None:
    """Import the ``attnlib/checks`` modules whose names start with ``prefix``."""
    package = importlib.import_module("attnlib.checks")
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        if info.name.startswith(prefix):
            importlib.import_module(f"attnlib.checks.{info.name}")


def _discover() -> None:
    """Import every ``attnlib/checks/ch*.py`` module once, which registers its exercises."""
    global _DISCOVERED
    if not _DISCOVERED:
        _import_check_modules()
        _DISCOVERED = True


def get_exercise(exercise_id: str) -> Exercise:
    """The registered exercise with this id; ``KeyError`` naming the known ids otherwise.

    Only the check modules of the exercise's own chapter (``ex-02-1`` ->
    ``ch02_*``) are imported first, so a notebook's checks (and the grader)
    never depend on another chapter's module.
    """
    if exercise_id not in _REGISTRY:
        parts = str(exercise_id).split("-")
        if len(parts) == 3 and parts[1].isdigit():
            _import_check_modules(f"ch{parts[1]}_")
    if exercise_id not in _REGISTRY:
        _discover()
    try:
        return _REGISTRY[exercise_id]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY)) or "none"
        raise KeyError(f"no exercise {exercise_id!r}; known exercises: {known}") from None


def all_exercises() -> dict[str, Exercise]:
    """Every registered exercise, by id."""
    _discover()
    return dict(sorted(_REGISTRY.items()))
