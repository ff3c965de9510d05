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
import textwrap
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
    "reset_parameters",
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
    hints: Sequence[str] = ()

    def __post_init__(self) -> None:
        if self.hints and not self.hint:
            self.hint = self.hints[0]
        if not self.cases or all(c.hidden for c in self.cases):
            raise ValueError(f"exercise {self.id!r} needs at least one visible case")
        names = [c.name for c in self.cases]
        if len(set(names)) != len(names):
            raise ValueError(f"exercise {self.id!r} has duplicate case names: {names}")

    def visible_cases(self) -> list[Case]:
        return [c for c in self.cases if not c.hidden]

    def hint_tiers(self) -> tuple[str, ...]:
        """The tiered hints (``hints``, or the single ``hint``)."""
        return tuple(self.hints) or ((self.hint,) if self.hint else ())


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


def reset_parameters(module: Any, generator: Any) -> Any:
    """Draw every parameter of a torch module from ``generator`` (never the global RNG); returns the module.

    A case that builds a model must not depend on, nor change, torch's global
    random state (the grader runs cases in concurrent threads). Embeddings get
    N(0, 1) (their padding row zero), recurrent and linear layers
    U(-1/sqrt(n), 1/sqrt(n)) with n the hidden size or the input size, as
    torch's own initialisation; anything else N(0, 0.1^2).
    """
    import torch
    from torch import nn

    with torch.no_grad():
        for sub in module.modules():
            for p in sub.parameters(recurse=False):
                if isinstance(sub, nn.Embedding):
                    p.copy_(torch.randn(p.shape, generator=generator, dtype=p.dtype))
                    if sub.padding_idx is not None:
                        p[sub.padding_idx].zero_()
                    continue
                if isinstance(sub, nn.RNNBase):
                    bound = sub.hidden_size**-0.5
                elif isinstance(sub, nn.Linear):
                    bound = sub.in_features**-0.5
                else:
                    p.copy_(0.1 * torch.randn(p.shape, generator=generator, dtype=p.dtype))
                    continue
                p.copy_((torch.rand(p.shape, generator=generator, dtype=p.dtype) * 2 - 1) * bound)
    return module


# --------------------------------------------------------------------------- outputs


class NotAttempted(Exception):
    """The learner's function still raises the stub's ``NotImplementedError``."""


def to_arrays(value: Any) -> Any:
    """Turn a function's return value into plain data: NumPy arrays, tuples of them, or scalars.

    Tensors are detached and moved to the CPU. The dtype is kept (a float32
    answer stays float32, a boolean mask stays boolean), so that the judge can
    compare dtype kinds strictly and choose tolerances that fit the precision;
    bfloat16, which NumPy lacks, becomes float32. Python numbers become 0-d
    arrays (``True`` stays boolean); tuples and lists become tuples; dicts keep
    their keys. Anything else raises ``TypeError``.
    """
    try:  # torch is optional for the NumPy chapters
        import torch
    except ImportError:  # pragma: no cover - torch is in requirements.txt
        torch = None
    if torch is not None and isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        if value.dtype == torch.bfloat16:
            value = value.float()
        return value.resolve_conj().resolve_neg().numpy().copy()
    if isinstance(value, np.ndarray | np.generic):
        arr = np.array(value)
        if arr.dtype.kind not in "biufc":
            raise TypeError(f"cannot compare an array of dtype {arr.dtype}")
        return arr
    if isinstance(value, bool | int | float | complex):
        return np.asarray(value)
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


_KIND_NAMES = {
    "b": "booleans",
    "i": "integers",
    "u": "integers",
    "f": "floating-point numbers",
    "c": "complex numbers",
}


def _kind_message(expected: np.ndarray, got: np.ndarray, where: str) -> str | None:
    """A message when ``got`` holds another kind of value than ``expected`` (None when it fits).

    A boolean answer fits only a boolean expectation, an integer answer an
    integer or floating-point one, a floating-point answer only a
    floating-point one; complex numbers fit only complex ones.
    """
    e, g = expected.dtype.kind, got.dtype.kind
    e = "i" if e == "u" else e
    g = "i" if g == "u" else g
    if e == g or (e == "f" and g == "i") or (e == "c" and g in "if"):
        return None
    msg = (
        f"{where}expected {_KIND_NAMES[e]} (dtype {expected.dtype}), got {_KIND_NAMES[g]} (dtype {got.dtype})"
    )
    if e == "b":
        msg += (
            ": a mask holds True/False (a comparison such as positions < lengths gives one); keep it boolean"
        )
    elif g == "b":
        msg += ": return the computed numbers, not the result of a comparison"
    elif e == "i" and g == "f":
        msg += ": token ids and counts are integers (use a long tensor, or .long())"
    elif g == "c":
        msg += ": the answer is real; a complex result means a sqrt or log of a negative number?"
    return msg


