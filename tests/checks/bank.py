"""The shared format of the answer banks (see tests/checks/test_answer_banks.py).

Every graded exercise has a bank of answers its checks had never been written
against: at least three plausible WRONG answers, which must lose marks with
feedback that names the mistake, and at least one RIGHT answer written
differently from the solution, which must get full marks.

A bank lives in ``tests/checks/banks/<checks module name>.py`` (for example
``banks/ch04_scaling_softmax.py``) and defines two lists::

    from bank import Right, Wrong

    WRONG = [Wrong("ex-04-1", softmax_global_max, "global max"), ...]
    RIGHT = [Right("ex-04-1", softmax_einsum_float64), ...]
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Wrong:
    """A plausible wrong answer.

    Attributes
    ----------
    exercise : str
        The exercise id, ``"ex-04-1"``.
    fn : callable
        The answer, with the signature of the learner's function.
    mistake : str
        A phrase (compared case-insensitively) that the feedback must contain,
        usually the name of the exercise's Misconception, e.g. ``"global max"``.
    not_named : tuple of str
        Phrases that no mistake the feedback names ("looks like: ...") may
        contain: a diagnosis the answer must NOT get (issue 33 item 14). The
        empty string ``""`` (:data:`NO_MISTAKE`) says that no registered mistake
        may be named at all.
    """

    exercise: str
    fn: Callable
    mistake: str
    not_named: tuple[str, ...] = ()


NO_MISTAKE = ("",)  # Wrong(..., not_named=NO_MISTAKE): the feedback names no registered mistake


@dataclass(frozen=True)
class Right:
    """A correct answer written differently from the solution (einsum, float64 inside, a loop, ...)."""

    exercise: str
    fn: Callable
