"""Independent bank for chapter 06, written from the exercise text only (#25)."""

import math

import torch
from bank import Right, Wrong

# ---- ex-06-1 split_heads ----------------------------------------------------


def sh_view_direct(x, num_heads):
    B, L, _ = x.shape
    return x.reshape(B, num_heads, L, -1)


def sh_interleaved(x, num_heads):
    B, L, D = x.shape
    return x.reshape(B, L, D // num_heads, num_heads).permute(0, 3, 1, 2)


def sh_no_transpose(x, num_heads):
    B, L, D = x.shape
    return x.reshape(B, L, num_heads, D // num_heads)  # (B, L, h, d)


def sh_transpose_then_view(x, num_heads):
    B, L, D = x.shape
    return x.transpose(1, 2).reshape(B, num_heads, L, D // num_heads)


def sh_chunk_stack(x, num_heads):
    return torch.stack(x.chunk(num_heads, dim=-1), dim=1)


def sh_unflatten(x, num_heads):
    return x.unflatten(-1, (num_heads, -1)).permute(0, 2, 1, 3)


# ---- ex-06-2 merge_heads ----------------------------------------------------


def mh_no_transpose(x):
    B, h, L, d = x.shape
    return x.reshape(B, L, h * d)


def mh_interleaved(x):
    B, h, L, d = x.shape
    return x.permute(0, 2, 3, 1).reshape(B, L, h * d)  # features then heads


def mh_not_flattened(x):
    return x.transpose(1, 2)  # (B, L, h, d)


def mh_sum_heads(x):
    return x.sum(1)  # heads added, not concatenated


def mh_cat_unbind(x):
    return torch.cat(x.unbind(1), dim=-1)


def mh_permute_flatten(x):
    return x.permute(0, 2, 1, 3).flatten(2)


# ---- ex-06-3 multi_head_attention --------------------------------------------


def _split(x, h):
    B, L, D = x.shape
    return x.view(B, L, h, D // h).transpose(1, 2)


def _merge(x):
    B, h, L, d = x.shape
    return x.transpose(1, 2).reshape(B, L, h * d)


def _mha(x, w_q, w_k, w_v, w_o, h, scale, split=_split, dim=-1, use_o=True):
    q, k, v = (split(x @ w, h) for w in (w_q, w_k, w_v))
    w = torch.softmax(q @ k.transpose(-2, -1) / scale, dim=dim)
    out = _merge(w @ v)
    return out @ w_o if use_o else out


def mha_d_model(x, w_q, w_k, w_v, w_o, num_heads):
    return _mha(x, w_q, w_k, w_v, w_o, num_heads, math.sqrt(x.shape[-1]))


def mha_full_width(x, w_q, w_k, w_v, w_o, num_heads):
    return _mha(x, w_q, w_k, w_v, w_o, num_heads, math.sqrt(w_q.shape[-1]))  # h*d_k


def mha_d_v(x, w_q, w_k, w_v, w_o, num_heads):
    return _mha(x, w_q, w_k, w_v, w_o, num_heads, math.sqrt(w_v.shape[-1] // num_heads))


def mha_softmax_queries(x, w_q, w_k, w_v, w_o, num_heads):
    s = math.sqrt(w_q.shape[-1] // num_heads)
    return _mha(x, w_q, w_k, w_v, w_o, num_heads, s, dim=-2)


def mha_bad_split(x, w_q, w_k, w_v, w_o, num_heads):
    s = math.sqrt(w_q.shape[-1] // num_heads)
    return _mha(x, w_q, w_k, w_v, w_o, num_heads, s, split=sh_view_direct)


def mha_single_head(x, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = x @ w_q, x @ w_k, x @ w_v  # one head of width h*d_k
    w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(w_q.shape[-1] // num_heads), -1)
    return (w @ v) @ w_o


def mha_head_loop(x, w_q, w_k, w_v, w_o, num_heads):
    dk, dv = w_q.shape[1] // num_heads, w_v.shape[1] // num_heads
    heads = []
    for j in range(num_heads):
        q = x @ w_q[:, j * dk : (j + 1) * dk]
        k = x @ w_k[:, j * dk : (j + 1) * dk]
        v = x @ w_v[:, j * dv : (j + 1) * dv]
        a = torch.softmax(q @ k.transpose(1, 2) / dk**0.5, dim=-1)
        heads.append(a @ v)
    return torch.cat(heads, dim=-1) @ w_o


def mha_einsum(x, w_q, w_k, w_v, w_o, num_heads):
    h = num_heads
    q = torch.einsum("bld,dhk->bhlk", x, w_q.unflatten(1, (h, -1)))
    k = torch.einsum("bld,dhk->bhlk", x, w_k.unflatten(1, (h, -1)))
    v = torch.einsum("bld,dhk->bhlk", x, w_v.unflatten(1, (h, -1)))
    a = torch.softmax(torch.einsum("bhik,bhjk->bhij", q, k) * q.shape[-1] ** -0.5, -1)
    o = torch.einsum("bhij,bhjv->bihv", a, v).flatten(2)
    return o @ w_o


WRONG = [
    Wrong("ex-06-1", sh_view_direct, "reshape to (B, h, L, d) without transpose"),
    Wrong("ex-06-1", sh_interleaved, "head index as the fast (interleaved) factor"),
    Wrong("ex-06-1", sh_no_transpose, "(B, L, h, d) not transposed"),
    Wrong("ex-06-1", sh_transpose_then_view, "transpose before reshape"),
    Wrong("ex-06-2", mh_no_transpose, "reshape without transpose back"),
    Wrong("ex-06-2", mh_interleaved, "features interleaved across heads"),
    Wrong("ex-06-2", mh_not_flattened, "(B, L, h, d) not flattened"),
    Wrong("ex-06-2", mh_sum_heads, "heads summed not concatenated"),
    Wrong("ex-06-3", mha_d_model, "scaled by sqrt(d_model)"),
    Wrong("ex-06-3", mha_full_width, "scaled by sqrt(h*d_k)"),
    Wrong("ex-06-3", mha_d_v, "scaled by sqrt(d_v)"),
    Wrong("ex-06-3", mha_softmax_queries, "softmax over queries"),
    Wrong("ex-06-3", mha_bad_split, "split without transpose"),
    Wrong("ex-06-3", mha_single_head, "one head of full width"),
]
RIGHT = [
    Right("ex-06-1", sh_chunk_stack),
    Right("ex-06-1", sh_unflatten),
    Right("ex-06-2", mh_cat_unbind),
    Right("ex-06-2", mh_permute_flatten),
    Right("ex-06-3", mha_head_loop),
    Right("ex-06-3", mha_einsum),
]

# What the feedback must say for the mistake to count as named (the check's
# vocabulary, read off the feedback); None: a known gap, the answer loses marks
# but nothing names its mistake (see tests/checks/independent_banks.py).
NAMED = {
    "sh_view_direct": "without a transpose",
    "sh_interleaved": "interleaved features",
    "sh_no_transpose": "left as (B, L, h, d)",
    "sh_transpose_then_view": "transposed before reshaping",
    "mh_no_transpose": "without transposing back",
    "mh_interleaved": "features interleaved across heads",
    "mh_not_flattened": None,
    "mh_sum_heads": "instead of concatenated",
    "mha_d_model": "sqrt(d_model) instead of sqrt(d_k)",
    "mha_full_width": "instead of sqrt(d_k)",
    "mha_d_v": None,
    "mha_softmax_queries": "over the queries",
    "mha_bad_split": "without a transpose",
    "mha_single_head": "never split",
}
