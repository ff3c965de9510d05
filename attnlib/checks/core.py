"""The exercise checker: cases, reference answers, comparison and feedback.

An :class:`Exercise` names the function a learner writes, the reference
implementation that lives in attnlib, the cases it is tried on and the known
wrong variants (:class:`Misconception`) that deserve a specific hint.

Checking is split in two halves so that the grader can run them in different
processes:

* :func:`run_case` calls the learner's function on one case's inputs and turns
  what comes back into plain NumPy arrays (this half may run inside untrusted
  code's process);
* :func:`judge_case` compares those arrays with the reference, computed afresh,
  and names the mistake (this half runs where the learner's code cannot reach).

:func:`check` joins both halves for the notebook: it runs the visible cases and
prints one line per case with what was expected, what came back and a hint.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

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
    "register",
    "run_case",
    "to_arrays",
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
    """A known wrong answer: a function with the reference's signature, and the hint it earns."""

    name: str
    wrong: Callable[..., Any]
    hint: str


@dataclass
class Exercise:
    """A graded exercise.

    Attributes:
        id: the exercise id, ``"ex-NN-k"``, also stored in the notebook cell's metadata.
        function: the name of the function the learner defines.
        reference: attnlib's correct implementation, same signature.
        cases: the inputs to try; at least one visible.
        misconceptions: wrong variants recognised from their outputs.
        rtol, atol: tolerances of :func:`numpy.allclose` on every output array.
        hint: a general hint shown when a case fails and no misconception matches.
        compare: optional replacement for :func:`compare_outputs`.
        forbidden: calls that already implement what the exercise asks for
            (dotted names, see :func:`attnlib.checks.forbidden.find_forbidden`);
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

    def __post_init__(self) -> None:
        if not self.cases or all(c.hidden for c in self.cases):
            raise ValueError(f"exercise {self.id!r} needs at least one visible case")
        names = [c.name for c in self.cases]
        if len(set(names)) != len(names):
            raise ValueError(f"exercise {self.id!r} has duplicate case names: {names}")

    def visible_cases(self) -> list[Case]:
        return [c for c in self.cases if not c.hidden]


# --------------------------------------------------------------------------- registry

_REGISTRY: dict[str, Exercise] = {}
_DISCOVERED = False


def register(exercise: Exercise) -> Exercise:
    """Add an exercise to the registry; ids are unique."""
    if exercise.id in _REGISTRY and _REGISTRY[exercise.id] is not exercise:
        raise ValueError(f"exercise id {exercise.id!r} is registered twice")
    _REGISTRY[exercise.id] = exercise
    return exercise


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


# --------------------------------------------------------------------------- outputs


class NotAttempted(Exception):
    """The learner's function still raises the stub's ``NotImplementedError``."""


def to_arrays(value: Any) -> Any:
    """Turn a function's return value into plain data: NumPy arrays, tuples of them, or scalars.

    Tensors are detached and moved to the CPU; floating values become float64
    so that comparisons never depend on the learner's dtype; tuples and lists
    become tuples; dicts keep their keys. Anything else raises ``TypeError``.
    """
    try:  # torch is optional for the NumPy chapters
        import torch
    except ImportError:  # pragma: no cover - torch is in requirements.txt
        torch = None
    if torch is not None and isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        if value.is_floating_point():
            value = value.double()
        return value.numpy().copy()
    if isinstance(value, np.ndarray | np.generic):
        arr = np.asarray(value)
        if arr.dtype.kind == "f":
            arr = arr.astype(np.float64)
        return arr
    if isinstance(value, bool | int | float):
        return np.asarray(value, dtype=np.float64 if isinstance(value, float) else None)
    if isinstance(value, tuple | list):
        return tuple(to_arrays(v) for v in value)
    if isinstance(value, dict):
        return {str(k): to_arrays(v) for k, v in value.items()}
    if value is None:
        return None
    raise TypeError(f"cannot compare a value of type {type(value).__name__}")


def _describe(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"array of shape {value.shape}"
    if isinstance(value, tuple):
        return f"tuple of {len(value)}"
    if isinstance(value, dict):
        return f"dict with keys {sorted(value)}"
    return type(value).__name__


def _preview(arr: np.ndarray, limit: int = 6) -> str:
    flat = np.asarray(arr, dtype=np.float64).ravel()
    body = np.array2string(flat[:limit], precision=4, separator=", ", suppress_small=True)
    return body[:-1] + ", ...]" if flat.size > limit else body


def _compare_arrays(expected: np.ndarray, got: np.ndarray, rtol: float, atol: float, where: str):
    if got.shape != expected.shape:
        msg = f"{where}expected shape {expected.shape}, got {got.shape}"
        if got.ndim >= 2 and got.swapaxes(-1, -2).shape == expected.shape:
            msg += " (the last two axes look swapped: a missing or extra transpose?)"
        elif got.size == expected.size:
            msg += " (same number of elements: a reshape in the wrong order?)"
        elif got.ndim < expected.ndim:
            msg += " (an axis is missing: did you sum or index one away?)"
        return False, msg
    if np.issubdtype(expected.dtype, np.bool_) or np.issubdtype(got.dtype, np.bool_):
        if not np.array_equal(expected.astype(bool), got.astype(bool)):
            bad = np.argwhere(expected.astype(bool) != got.astype(bool))[0]
            return False, (
                f"{where}values differ at index {tuple(int(i) for i in bad)}: expected "
                f"{bool(expected[tuple(bad)])}, got {bool(got[tuple(bad)])}"
            )
        return True, ""
    got_f = got.astype(np.float64)
    exp_f = expected.astype(np.float64)
    if not np.all(np.isfinite(got_f)) and np.all(np.isfinite(exp_f)):
        kind = "NaN" if np.isnan(got_f).any() else "inf"
        return False, (
            f"{where}your output contains {kind} where the expected one is finite "
            "(an overflow in exp, or 0/0 in a normalisation?)"
        )
    if not np.allclose(got_f, exp_f, rtol=rtol, atol=atol, equal_nan=True):
        diff = np.abs(got_f - exp_f)
        diff = np.where(np.isnan(diff), np.inf, diff)
        idx = tuple(int(i) for i in np.unravel_index(np.argmax(diff), diff.shape))
        return False, (
            f"{where}values differ (largest difference {float(diff[idx]):.3g} at index {idx}): "
            f"expected {_preview(exp_f)}, got {_preview(got_f)}"
        )
    return True, ""


def compare_outputs(expected: Any, got: Any, rtol: float = 1e-5, atol: float = 1e-6, where=""):
    """Compare two outputs made by :func:`to_arrays`; return ``(ok, message)``.

    The message names the first difference: the structure, the shape (with a
    guess at the cause when the shape is a transposition or a reshape of the
    expected one), NaN or inf, or the largest value difference.
    """
    if isinstance(expected, tuple):
        if not isinstance(got, tuple) or len(got) != len(expected):
            return False, f"{where}expected a tuple of {len(expected)}, got {_describe(got)}"
        for i, (e, g) in enumerate(zip(expected, got, strict=True)):
            ok, msg = compare_outputs(e, g, rtol, atol, where=f"{where}item {i}: ")
            if not ok:
                return ok, msg
        return True, ""
    if isinstance(expected, dict):
        if not isinstance(got, dict) or sorted(got) != sorted(expected):
            return False, f"{where}expected a dict with keys {sorted(expected)}, got {_describe(got)}"
        for key in sorted(expected):
            ok, msg = compare_outputs(expected[key], got[key], rtol, atol, where=f"{where}[{key!r}]: ")
            if not ok:
                return ok, msg
        return True, ""
    if expected is None:
        return (got is None), ("" if got is None else f"{where}expected None, got {_describe(got)}")
    if not isinstance(got, np.ndarray):
        return False, f"{where}expected {_describe(expected)}, got {_describe(got)}"
    return _compare_arrays(np.asarray(expected), got, rtol, atol, where)


# --------------------------------------------------------------------------- running and judging


@dataclass
class CaseResult:
    """The verdict on one case. ``status`` is ``passed``, ``failed``, ``error`` or ``not-attempted``."""

    case: str
    status: str
    message: str = ""
    misconception: str | None = None
    hint: str = ""
    hidden: bool = False

    @property
    def passed(self) -> bool:
        return self.status == "passed"


@dataclass
class CheckResult:
    """All case verdicts of one exercise."""

    exercise: str
    cases: list[CaseResult] = field(default_factory=list)

    @property
    def fraction(self) -> float:
        """Share of cases passed, in [0, 1]; partial credit is this times the exercise's points."""
        return sum(c.passed for c in self.cases) / len(self.cases) if self.cases else 0.0

    @property
    def attempted(self) -> bool:
        return not any(c.status == "not-attempted" for c in self.cases)

    def report(self) -> str:
        """The feedback as text: one line per case, then the hints."""
        if not self.attempted:
            return f"{self.exercise}: not attempted yet (the function still raises NotImplementedError)."
        passed = sum(c.passed for c in self.cases)
        lines = [f"{self.exercise}: {passed}/{len(self.cases)} cases passed"]
        for c in self.cases:
            mark = "ok  " if c.passed else "FAIL"
            line = f"  [{mark}] {c.case}"
            if not c.passed:
                line += f": {c.message}"
                if c.misconception:
                    line += f"\n         looks like: {c.misconception}"
                if c.hint:
                    line += f"\n         hint: {c.hint}"
            lines.append(line)
        if passed == len(self.cases):
            lines.append("  All cases pass. Well done!")
        return "\n".join(lines)


