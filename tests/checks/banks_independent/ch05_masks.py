"""Independent bank for chapter 05, written from the exercise text only (#25)."""

import math

import torch
from bank import Right, Wrong

# ---- ex-05-1 padding_mask_from_lengths ----------------------------------------


def pm_no_trailing_axis(lengths, max_len):
    return torch.arange(max_len) < lengths  # (max_len,) vs (B,)


def pm_le(lengths, max_len):
    return torch.arange(max_len)[None, :] <= lengths[:, None]  # one too many


def pm_long(lengths, max_len):
    return (torch.arange(max_len)[None, :] < lengths[:, None]).long()


def pm_inverted(lengths, max_len):
    return torch.arange(max_len)[None, :] >= lengths[:, None]  # True at PAD


def pm_transposed(lengths, max_len):
    return torch.arange(max_len)[:, None] < lengths[None, :]  # (max_len, B)


def pm_expand(lengths, max_len):
    pos = torch.arange(max_len, device=lengths.device).expand(len(lengths), -1)
    return pos < lengths.unsqueeze(-1)


def pm_not_ge(lengths, max_len):
    return ~(lengths.view(-1, 1) <= torch.arange(max_len).view(1, -1))


# ---- ex-05-2 build_causal_mask ------------------------------------------------


def cm_strict(q_len, k_len):
    return torch.ones(q_len, k_len, dtype=torch.bool).tril(-1)


def cm_upper(q_len, k_len):
    return torch.ones(q_len, k_len, dtype=torch.bool).triu()


def cm_bottom_right(q_len, k_len):
    return torch.ones(q_len, k_len, dtype=torch.bool).tril(k_len - q_len)


def cm_float(q_len, k_len):
    return torch.ones(q_len, k_len).tril()  # float, not bool


def cm_square_only(q_len, k_len):
    n = max(q_len, k_len)
    return torch.ones(n, n, dtype=torch.bool).tril()  # (n, n) whatever the lengths


def cm_arange(q_len, k_len):
    return torch.arange(k_len)[None, :] <= torch.arange(q_len)[:, None]


def cm_tril_bool(q_len, k_len):
    return torch.tril(torch.ones(q_len, k_len)).bool()


# ---- ex-05-3 masked_attention -------------------------------------------------


def _scores(query, key):
    return query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])


def ma_minus_1e9(query, key, value, mask):
    w = torch.softmax(_scores(query, key).masked_fill(~mask, -1e9), -1)
    return w @ value, w  # an empty row gets uniform weights


def ma_inverted(query, key, value, mask):
    w = torch.softmax(_scores(query, key).masked_fill(mask, float("-inf")), -1)
    w = torch.nan_to_num(w)
    return w @ value, w


def ma_after_softmax(query, key, value, mask):
    w = torch.softmax(_scores(query, key), -1) * mask
    return w @ value, w


def ma_unscaled(query, key, value, mask):
    s = (query @ key.transpose(-2, -1)).masked_fill(~mask, float("-inf"))
    w = torch.nan_to_num(torch.softmax(s, -1))
    return w @ value, w


def ma_nan_output(query, key, value, mask):
    w = torch.softmax(_scores(query, key).masked_fill(~mask, float("-inf")), -1)
    out = w @ value  # NaN rows already in the output
    return out, torch.nan_to_num(w)


def ma_float_mask(query, key, value, mask):
    # mask added as a number: True -> +1, False -> 0, no blocking at all
    w = torch.softmax(_scores(query, key) + mask.float(), -1)
    return w @ value, w


def ma_manual_exp(query, key, value, mask):
    s = _scores(query, key)
    mask = mask.expand(s.shape)
    m = s.masked_fill(~mask, float("-inf")).amax(-1, keepdim=True)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    e = torch.exp((s - m).masked_fill(~mask, float("-inf")))
    w = e / e.sum(-1, keepdim=True).clamp_min(torch.finfo(e.dtype).tiny)
    return w @ value, w


def ma_where_zero_rows(query, key, value, mask):
    s = _scores(query, key).masked_fill(~mask, -1e9)
    w = torch.softmax(s, -1) * mask.any(-1, keepdim=True)  # empty rows -> 0
    w = torch.where(mask, w, torch.zeros_like(w))
    return torch.matmul(w, value), w


WRONG = [
    Wrong("ex-05-1", pm_no_trailing_axis, "arange < lengths without trailing axis"),
    Wrong("ex-05-1", pm_le, "<= off by one"),
    Wrong("ex-05-1", pm_long, "long instead of bool"),
    Wrong("ex-05-1", pm_inverted, "mask inverted (True at PAD)"),
    Wrong("ex-05-1", pm_transposed, "transposed (max_len, B)"),
    Wrong("ex-05-2", cm_strict, "strictly lower, diagonal missing"),
    Wrong("ex-05-2", cm_upper, "upper triangle (future)"),
    Wrong("ex-05-2", cm_bottom_right, "bottom-right aligned"),
    Wrong("ex-05-2", cm_float, "float instead of bool"),
    Wrong("ex-05-2", cm_square_only, "square mask ignoring k_len"),
    Wrong("ex-05-3", ma_minus_1e9, "-1e9 gives uniform weights to empty row"),
    Wrong("ex-05-3", ma_inverted, "mask inverted"),
    Wrong("ex-05-3", ma_after_softmax, "mask after softmax"),
    Wrong("ex-05-3", ma_unscaled, "not scaled"),
    Wrong("ex-05-3", ma_nan_output, "NaN output for empty row"),
    Wrong("ex-05-3", ma_float_mask, "bool mask added as float"),
]
RIGHT = [
    Right("ex-05-1", pm_expand),
    Right("ex-05-1", pm_not_ge),
    Right("ex-05-2", cm_arange),
    Right("ex-05-2", cm_tril_bool),
    Right("ex-05-3", ma_manual_exp),
    Right("ex-05-3", ma_where_zero_rows),
]

# What the feedback must say for the mistake to count as named (the check's
# vocabulary, read off the feedback); None: a known gap, the answer loses marks
# but nothing names its mistake (see tests/checks/independent_banks.py).
NAMED = {
    "pm_no_trailing_axis": "without a trailing axis",
    "pm_le": "positions <= length are kept",
    "pm_long": "expected booleans",
    "pm_inverted": "the mask is inverted",
    "pm_transposed": "(max_len, B) instead of (B, max_len)",
    "cm_strict": "strictly lower triangular",
    "cm_upper": "upper triangular",
    "cm_bottom_right": "aligned at the bottom right",
    "cm_float": "expected booleans",
    "cm_square_only": None,
    "ma_minus_1e9": "-1e9",
    "ma_inverted": "the mask is inverted",
    "ma_after_softmax": "applied after the softmax",
    "ma_unscaled": "no 1/sqrt(d_k)",
    "ma_nan_output": None,
    "ma_float_mask": None,
}
