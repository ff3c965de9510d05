"""Answer bank of chapter 05 (padding mask, causal mask, masked attention)."""

import math

import numpy as np
import torch
from bank import NO_MISTAKE, Right, Wrong

# --------------------------------------------------------------------------- ex-05-1


def padding_inverted(lengths, max_len):
    return torch.arange(max_len)[None, :] >= lengths[:, None]


def padding_less_or_equal(lengths, max_len):
    return torch.arange(max_len)[None, :] <= lengths[:, None]


def padding_transposed(lengths, max_len):
    return torch.arange(max_len)[:, None] < lengths[None, :]


def padding_float(lengths, max_len):
    return (torch.arange(max_len)[None, :] < lengths[:, None]).float()  # 1.0 / 0.0, not True / False


def padding_by_attnlib(lengths, max_len):
    from attnlib.masks import padding_mask

    return padding_mask(lengths, max_len)


def padding_loop(lengths, max_len):
    mask = torch.zeros(len(lengths), max_len, dtype=torch.bool)
    for b, n in enumerate(lengths.tolist()):
        mask[b, :n] = True
    return mask


def padding_expand(lengths, max_len):
    return ~(torch.arange(max_len).expand(len(lengths), -1) >= lengths.unsqueeze(1))


# --------------------------------------------------------------------------- ex-05-2


def causal_inverted(q_len, k_len):
    return torch.ones(q_len, k_len, dtype=torch.bool).triu(diagonal=1)


def causal_strict(q_len, k_len):
    return torch.ones(q_len, k_len, dtype=torch.bool).tril(diagonal=-1)


def causal_triu(q_len, k_len):
    return torch.ones(q_len, k_len, dtype=torch.bool).triu()


def causal_bottom_right(q_len, k_len):
    return torch.ones(q_len, k_len, dtype=torch.bool).tril(diagonal=k_len - q_len)


def causal_diagonal_plus_one(q_len, k_len):
    return torch.tril(torch.ones(q_len, k_len, dtype=torch.bool), diagonal=1)


def causal_float(q_len, k_len):
    return torch.tril(torch.ones(q_len, k_len))  # float ones and zeros


def causal_numpy_tri(q_len, k_len):
    return np.tri(q_len, k_len, dtype=bool)


def causal_ones_tril_bool(q_len, k_len):
    return torch.ones(q_len, k_len).tril().bool()


# --------------------------------------------------------------------------- ex-05-3


def _scores(q, k):
    return q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])


def masked_after_softmax(query, key, value, mask):
    w = torch.softmax(_scores(query, key), dim=-1) * mask
    return w @ value, w


def masked_nan_rows(query, key, value, mask):
    w = torch.softmax(_scores(query, key).masked_fill(~mask, float("-inf")), dim=-1)
    return w @ value, w


def masked_minus_1e9(query, key, value, mask):
    w = torch.softmax(_scores(query, key).masked_fill(~mask, -1e9), dim=-1)
    return w @ value, w


def masked_inverted(query, key, value, mask):
    s = _scores(query, key).masked_fill(mask, float("-inf"))
    w = torch.nan_to_num(torch.softmax(s, dim=-1))
    return w @ value, w


def masked_unscaled(query, key, value, mask):
    s = (query @ key.transpose(-2, -1)).masked_fill(~mask, float("-inf"))
    w = torch.nan_to_num(torch.softmax(s, dim=-1))
    return w @ value, w


def masked_scaled_by_keys(query, key, value, mask):
    s = (query @ key.transpose(-2, -1) / math.sqrt(key.shape[-2])).masked_fill(~mask, float("-inf"))
    w = torch.nan_to_num(torch.softmax(s, dim=-1))
    return w @ value, w


def masked_by_sdpa(query, key, value, mask):
    import torch.nn.functional as F

    w = torch.nan_to_num(torch.softmax(_scores(query, key).masked_fill(~mask, float("-inf")), dim=-1))
    return F.scaled_dot_product_attention(query, key, value, attn_mask=mask), w


def masked_where_and_exp(query, key, value, mask):
    s = torch.einsum("...ld,...sd->...ls", query, key) / query.shape[-1] ** 0.5
    s = torch.where(mask, s, torch.full_like(s, -math.inf))
    m = s.amax(dim=-1, keepdim=True)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)  # an empty row: no shift needed
    e = torch.exp(s - m)  # exp(-inf) = 0 at the blocked keys
    total = e.sum(dim=-1, keepdim=True)
    w = torch.where(total > 0, e / total.clamp_min(1e-300), torch.zeros_like(e))
    return w @ value, w


WRONG = [
    Wrong("ex-05-1", padding_inverted, "inverted"),
    Wrong("ex-05-1", padding_less_or_equal, "<= length"),
    Wrong("ex-05-1", padding_transposed, "(max_len, B)"),
    Wrong("ex-05-1", padding_float, "expected booleans"),
    Wrong("ex-05-1", padding_by_attnlib, "not allowed"),
    Wrong("ex-05-2", causal_inverted, "inverted"),
    Wrong("ex-05-2", causal_strict, "strictly lower"),
    Wrong("ex-05-2", causal_triu, "upper triangular"),
    Wrong("ex-05-2", causal_bottom_right, "bottom right"),
    Wrong("ex-05-2", causal_float, "expected booleans"),
    Wrong("ex-05-2", causal_diagonal_plus_one, "one key too many"),
    Wrong("ex-05-3", masked_after_softmax, "after the softmax"),
    Wrong("ex-05-3", masked_nan_rows, "NaN"),
    Wrong("ex-05-3", masked_minus_1e9, "-1e9"),
    Wrong("ex-05-3", masked_inverted, "inverted"),
    Wrong("ex-05-3", masked_unscaled, "scaling"),
    Wrong("ex-05-3", masked_by_sdpa, "not allowed"),
    Wrong("ex-05-3", masked_scaled_by_keys, "number of keys"),
]
RIGHT = [
    Right("ex-05-1", padding_loop),
    Right("ex-05-1", padding_expand),
    Right("ex-05-2", causal_numpy_tri),
    Right("ex-05-2", causal_ones_tril_bool),
    Right("ex-05-3", masked_where_and_exp),
]

# --------------------------------------------------------------------------- issue 33 item 14


def causal_float_01(q_len, k_len):  # the right pattern, as 0.0/1.0 floats instead of booleans
    return torch.ones(q_len, k_len).tril()


WRONG += [Wrong("ex-05-2", causal_float_01, "expected booleans", not_named=NO_MISTAKE)]