def run_case(func: Callable[..., Any], case: Case) -> Any:
    """Call ``func`` on the case's inputs and return its output as arrays (see :func:`to_arrays`).

    Raises :class:`NotAttempted` for the stub's ``NotImplementedError``; any
    other exception from the learner's code propagates.
    """
    try:
        out = func(*case.make_inputs())
    except NotImplementedError as exc:
        raise NotAttempted(str(exc)) from None
    return to_arrays(out)


def judge_case(exercise: Exercise, case: Case, got: Any) -> CaseResult:
    """Compare ``got`` (from :func:`run_case`) with the reference and name the mistake."""
    expected = to_arrays(exercise.reference(*case.make_inputs()))
    compare = exercise.compare or (lambda e, g, ex: compare_outputs(e, g, ex.rtol, ex.atol))
    ok, message = compare(expected, got, exercise)
    if ok:
        return CaseResult(case.name, "passed", hidden=case.hidden)
    for mis in exercise.misconceptions:
        try:
            wrong = to_arrays(mis.wrong(*case.make_inputs()))
        except Exception:  # a wrong variant may legitimately fail on some inputs
            continue
        if compare(wrong, got, exercise)[0]:
            return CaseResult(case.name, "failed", message, mis.name, mis.hint, case.hidden)
    return CaseResult(case.name, "failed", message, None, exercise.hint, case.hidden)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""


