"""The grader names a mistake as check() does: only where the cases tell it apart (issue 33.11).

``verdict.finish`` judges each case from the harness's events, then passes the exercise's
verdicts through :func:`attnlib.checks.judge.name_mistakes`, so the record, the feedback and
the class report's count of a mistake agree with the learner's own ``check()``.
"""

from __future__ import annotations

import torch

from attnlib.checks import get_exercise
from attnlib.checks.core import evaluate, judge_case, run_case
from coursetools.grade.grading.verdict import _named_across_cases, _stored


def strictly_lower(q_len, k_len):  # ex-05-2's "a token may not attend to itself" mistake
    return torch.ones(q_len, k_len, dtype=torch.bool).tril(-1)


def test_the_grader_names_the_mistake_that_check_names_and_nothing_on_the_one_by_one_case():
    exercise = get_exercise("ex-05-2")
    raw = [judge_case(exercise, case, run_case(strictly_lower, case)) for case in exercise.cases]
    one = next(i for i, c in enumerate(exercise.cases) if c.name == "hidden: one query, one key")
    assert raw[one].misconception is None and len(raw[one].candidates) == 2  # alone: ambiguous
    stored = [_stored(v) for v in _named_across_cases(exercise, raw)]
    learner = evaluate("ex-05-2", strictly_lower, include_hidden=True)
    assert [c.misconception for c in stored] == [c.misconception for c in learner.cases]
    named = {c.misconception for c in stored if c.misconception}
    assert named == {"strictly lower triangular (a token may not attend to itself)"}, named


def test_cases_without_a_verdict_take_no_part():
    exercise = get_exercise("ex-05-2")
    raw = [judge_case(exercise, case, run_case(strictly_lower, case)) for case in exercise.cases]
    raw[0] = None
    out = _named_across_cases(exercise, raw)
    assert out[0] is None and len(out) == len(raw)
    assert all(v is not None for v in out[1:])
    assert _named_across_cases(exercise, [None] * len(raw)) == [None] * len(raw)
