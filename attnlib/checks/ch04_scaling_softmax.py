"""Chapter 04 exercises: a stable softmax, log-sum-exp, the scaled scores, stable attention weights."""

import math

import numpy as np

from attnlib import numpy as anp
from attnlib.checks._cases import cases, this_is_book, x_wq_wk
from attnlib.checks.core import Exercise, Misconception, register
from attnlib.checks.rules import (
    ATTENTION_IMPLEMENTATIONS,
    LOGSUMEXP_IMPLEMENTATIONS,
    SCALED_SCORE_IMPLEMENTATIONS,
    SOFTMAX_IMPLEMENTATIONS,
)

# --------------------------------------------------------------------------- references


def stable_softmax(x):
    """Softmax along the last axis of x (..., S), safe for any finite logits."""
    return anp.softmax(x, dim=-1)


def log_sum_exp(x):
    """log(sum(exp(x))) along the last axis: (..., S) -> (...)."""
    return anp.logsumexp(x, dim=-1)


def scaled_scores(q, k):
    """q (..., L, d_k), k (..., S, d_k) -> q k^T / sqrt(d_k), shape (..., L, S)."""
    return anp.scaled_dot_scores(q, k)


def attention_weights(x, w_q, w_k):
    """x (..., L, d_model), W_Q and W_K (d_model, d_k) -> softmax(Q K^T / sqrt(d_k)) (..., L, L)."""
    return anp.softmax(anp.scaled_dot_scores(x @ w_q, x @ w_k), dim=-1)


# --------------------------------------------------------------------------- wrong variants
# numpy warnings (overflow, 0/0) are silenced: these run inside the checker, and the
# learner should read the checker's message, not a RuntimeWarning.


def _quiet(fn):
    def wrapped(*args):
        with np.errstate(all="ignore"):
            return fn(*args)

    return wrapped


def _t(a):
    return np.swapaxes(a, -1, -2)


@_quiet
def _softmax_no_shift(x):
    e = np.exp(x)
    return e / e.sum(axis=-1, keepdims=True)


@_quiet
def _softmax_wrong_axis(x):
    e = np.exp(x - x.max(axis=-2, keepdims=True))
    return e / e.sum(axis=-2, keepdims=True)


@_quiet
def _softmax_global_max(x):
    e = np.exp(x - x.max())
    return e / e.sum(axis=-1, keepdims=True)


