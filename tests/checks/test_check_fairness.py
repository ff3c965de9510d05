"""Checks that are fair to the letter (issue 25, items 8, 9 and 11).

* The tolerance comes from the question (the case's inputs and the reference's
  output), never from the answer: an answer cast to float16 does not pass a
  float32 exercise with float16's tolerance; a float32 answer passes a float32
  one, and an answer more precise than the question passes too.
* The hint ladder: a failed check shows one more tier only when the answer
  changed since the last check; running the same answer again shows the same
  tiers; a check of a function not named as the exercise asks (a chapter's
  demonstration, a lambda) is a tour and uses up none of the learner's tiers.
"""

from __future__ import annotations

import numpy as np
import pytest

from attnlib.checks import Case, Exercise, check, core, evaluate
from attnlib.checks import exercise as registry
from attnlib.checks import notebook as notebook_checks


def softmax32(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


FLOAT32_QUESTION = Exercise(
    id="ex-98-1",
    function="softmax",
    reference=softmax32,
    cases=[Case("float32 scores", lambda: (np.linspace(-3.0, 4.0, 24, dtype=np.float32).reshape(2, 12),))],
    rtol=1e-6,
    atol=1e-7,
)


@pytest.fixture
def registered(monkeypatch):
    registry._discover()
    monkeypatch.setitem(registry._REGISTRY, FLOAT32_QUESTION.id, FLOAT32_QUESTION)
    monkeypatch.setattr(notebook_checks, "_FAILED_CHECKS", {})
    monkeypatch.setattr(notebook_checks, "_LAST_FAILURE", {})


def test_an_answer_cast_to_float16_fails_a_float32_question(registered):
    def softmax(x):  # right, then rounded to half precision
        return softmax32(x).astype(np.float16)

    result = evaluate(FLOAT32_QUESTION.id, softmax, apply_forbidden=False)
    assert result.fraction == 0.0, result.report()
    assert "values differ" in result.report()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_right_answer_in_the_questions_precision_or_better_passes(registered, dtype):
    def softmax(x):
        x = x.astype(dtype)
        return np.exp(x) / np.exp(x).sum(axis=-1, keepdims=True)  # another order of operations

    result = evaluate(FLOAT32_QUESTION.id, softmax, apply_forbidden=False)
    assert result.fraction == 1.0, result.report()


def test_the_question_precision_reads_inputs_modules_and_outputs():
    import torch

    from attnlib.checks.compare import question_precision

    assert question_precision((np.zeros(2, np.float32),)) == np.float32
    assert question_precision((torch.zeros(2, dtype=torch.float64),), np.zeros(1)) is None
    assert question_precision((torch.nn.Linear(2, 2).to(torch.float16),)) == np.float16
    assert question_precision((torch.zeros(2, dtype=torch.bfloat16),)) == np.float32  # NumPy has no bf16
    assert question_precision((np.arange(3), 2)) == np.float32  # no float input: torch's default


TIERED = Exercise(
    id="ex-98-2",
    function="double",
    reference=lambda x: 2 * x,
    cases=[Case("vector", lambda: (np.arange(3.0),))],
    hints=("twice the input.", "add the input to itself.", "multiply by the number of copies."),
)


@pytest.fixture
def tiered(monkeypatch):
    registry._discover()
    monkeypatch.setitem(registry._REGISTRY, TIERED.id, TIERED)
    monkeypatch.setattr(notebook_checks, "_FAILED_CHECKS", {})
    monkeypatch.setattr(notebook_checks, "_LAST_FAILURE", {})


def shown_tiers(capsys) -> list[int]:
    out = capsys.readouterr().out
    return [int(n) for n in __import__("re").findall(r"hint (\d)/3", out)]


def test_the_same_answer_again_shows_the_same_tier(tiered, capsys):
    def double(x):
        return x

    check(TIERED.id, double)
    assert shown_tiers(capsys) == [1]
    check(TIERED.id, double)  # the cell run again, unchanged
    assert shown_tiers(capsys) == [1]

    def double(x):  # noqa: F811 - the learner edits the cell
        return x + 1

    check(TIERED.id, double)
    assert shown_tiers(capsys) == [1, 2]
    check(TIERED.id, double)
    assert shown_tiers(capsys) == [1, 2]


def test_a_tour_of_a_wrong_answer_uses_no_tier(tiered, capsys):
    check(TIERED.id, lambda x: x)  # a demonstration: not named as the exercise asks
    check(TIERED.id, lambda x: x - 1)
    assert shown_tiers(capsys) == [1, 1]  # each tour shows tier 1 only

    def double(x):
        return x

    check(TIERED.id, double)  # the learner's first failed check: their first tier
    assert shown_tiers(capsys) == [1]


def test_compare_outputs_widens_to_float32_at_most():
    """float32 is the widest the answer's dtype makes the tolerance; float16 earns nothing more."""
    from attnlib.checks import compare_outputs

    exp64 = np.array([1 / 3, 2 / 3, 1000.1])
    assert compare_outputs(exp64, exp64.astype(np.float32), rtol=1e-9, atol=1e-12)[0]
    exp32 = exp64.astype(np.float32)
    assert not compare_outputs(exp32, exp32.astype(np.float16), rtol=1e-6, atol=1e-7)[0]
    assert not compare_outputs(exp64, exp64.astype(np.float16), rtol=1e-6, atol=1e-7)[0]


def test_a_tours_report_comes_under_its_heading(tiered, capsys):
    """Issue 25 item 11: a demonstration's failures are not the learner's."""
    check(TIERED.id, lambda x: x)
    out = capsys.readouterr().out
    assert out.startswith(notebook_checks.TOUR_HEADING + "\n"), out

    def double(x):
        return x

    check(TIERED.id, double)
    assert notebook_checks.TOUR_HEADING not in capsys.readouterr().out


def test_a_pass_says_the_grader_adds_hidden_cases(tiered, capsys):
    """Issue 25 item 9: after a pass the learner is told the visible cases are not the whole grade."""

    def double(x):
        return 2 * x

    check(TIERED.id, double)
    assert notebook_checks.HIDDEN_CASES_NOTE in capsys.readouterr().out

    def double_wrong(x):
        return x

    check(TIERED.id, double_wrong)  # a failure (and a tour): no such line
    assert notebook_checks.HIDDEN_CASES_NOTE not in capsys.readouterr().out


# ------------------------------------------------------------- naming a mistake (#33 items 11, 14)

from attnlib.checks import Misconception, get_exercise, judge_case, name_mistakes, run_case  # noqa: E402


def _double(x):
    return 2 * x


def _square(x):
    return x * x


def _plus_two(x):
    return x + 2


def _toy(*misconceptions):
    """f(x) = x on three cases, x = 2 (where 2x = x*x = x+2), x = 3 and x = 0."""
    cases = [Case(f"x = {v}", lambda v=v: (np.array([float(v)]),)) for v in (2, 3, 0)]
    return Exercise("ex-98-2", "f", lambda x: x.copy(), cases, list(misconceptions))


@pytest.fixture
def toy(monkeypatch):
    registry._discover()

    def register(exercise):
        monkeypatch.setitem(registry._REGISTRY, exercise.id, exercise)
        return exercise

    return register


def test_a_case_that_cannot_tell_two_mistakes_apart_names_neither():
    """x = 2: doubling and squaring give the same 4; that case alone names no mistake."""
    exercise = _toy(Misconception("doubled", _double, "h1"), Misconception("squared", _square, "h2"))
    verdict = judge_case(exercise, exercise.cases[0], run_case(_double, exercise.cases[0]))
    assert verdict.status == "failed" and verdict.misconception is None
    assert set(verdict.candidates) == {"doubled", "squared"}
    verdict = judge_case(exercise, exercise.cases[1], run_case(_double, exercise.cases[1]))
    assert verdict.misconception == "doubled" and verdict.candidates == ("doubled",)


def test_the_other_cases_tell_them_apart(toy):
    exercise = toy(_toy(Misconception("doubled", _double, "h1"), Misconception("squared", _square, "h2")))
    result = evaluate(exercise.id, _double)
    # x = 0 passes (2*0 = 0) while squaring would also pass there; x = 3 tells them apart
    assert [c.status for c in result.cases] == ["failed", "failed", "passed"]
    assert [c.misconception for c in result.cases[:2]] == ["doubled", "doubled"]
    assert all(c.hint == "h1" for c in result.cases[:2])


def test_a_mistake_that_explains_one_failure_but_not_another_is_not_named(toy):
    """The answer is 2x on x = 2 (as doubling) but 3 + 2 on x = 3: doubling is ruled out at x = 3."""

    def answer(x):
        return x + 2

    exercise = toy(_toy(Misconception("doubled", _double, "h1")))
    result = evaluate(exercise.id, answer)
    assert [c.status for c in result.cases] == ["failed", "failed", "failed"]
    assert not any(c.misconception for c in result.cases)
    assert result.cases[0].candidates == ("doubled",) and "doubled" in result.cases[1].ruled_out


def test_a_mistake_that_would_have_shown_on_a_passed_case_is_not_named(toy):
    """Adding 2 shows at x = 0; an answer right at x = 0 is not that mistake, even if it agrees elsewhere."""

    def answer(x):
        return np.where(x == 0, x, x + 2)

    exercise = toy(_toy(Misconception("plus two", _plus_two, "h")))
    result = evaluate(exercise.id, answer)
    assert [c.status for c in result.cases] == ["failed", "failed", "passed"]
    assert not any(c.misconception for c in result.cases)
    exercise = toy(_toy(Misconception("doubled", _double, "h")))
    result = evaluate(exercise.id, _double)  # doubling is right at x = 0: named
    assert [c.misconception for c in result.cases] == ["doubled", "doubled", None]


def test_a_mistake_written_two_ways_is_named_from_either(toy):
    exercise = toy(_toy(Misconception("grew", _plus_two, "h", variants=(_square,))))
    assert {c.misconception for c in evaluate(exercise.id, _square).cases if not c.passed} == {"grew"}
    assert {c.misconception for c in evaluate(exercise.id, _plus_two).cases if not c.passed} == {"grew"}
    with pytest.raises(ValueError, match="duplicate misconception"):
        _toy(Misconception("grew", _plus_two, "h"), Misconception("grew", _square, "h"))


def test_name_mistakes_keeps_a_grader_verdict_without_candidates():
    exercise = _toy(Misconception("doubled", _double, "h1"))
    verdicts = [judge_case(exercise, c, run_case(_double, c)) for c in exercise.cases]
    named = name_mistakes(exercise, exercise.cases, verdicts)
    assert [v.misconception for v in named] == ["doubled", "doubled", None]
    timeout = core.CaseResult("x = 0", "error", "did not finish", hint="look for a loop")
    named = name_mistakes(exercise, exercise.cases, [*verdicts[:2], timeout])
    assert named[2].hint == "look for a loop" and named[0].misconception == "doubled"


def test_the_one_by_one_causal_mask_names_no_mistake_and_the_exercise_names_one():
    """Issue 33 item 11: on the 1 x 1 hidden case of ex-05-2 "strictly lower" and "inverted" agree."""
    import torch

    def strictly_lower(q_len, k_len):
        return torch.ones(q_len, k_len, dtype=torch.bool).tril(-1)

    exercise = get_exercise("ex-05-2")
    one = next(c for c in exercise.cases if c.name == "hidden: one query, one key")
    verdict = judge_case(exercise, one, run_case(strictly_lower, one))
    assert verdict.misconception is None and len(verdict.candidates) == 2
    result = evaluate("ex-05-2", strictly_lower, include_hidden=True)
    assert {c.misconception for c in result.cases if not c.passed} == {
        "strictly lower triangular (a token may not attend to itself)"
    }


def test_a_wrong_integer_or_boolean_scalar_fails():
    """np.argwhere finds no index in a 0-d array: a scalar answer (ex-13-4's byte count) was once
    passed whatever its value."""
    from attnlib.checks.compare import compare_outputs, to_arrays

    assert compare_outputs(to_arrays(2048), to_arrays(1024)) == (False, "expected 2048, got 1024")
    assert not compare_outputs(to_arrays(True), to_arrays(False))[0]
    assert compare_outputs(to_arrays(2048), to_arrays(2048))[0]
