"""Verdicts: from what the harness reported about each case to the record's scores.

Runs in the grader's process only; the learner's code never reaches it. A case's
verdict is a :class:`~attnlib.checks.core.CaseResult` whose status is the word of a
:class:`~coursetools.grade.records.record.CaseStatus`; what the harness reported is a
:class:`~coursetools.grade.records.events.CaseEvent` of a :class:`~coursetools.grade.records.events.CaseKind`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from attnlib.checks.core import (
    FORBIDDEN_MISCONCEPTION,
    CaseResult,
    Exercise,
    forbidden_message,
    judge_case,
    judge_error,
    name_mistakes,
)
from coursetools.grade.records.events import CaseEvent, CaseKind
from coursetools.grade.records.record import Case, CaseStatus, ExerciseResult, Record, Status
from coursetools.grade.records.wire import WireError, decode

ERROR = CaseStatus.ERROR.value  # a CaseResult's status is the plain word (it is stored as JSON)
DIED_HINT = "run the function on the case's inputs in a fresh kernel"
# a hidden case's inputs are never shown: its hint asks for nothing the learner cannot see (issue 43.4)
DIED_HINT_HIDDEN = (
    "this case's inputs are hidden: run the function in a fresh kernel on inputs of your own like "
    "the visible cases', larger ones too, and look for what ends the process (os._exit, memory)"
)

# Verdicts compute references in the grader's process, from several job threads. A
# reference or a case may draw from (or seed) a global random generator, or import a
# part of torch lazily (two threads doing that at once fail): one verdict at a time, with
# torch's and NumPy's global generators saved and restored around it, so that no verdict
# depends on another thread's timing.
_JUDGE_LOCK = threading.RLock()


def judge(exercise: Exercise, case, event: CaseEvent | dict | None, settings) -> CaseResult | None:
    """The verdict for one case from what the harness sent (``None``: no verdict)."""
    if isinstance(event, dict):
        event = CaseEvent.from_event(event)
    if event is None:
        return None
    with one_at_a_time():
        return _judge(exercise, case, event, settings)


@contextmanager
def one_at_a_time() -> Iterator[None]:
    """Run a reference or a case's ``make_inputs`` alone, with the global generators restored after."""
    import numpy as np
    import torch

    with _JUDGE_LOCK, torch.random.fork_rng(devices=[]):
        np_state = np.random.get_state()  # noqa: NPY002 - saving the legacy global state
        try:
            yield
        finally:
            np.random.set_state(np_state)  # noqa: NPY002


def _judge(exercise: Exercise, case, event: CaseEvent, settings) -> CaseResult | None:
    kind = event.kind  # a CaseKind member (CaseEvent makes it one)
    try:
        if kind is CaseKind.VALUE:
            try:
                got = decode(event.value)
            except WireError as exc:
                return CaseResult(
                    case.name, ERROR, f"the output could not be read: {exc}", hidden=case.hidden
                )
            return judge_case(exercise, case, got)
        if kind is CaseKind.NOT_ATTEMPTED:
            return CaseResult(
                case.name, CaseStatus.NOT_ATTEMPTED.value, "not attempted yet", hidden=case.hidden
            )
        if kind is CaseKind.MISSING:
            return CaseResult(
                case.name,
                ERROR,
                event.text,
                hint=f"define {exercise.function}() in the answer cell, with the name given in the exercise",
                hidden=case.hidden,
            )
        if kind is CaseKind.ERROR:
            return judge_error(exercise, case, event.etype or "Exception", event.text)
        if kind is CaseKind.TIMEOUT:
            return CaseResult(
                case.name,
                ERROR,
                f"did not finish within {settings.timeout_cell:g} s",
                hint="look for a loop that never ends, or work that grows much faster than the input",
                hidden=case.hidden,
            )
        if kind in (CaseKind.TIMEOUT_SKIPPED, CaseKind.DIED_SKIPPED):
            what = "did not finish" if kind is CaseKind.TIMEOUT_SKIPPED else "crashed the process"
            return CaseResult(
                case.name,
                ERROR,
                f"not run: an earlier case of this exercise {what}",
                hidden=case.hidden,
            )
        if kind is CaseKind.DIED:
            return CaseResult(
                case.name,
                ERROR,
                "the process died while running this case (os._exit, a crash, or the memory limit)",
                hint=DIED_HINT_HIDDEN if case.hidden else DIED_HINT,
                hidden=case.hidden,
            )
    except Exception as exc:  # noqa: BLE001 - a verdict must never crash the grader
        return CaseResult(
            case.name, ERROR, f"could not be judged: {type(exc).__name__}: {exc}"[:300], hidden=case.hidden
        )
    return None


