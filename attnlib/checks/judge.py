"""Judging: running a learner's function on the cases and naming its mistake.

Checking is split in two halves so that the grader can run them in different
processes:

* :func:`run_case` calls the learner's function on one case's inputs and turns
  what comes back into plain NumPy arrays (this half may run inside untrusted
  code's process);
* :func:`judge_case` compares those arrays with the reference, computed afresh,
  and names the mistake (this half runs where the learner's code cannot reach).

:func:`evaluate` joins both halves for every case of an exercise, and an
answer that uses a forbidden call (:func:`forbidden_calls`) fails every case.
A known mistake is named only from the cases that tell it apart from the
other registered mistakes (:func:`name_mistakes`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from attnlib.checks.compare import (
    _abs_difference,
    _cast_inputs,
    compare_outputs,
    lowest_precision,
    output_precision,
    question_precision,
    to_arrays,
)
from attnlib.checks.exercise import Case, Exercise, get_exercise

__all__ = [
    "FORBIDDEN_MISCONCEPTION",
    "CaseResult",
    "CheckResult",
    "NotAttempted",
    "evaluate",
    "forbidden_calls",
    "forbidden_message",
    "forbidden_result",
    "judge_case",
    "judge_error",
    "name_mistakes",
    "run_case",
]


class NotAttempted(Exception):
    """The learner's function still raises the stub's ``NotImplementedError``."""


@dataclass
class CaseResult:
    """The verdict on one case. ``status`` is ``passed``, ``failed``, ``error`` or ``not-attempted``."""

    case: str
    status: str
    message: str = ""
    misconception: str | None = None
    hint: str = ""
    hidden: bool = False
    candidates: tuple[str, ...] = ()
    """The registered mistakes whose output (or error) on this case is the answer's."""
    ruled_out: tuple[str, ...] = ()
    """The registered mistakes this case rules out (they give another output, or run where it raised)."""

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
    review: tuple[str, ...] = ()  # why the allow-list rule sends the answer to a person (issue 34)

    @property
    def fraction(self) -> float:
        """Share of cases passed, in [0, 1]; partial credit is this times the exercise's points."""
        return sum(c.passed for c in self.cases) / len(self.cases) if self.cases else 0.0

    @property
    def attempted(self) -> bool:
        return not any(c.status == "not-attempted" for c in self.cases)

    def report(self) -> str:
        """The feedback as text: one line per case, then the hints (and why the answer goes to review)."""
        if self.review:
            return "\n".join([self._report(), *review_lines(self.review)])
        return self._report()

    def _report(self) -> str:
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

    The registered mistakes whose output on this case is ``got`` are the
    verdict's ``candidates``; one is named only when it is the only candidate
    (the case tells it apart). :func:`evaluate` then weighs every case of the
    exercise together (:func:`name_mistakes`); a caller that judges cases one by
    one (the grader) should pass its verdicts through :func:`name_mistakes` too.

    The tolerances fit the question (the case's inputs and the reference's
    output, :func:`~attnlib.checks.compare.question_precision`), not the
    answer: an answer cast to float16 does not earn float16's tolerance on a
    float32 question. One allowance: an answer computed in float32, torch's
    default, is judged at float32 precision on a float64 question, where the
    reference is also computed on the inputs cast to float32 and how far that
    moves it is allowed on top (a correct float32 answer is never failed by the
    rounding its precision forces).
    """
    inputs = case.make_inputs()
    expected = to_arrays(exercise.reference(*inputs))
    precision = question_precision(inputs, expected)
    slack = None
    if output_precision(got) is not None and precision is None:  # float32 (or lower) for float64
        try:
            float32_inputs = _cast_inputs(case.make_inputs(), np.dtype(np.float32))
            expected32 = to_arrays(exercise.reference(*float32_inputs))
            slack = _scale_slack(_abs_difference(expected, expected32), 4.0)
        except Exception:  # the reference need not run in every precision
            slack = None

    def compare(e, g):
        if exercise.compare is not None:
            return exercise.compare(e, g, exercise)
        return compare_outputs(e, g, exercise.rtol, exercise.atol, slack=slack, precision=precision)

    ok, message = compare(expected, got)
    if ok:
        return CaseResult(case.name, "passed", hidden=case.hidden)
    matches, ruled_out = _sort_mistakes(
        exercise.misconceptions, case, lambda wrong: _same_values(wrong, got, exercise, precision, slack)
    )
    return _failed(exercise, case, "failed", message, matches, ruled_out)


def _sort_mistakes(mistakes: Sequence[Any], case: Case, same: Callable[[Any], bool]) -> tuple[list, list]:
    """The registered mistakes that match an answer's output on ``case`` (``same(wrong output)``),
    and those ruled out there: a form of theirs ran and none matched. A mistake whose every form
    raises on this case is neither (it tells nothing about an answer that ran)."""
    matches, ruled_out = [], []
    for mis in mistakes:
        ran = False
        for form in mis.forms():
            try:
                with np.errstate(all="ignore"):
                    wrong = to_arrays(form(*case.make_inputs()))
            except Exception:  # a wrong variant may legitimately fail on some inputs
                continue
            ran = True
            if same(wrong):
                matches.append(mis)
                break
        else:
            if ran:
                ruled_out.append(mis)
    return matches, ruled_out


def _failed(
    exercise: Exercise, case: Case, status: str, message: str, matches: list, ruled_out: list
) -> CaseResult:
    """A failed case's verdict: a mistake is named only when this case tells it apart.

    ``matches`` are the registered mistakes that give the answer's output (or
    error) on this case. When several do, the case cannot tell which one the
    answer made (a 1 x 1 causal mask is ``[[False]]`` both "strictly lower" and
    "inverted"), so none is named here; :func:`name_mistakes` may still name
    one from the exercise's other cases.
    """
    candidates = tuple(m.name for m in matches)
    excluded = tuple(m.name for m in ruled_out)
    if len(matches) == 1:
        mis = matches[0]
        return CaseResult(case.name, status, message, mis.name, mis.hint, case.hidden, candidates, excluded)
    hint = exercise.hint if status == "failed" else error_hint(case.hidden)
    return CaseResult(case.name, status, message, None, hint, case.hidden, candidates, excluded)


_ERROR_HINT = "call your function on the case's inputs by hand and read the traceback"
# a hidden case's inputs are never shown, so its hint asks for nothing the learner cannot see
_HIDDEN_ERROR_HINT = (
    "this case's inputs are hidden: call your function by hand on inputs of your own like the "
    "visible cases', with the edge cases the exercise's text names, and read the traceback"
)


def error_hint(hidden: bool) -> str:
    """The hint of a case whose call raised and matched no known mistake."""
    return _HIDDEN_ERROR_HINT if hidden else _ERROR_HINT


def name_mistakes(
    exercise: Exercise, cases: Sequence[Case], results: Sequence[CaseResult]
) -> list[CaseResult]:
    """The verdicts ``results`` (one per case of ``cases``), a mistake named only where the cases say so.

    A registered mistake is named, on the failed cases where it matches the
    answer, when it is the only one that

    * matches the answer (gives its output, or raises its error) on at least
      one case the answer failed;
    * is ruled out by no case: on no failed case does it give another output
      than the answer's (or run where the answer raised), and on no passed case
      does it give another output than the right one (a mistake that would have
      shown there, and did not, is not the answer's). A case where every form
      of the mistake raises tells nothing either way.

    Otherwise (none, or several the cases cannot tell apart) no mistake is
    named and the failed cases carry the exercise's general hint. A forbidden
    call's verdict is kept as it is. Naming the wrong mistake sends a learner
    to fix what was right, so the evidence must point at one.
    """
    results = list(results)
    failing = [
        i
        for i, r in enumerate(results)
        if r.status in ("failed", "error") and r.misconception != FORBIDDEN_MISCONCEPTION
    ]
    if not failing:
        return results
    matched = {name for i in failing for name in results[i].candidates}
    ruled_out = {name for i in failing for name in results[i].ruled_out}
    survivors = [m for m in exercise.misconceptions if m.name in matched and m.name not in ruled_out]
    for case, verdict in zip(cases, results, strict=True):
        if len(survivors) == 0:
            break
        if verdict.passed:
            survivors = [m for m in survivors if not _shows_on(exercise, case, m)]
    named = survivors[0] if len(survivors) == 1 else None
    for i in failing:
        r = results[i]
        if named is not None and named.name in r.candidates:
            results[i] = replace(r, misconception=named.name, hint=named.hint)
        elif r.misconception is not None:
            hint = exercise.hint if r.status == "failed" else error_hint(r.hidden)
            results[i] = replace(r, misconception=None, hint=hint)
    return results


def _shows_on(exercise: Exercise, case: Case, mis: Any) -> bool:
    """Whether the mistake ``mis`` shows on ``case`` (a form of it runs, none giving the right output)."""
    inputs = case.make_inputs()
    expected = to_arrays(exercise.reference(*inputs))
    precision = question_precision(inputs, expected)
    _, ruled_out = _sort_mistakes(
        [mis], case, lambda wrong: _same_values(wrong, expected, exercise, precision, None)
    )
    return bool(ruled_out)


def _scale_slack(slack: Any, factor: float) -> Any:
    if isinstance(slack, tuple):
        return tuple(_scale_slack(s, factor) for s in slack)
    if isinstance(slack, dict):
        return {k: _scale_slack(v, factor) for k, v in slack.items()}
    return None if slack is None else slack * factor


def _same_values(wrong: Any, got: Any, exercise: Exercise, precision: Any, slack: Any) -> bool:
    """Whether ``got`` matches a wrong variant's output (kinds are not required to match here).

    Naming a mistake earns no marks, so here the answer's own precision may
    widen the tolerance: a float16 answer that makes a known mistake is named.
    """
    if exercise.compare is not None:
        return exercise.compare(wrong, got, exercise)[0]
    naming = lowest_precision([precision, output_precision(got)])
    return compare_outputs(
        _as_numbers(wrong), _as_numbers(got), exercise.rtol, exercise.atol, slack=slack, precision=naming
    )[0]


def _as_numbers(value: Any) -> Any:
    if isinstance(value, tuple):
        return tuple(_as_numbers(v) for v in value)
    if isinstance(value, dict):
        return {k: _as_numbers(v) for k, v in value.items()}
    if isinstance(value, np.ndarray) and value.dtype.kind in "biu":
        return value.astype(np.float64)
    return value


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""


def judge_error(exercise: Exercise, case: Case, error_type: str, error_text: str) -> CaseResult:
    """The verdict for a case whose call raised ``error_type: error_text``.

    A known wrong variant that raises the same error on these inputs (say, a
    plain ``.T`` on a batched array) is a candidate, like a wrong output would
    be, and is named when it is the only one (see :func:`name_mistakes`).
    """
    message = f"raised {error_type}" + (f": {error_text}" if error_text else "")
    matches, ruled_out = [], []
    for mis in exercise.misconceptions:
        ran = False
        for form in mis.forms():
            try:
                with np.errstate(all="ignore"):
                    form(*case.make_inputs())
            except Exception as exc:
                if type(exc).__name__ == error_type and _first_line(exc) == error_text:
                    matches.append(mis)
                    break
            else:
                ran = True
        else:
            if ran:  # it runs where the answer raised
                ruled_out.append(mis)
    return _failed(exercise, case, "error", message, matches, ruled_out)


FORBIDDEN_MISCONCEPTION = "calls an existing implementation (not allowed)"


def forbidden_calls(exercise_id: str, func: Callable[..., Any] | None = None, source: str | None = None):
    """The forbidden calls (``Exercise.forbidden``) that an answer uses; ``[]`` when none.

    ``source`` (an answer cell's source, as the grader has it) is read with
    :func:`attnlib.checks.rules.find_forbidden`; ``func`` with
    :func:`attnlib.checks.rules.forbidden_in_function` (its source and
    the learner's helpers it calls). Give either or both.
    """
    from attnlib.checks.rules import find_forbidden, forbidden_in_function

    exercise = get_exercise(exercise_id)
    if not exercise.forbidden or (func is exercise.reference and source is None):
        return []  # the reference is attnlib's own implementation
    found: set[str] = set()
    if source is not None:
        found |= set(find_forbidden(source, exercise.forbidden))
    if func is not None and callable(func):
        found |= set(forbidden_in_function(func, exercise.forbidden))
    return sorted(found)


def allow_list(exercise: Exercise, func: Callable[..., Any]):
    """The allow-list rule (:func:`attnlib.checks.rules.audit_function`) on ``func``, as the
    grader applies it to the notebook: forbidden entries score 0, review reasons hold the mark."""
    from attnlib.checks.rules import Audit, audit_function
    from attnlib.checks.rules.allowed import policy

    if func is exercise.reference or not callable(func):
        return Audit()
    return audit_function(func, policy(exercise.id, exercise.function, exercise.forbidden))


def review_lines(reasons: Sequence[str]) -> list[str]:
    """The feedback's lines for an answer the allow-list rule sends to review."""
    lines = ["  REVIEW: the grader will not mark this answer by itself; your instructor reads it, because"]
    lines += [f"    - {why}" for why in reasons[:8]]
    if len(reasons) > 8:
        lines.append(f"    - and {len(reasons) - 8} more")
    from attnlib.checks.rules.allowed import RULE_SENTENCE

    lines.append(f"  The rule: {RULE_SENTENCE}")
    return lines


def forbidden_message(found: Sequence[str]) -> str:
    """The feedback for an answer that uses the forbidden calls ``found``."""
    names = ", ".join(found)
    return (
        f"not allowed: the answer uses {names}, an existing implementation of what it computes "
        "(scores 0; the exercise's text lists what its answer may not call)"
    )


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
    audit = allow_list(exercise, func) if apply_forbidden else None
    if audit is not None and audit.forbidden:
        found = sorted(set(found) | set(audit.forbidden))
    if found:
        judged = evaluate(exercise_id, func, include_hidden, apply_forbidden=False)
        return forbidden_result(exercise, found, include_hidden, judged)
    result = CheckResult(exercise_id, hints=exercise.hint_tiers())
    if audit is not None:
        result.review = audit.review
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
    result.cases = name_mistakes(exercise, cases, result.cases)
    return result
