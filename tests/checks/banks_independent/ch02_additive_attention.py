"""Independent bank for chapter 02, written from the exercise text only (#25)."""

import numpy as np
import torch
from bank import Right, Wrong

# ---- ex-02-1 alignment_scores ---------------------------------------------


def as_no_tanh(s_prev, H, W, U, v):
    return (W @ s_prev + H @ U.T) @ v


def as_tanh_after_v(s_prev, H, W, U, v):
    return np.tanh((W @ s_prev + H @ U.T) @ v)


def as_sum_not_v(s_prev, H, W, U, v):
    return np.tanh(W @ s_prev + H @ U.T).sum(-1)  # v forgotten


def as_tanh_split(s_prev, H, W, U, v):
    return (np.tanh(W @ s_prev) + np.tanh(H @ U.T)) @ v


def as_columns(s_prev, H, W, U, v):
    # (d_a, S) with one column per source position
    return v @ np.tanh((W @ s_prev)[:, None] + U @ H.T)


def as_einsum(s_prev, H, W, U, v):
    return np.einsum("a,ja->j", v, np.tanh(np.einsum("ad,d->a", W, s_prev) + np.einsum("ae,je->ja", U, H)))


# ---- ex-02-2 alignment_weights --------------------------------------------


def aw_no_max(scores):
    e = np.exp(scores)
    return e / e.sum(-1, keepdims=True)


def aw_axis0(scores):
    e = np.exp(scores - scores.max(0, keepdims=True))
    return e / e.sum(0, keepdims=True)


def aw_global_max(scores):
    e = np.exp(scores - scores.max())
    return e / e.sum(-1, keepdims=True)


def aw_global_sum(scores):
    e = np.exp(scores - scores.max(-1, keepdims=True))
    return e / e.sum()  # the whole matrix sums to 1


def aw_no_keepdims(scores):
    e = np.exp(scores - scores.max(-1, keepdims=True))
    return e / e.sum(-1)  # broadcasts along the wrong axis


def aw_logsumexp(scores):
    m = scores.max(-1, keepdims=True)
    lse = m + np.log(np.exp(scores - m).sum(-1, keepdims=True))
    return np.exp(scores - lse)


def aw_row_loop(scores):
    out = np.empty_like(scores, dtype=float)
    for i, row in enumerate(scores):
        e = np.exp(row - row.max())
        out[i] = e / e.sum()
    return out


# ---- ex-02-3 attention_context --------------------------------------------


def ac_transposed(weights, H):
    return H.T @ weights.T  # (d_enc, T)


def ac_mean(weights, H):
    return weights @ H / H.shape[0]  # divided by S


def ac_sum_over_steps(weights, H):
    return (weights[:, :, None] * H[None]).sum(0)  # sums over T: (S, d_enc)


def ac_elementwise_weights_sum(weights, H):
    return weights.sum(0)[:, None] * H  # weights of all steps pooled


def ac_einsum(weights, H):
    return np.einsum("ts,sd->td", weights, H)


def ac_loop(weights, H):
    return np.stack([sum(w * h for w, h in zip(row, H, strict=True)) for row in weights])


# ---- ex-02-4 additive_attention_forward ---------------------------------------


def _scores(module, query, keys):
    Wq = module.w_query.weight
    Uk = module.w_key.weight
    v = module.v.weight
    return (torch.tanh((query @ Wq.T)[:, None, :] + keys @ Uk.T) @ v.T)[..., 0]


def aaf_no_mask(module, query, keys, key_mask):
    w = torch.softmax(_scores(module, query, keys), -1)
    return (w[:, None, :] @ keys)[:, 0], w


def aaf_mask_after_softmax(module, query, keys, key_mask):
    w = torch.softmax(_scores(module, query, keys), -1) * key_mask
    return (w[:, None, :] @ keys)[:, 0], w


def aaf_mask_inverted(module, query, keys, key_mask):
    e = _scores(module, query, keys).masked_fill(key_mask, float("-inf"))
    w = torch.softmax(e, -1)
    return (w[:, None, :] @ keys)[:, 0], w


