"""Answer bank of chapter 02 (additive scores, weights, context, the batched module)."""

import numpy as np
import torch
from bank import Right, Wrong

# --------------------------------------------------------------------------- ex-02-1


def scores_tanh_each_part(s_prev, H, W, U, v):
    return (np.tanh(W @ s_prev) + np.tanh(H @ U.T)) @ v


def scores_no_tanh(s_prev, H, W, U, v):
    return (W @ s_prev + H @ U.T) @ v


def scores_v_inside(s_prev, H, W, U, v):
    return np.tanh((W @ s_prev + H @ U.T) @ v)


def scores_U_not_transposed(s_prev, H, W, U, v):
    return np.tanh(W @ s_prev + H @ U) @ v  # (S, D_h) @ (A, D_h): works only when D_h == A


def scores_loop(s_prev, H, W, U, v):
    return np.array([v @ np.tanh(W @ s_prev + U @ h) for h in H])


def scores_einsum(s_prev, H, W, U, v):
    hidden = np.tanh(np.einsum("ad,d->a", W, s_prev)[None, :] + np.einsum("ad,sd->sa", U, H))
    return np.einsum("sa,a->s", hidden, v)


# --------------------------------------------------------------------------- ex-02-2


def weights_over_steps(scores):
    e = np.exp(scores - scores.max(axis=0, keepdims=True))
    return e / e.sum(axis=0, keepdims=True)


def weights_no_shift(scores):
    with np.errstate(all="ignore"):
        e = np.exp(scores)
        return e / e.sum(axis=-1, keepdims=True)


def weights_global_max(scores):
    with np.errstate(all="ignore"):
        e = np.exp(scores - scores.max())
        return e / e.sum(axis=-1, keepdims=True)


def weights_no_keepdims(scores):
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1)  # (T, S) / (S,)... broadcasts along the wrong axis


def weights_by_torch(scores):
    return torch.softmax(torch.from_numpy(scores), dim=-1).numpy()


def weights_log_space(scores):
    m = scores.max(axis=-1, keepdims=True)
    log_z = m + np.log(np.exp(scores - m).sum(axis=-1, keepdims=True))
    return np.exp(scores - log_z)


def weights_row_loop(scores):
    out = np.empty_like(scores)
    for i, row in enumerate(scores):
        e = np.exp(row - row.max())
        out[i] = e / e.sum()
    return out


# --------------------------------------------------------------------------- ex-02-3


def context_unweighted_sum(weights, H):
    return np.repeat(H.sum(axis=0, keepdims=True), weights.shape[0], axis=0)


def context_mean(weights, H):
    return np.repeat(H.mean(axis=0, keepdims=True), weights.shape[0], axis=0)


def context_weights_transposed(weights, H):
    return weights.T @ H


def context_sum_over_steps(weights, H):
    return (weights[:, :, None] * H[None, :, :]).sum(axis=0)  # (S, D_h): summed over steps


def context_einsum(weights, H):
    return np.einsum("ts,sd->td", weights, H)


def context_loop(weights, H):
    return np.stack([sum(w_j * h_j for w_j, h_j in zip(row, H, strict=True)) for row in weights])


# --------------------------------------------------------------------------- ex-02-4


def _parts(module):
    return module.w_query.weight, module.w_key.weight, module.v.weight[0]


def _scores(module, query, keys):
    W, U, v = _parts(module)
    return torch.tanh((query @ W.T)[:, None, :] + keys @ U.T) @ v  # (B, S)


def forward_mask_ignored(module, query, keys, key_mask):
    weights = torch.softmax(_scores(module, query, keys), dim=-1)
    return (weights[:, :, None] * keys).sum(dim=1), weights


def forward_mask_after_softmax(module, query, keys, key_mask):
    weights = torch.softmax(_scores(module, query, keys), dim=-1) * key_mask
    return (weights[:, :, None] * keys).sum(dim=1), weights


def forward_mask_with_zero(module, query, keys, key_mask):
    weights = torch.softmax(_scores(module, query, keys).masked_fill(~key_mask, 0.0), dim=-1)
    return (weights[:, :, None] * keys).sum(dim=1), weights


def forward_softmax_over_batch(module, query, keys, key_mask):
    weights = torch.softmax(_scores(module, query, keys).masked_fill(~key_mask, float("-inf")), dim=0)
    return (weights[:, :, None] * keys).sum(dim=1), weights


def forward_by_the_module(module, query, keys, key_mask):
    return module(query, keys, key_mask=key_mask)


def forward_where_and_exp(module, query, keys, key_mask):
    W, U, v = _parts(module)
    hidden = torch.tanh(
        torch.einsum("ad,bd->ba", W, query)[:, None, :] + torch.einsum("ae,bse->bsa", U, keys)
    )
    scores = torch.einsum("bsa,a->bs", hidden, v)
    scores = torch.where(key_mask, scores, torch.tensor(float("-inf"), dtype=scores.dtype))
    e = torch.exp(scores - scores.max(dim=-1, keepdim=True).values)
    weights = e / e.sum(dim=-1, keepdim=True)
    return torch.einsum("bs,bsd->bd", weights, keys), weights


WRONG = [
    Wrong("ex-02-1", scores_tanh_each_part, "separately"),
    Wrong("ex-02-1", scores_no_tanh, "no tanh"),
    Wrong("ex-02-1", scores_v_inside, "v applied before the tanh"),
    Wrong("ex-02-1", scores_U_not_transposed, "transpos"),
    Wrong("ex-02-2", weights_over_steps, "wrong axis"),
    Wrong("ex-02-2", weights_no_shift, "overflow"),
    Wrong("ex-02-2", weights_global_max, "global max"),
    Wrong("ex-02-2", weights_no_keepdims, "keepdims"),
    Wrong("ex-02-2", weights_by_torch, "not allowed"),
    Wrong("ex-02-3", context_unweighted_sum, "without the weights"),
    Wrong("ex-02-3", context_mean, "average"),
    Wrong("ex-02-3", context_weights_transposed, "weights transposed"),
    Wrong("ex-02-3", context_sum_over_steps, "over the decoder steps"),
    Wrong("ex-02-4", forward_mask_ignored, "mask is ignored"),
    Wrong("ex-02-4", forward_mask_after_softmax, "after the softmax"),
    Wrong("ex-02-4", forward_mask_with_zero, "instead of -inf"),
    Wrong("ex-02-4", forward_softmax_over_batch, "batch axis"),
    Wrong("ex-02-4", forward_by_the_module, "not allowed"),
]
RIGHT = [
    Right("ex-02-1", scores_loop),
    Right("ex-02-1", scores_einsum),
    Right("ex-02-2", weights_log_space),
    Right("ex-02-2", weights_row_loop),
    Right("ex-02-3", context_einsum),
    Right("ex-02-3", context_loop),
    Right("ex-02-4", forward_where_and_exp),
]
