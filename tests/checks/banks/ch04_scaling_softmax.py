"""Answer bank of chapter 04 (stable softmax, log-sum-exp, scaled scores, attention weights)."""

import math

import numpy as np
from bank import Right, Wrong

from banks.scaffold import shifted_softmax, swap_last

# --------------------------------------------------------------------------- ex-04-1


def softmax_no_shift(x):
    with np.errstate(all="ignore"):
        e = np.exp(x)
        return e / e.sum(axis=-1, keepdims=True)


def softmax_columns(x):
    e = np.exp(x - x.max(axis=-2, keepdims=True))
    return e / e.sum(axis=-2, keepdims=True)


def softmax_global_max(x):
    with np.errstate(all="ignore"):
        e = np.exp(x - np.max(x))
        return e / e.sum(axis=-1, keepdims=True)


def softmax_max_without_keepdims(x):
    e = np.exp(x - x.max(axis=-1))  # (..., S) - (...,): broadcasts wrongly or fails
    return e / e.sum(axis=-1, keepdims=True)


def softmax_by_scipy(x):
    from scipy.special import softmax

    return softmax(x, axis=-1)


def softmax_float32_inside(x):
    x32 = x.astype(np.float32)
    e = np.exp(x32 - x32.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)  # float32: judged at float32 precision


def softmax_through_logsumexp(x):
    m = np.max(x, axis=-1, keepdims=True)
    lse = m + np.log(np.sum(np.exp(x - m), axis=-1, keepdims=True))
    return np.exp(x - lse)


# --------------------------------------------------------------------------- ex-04-2


def lse_naive(x):
    with np.errstate(all="ignore"):
        return np.log(np.exp(x).sum(axis=-1))


def lse_max_not_added(x):
    m = x.max(axis=-1, keepdims=True)
    return np.log(np.exp(x - m).sum(axis=-1))


def lse_global_max(x):
    with np.errstate(all="ignore"):
        m = x.max()
        return m + np.log(np.exp(x - m).sum(axis=-1))


def lse_keepdims_left(x):
    m = x.max(axis=-1, keepdims=True)
    return m + np.log(np.exp(x - m).sum(axis=-1, keepdims=True))  # (..., 1)


def lse_mean(x):
    m = x.max(axis=-1, keepdims=True)
    return (m + np.log(np.exp(x - m).mean(axis=-1, keepdims=True)))[..., 0]


def lse_by_scipy(x):
    from scipy.special import logsumexp

    return logsumexp(x, axis=-1)


def lse_logaddexp(x):
    return np.logaddexp.reduce(x, axis=-1)  # a library log-sum-exp: off limits, as the text says


def lse_squeeze(x):
    m = np.max(x, axis=-1)
    return m + np.log(np.sum(np.exp(x - m[..., None]), axis=-1))


# --------------------------------------------------------------------------- ex-04-3


def scaled_unscaled(q, k):
    return q @ swap_last(k)


def scaled_by_d_k(q, k):
    return q @ swap_last(k) / q.shape[-1]


def scaled_by_sqrt_S(q, k):
    return q @ swap_last(k) / np.sqrt(k.shape[-2])


def scaled_k_q(q, k):
    return k @ swap_last(q) / np.sqrt(q.shape[-1])


def scaled_einsum(q, k):
    return np.einsum("...ld,...sd->...ls", q, k) * (1.0 / math.sqrt(q.shape[-1]))


# --------------------------------------------------------------------------- ex-04-4


def weights_sqrt_d_model(x, w_q, w_k):
    return shifted_softmax((x @ w_q) @ swap_last(x @ w_k) / np.sqrt(x.shape[-1]))


def weights_unscaled(x, w_q, w_k):
    return shifted_softmax((x @ w_q) @ swap_last(x @ w_k))


def weights_no_shift(x, w_q, w_k):
    s = (x @ w_q) @ swap_last(x @ w_k) / np.sqrt(w_q.shape[-1])
    with np.errstate(all="ignore"):
        e = np.exp(s)
        return e / e.sum(axis=-1, keepdims=True)


def weights_columns(x, w_q, w_k):
    return shifted_softmax((x @ w_q) @ swap_last(x @ w_k) / np.sqrt(w_q.shape[-1]), axis=-2)


def weights_by_attnlib(x, w_q, w_k):
    from attnlib import numpy as anp

    return anp.softmax(anp.scaled_dot_scores(x @ w_q, x @ w_k), dim=-1)


def weights_einsum_logsumexp(x, w_q, w_k):
    q = np.einsum("...ld,dk->...lk", x, w_q)
    k = np.einsum("...ld,dk->...lk", x, w_k)
    s = np.einsum("...ik,...jk->...ij", q, k) / math.sqrt(w_q.shape[-1])
    m = s.max(axis=-1, keepdims=True)
    return np.exp(s - m - np.log(np.exp(s - m).sum(axis=-1, keepdims=True)))


WRONG = [
    Wrong("ex-04-1", softmax_no_shift, "no max subtraction"),
    Wrong("ex-04-1", softmax_columns, "wrong axis"),
    Wrong("ex-04-1", softmax_global_max, "global max"),
    Wrong("ex-04-1", softmax_max_without_keepdims, "keepdims"),
    Wrong("ex-04-1", softmax_by_scipy, "not allowed"),
    Wrong("ex-04-2", lse_naive, "naively"),
    Wrong("ex-04-2", lse_max_not_added, "not added back"),
    Wrong("ex-04-2", lse_global_max, "global max"),
    Wrong("ex-04-2", lse_keepdims_left, "keepdims"),
    Wrong("ex-04-2", lse_by_scipy, "not allowed"),
    Wrong("ex-04-2", lse_logaddexp, "not allowed"),
    Wrong("ex-04-2", lse_mean, "mean of the exponentials"),
    Wrong("ex-04-3", scaled_unscaled, "forgetting the scale"),
    Wrong("ex-04-3", scaled_by_d_k, "divided by d_k"),
    Wrong("ex-04-3", scaled_by_sqrt_S, "sqrt(S)"),
    Wrong("ex-04-3", scaled_k_q, "K Q^T"),
    Wrong("ex-04-4", weights_sqrt_d_model, "sqrt(d_model)"),
    Wrong("ex-04-4", weights_unscaled, "forgetting the scale"),
    Wrong("ex-04-4", weights_no_shift, "no max subtraction"),
    Wrong("ex-04-4", weights_columns, "wrong axis"),
    Wrong("ex-04-4", weights_by_attnlib, "not allowed"),
]
RIGHT = [
    Right("ex-04-1", softmax_float32_inside),
    Right("ex-04-1", softmax_through_logsumexp),
    Right("ex-04-2", lse_squeeze),
    Right("ex-04-3", scaled_einsum),
    Right("ex-04-4", weights_einsum_logsumexp),
]

# --------------------------------------------------------------------------- issue 33 item 14


def softmax_mean_shift(x):  # a shift, but the mean does not bound the exponents
    e = np.exp(x - x.mean(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def scaled_scores_plain_T(q, k):  # .T on batched keys
    return q @ k.T / np.sqrt(q.shape[-1])


WRONG += [
    Wrong("ex-04-1", softmax_mean_shift, "the row mean subtracted", not_named=("axis 0",)),
    Wrong("ex-04-3", scaled_scores_plain_T, "k.T swaps the batch axes too"),
]