def _fmt(x) -> str:
    if isinstance(x, np.bool_ | bool):
        return str(bool(x))
    if isinstance(x, np.integer | int):
        return str(int(x))
    if isinstance(x, np.complexfloating | complex):
        return f"{complex(x):.6g}"
    return f"{float(x):.6g}"


def _precision(arr: np.ndarray) -> np.dtype | None:
    """The floating dtype of an array when it is less precise than float64, else None."""
    if arr.dtype.kind in "fc" and np.finfo(arr.dtype).eps > np.finfo(np.float64).eps:
        return np.dtype(np.float32) if arr.dtype.kind == "c" else arr.dtype
    return None


def _compare_arrays(expected, got, rtol: float, atol: float, where: str, slack=None):
    if got.shape != expected.shape:
        msg = f"{where}expected shape {expected.shape}, got {got.shape}"
        if got.ndim >= 2 and got.swapaxes(-1, -2).shape == expected.shape:
            msg += " (the last two axes look swapped: a missing or extra transpose?)"
        elif got.size == expected.size:
            msg += " (same number of elements: a reshape in the wrong order?)"
        elif got.ndim < expected.ndim:
            msg += " (an axis is missing: did you sum or index one away, or forget keepdims?)"
        elif got.ndim > expected.ndim:
            msg += " (an extra axis: a missing squeeze, or a reduction without keepdims=False?)"
        return False, msg
    kind = _kind_message(expected, got, where)
    if kind:
        return False, kind
    if expected.dtype.kind == "b" or expected.dtype.kind in "iu" and got.dtype.kind in "iu":
        bad = np.argwhere(expected != got)
        if bad.size:
            idx = tuple(int(i) for i in bad[0])
            return False, (
                f"{where}{len(bad)} of {expected.size} values differ; the first at index {idx}: "
                f"expected {_fmt(expected[idx])}, got {_fmt(got[idx])}"
            )
        return True, ""
    # numbers: tolerances fit the less precise of the two dtypes
    low = [d for d in (_precision(expected), _precision(got)) if d is not None]
    if low:
        eps = max(float(np.finfo(d).eps) for d in low)
        rtol = max(rtol, 16 * eps)
        atol = max(atol, 16 * eps)
    exp_f = expected.astype(np.complex128 if expected.dtype.kind == "c" else np.float64)
    got_f = got.astype(exp_f.dtype)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(got_f - exp_f)
        allowed = atol + rtol * np.abs(exp_f)
        if slack is not None and np.shape(slack) == exp_f.shape:
            allowed = allowed + np.nan_to_num(np.asarray(slack, dtype=np.float64), nan=0.0, posinf=0.0)
        # an infinite expected value (a -inf mask entry) must come back exactly: rtol * inf allows anything
        allowed = np.where(np.isfinite(exp_f), allowed, 0.0)
        same = (exp_f == got_f) | (np.isnan(exp_f) & np.isnan(got_f))
        ok = same | (diff <= allowed)
    if ok.all():
        return True, ""
    bad = np.argwhere(~ok)
    idx = tuple(int(i) for i in bad[0])
    finite = np.isfinite(exp_f)
    if not np.all(np.isfinite(got_f)[finite]):
        kind_word = "NaN" if np.isnan(got_f[finite]).any() else "inf"
        first = tuple(int(i) for i in np.argwhere(finite & ~np.isfinite(got_f))[0])
        return False, (
            f"{where}your output contains {kind_word} where the expected one is finite, first at index "
            f"{first}: expected {_fmt(exp_f[first])}, got {_fmt(got_f[first])} "
            "(an overflow in exp, or 0/0 in a normalisation?)"
        )
    worst = np.where(np.isnan(diff), np.inf, diff)
    worst = np.where(ok, 0.0, worst)
    big = tuple(int(i) for i in np.unravel_index(np.argmax(worst), worst.shape))
    return False, (
        f"{where}{len(bad)} of {expected.size} values differ; the first at index {idx}: "
        f"expected {_fmt(exp_f[idx])}, got {_fmt(got_f[idx])} "
        f"(largest difference {float(worst[big]):.3g} at index {big})"
    )


