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
    core._discover()
    monkeypatch.setitem(core._REGISTRY, FLOAT32_QUESTION.id, FLOAT32_QUESTION)
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
    core._discover()
    monkeypatch.setitem(core._REGISTRY, TIERED.id, TIERED)
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