def aaf_query_not_broadcast(module, query, keys, key_mask):
    Wq, Uk, v = module.w_query.weight, module.w_key.weight, module.v.weight
    e = (torch.tanh(query @ Wq.T + keys @ Uk.T) @ v.T)[..., 0]  # (B, d_a) + (B, S, d_a)
    w = torch.softmax(e.masked_fill(~key_mask, float("-inf")), -1)
    return (w[:, None, :] @ keys)[:, 0], w


def aaf_context_sum_wrong_axis(module, query, keys, key_mask):
    e = _scores(module, query, keys).masked_fill(~key_mask, float("-inf"))
    w = torch.softmax(e, -1)
    return (w[:, :, None] * keys).sum(2), w  # sums features, not positions


def aaf_renormalised(module, query, keys, key_mask):
    w = torch.softmax(_scores(module, query, keys), -1) * key_mask
    w = w / w.sum(-1, keepdim=True)
    return torch.einsum("bs,bsd->bd", w, keys), w


def aaf_minus_1e9(module, query, keys, key_mask):
    # every row has a real token (rows sum to 1), so -1e9 gives exact zeros
    e = _scores(module, query, keys).masked_fill(~key_mask, -1e9)
    w = torch.softmax(e, -1)
    return torch.bmm(w.unsqueeze(1), keys).squeeze(1), w


WRONG = [
    Wrong("ex-02-1", as_no_tanh, "tanh forgotten"),
    Wrong("ex-02-1", as_tanh_after_v, "tanh applied after v"),
    Wrong("ex-02-1", as_sum_not_v, "sum instead of v"),
    Wrong("ex-02-1", as_tanh_split, "tanh of each term separately"),
    Wrong("ex-02-2", aw_no_max, "no max subtraction: overflow"),
    Wrong("ex-02-2", aw_axis0, "softmax over axis 0 (decoder steps)"),
    Wrong("ex-02-2", aw_global_max, "global max instead of per row"),
    Wrong("ex-02-2", aw_global_sum, "normalised by the whole matrix"),
    Wrong("ex-02-2", aw_no_keepdims, "sum without keepdims broadcasts wrong"),
    Wrong("ex-02-3", ac_transposed, "transposed result (d_enc, T)"),
    Wrong("ex-02-3", ac_mean, "divided by S"),
    Wrong("ex-02-3", ac_sum_over_steps, "sum over decoder steps"),
    Wrong("ex-02-3", ac_elementwise_weights_sum, "pooled weights, elementwise"),
    Wrong("ex-02-4", aaf_no_mask, "padding mask not applied"),
    Wrong("ex-02-4", aaf_mask_after_softmax, "mask after softmax, not renormalised"),
    Wrong("ex-02-4", aaf_mask_inverted, "mask inverted"),
    Wrong("ex-02-4", aaf_query_not_broadcast, "query not broadcast over S"),
    Wrong("ex-02-4", aaf_context_sum_wrong_axis, "context summed over features"),
]
RIGHT = [
    Right("ex-02-1", as_columns),
    Right("ex-02-1", as_einsum),
    Right("ex-02-2", aw_logsumexp),
    Right("ex-02-2", aw_row_loop),
    Right("ex-02-3", ac_einsum),
    Right("ex-02-3", ac_loop),
    Right("ex-02-4", aaf_renormalised),
    Right("ex-02-4", aaf_minus_1e9),
]

# What the feedback must say for the mistake to count as named (the check's
# vocabulary, read off the feedback); None: a known gap, the answer loses marks
# but nothing names its mistake (see tests/checks/independent_banks.py).
NAMED = {
    "as_no_tanh": "no tanh",
    "as_tanh_after_v": "v applied before the tanh",
    "as_sum_not_v": None,
    "as_tanh_split": "tanh applied to W s and U h separately",
    "aw_no_max": "exp of the raw scores",
    "aw_axis0": "over decoder steps",
    "aw_global_max": "the global maximum subtracted",
    "aw_global_sum": None,
    "aw_no_keepdims": "without keepdims",
    "ac_transposed": "the last two axes look swapped",
    "ac_mean": None,
    "ac_sum_over_steps": "summed over the decoder steps",
    "ac_elementwise_weights_sum": "summed over the decoder steps",
    "aaf_no_mask": "the padding mask is ignored",
    "aaf_mask_after_softmax": "the mask is applied after the softmax",
    "aaf_mask_inverted": None,
    "aaf_query_not_broadcast": None,
    "aaf_context_sum_wrong_axis": None,
}