def compare_outputs(expected: Any, got: Any, rtol: float = 1e-5, atol: float = 1e-6, where="", slack=None):
    """Compare two outputs made by :func:`to_arrays`; return ``(ok, message)``.

    Dtype kinds are compared strictly (booleans, integers, floating-point
    numbers, complex numbers: see :func:`_kind_message`). Tolerances are at
    least 16 machine epsilons of the less precise dtype, so a correct float32
    answer is judged at float32 precision. ``slack`` (same structure as
    ``expected``, or None) adds an allowed absolute difference per element:
    :func:`judge_case` passes how far the reference itself moves when computed
    in the answer's precision.

    The message names the first difference: the structure, the shape (with a
    guess at the cause when the shape is a transposition or a reshape of the
    expected one), the kind of values, NaN or inf, or the first differing
    element (index, expected, got).
    """
    if isinstance(expected, tuple):
        if not isinstance(got, tuple) or len(got) != len(expected):
            return False, f"{where}expected a tuple of {len(expected)}, got {_describe(got)}"
        for i, (e, g) in enumerate(zip(expected, got, strict=True)):
            s = slack[i] if isinstance(slack, tuple) and len(slack) == len(expected) else None
            ok, msg = compare_outputs(e, g, rtol, atol, where=f"{where}item {i}: ", slack=s)
            if not ok:
                return ok, msg
        return True, ""
    if isinstance(expected, dict):
        if not isinstance(got, dict) or sorted(got) != sorted(expected):
            return False, f"{where}expected a dict with keys {sorted(expected)}, got {_describe(got)}"
        for key in sorted(expected):
            s = slack.get(key) if isinstance(slack, dict) else None
            ok, msg = compare_outputs(
                expected[key], got[key], rtol, atol, where=f"{where}[{key!r}]: ", slack=s
            )
            if not ok:
                return ok, msg
        return True, ""
    if expected is None:
        return (got is None), ("" if got is None else f"{where}expected None, got {_describe(got)}")
    if not isinstance(got, np.ndarray):
        return False, f"{where}expected {_describe(expected)}, got {_describe(got)}"
    return _compare_arrays(np.asarray(expected), got, rtol, atol, where, slack)


def _lowest_precision(value: Any) -> np.dtype | None:
    """The least precise floating dtype (below float64) in an output, or None."""
    if isinstance(value, np.ndarray):
        return _precision(value)
    items = value.values() if isinstance(value, dict) else value if isinstance(value, tuple) else ()
    found = [d for d in (_lowest_precision(v) for v in items) if d is not None]
    return max(found, key=lambda d: np.finfo(d).eps) if found else None


def _cast_inputs(inputs: tuple, dtype: np.dtype) -> tuple:
    """The case's inputs with every floating array, tensor and module in ``dtype``."""
    import torch

    tdtype = {np.dtype(np.float16): torch.float16, np.dtype(np.float32): torch.float32}.get(np.dtype(dtype))
    out = []
    for x in inputs:
        if isinstance(x, np.ndarray) and x.dtype.kind == "f":
            x = x.astype(dtype)
        elif isinstance(x, torch.Tensor) and x.is_floating_point() and tdtype is not None:
            x = x.to(tdtype)
        elif isinstance(x, torch.nn.Module) and tdtype is not None:
            x = x.to(tdtype)
        out.append(x)
    return tuple(out)


