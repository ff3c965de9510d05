"""Visible cases cover every rule an exercise's text states (issue 43, item 4).

A rule that only hidden cases test passes in the notebook ("Well done!") and loses marks at
grading: exercise 12.2's visible cases skipped its ties and ``k >= V`` (1.4 / 2 at grading).
A general test would have to read every text; here each rule of 12.2's text has an answer that
breaks that rule alone, and ``check()``'s visible cases must catch it. Other exercises' texts
were read by hand against their visible cases (the report of issue 43's fifth pass lists them).
"""

from __future__ import annotations

import warnings

import pytest
import torch

from attnlib.checks import ch12_real_text as ch12
from attnlib.checks import evaluate, get_exercise


def _without_length_guard(logits, k):
    """No case for k at least the row's length: torch.topk raises for k > V."""
    kth = torch.topk(logits, k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth, float("-inf"))


def _removes_one_when_k_is_the_length(logits, k):
    """k clipped to V - 1: a k equal to (or above) the row's length still removes the smallest."""
    k = min(k, logits.shape[-1] - 1)
    kth = torch.topk(logits, k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth, float("-inf"))


def _rows_of_a_matrix(logits, k):
    """Written for a (rows, V) matrix: the k largest along dim 1, which is V only in 2-D."""
    if k >= logits.shape[-1]:
        return logits
    kth = torch.topk(logits, min(k, logits.shape[1]), dim=1).values.narrow(1, -1 + min(k, logits.shape[1]), 1)
    return logits.masked_fill(logits < kth, float("-inf"))


# Exercise 12.2's text, rule by rule, and an answer that breaks that rule alone.
RULES_12_2 = {
    "each row keeps its k largest logits": ch12._top_k_smallest,
    "rows are the last dimension": ch12._top_k_first_axis,
    "the k-th largest is the threshold (not the k + 1-th)": ch12._top_k_plus_one,
    "every other entry is -inf": ch12._top_k_zero,
    "logits equal to the k-th largest are kept too": ch12._top_k_strict_ties,
    "a k at least the row's length keeps every logit (k > V)": _without_length_guard,
    "a k at least the row's length keeps every logit (k = V)": _removes_one_when_k_is_the_length,
    "return logits, not probabilities": ch12._top_k_probabilities,
    "logits of any leading shape (..., V)": _rows_of_a_matrix,
}


@pytest.mark.parametrize("rule", sorted(RULES_12_2))
def test_each_rule_of_12_2_has_a_visible_case(rule):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = evaluate("ex-12-2", RULES_12_2[rule], include_hidden=False, apply_forbidden=False)
    assert result.fraction < 1.0, (
        f"{rule}: every visible case passes an answer that breaks it\n{result.report()}"
    )


def test_the_reference_passes_the_visible_cases():
    result = evaluate("ex-12-2", ch12.top_k_logits, include_hidden=True, apply_forbidden=False)
    assert result.fraction == 1.0, result.report()
    visible = [c.name for c in get_exercise("ex-12-2").visible_cases()]
    assert any("ties" in name for name in visible) and any("length" in name for name in visible), visible
