"""Independent bank for chapter 03, written from the exercise text only (#25)."""

import numpy as np
from bank import Right, Wrong
from banks.scaffold import swap_last

# ---- ex-03-1 project_qkv ----------------------------------------------------


def pq_copy_paste(x, w_q, w_k, w_v):
    return x @ w_q, x @ w_q, x @ w_v  # K made with w_q


def pq_order(x, w_q, w_k, w_v):
    return x @ w_q, x @ w_v, x @ w_k  # (Q, V, K)


def pq_dot_T(x, w_q, w_k, w_v):
    return tuple((w.T @ x.T).T for w in (w_q, w_k, w_v))  # .T on batches


def pq_weights_transposed(x, w_q, w_k, w_v):
    return tuple(x @ w.T if w.shape[0] == w.shape[1] else x @ w for w in (w_q, w_k, w_v))


def pq_tensordot(x, w_q, w_k, w_v):
    return tuple(np.tensordot(x, w, axes=([-1], [0])) for w in (w_q, w_k, w_v))


def pq_einsum_list(x, w_q, w_k, w_v):
    return [np.einsum("...ld,dk->...lk", x, w) for w in (w_q, w_k, w_v)]


# ---- ex-03-2 attention_scores -----------------------------------------------


def sc_d_model(x, w_q, w_k):
    q, k = x @ w_q, x @ w_k
    return q @ swap_last(k) / np.sqrt(x.shape[-1])


def sc_unscaled(x, w_q, w_k):
    q, k = x @ w_q, x @ w_k
    return q @ swap_last(k)


def sc_by_d_k(x, w_q, w_k):
    q, k = x @ w_q, x @ w_k
    return q @ swap_last(k) / w_q.shape[-1]  # no square root


def sc_T(x, w_q, w_k):
    q, k = x @ w_q, x @ w_k
    return q @ k.T / np.sqrt(w_q.shape[-1])


def sc_transposed(x, w_q, w_k):
    q, k = x @ w_q, x @ w_k
    return k @ swap_last(q) / np.sqrt(w_q.shape[-1])


def sc_prescaled(x, w_q, w_k):
    q = x @ (w_q / w_q.shape[-1] ** 0.5)
    return np.einsum("...id,...jd->...ij", q, x @ w_k)


# ---- ex-03-3 row_softmax -------------------------------------------------------


def rs_axis_minus2(scores):
    e = np.exp(scores)
    return e / e.sum(-2, keepdims=True)


def rs_no_keepdims(scores):
    e = np.exp(scores)
    return e / e.sum(-1)


def rs_global(scores):
    e = np.exp(scores)
    return e / e.sum()


def rs_axis0(scores):
    e = np.exp(scores - scores.max(0))
    return e / e.sum(0)


def rs_max_shift(scores):
    e = np.exp(scores - scores.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def rs_reshape_loop(scores):
    flat = scores.reshape(-1, scores.shape[-1])
    out = np.array([np.exp(r) / np.exp(r).sum() for r in flat])
    return out.reshape(scores.shape)


# ---- ex-03-4 attention_output --------------------------------------------------


# its own softmax, not banks/scaffold.py's: a right answer (ao_weights_times_value_T) is built on it
def _softmax(e, axis=-1):
    e = np.exp(e - e.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def ao_softmax_queries(q, k, v):
    return _softmax(q @ swap_last(k) / np.sqrt(q.shape[-1]), -2) @ v


def ao_unscaled(q, k, v):
    return _softmax(q @ swap_last(k)) @ v


def ao_scaled_by_d_v(q, k, v):
    return _softmax(q @ swap_last(k) / np.sqrt(v.shape[-1])) @ v


def ao_T(q, k, v):
    return _softmax(q @ k.T / np.sqrt(q.shape[-1])) @ v


def ao_weights_times_value_T(q, k, v):
    w = _softmax(q @ swap_last(k) / np.sqrt(q.shape[-1]))
    return swap_last(swap_last(v) @ swap_last(w))


def ao_plain_exp(q, k, v):
    # exercise 03.3 says "here plain np.exp is enough": its row_softmax reused
    e = np.exp(q @ swap_last(k) / np.sqrt(q.shape[-1]))
    return e / e.sum(-1, keepdims=True) @ v


def ao_einsum(q, k, v):
    e = np.einsum("...ld,...sd->...ls", q, k) / np.sqrt(k.shape[-1])
    w = np.exp(e - e.max(-1, keepdims=True))
    return np.einsum("...ls,...sv->...lv", w, v) / w.sum(-1)[..., None]


WRONG = [
    Wrong("ex-03-1", pq_copy_paste, "K computed with w_q"),
    Wrong("ex-03-1", pq_order, "tuple order (Q, V, K)"),
    Wrong("ex-03-1", pq_dot_T, ".T on batched input"),
    Wrong("ex-03-1", pq_weights_transposed, "square weights transposed"),
    Wrong("ex-03-2", sc_d_model, "scaled by sqrt(d_model)"),
    Wrong("ex-03-2", sc_unscaled, "not scaled"),
    Wrong("ex-03-2", sc_by_d_k, "divided by d_k, not sqrt"),
    Wrong("ex-03-2", sc_T, ".T on batched keys"),
    Wrong("ex-03-2", sc_transposed, "K Q^T transposed scores"),
    Wrong("ex-03-3", rs_axis_minus2, "softmax over queries (axis -2)"),
    Wrong("ex-03-3", rs_no_keepdims, "sum without keepdims"),
    Wrong("ex-03-3", rs_global, "normalised over all entries"),
    Wrong("ex-03-3", rs_axis0, "softmax over axis 0"),
    Wrong("ex-03-4", ao_softmax_queries, "softmax over queries"),
    Wrong("ex-03-4", ao_unscaled, "not scaled"),
    Wrong("ex-03-4", ao_scaled_by_d_v, "scaled by sqrt(d_v)"),
    Wrong("ex-03-4", ao_T, ".T on batched keys"),
]
RIGHT = [
    Right("ex-03-1", pq_tensordot),
    Right("ex-03-1", pq_einsum_list),
    Right("ex-03-2", sc_prescaled),
    Right("ex-03-3", rs_max_shift),
    Right("ex-03-3", rs_reshape_loop),
    Right("ex-03-4", ao_weights_times_value_T),
    Right("ex-03-4", ao_einsum),
    Right("ex-03-4", ao_plain_exp),
]

# What the feedback must say for the mistake to count as named (the check's
# vocabulary, read off the feedback); None: a known gap, the answer loses marks
# but nothing names its mistake (see tests/checks/independent_banks.py).
NAMED = {
    "pq_copy_paste": None,
    "pq_order": "keys and values swapped",
    "pq_dot_T": None,
    "pq_weights_transposed": "x @ W.T",
    "sc_d_model": "sqrt(d_model) instead of sqrt(d_k)",
    "sc_unscaled": "no 1/sqrt(d_k)",
    "sc_by_d_k": "divided by d_k instead of sqrt(d_k)",
    "sc_T": "reverses the batch axes too",
    "sc_transposed": "the scores transposed",
    "rs_axis_minus2": "softmax over the wrong axis",
    "rs_no_keepdims": "without keepdims",
    "rs_global": "normalised over the whole array",
    "rs_axis0": "softmax over axis 0",
    "ao_softmax_queries": "softmax over the wrong axis",
    "ao_unscaled": "no 1/sqrt(d_k)",
    "ao_scaled_by_d_v": "sqrt(d_v) instead of sqrt(d_k)",
    "ao_T": "reverses the batch axes too",
}