def _abs_difference(a: Any, b: Any) -> Any:
    """Elementwise |a - b| over matching structures of floating arrays (None where they do not match)."""
    if isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b):
        return tuple(_abs_difference(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return {k: _abs_difference(a[k], b.get(k)) for k in a}
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.shape == b.shape:
        if a.dtype.kind in "fc" and b.dtype.kind in "fc":
            with np.errstate(invalid="ignore", over="ignore"):
                return np.abs(a.astype(np.complex128) - b.astype(np.complex128)).real
    return None


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
    hints: tuple[str, ...] = ()
    shown_hints: int = 1

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
                if c.hint and (c.misconception or not self.hints):
                    line += f"\n         hint: {c.hint}"
            lines.append(line)
        if passed == len(self.cases):
            lines.append("  All cases pass. Well done!")
        elif self.hints:
            shown = max(1, min(self.shown_hints, len(self.hints)))
            for i, text in enumerate(self.hints[:shown], start=1):
                lines.append(f"  hint {i}/{len(self.hints)}: {text}")
            if shown < len(self.hints):
                lines.append("  (run the check again after a change to see the next hint)")
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
    """Compare ``got`` (from :func:`run_case`) with the reference and name the mistake.

    When the answer is less precise than float64 (say float32), the reference
    is also computed on the case's inputs cast to that precision, and how far
    that moves it is allowed on top of the dtype's tolerance: a correct
    float32 answer is never failed by the rounding its precision forces.
    """
    expected = to_arrays(exercise.reference(*case.make_inputs()))
    slack = None
    low = _lowest_precision(got)
    if low is not None:
        try:
            expected_low = to_arrays(exercise.reference(*_cast_inputs(case.make_inputs(), low)))
            slack = _abs_difference(expected, expected_low)
            slack = _scale_slack(slack, 4.0)
        except Exception:  # the reference need not run in every precision
            slack = None

    def compare(e, g):
        if exercise.compare is not None:
            return exercise.compare(e, g, exercise)
        return compare_outputs(e, g, exercise.rtol, exercise.atol, slack=slack)

    ok, message = compare(expected, got)
    if ok:
        return CaseResult(case.name, "passed", hidden=case.hidden)
    for mis in exercise.misconceptions:
        try:
            with np.errstate(all="ignore"):
                wrong = to_arrays(mis.wrong(*case.make_inputs()))
        except Exception:  # a wrong variant may legitimately fail on some inputs
            continue
        if _same_values(wrong, got, exercise, slack):
            return CaseResult(case.name, "failed", message, mis.name, mis.hint, case.hidden)
    return CaseResult(case.name, "failed", message, None, exercise.hint, case.hidden)


def _same_values(wrong: Any, got: Any, exercise: Exercise, slack: Any) -> bool:
    """Whether ``got`` matches a wrong variant's output (kinds are not required to match here)."""
    if exercise.compare is not None:
        return exercise.compare(wrong, got, exercise)[0]
    return compare_outputs(_as_numbers(wrong), _as_numbers(got), exercise.rtol, exercise.atol, slack=slack)[0]


def _as_numbers(value: Any) -> Any:
    if isinstance(value, tuple):
        return tuple(_as_numbers(v) for v in value)
    if isinstance(value, dict):
        return {k: _as_numbers(v) for k, v in value.items()}
    if isinstance(value, np.ndarray) and value.dtype.kind in "biu":
        return value.astype(np.float64)
    return value


def _scale_slack(slack: Any, factor: float) -> Any:
    if isinstance(slack, tuple):
        return tuple(_scale_slack(s, factor) for s in slack)
    if isinstance(slack, dict):
        return {k: _scale_slack(v, factor) for k, v in slack.items()}
    return None if slack is None else slack * factor


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
    if not exercise.forbidden or (func is exercise.reference and source is None):
        return []  # the reference is attnlib's own implementation
    found: set[str] = set()
    if source is not None:
        found |= set(find_forbidden(source, exercise.forbidden))
    if func is not None and callable(func):
        found |= set(forbidden_in_function(func, exercise.forbidden))
    return sorted(found)


def forbidden_message(found: Sequence[str]) -> str:
    """The feedback for an answer that uses the forbidden calls ``found``."""
    names = ", ".join(found)
    return f"not allowed: the answer uses {names}, an existing implementation of what it computes (scores 0)"


def forbidden_result(
    exercise: Exercise,
    found: Sequence[str],
    include_hidden: bool = True,
    judged: CheckResult | None = None,
) -> CheckResult:
    """A :class:`CheckResult` that fails every case because the answer uses ``found``.

    ``judged`` (the verdicts of the same answer judged on its outputs) adds,
    to each case, what else is wrong with it and the misconception it shows,
    so the feedback still teaches; the score stays 0.
    """
    cases = list(exercise.cases) if include_hidden else exercise.visible_cases()
    message = forbidden_message(found)
    hint = "write the computation with basic operations (matrix products, exp, sums, max)."
    verdicts = {c.case: c for c in judged.cases} if judged is not None else {}
    results = []
    for c in cases:
        other = verdicts.get(c.name)
        if other is not None and not other.passed and other.status != "not-attempted":
            results.append(
                CaseResult(
                    c.name,
                    "failed",
                    f"{message}; besides, {other.message}",
                    other.misconception or FORBIDDEN_MISCONCEPTION,
                    other.hint if other.misconception else hint,
                    c.hidden,
                )
            )
        else:
            results.append(CaseResult(c.name, "failed", message, FORBIDDEN_MISCONCEPTION, hint, c.hidden))
    return CheckResult(exercise.id, results)


def evaluate(
    exercise_id: str,
    func: Callable[..., Any],
    include_hidden: bool = False,
    source: str | None = None,
    apply_forbidden: bool = True,
) -> CheckResult:
    """Run ``func`` on the exercise's cases (visible only, unless ``include_hidden``) and judge each.

    An answer that uses one of the exercise's forbidden calls (read from
    ``source`` when given, and from ``func``'s own source) fails every case
    with a message naming the call: it scores 0. ``apply_forbidden=False``
    judges the outputs only (the tests of the checks' own misconceptions use it).
    """
    exercise = get_exercise(exercise_id)
    found = forbidden_calls(exercise_id, func, source) if apply_forbidden else []
    if found:
        judged = evaluate(exercise_id, func, include_hidden, apply_forbidden=False)
        return forbidden_result(exercise, found, include_hidden, judged)
    result = CheckResult(exercise_id, hints=exercise.hint_tiers())
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