def finish(
    record: Record, assignment, exercises, results, settings, started: float, held: dict | None = None
) -> Record:
    """Step 4 of :func:`coursetools.grade.grading.runner.grade_submission`: judge every case and complete
    ``record`` (its exercises, ``total``, ``max``, ``seconds``; ``graded`` becomes ``needs-review``
    when a reason to review was found). ``results``: ``{(exercise, case): CaseEvent}``.

    ``held``: ``{exercise: reasons}``, the answers the allow-list rule sends to a person
    (:func:`attnlib.checks.rules.audit_notebook`): their cases are judged and shown, but
    the exercise gets no score (and the record no total) until an instructor sets one; the
    reasons are in ``record.review``, so the record needs review."""
    held = held or {}
    status = record.status
    readable = status is not Status.UNREADABLE
    total = 0.0
    complete = readable
    for ex_id, points in assignment.points.items():
        exercise = exercises[ex_id]
        banned = record.forbidden.get(ex_id) if readable else None
        raw = [_verdict(exercise, ex_id, case, banned, results, settings) for case in exercise.cases]
        verdicts = [_stored(v) for v in _named_across_cases(exercise, raw)]
        score = None
        if ex_id in held:
            complete = False  # never marks: a person decides (the reasons are in record.review)
            for why in held[ex_id]:
                if why not in record.review:
                    record.review.append(str(why))
        elif readable and all(v is not None for v in verdicts):
            passed = sum(v.passed for v in verdicts if v is not None)
            score = round(points * passed / len(verdicts), 6)
            total += score
        else:
            complete = False
        record.exercises[ex_id] = ExerciseResult(
            ex_id,
            points,
            score,
            exercise.function,
            tuple(
                v if v is not None else Case(case.name, CaseStatus.NO_VERDICT, case.hidden)
                for v, case in zip(verdicts, exercise.cases, strict=True)
            ),
        )
    record.total = round(total, 6) if complete else None
    record.max = assignment.max_points
    if status is Status.GRADED and record.review:
        record.status = Status.NEEDS_REVIEW
    record.seconds = round(time.monotonic() - started, 3)
    return record


def _named_across_cases(exercise: Exercise, raw: list[CaseResult | None]) -> list[CaseResult | None]:
    """The verdicts with a mistake named only where the cases tell it apart from the other
    registered mistakes (:func:`attnlib.checks.judge.name_mistakes`, as ``check()`` does): one
    case alone may fit several mistakes, and naming the wrong one sends a learner to fix what
    was right. Cases without a verdict take no part."""
    judged = [(case, v) for case, v in zip(exercise.cases, raw, strict=True) if v is not None]
    if not judged:
        return raw
    named = iter(name_mistakes(exercise, [c for c, _ in judged], [v for _, v in judged]))
    return [next(named) if v is not None else None for v in raw]


def _stored(verdict: CaseResult | None) -> Case | None:
    if verdict is None:
        return None
    return Case(
        verdict.case,
        CaseStatus.parse(verdict.status),
        verdict.hidden,
        verdict.message,
        verdict.misconception,
        verdict.hint,
    )


def _verdict(exercise: Exercise, ex_id: str, case, banned, results: dict, settings) -> CaseResult | None:
    """One case's verdict: 0 points when the answer uses a forbidden call (``banned``)."""
    verdict: CaseResult | None
    if banned:
        verdict = CaseResult(
            case.name,
            CaseStatus.FAILED.value,
            forbidden_message(banned),
            FORBIDDEN_MISCONCEPTION,
            "write the computation with basic operations (matrix products, exp, sums, max).",
            case.hidden,
        )
    else:
        verdict = judge(exercise, case, results.get((ex_id, case.name)), settings)
    return verdict
