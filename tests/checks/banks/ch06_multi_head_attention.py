"""Answer bank of chapter 06 (split heads, merge heads, the multi-head forward pass)."""

import math

import torch
from bank import Right, Wrong

# --------------------------------------------------------------------------- ex-06-1


def split_view_without_transpose(x, num_heads):
    B, L, D = x.shape
    return x.view(B, num_heads, L, D // num_heads)


def split_no_transpose(x, num_heads):
    B, L, D = x.shape
    return x.view(B, L, num_heads, D // num_heads)


def split_interleaved(x, num_heads):
    B, L, D = x.shape
    return x.view(B, L, D // num_heads, num_heads).permute(0, 3, 1, 2)


def split_transpose_first(x, num_heads):
    B, L, D = x.shape
    return x.transpose(1, 2).reshape(B, num_heads, L, D // num_heads)


def split_by_attnlib(x, num_heads):
    from attnlib.modules import split_heads

    return split_heads(x, num_heads)


def split_by_chunks(x, num_heads):
    return torch.stack(x.chunk(num_heads, dim=-1), dim=1)  # h blocks of d features


def split_reshape_permute(x, num_heads):
    B, L, D = x.shape
    return x.reshape(B, L, num_heads, -1).permute(0, 2, 1, 3)


# --------------------------------------------------------------------------- ex-06-2


def merge_no_transpose(x):
    B, h, L, d = x.shape
    return x.reshape(B, L, h * d)


def merge_wrong_order(x):
    B, h, L, d = x.shape
    return x.permute(0, 2, 3, 1).reshape(B, L, h * d)


def merge_sum(x):
    return x.sum(dim=1)


def merge_mean(x):
    return x.mean(dim=1)


def merge_by_cat(x):
    return torch.cat(x.unbind(dim=1), dim=-1)


def merge_transpose_reshape(x):
    B, h, L, d = x.shape
    return x.transpose(1, 2).reshape(B, L, -1)


def merge_permute_flatten(x):
    return x.permute(0, 2, 1, 3).flatten(start_dim=2)


# --------------------------------------------------------------------------- ex-06-3


def _split(x, h):
    B, L, D = x.shape
    return x.view(B, L, h, D // h).transpose(1, 2)


def _merge(x):
    B, h, L, d = x.shape
    return x.transpose(1, 2).reshape(B, L, h * d)


def _mha(x, w_q, w_k, w_v, w_o, h, *, scale=None, dim=-1, split=_split, merge=_merge, project=True):
    q, k, v = (split(x @ w, h) for w in (w_q, w_k, w_v))
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    w = torch.softmax(q @ k.transpose(-2, -1) * scale, dim=dim)
    out = merge(w @ v)
    return out @ w_o if project else out


def mha_sqrt_d_model(x, w_q, w_k, w_v, w_o, num_heads):
    return _mha(x, w_q, w_k, w_v, w_o, num_heads, scale=1 / math.sqrt(x.shape[-1]))


def mha_split_without_transpose(x, w_q, w_k, w_v, w_o, num_heads):
    def split(t, h):
        B, L, D = t.shape
        return t.view(B, h, L, D // h)

    return _mha(x, w_q, w_k, w_v, w_o, num_heads, split=split)


def mha_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads):
    def merge(t):
        B, h, L, d = t.shape
        return t.reshape(B, L, h * d)

    return _mha(x, w_q, w_k, w_v, w_o, num_heads, merge=merge)


def mha_no_output_projection(x, w_q, w_k, w_v, w_o, num_heads):
    return _mha(x, w_q, w_k, w_v, w_o, num_heads, project=False)


def mha_softmax_over_queries(x, w_q, w_k, w_v, w_o, num_heads):
    return _mha(x, w_q, w_k, w_v, w_o, num_heads, dim=-2)


def mha_one_big_head(x, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = x @ w_q, x @ w_k, x @ w_v  # the heads are never split
    w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1] // num_heads), dim=-1)
    return (w @ v) @ w_o


def mha_by_sdpa(x, w_q, w_k, w_v, w_o, num_heads):
    import torch.nn.functional as F

    q, k, v = (_split(x @ w, num_heads) for w in (w_q, w_k, w_v))
    return _merge(F.scaled_dot_product_attention(q, k, v)) @ w_o


def mha_loop_over_heads(x, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    d_k, d_v = q.shape[-1] // num_heads, v.shape[-1] // num_heads
    heads = []
    for i in range(num_heads):
        qi = q[..., i * d_k : (i + 1) * d_k]
        ki = k[..., i * d_k : (i + 1) * d_k]
        vi = v[..., i * d_v : (i + 1) * d_v]
        s = torch.einsum("bld,bsd->bls", qi, ki) / math.sqrt(d_k)
        e = torch.exp(s - s.amax(dim=-1, keepdim=True))
        heads.append((e / e.sum(dim=-1, keepdim=True)) @ vi)
    return torch.cat(heads, dim=-1) @ w_o


WRONG = [
    Wrong("ex-06-1", split_view_without_transpose, "without a transpose"),
    Wrong("ex-06-1", split_no_transpose, "the transpose is missing"),
    Wrong("ex-06-1", split_interleaved, "interleaved"),
    Wrong("ex-06-1", split_transpose_first, "transposed before"),
    Wrong("ex-06-1", split_by_attnlib, "not allowed"),
    Wrong("ex-06-2", merge_no_transpose, "without transposing back"),
    Wrong("ex-06-2", merge_wrong_order, "wrong order"),
    Wrong("ex-06-2", merge_sum, "instead of concatenated"),
    Wrong("ex-06-2", merge_mean, "averaged"),
    Wrong("ex-06-3", mha_sqrt_d_model, "sqrt(d_model)"),
    Wrong("ex-06-3", mha_split_without_transpose, "without a transpose"),
    Wrong("ex-06-3", mha_merge_without_transpose, "without transposing back"),
    Wrong("ex-06-3", mha_no_output_projection, "output projection"),
    Wrong("ex-06-3", mha_softmax_over_queries, "wrong axis"),
    Wrong("ex-06-3", mha_one_big_head, "never split"),
    Wrong("ex-06-3", mha_by_sdpa, "not allowed"),
]
RIGHT = [
    Right("ex-06-1", split_by_chunks),
    Right("ex-06-1", split_reshape_permute),
    Right("ex-06-2", merge_by_cat),
    Right("ex-06-2", merge_permute_flatten),
    Right("ex-06-2", merge_transpose_reshape),
    Right("ex-06-3", mha_loop_over_heads),
]