@_quiet
def _softmax_max_axis0(x):
    """m taken down axis 0 (the first axis), the sum along the rows."""
    e = np.exp(x - x.max(axis=0, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@_quiet
def _softmax_max_no_keepdims(x):
    e = np.exp(x - x.max(axis=-1))  # (..., S) - (...,): lines the maxima up with the wrong axis
    return e / e.sum(axis=-1, keepdims=True)


@_quiet
def _softmax_mean_shift(x):
    e = np.exp(x - x.mean(axis=-1, keepdims=True))  # a shift, but not one that bounds the exponents
    return e / e.sum(axis=-1, keepdims=True)


@_quiet
def _softmax_no_keepdims_at_all(x):
    e = np.exp(x - x.max(axis=-1))  # the same slip in the maximum ...
    return e / e.sum(axis=-1)  # ... and in the sum


@_quiet
def _lse_keepdims(x):
    m = x.max(axis=-1, keepdims=True)
    return m + np.log(np.exp(x - m).sum(axis=-1, keepdims=True))  # (..., 1)


def _masked_entries():
    return (np.array([[2.0, -np.inf, 0.5, 1.0], [-np.inf, -np.inf, 3.0, -1.0]]),)


@_quiet
def _lse_naive(x):
    return np.log(np.exp(x).sum(axis=-1))


@_quiet
def _lse_max_not_added_back(x):
    m = x.max(axis=-1, keepdims=True)
    return np.log(np.exp(x - m).sum(axis=-1))


@_quiet
def _lse_global_max(x):
    m = x.max()
    return m + np.log(np.exp(x - m).sum(axis=-1))


# --------------------------------------------------------------------------- inputs


def _logits(shape, seed, scale=3.0, shift=0.0):
    return (np.random.default_rng(seed).normal(size=shape) * scale + shift,)


def _rows_far_apart():
    # row 1 sits 1000 below row 0: subtracting the global max underflows all of row 1 to 0
    return (np.array([[0.0, 1.0, 2.0, 0.5], [-1000.0, -999.0, -998.0, -1001.0]]),)


def _logits_1000():
    return (np.array([[1000.0, 1001.0, 1002.0], [3.0, 1.0, 0.2]]),)


def _visible_logit_cases(shape, seed):
    """The visible cases that ex-04-1 and ex-04-2 share: small logits, then two that overflow.

    Rows of a ``cases(_logits, ...)`` table: a tuple row holds ``_logits``'s arguments.
    """
    return {
        f"small logits {shape}": (shape, seed),
        "logits near 1000": _logits_1000,
        "two rows 1000 apart": _rows_far_apart,
    }


def _qk(L, S, d_k, seed, batch=()):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(*batch, L, d_k)), rng.normal(size=(*batch, S, d_k))


# --------------------------------------------------------------------------- exercises

register(
    Exercise(
        id="ex-04-1",
        function="stable_softmax",
        reference=stable_softmax,
        cases=cases(
            _logits,
            {
                **_visible_logit_cases((2, 4), 0),
                # the text's "m is the row maximum": a mean shift leaves 750 in the exponent here
                "one logit 1000 above the rest of its row": lambda: (
                    np.array([[0.0, 0.0, 0.0, 1000.0], [3.0, 1.0, 2.0, 0.0]]),
                ),
                "hidden: a batch (2, 3, 5) of logits near 800": ((2, 3, 5), 1, 5.0, 800.0),
                "hidden: logits near -900 (4, 6)": ((4, 6), 2, 2.0, -900.0),
                "hidden: square (3, 3), rows 1000 apart": lambda: (
                    np.array([[1000.0, 999.0, 1001.0], [0.0, 1.0, -1.0], [2.0, 0.5, 1.0]]),
                ),
                "hidden: one logit per row (3, 1)": ((3, 1), 3, 5.0, 300.0),
                "hidden: one logit far above the rest of its row (1500 among zeros)": lambda: (
                    np.array([[0.0, 0.0, 0.0, 1500.0], [1.0, 2.0, 3.0, 4.0]]),
                ),
                "hidden: masked entries (-inf)": _masked_entries,
            },
        ),
        misconceptions=[
            Misconception(
                "no max subtraction (exp overflows or underflows)",
                _softmax_no_shift,
                "exp(1000) is inf in float64 (inf/inf is NaN) and exp(-1000) is 0 (0/0 is NaN): subtract "
                "each row's maximum before np.exp; the softmax does not change.",
            ),
            Misconception(
                "softmax over the wrong axis (columns)",
                _softmax_wrong_axis,
                "the weights of one row sum to 1: take max and sum along axis=-1 with keepdims=True.",
            ),
            Misconception(
                "subtracting the global max instead of the row max",
                _softmax_global_max,
                "a row far below the global maximum underflows to all zeros and gives 0/0: subtract "
                "each row's own maximum, taken along the last axis with that axis kept so that it "
                "lines up with the rows.",
            ),
            Misconception(
                "the row mean subtracted instead of the row maximum",
                _softmax_mean_shift,
                "any shift leaves the softmax unchanged, but only the maximum bounds every exponent by "
                "0: entries far above the mean still overflow, and the mean of a row with a masked "
                "(-inf) entry is -inf itself.",
            ),
            Misconception(
                "the maximum taken over axis 0 (down the columns), not along each row",
                _softmax_max_axis0,
                "m is the maximum of one row z, along the axis the softmax runs along (the last), "
                "with that axis kept; axis 0 compares different rows (or batches) entry by entry.",
            ),
            Misconception(
                "the row maximum taken without keepdims (subtracted along the wrong axis)",
                _softmax_max_no_keepdims,
                "x.max(axis=-1) has shape (...,) and lines up with the last axis, not with the rows: "
                "keep the reduced axis, shape (..., 1).",
                variants=(_softmax_no_keepdims_at_all,),
            ),
        ],
        forbidden=SOFTMAX_IMPLEMENTATIONS,
        hints=(
            "the softmax does not change when the same number is subtracted from every entry of a "
            "row; choose that number so that exp can neither overflow nor underflow to all zeros.",
            "subtract each row's own maximum (not the maximum of the whole array), keeping the axis so "
            "that it lines up with the rows; then exponentiate and divide by the row sums.",
            "subtract each row's largest value before exponentiating (the softmax does not change, and "
            "no exponent is above 0); then divide each row by its own sum, keeping the reduced axis so "
            "the division broadcasts.",
        ),
    )
)

register(
    Exercise(
        id="ex-04-2",
        function="log_sum_exp",
        reference=log_sum_exp,
        cases=cases(
            _logits,
            {
                **_visible_logit_cases((3, 4), 3),
                "hidden: a batch (2, 2, 7) near -750": ((2, 2, 7), 4, 4.0, -750.0),
                "hidden: one logit per row (3, 1)": ((3, 1), 5, 5.0, 300.0),
                "hidden: a batch whose rows sit 800 apart": lambda: (
                    np.array(
                        [[[0.0, 1.0, 2.0], [-800.0, -801.0, -799.0]], [[5.0, 4.0, 3.0], [1.0, 0.0, 2.0]]]
                    ),
                ),
                "hidden: masked entries (-inf)": _masked_entries,
            },
        ),
        misconceptions=[
            Misconception(
                "log(sum(exp(x))) computed naively (overflow)",
                _lse_naive,
                "exp(1000) overflows: use logsumexp(x) = m + log(sum(exp(x - m))) with m the row maximum.",
            ),
            Misconception(
                "the maximum is not added back",
                _lse_max_not_added_back,
                "log(sum(exp(x - m))) is logsumexp(x) - m: add m back.",
            ),
            Misconception(
                "subtracting the global max instead of the row max",
                _lse_global_max,
                "a row far below the global maximum underflows to log(0) = -inf: use each row's own "
                "maximum, taken along the last axis with that axis kept.",
            ),
            Misconception(
                "the mean of the exponentials instead of their sum",
                _quiet(lambda x: anp.logsumexp(x, dim=-1) - np.log(x.shape[-1])),
                "log-sum-exp sums the exponentials: np.sum, not np.mean (the mean is off by log(S)).",
            ),
            Misconception(
                "the summed axis kept (keepdims=True left on the result)",
                _lse_keepdims,
                "log-sum-exp reduces the last axis: the result has shape x.shape[:-1]; drop the kept "
                "axis at the end ([..., 0] or squeeze(-1)).",
            ),
        ],
        forbidden=LOGSUMEXP_IMPLEMENTATIONS,
        hints=(
            "the exponential of a large score overflows; pull one constant per row out of the "
            "exponentials first and add it back outside the logarithm.",
            "with m the maximum of each row, log(sum(exp(x))) = m + log(sum(exp(x - m))); the result "
            "has one number per row, shape x.shape[:-1].",
            "write log(sum(exp(x))) as m + log(sum(exp(x - m))) with m the row's maximum; keep the axis"
            " while you compute, and drop it at the end so there is one number per row.",
        ),
    )
)

register(
    Exercise(
        id="ex-04-3",
        function="scaled_scores",
        reference=scaled_scores,
        cases=cases(
            _qk,
            {
                "2 queries, 3 keys, d_k=4": (2, 3, 4, 5),
                "4 queries, 4 keys, d_k=16": (4, 4, 16, 6),
                "a batch of 2: 3 queries, 5 keys, d_k=9": (3, 5, 9, 7, (2,)),
                "hidden: (2, 4) batch and heads, d_k=64": (5, 6, 64, 8, (2, 4)),
                "hidden: one query, 3 keys, d_k=25": (1, 3, 25, 9),
            },
        ),
        misconceptions=[
            Misconception(
                "forgetting the scale",
                lambda q, k: q @ _t(k),
                "divide by sqrt(d_k) so that the scores keep unit variance as d_k grows.",
            ),
            Misconception(
                "divided by d_k instead of sqrt(d_k)",
                lambda q, k: q @ _t(k) / q.shape[-1],
                "the variance of q.k is d_k, so its standard deviation is sqrt(d_k): divide by that.",
            ),
            Misconception(
                "divided by sqrt(S), the number of keys",
                lambda q, k: q @ _t(k) / math.sqrt(k.shape[-2]),
                "d_k is the size of one vector, q.shape[-1], not the number of keys.",
            ),
            Misconception(
                "the scores transposed (K Q^T)",
                lambda q, k: k @ _t(q) / math.sqrt(q.shape[-1]),
                "row i belongs to query i: Q @ K^T, shape (..., L, S).",
            ),
            Misconception(
                "k.T swaps the batch axes too",
                # batched inputs make NumPy refuse q @ k.T; the judge names this variant when
                # the learner's code raises the same error
                lambda q, k: q @ k.T / math.sqrt(q.shape[-1]),
                "with leading (batch) axes .T reverses every axis, the batch axes too: transpose only"
                " the last two axes of the keys (NumPy has a function that swaps two chosen axes).",
            ),
        ],
        forbidden=SCALED_SCORE_IMPLEMENTATIONS,
        hints=(
            "the dot product of two random vectors of size d_k has variance d_k; divide it by its "
            "standard deviation so the scores keep unit variance whatever d_k is.",
            "d_k is the size of one query (the last axis of q), not the number of keys nor of queries.",
            "scores = Q K^T / sqrt(d_k), d_k the last axis of q; K is transposed on its last two axes"
            " only, so that the leading (batch, head) axes stay in place; shape (..., L, S).",
        ),
    )
)

register(
    Exercise(
        id="ex-04-4",
        function="attention_weights",
        reference=attention_weights,
        cases=cases(
            x_wq_wk,
            {
                '"This is book": d_model=5, d_k=3': lambda: this_is_book(3.0),
                "6 tokens, d_model=8, d_k=2": ((6, 8), 2, 9),
                "large inputs: scores in the thousands": ((4, 6), 3, 10, 40.0),
                "hidden: a batch (2, 5, 12), d_k=4": ((2, 5, 12), 4, 11, 3.0),
                "hidden: one token, d_model=4, d_k=2": ((1, 4), 2, 12, 40.0),
                "hidden: a batch (2, 5, 6) of large inputs": ((2, 5, 6), 3, 13, 40.0),
            },
        ),
        misconceptions=[
            Misconception(
                "sqrt(d_model) instead of sqrt(d_k)",
                lambda x, w_q, w_k: anp.softmax((x @ w_q) @ _t(x @ w_k) / math.sqrt(x.shape[-1]), dim=-1),
                "scale by the size of a query/key vector, d_k = W_Q.shape[-1], not the embedding size "
                "x.shape[-1].",
            ),
            Misconception(
                "forgetting the scale",
                lambda x, w_q, w_k: anp.softmax((x @ w_q) @ _t(x @ w_k), dim=-1),
                "divide the scores by sqrt(d_k) before the softmax.",
            ),
            Misconception(
                "no max subtraction (exp overflows)",
                _quiet(
                    lambda x, w_q, w_k: _softmax_no_shift((x @ w_q) @ _t(x @ w_k) / math.sqrt(w_q.shape[-1]))
                ),
                "scores in the thousands overflow exp: subtract each row's maximum first.",
            ),
            Misconception(
                "softmax over the wrong axis (columns)",
                lambda x, w_q, w_k: anp.softmax((x @ w_q) @ _t(x @ w_k) / math.sqrt(w_q.shape[-1]), dim=-2),
                "each query's weights sum to 1 over the keys: softmax along the last axis.",
            ),
        ],
        forbidden=SOFTMAX_IMPLEMENTATIONS + SCALED_SCORE_IMPLEMENTATIONS + ATTENTION_IMPLEMENTATIONS,
        hints=(
            "the two earlier exercises together: scaled scores of the projected tokens, then a "
            "softmax that cannot overflow.",
            "project with W_Q and W_K, scale by the size of one query/key vector (W_Q.shape[-1]), and "
            "normalise every row over the keys after subtracting its maximum.",
            "Q = x W_Q, K = x W_K; s = Q K^T / sqrt(d_k); weights = exp(s - m) / sum(exp(s - m)) along "
            "the last axis, m the row maximum.",
        ),
    )
)
