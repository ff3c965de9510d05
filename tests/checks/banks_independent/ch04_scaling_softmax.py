"""Independent bank for chapter 04, written from the exercise text only (#25)."""

import numpy as np
from bank import Right, Wrong
from banks.scaffold import shifted_softmax, swap_last

# ---- ex-04-1 stable_softmax -------------------------------------------------


def ss_global_max(x):
    e = np.exp(x - np.max(x))
    return e / e.sum(-1, keepdims=True)


def ss_naive(x):
    e = np.exp(x)
    return e / e.sum(-1, keepdims=True)


def ss_max_axis0(x):
    e = np.exp(x - x.max(0, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def ss_no_keepdims(x):
    m = x.max(-1)
    e = np.exp(x - m)  # (..., S) - (...,) broadcasts along the wrong axis
    return e / e.sum(-1)


def ss_clip(x):
    e = np.exp(np.clip(x, -50, 50))  # clipping instead of shifting
    return e / e.sum(-1, keepdims=True)


def ss_via_lse(x):
    m = x.max(-1, keepdims=True)
    return np.exp(x - (m + np.log(np.exp(x - m).sum(-1, keepdims=True))))


# ---- ex-04-2 log_sum_exp ----------------------------------------------------


def lse_naive(x):
    return np.log(np.exp(x).sum(-1))


def lse_forgot_m(x):
    m = x.max(-1, keepdims=True)
    return np.log(np.exp(x - m).sum(-1))  # m not added back


def lse_keepdims(x):
    m = x.max(-1, keepdims=True)
    return m + np.log(np.exp(x - m).sum(-1, keepdims=True))  # shape (..., 1)


def lse_global_max(x):
    m = x.max()
    return m + np.log(np.exp(x - m).sum(-1))


def lse_squeeze(x):
    m = np.max(x, axis=-1, keepdims=True)
    return np.squeeze(m + np.log(np.sum(np.exp(x - m), axis=-1, keepdims=True)), -1)


# ---- ex-04-3 scaled_scores --------------------------------------------------


def sc_by_d_k(q, k):
    return q @ swap_last(k) / q.shape[-1]


def sc_by_length(q, k):
    return q @ swap_last(k) / np.sqrt(k.shape[-2])  # sqrt(S)


def sc_T(q, k):
    return q @ k.T / np.sqrt(q.shape[-1])


def sc_unscaled(q, k):
    return q @ swap_last(k)


def sc_einsum(q, k):
    return np.einsum("...ld,...sd->...ls", q / np.sqrt(q.shape[-1]), k)


# ---- ex-04-4 attention_weights ----------------------------------------------


def aw_d_model(x, w_q, w_k):
    return shifted_softmax((x @ w_q) @ swap_last(x @ w_k) / np.sqrt(x.shape[-1]))


def aw_shape0(x, w_q, w_k):
    return shifted_softmax((x @ w_q) @ swap_last(x @ w_k) / np.sqrt(w_q.shape[0]))  # = d_model


def aw_naive_softmax(x, w_q, w_k):
    e = np.exp((x @ w_q) @ swap_last(x @ w_k) / np.sqrt(w_q.shape[-1]))
    return e / e.sum(-1, keepdims=True)


def aw_axis_minus2(x, w_q, w_k):
    e = (x @ w_q) @ swap_last(x @ w_k) / np.sqrt(w_q.shape[-1])
    e = np.exp(e - e.max(-2, keepdims=True))
    return e / e.sum(-2, keepdims=True)


def aw_unscaled(x, w_q, w_k):
    return shifted_softmax((x @ w_q) @ swap_last(x @ w_k))


def aw_einsum_lse(x, w_q, w_k):
    d_k = w_k.shape[1]
    q = np.einsum("...ld,de->...le", x, w_q)
    k = np.einsum("...ld,de->...le", x, w_k)
    e = np.einsum("...le,...me->...lm", q, k) / np.sqrt(d_k)
    m = e.max(-1, keepdims=True)
    return np.exp(e - m - np.log(np.exp(e - m).sum(-1, keepdims=True)))


WRONG = [
    Wrong("ex-04-1", ss_global_max, "global max, not per row"),
    Wrong("ex-04-1", ss_naive, "no max subtracted: overflow"),
    Wrong("ex-04-1", ss_max_axis0, "max over axis 0"),
    Wrong("ex-04-1", ss_no_keepdims, "max without keepdims broadcasts wrong"),
    Wrong("ex-04-1", ss_clip, "clipping the logits instead of shifting"),
    Wrong("ex-04-2", lse_naive, "naive log(sum(exp)) overflows"),
    Wrong("ex-04-2", lse_forgot_m, "m not added back"),
    Wrong("ex-04-2", lse_keepdims, "keepdims result shape (..., 1)"),
    Wrong("ex-04-2", lse_global_max, "global max, not per row"),
    Wrong("ex-04-3", sc_by_d_k, "divided by d_k, not sqrt"),
    Wrong("ex-04-3", sc_by_length, "divided by sqrt(S)"),
    Wrong("ex-04-3", sc_T, ".T on batched keys"),
    Wrong("ex-04-3", sc_unscaled, "not scaled"),
    Wrong("ex-04-4", aw_d_model, "scaled by sqrt(d_model)"),
    Wrong("ex-04-4", aw_shape0, "d_k read as w_q.shape[0] (= d_model)"),
    Wrong("ex-04-4", aw_naive_softmax, "naive softmax overflows"),
    Wrong("ex-04-4", aw_axis_minus2, "softmax over queries"),
    Wrong("ex-04-4", aw_unscaled, "not scaled"),
]
# lse_logaddexp (np.logaddexp.reduce(x, axis=-1)) was a right answer here; the text of 04.2 now
# names a library's log-sum-exp, np.logaddexp included, off limits, so it moved to the forbidden
# one-line equivalents of tests/checks/test_forbidden.py (LOGSUMEXP_BANK).
RIGHT = [
    Right("ex-04-1", ss_via_lse),
    Right("ex-04-2", lse_squeeze),
    Right("ex-04-3", sc_einsum),
    Right("ex-04-4", aw_einsum_lse),
]

# What the feedback must say for the mistake to count as named (the check's
# vocabulary, read off the feedback); None: a known gap, the answer loses marks
# but nothing names its mistake (see tests/checks/independent_banks.py).
NAMED = {
    "ss_global_max": "global max instead of the row max",
    "ss_naive": "no max subtraction",
    "ss_max_axis0": "the maximum taken over axis 0",
    "ss_no_keepdims": "without keepdims",
    "ss_clip": None,
    "lse_naive": "computed naively",
    "lse_forgot_m": "the maximum is not added back",
    "lse_keepdims": "keepdims=True left on the result",
    "lse_global_max": "global max instead of the row max",
    "sc_by_d_k": "divided by d_k instead of sqrt(d_k)",
    "sc_by_length": "sqrt(S), the number of keys",
    "sc_T": "k.T swaps the batch axes too",
    "sc_unscaled": "forgetting the scale",
    "aw_d_model": "sqrt(d_model) instead of sqrt(d_k)",
    "aw_shape0": "sqrt(d_model) instead of sqrt(d_k)",
    "aw_naive_softmax": "no max subtraction",
    "aw_axis_minus2": "softmax over the wrong axis",
    "aw_unscaled": "forgetting the scale",
}
