"""Verdicts: from what the harness reported about each case to the record's scores.

Runs in the grader's process only; the learner's code never reaches it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict

from attnlib.checks.core import (
    FORBIDDEN_MISCONCEPTION,
    CaseResult,
    Exercise,
    forbidden_message,
    judge_case,
    judge_error,
)
from coursetools.grade.events import CaseEvent
from coursetools.grade.wire import WireError, decode


def _case_dict(result: CaseResult) -> dict:
    return asdict(result)


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
    kind = event.kind
    try:
        if kind == "value":
            try:
                got = decode(event.value)
            except WireError as exc:
                return CaseResult(
                    case.name, "error", f"the output could not be read: {exc}", hidden=case.hidden
                )
            return judge_case(exercise, case, got)
        if kind == "not-attempted":
            return CaseResult(case.name, "not-attempted", "not attempted yet", hidden=case.hidden)
        if kind == "missing":
            return CaseResult(
                case.name,
                "error",
                event.text,
                hint=f"define {exercise.function}() in the answer cell, with the name given in the exercise",
                hidden=case.hidden,
            )
        if kind == "error":
            return judge_error(exercise, case, event.etype or "Exception", event.text)
        if kind == "timeout":
            return CaseResult(
                case.name,
                "error",
                f"did not finish within {settings.timeout_cell:g} s",
                hint="look for a loop that never ends, or work that grows much faster than the input",
                hidden=case.hidden,
            )
        if kind in ("timeout-skipped", "died-skipped"):
            what = "did not finish" if kind == "timeout-skipped" else "crashed the process"
            return CaseResult(
                case.name,
                "error",
                f"not run: an earlier case of this exercise {what}",
                hidden=case.hidden,
            )
        if kind == "died":
            return CaseResult(
                case.name,
                "error",
                "the process died while running this case (os._exit, a crash, or the memory limit)",
                hint="run the function on the case's inputs in a fresh kernel",
                hidden=case.hidden,
            )
    except Exception as exc:  # noqa: BLE001 - a verdict must never crash the grader
        return CaseResult(
            case.name, "error", f"could not be judged: {type(exc).__name__}: {exc}"[:300], hidden=case.hidden
        )
    return None


def finish(record, assignment, exercises, results, settings, started) -> dict:
    total = 0.0
    complete = record["status"] != "unreadable"
    for ex_id, points in assignment.points.items():
        exercise = exercises[ex_id]
        cases = []
        banned = record.get("forbidden", {}).get(ex_id)
        for case in exercise.cases:
            if banned and record["status"] != "unreadable":
                # the answer cell uses a call that already implements the exercise: 0 points
                verdict = CaseResult(
                    case.name,
                    "failed",
                    forbidden_message(banned),
                    FORBIDDEN_MISCONCEPTION,
                    "write the computation with basic operations (matrix products, exp, sums, max).",
                    case.hidden,
                )
            else:
                verdict = judge(exercise, case, results.get((ex_id, case.name)), settings)
            cases.append(None if verdict is None else _case_dict(verdict))
        judged = [c for c in cases if c is not None]
        score = None
        if record["status"] != "unreadable" and len(judged) == len(cases):
            score = round(points * sum(c["status"] == "passed" for c in judged) / len(cases), 6)
            total += score
        else:
            complete = False
        record["exercises"][ex_id] = {
            "function": exercise.function,
            "points": points,
            "score": score,
            "cases": [
                c if c is not None else {"case": case.name, "status": "no-verdict", "hidden": case.hidden}
                for c, case in zip(cases, exercise.cases, strict=True)
            ],
        }
    record["total"] = round(total, 6) if complete else None
    record["max"] = assignment.max_points
    if record["status"] == "graded" and record["review"]:
        record["status"] = "needs-review"
    record["seconds"] = round(time.monotonic() - started, 3)
    return record
