"""Answer bank of chapter 03 (projections, scores, row softmax, attention output)."""

import math

import numpy as np
from bank import Right, Wrong

from banks.scaffold import shifted_softmax, swap_last

# --------------------------------------------------------------------------- ex-03-1


def project_transposed(x, w_q, w_k, w_v):
    return x @ w_q.T, x @ w_k.T, x @ w_v.T


def project_k_v_swapped(x, w_q, w_k, w_v):
    return x @ w_q, x @ w_v, x @ w_k


def project_one_weight(x, w_q, w_k, w_v):
    q = x @ w_q
    return q, q, q


def project_einsum(x, w_q, w_k, w_v):
    return tuple(np.einsum("...ld,dk->...lk", x, w) for w in (w_q, w_k, w_v))


def project_matmul_list(x, w_q, w_k, w_v):
    return [np.matmul(x, w) for w in (w_q, w_k, w_v)]  # a list is fine too


# --------------------------------------------------------------------------- ex-03-2


def scores_unscaled(x, w_q, w_k):
    return (x @ w_q) @ swap_last(x @ w_k)


def scores_sqrt_d_model(x, w_q, w_k):
    return (x @ w_q) @ swap_last(x @ w_k) / np.sqrt(x.shape[-1])


def scores_divided_by_d_k(x, w_q, w_k):
    return (x @ w_q) @ swap_last(x @ w_k) / w_q.shape[-1]


def scores_k_q(x, w_q, w_k):
    return (x @ w_k) @ swap_last(x @ w_q) / np.sqrt(w_q.shape[-1])


def scores_einsum(x, w_q, w_k):
    q = np.einsum("...ld,dk->...lk", x, w_q)
    k = np.einsum("...ld,dk->...lk", x, w_k)
    return np.einsum("...ik,...jk->...ij", q, k) / math.sqrt(q.shape[-1])


def scores_scaled_before(x, w_q, w_k):
    d_k = w_q.shape[1]
    q = x @ w_q / d_k**0.25
    k = x @ w_k / d_k**0.25
    return q @ np.moveaxis(k, -1, -2)


# --------------------------------------------------------------------------- ex-03-3


def softmax_columns(scores):
    e = np.exp(scores - scores.max(axis=-2, keepdims=True))
    return e / e.sum(axis=-2, keepdims=True)


def softmax_whole_array(scores):
    e = np.exp(scores - scores.max())
    return e / e.sum()


def softmax_no_keepdims(scores):
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1)


def softmax_no_shift(scores):
    with np.errstate(all="ignore"):
        e = np.exp(scores)
        return e / e.sum(axis=-1, keepdims=True)


def softmax_loop(scores):
    flat = scores.reshape(-1, scores.shape[-1])
    out = np.empty_like(flat)
    for i, row in enumerate(flat):
        e = np.exp(row - np.max(row))
        out[i] = e / np.sum(e)
    return out.reshape(scores.shape)


def softmax_log_space(scores):
    m = np.max(scores, axis=-1, keepdims=True)
    return np.exp(scores - m - np.log(np.sum(np.exp(scores - m), axis=-1, keepdims=True)))


# --------------------------------------------------------------------------- ex-03-4


def output_unscaled(q, k, v):
    return shifted_softmax(q @ swap_last(k)) @ v


def output_columns(q, k, v):
    return shifted_softmax(q @ swap_last(k) / np.sqrt(q.shape[-1]), axis=-2) @ v


def output_sqrt_d_v(q, k, v):
    return shifted_softmax(q @ swap_last(k) / np.sqrt(v.shape[-1])) @ v


def output_by_attnlib(q, k, v):
    from attnlib import numpy as anp

    return anp.scaled_dot_product_attention(q, k, v)


def output_einsum_float64(q, k, v):
    s = np.einsum("...ld,...sd->...ls", q.astype(np.float64), k) / math.sqrt(q.shape[-1])
    w = np.exp(s - s.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    return np.einsum("...ls,...sv->...lv", w, v)


WRONG = [
    Wrong("ex-03-1", project_transposed, "transposed"),
    Wrong("ex-03-1", project_k_v_swapped, "swapped"),
    Wrong("ex-03-1", project_one_weight, "one weight matrix"),
    Wrong("ex-03-2", scores_unscaled, "no 1/sqrt(d_k)"),
    Wrong("ex-03-2", scores_sqrt_d_model, "sqrt(d_model)"),
    Wrong("ex-03-2", scores_divided_by_d_k, "divided by d_k"),
    Wrong("ex-03-2", scores_k_q, "K Q^T"),
    Wrong("ex-03-3", softmax_columns, "wrong axis"),
    Wrong("ex-03-3", softmax_whole_array, "whole array"),
    Wrong("ex-03-3", softmax_no_keepdims, "keepdims"),
    Wrong("ex-03-4", output_unscaled, "no 1/sqrt(d_k)"),
    Wrong("ex-03-4", output_columns, "wrong axis"),
    Wrong("ex-03-4", output_sqrt_d_v, "sqrt(d_v)"),
    Wrong("ex-03-4", output_by_attnlib, "not allowed"),
]
RIGHT = [
    # the text: "here plain np.exp is enough" (#25: no hidden case may overflow it)
    Right("ex-03-3", softmax_no_shift),
    Right("ex-03-1", project_einsum),
    Right("ex-03-1", project_matmul_list),
    Right("ex-03-2", scores_einsum),
    Right("ex-03-2", scores_scaled_before),
    Right("ex-03-3", softmax_loop),
    Right("ex-03-3", softmax_log_space),
    Right("ex-03-4", output_einsum_float64),
]

# --------------------------------------------------------------------------- issue 33 item 14


def scores_plain_T(x, w_q, w_k):  # .T on batched keys reverses the batch axes too
    q, k = x @ w_q, x @ w_k
    return q @ k.T / np.sqrt(q.shape[-1])


def output_plain_T(q, k, v):
    s = np.matmul(q, k.T) / math.sqrt(k.shape[-1])
    w = np.exp(s - s.max(axis=-1, keepdims=True))
    return w / w.sum(axis=-1, keepdims=True) @ v


WRONG += [
    Wrong("ex-03-2", scores_plain_T, "K transposed with .T", not_named=("forgetting the transpose",)),
    Wrong("ex-03-4", output_plain_T, "k.T on batched keys"),
]
