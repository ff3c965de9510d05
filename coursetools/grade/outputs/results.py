"""Gradescope's ``results.json`` for one learner, rendered from the final scores.

Gradescope's format (https://gradescope-autograders.readthedocs.io/en/latest/specs/):
``results.json`` has a top-level ``score`` (it overrides the sum of the tests),
``output`` and ``tests``; each test a ``name``, ``score``, ``max_score``, ``output``,
``status`` and ``visibility``. We write two tests per exercise: its visible cases
(``visible``) and its hidden cases (``after_published``). The optional ``execution_time``
is not written (issue 43.3): a run's time is the learner's code's to choose (a sleep as
long as a hidden input's value), and the learner reads this file.
:mod:`.publish` writes it for every learner; the autograder archive and its run are
:mod:`.gradescope`'s.
"""

from __future__ import annotations

from dataclasses import replace

from coursetools.grade.outputs.feedback import (
    after_hidden,
    case_details,
    case_label,
    learner_incidents,
    learner_message,
)
from coursetools.grade.outputs.scores import Grade, describe
from coursetools.grade.records.escape import visible
from coursetools.grade.records.record import AdjustmentKind, CaseStatus, Status

# a Gradescope test's own status field (its specification: "passed" or "failed"), not ours
GS_PASSED, GS_FAILED = "passed", "failed"


def _case_text(case, label: str, show_message: bool) -> list[str]:
    status = case.status
    words = {
        CaseStatus.PASSED: CaseStatus.PASSED.word,
        CaseStatus.FAILED: "FAILED",
        CaseStatus.ERROR: "ERROR",
        CaseStatus.NOT_ATTEMPTED: "not attempted",
        CaseStatus.NO_VERDICT: "not judged (the run stopped first)",
    }
    lines = [f"{words[status]}: {label}"]
    for name, phrase, text in case_details(case, show_message):
        lines.append(f"    {phrase}: {visible(text) if name == 'message' else text}")
    return lines


def _round(value: float) -> float:
    return round(float(value), 6)


def results_json(grade: Grade, show_hidden_inputs: bool = False) -> dict:
    """Gradescope's ``results.json`` for one learner's final grade
    (:class:`coursetools.grade.outputs.scores.Grade`).

    Two tests per exercise, the visible cases (``visible``) and the hidden
    ones (``after_published``; their inputs and outputs only with
    ``show_hidden_inputs``), each worth its cases' share of the exercise. Every
    adjustment (an override, a written answer graded by hand, a late penalty) adds
    a test of ``max_score`` 0 (a written answer: its points) saying what changed and
    why, and the top-level ``score`` is the final total.
    """
    record = grade.record
    tests = []
    automatic = 0.0
    late = set() if show_hidden_inputs else after_hidden(record)
    for ex_id, ex in record.exercises.items():
        cases = ex.cases
        share = ex.points / len(cases) if cases else 0.0
        label = f"{ex_id} {ex.function}()" if ex.function else ex_id
        if not cases:
            tests.append(
                {
                    "name": label,
                    "score": 0.0,
                    "max_score": _round(ex.points),
                    "status": GS_FAILED,
                    "output": (
                        "not judged: the file could not be read (nothing was run)"
                        if record.status is Status.UNREADABLE
                        else "not judged: the notebook could not be run"
                    ),
                    "visibility": "visible",
                }
            )
            continue
        for hidden in (False, True):
            group = [c for c in cases if c.hidden == hidden]
            if not group:
                continue
            passed = sum(c.passed for c in group)
            score = share * passed
            automatic += score
            head = f"{passed} of {len(group)} {'hidden' if hidden else 'visible'} cases passed"
            lines = [head, ""]
            for k, case in enumerate(group, start=1):
                name = case_label(case, k, show_hidden_inputs)
                if (ex_id, case.case) in late:
                    case = replace(case, message=learner_message(case.message or "", True))
                lines += _case_text(case, name, show_hidden_inputs or not hidden)
            tests.append(
                {
                    "name": f"{label}: {'hidden' if hidden else 'visible'} cases",
                    "score": _round(score),
                    "max_score": _round(share * len(group)),
                    "status": GS_PASSED if passed == len(group) else GS_FAILED,
                    "output": "\n".join(lines),
                    "visibility": "after_published" if hidden else "visible",
                }
            )
    for adjustment in grade.adjustments:
        before = adjustment.before or 0.0
        after = adjustment.after or 0.0
        written = adjustment.kind is AdjustmentKind.MANUAL
        tests.append(
            {
                "name": f"{adjustment.exercise or 'total'}: "
                + ("written answer, graded by your instructor" if written else "adjusted by your instructor"),
                "score": _round(after - before),
                "max_score": _round(grade.points.get(adjustment.exercise or "", 0.0)) if written else 0.0,
                "status": GS_PASSED,
                "output": visible(describe(adjustment)),
                "visibility": "visible",
            }
        )
    status = record.status
    summary = [f"status: {grade.status_text()}"]
    if grade.total is None:
        summary.insert(
            0,
            "Score: not final. Your file could not be read, so nothing was graded: the score shown "
            "here is not a grade; upload your notebook again."
            if status is Status.UNREADABLE
            else "Score: not final (not every part is judged yet): the score shown here is not your grade.",
        )
    summary += [f"- {visible(text)}" for text in learner_incidents(record, show_hidden_inputs)]
    if status is Status.UNREADABLE:
        summary += [f"- {visible(text)}" for text in record.notes]
    final = grade.total
    if final is None:
        final = automatic + sum((a.after or 0.0) - (a.before or 0.0) for a in grade.adjustments)
    return {
        "score": _round(final),
        "output": "\n".join(summary),
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": tests,
    }