def judge_error(exercise: Exercise, case: Case, error_type: str, error_text: str) -> CaseResult:
    """The verdict for a case whose call raised ``error_type: error_text``.

    A known wrong variant that raises the same error on these inputs (say, a
    plain ``.T`` on a batched array) is named, like a wrong output would be.
    """
    message = f"raised {error_type}" + (f": {error_text}" if error_text else "")
    for mis in exercise.misconceptions:
        try:
            mis.wrong(*case.make_inputs())
        except Exception as exc:
            if type(exc).__name__ == error_type and _first_line(exc) == error_text:
                return CaseResult(case.name, "error", message, mis.name, mis.hint, case.hidden)
    hint = "call your function on the case's inputs by hand and read the traceback"
    return CaseResult(case.name, "error", message, hint=hint, hidden=case.hidden)


FORBIDDEN_MISCONCEPTION = "calls an existing implementation (not allowed)"


def forbidden_calls(exercise_id: str, func: Callable[..., Any] | None = None, source: str | None = None):
    """The forbidden calls (``Exercise.forbidden``) that an answer uses; ``[]`` when none.

    ``source`` (an answer cell's source, as the grader has it) is read with
    :func:`attnlib.checks.forbidden.find_forbidden`; ``func`` with
    :func:`attnlib.checks.forbidden.forbidden_in_function` (its source and
    the learner's helpers it calls). Give either or both.
    """
    from attnlib.checks.forbidden import find_forbidden, forbidden_in_function

    exercise = get_exercise(exercise_id)
    if not exercise.forbidden:
        return []
    found: set[str] = set()
    if source is not None:
        found |= set(find_forbidden(source, exercise.forbidden))
    if func is not None and callable(func):
        found |= set(forbidden_in_function(func, exercise.forbidden))
    return sorted(found)


def forbidden_message(found: Sequence[str]) -> str:
    """The feedback for an answer that uses the forbidden calls ``found``."""
    names = ", ".join(found)
    return (
        f"not allowed: the answer uses {names}, which already implements what this exercise asks "
        "you to write; the exercise scores 0 until the answer computes it itself"
    )


def forbidden_result(exercise: Exercise, found: Sequence[str], include_hidden: bool = True) -> CheckResult:
    """A :class:`CheckResult` that fails every case because the answer uses ``found``."""
    cases = list(exercise.cases) if include_hidden else exercise.visible_cases()
    message = forbidden_message(found)
    hint = "write the computation with basic operations (matrix products, exp, sums, max)."
    return CheckResult(
        exercise.id,
        [CaseResult(c.name, "failed", message, FORBIDDEN_MISCONCEPTION, hint, c.hidden) for c in cases],
    )


def evaluate(
    exercise_id: str,
    func: Callable[..., Any],
    include_hidden: bool = False,
    source: str | None = None,
) -> CheckResult:
    """Run ``func`` on the exercise's cases (visible only, unless ``include_hidden``) and judge each.

    An answer that uses one of the exercise's forbidden calls (read from
    ``source`` when given, and from ``func``'s own source) fails every case
    with a message naming the call: it scores 0.
    """
    exercise = get_exercise(exercise_id)
    found = forbidden_calls(exercise_id, func, source)
    if found:
        return forbidden_result(exercise, found, include_hidden)
    result = CheckResult(exercise_id)
    cases = list(exercise.cases) if include_hidden else exercise.visible_cases()
    for case in cases:
        try:
            got = run_case(func, case)
        except NotAttempted:
            result.cases = [CaseResult(c.name, "not-attempted", hidden=c.hidden) for c in cases]
            return result
        except Exception as exc:  # the learner's code failed: report it, never crash the notebook
            result.cases.append(judge_error(exercise, case, type(exc).__name__, _first_line(exc)))
            continue
        result.cases.append(judge_case(exercise, case, got))
    return result


def check(exercise_id: str, func: Callable[..., Any]) -> None:
    """Run the visible cases of an exercise on ``func`` and print specific feedback.

    A function that still raises the stub's ``NotImplementedError`` prints
    "not attempted yet" instead of raising, so an exercise notebook runs from
    top to bottom before it is done.
    """
    if not callable(func):
        print(f"{exercise_id}: expected a function, got {type(func).__name__}")
        return
    print(evaluate(exercise_id, func).report())
