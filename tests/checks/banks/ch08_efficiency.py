"""Answer bank of chapter 08 (online softmax step, tile step, KV-cache decoding step)."""

import math

import numpy as np
import torch
from bank import Right, Wrong

# --------------------------------------------------------------------------- ex-08-1


def online_no_rescale(m, l, block):
    m_new = max(m, float(np.max(block)))
    return m_new, l + float(np.sum(np.exp(block - m_new)))


def online_inverted_rescale(m, l, block):
    m_new = max(m, float(np.max(block)))
    factor = math.exp(m_new - m) if m > -math.inf else 0.0
    return m_new, l * factor + float(np.sum(np.exp(block - m_new)))


def online_block_max(m, l, block):
    m_new = float(np.max(block))
    return m_new, l * math.exp(m - m_new) + float(np.sum(np.exp(block - m_new)))


def online_no_shift(m, l, block):
    with np.errstate(over="ignore"):
        return max(m, float(np.max(block))), l + float(np.sum(np.exp(block)))


def online_booleans(m, l, block):
    return True, True


def online_by_attnlib(m, l, block):
    from attnlib.efficient import online_softmax_update

    return online_softmax_update(m, l, block)


def online_float32(m, l, block):
    b = np.asarray(block, dtype=np.float32)
    m_new = np.maximum(np.float32(m), b.max())
    l_new = np.float32(l) * np.exp(np.float32(m) - m_new) + np.exp(b - m_new).sum()
    return m_new, l_new  # float32 scalars: judged at float32 precision


def online_log_space(m, l, block):
    m_new = max(m, *[float(s) for s in block])
    with np.errstate(divide="ignore"):
        log_old = math.log(l) + m - m_new if l > 0 else -math.inf
    log_block = np.log(np.sum(np.exp(np.asarray(block) - m_new)))
    return m_new, float(np.exp(np.logaddexp(log_old, log_block)))


# --------------------------------------------------------------------------- ex-08-2


def _scores(q, k, scale=None):
    return q @ k.transpose(-2, -1) * (1 / math.sqrt(q.shape[-1]) if scale is None else scale)


def _step(m, l, acc, q, k, v, *, scale=None, rescale_acc=True, rescale_l=True, normalise=False):
    s = _scores(q, k, scale)
    m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
    c = torch.exp(m - m_new)
    p = torch.exp(s - m_new)
    l_new = (c * l if rescale_l else l) + p.sum(dim=-1, keepdim=True)
    acc_new = (c * acc if rescale_acc else acc) + p @ v
    return m_new, l_new, acc_new / l_new if normalise else acc_new


def tile_acc_not_rescaled(m, l, acc, q_tile, k_tile, v_tile):
    return _step(m, l, acc, q_tile, k_tile, v_tile, rescale_acc=False)


def tile_l_not_rescaled(m, l, acc, q_tile, k_tile, v_tile):
    return _step(m, l, acc, q_tile, k_tile, v_tile, rescale_l=False)


def tile_unscaled(m, l, acc, q_tile, k_tile, v_tile):
    return _step(m, l, acc, q_tile, k_tile, v_tile, scale=1.0)


def tile_normalised_early(m, l, acc, q_tile, k_tile, v_tile):
    return _step(m, l, acc, q_tile, k_tile, v_tile, normalise=True)


def tile_by_attnlib(m, l, acc, q_tile, k_tile, v_tile):
    from attnlib import efficient

    return efficient.tile_step(m, l, acc, q_tile, k_tile, v_tile)


def tile_einsum_where(m, l, acc, q_tile, k_tile, v_tile):
    s = torch.einsum("...qd,...kd->...qk", q_tile, k_tile) / q_tile.shape[-1] ** 0.5
    m_new = torch.where(s.max(dim=-1, keepdim=True).values > m, s.max(dim=-1, keepdim=True).values, m)
    c = torch.where(torch.isinf(m), torch.zeros_like(m), torch.exp(m - m_new))  # nothing to rescale yet
    p = torch.exp(s - m_new)
    return m_new, c * l + p.sum(-1, keepdim=True), c * acc + torch.einsum("...qk,...kv->...qv", p, v_tile)


# --------------------------------------------------------------------------- ex-08-3


def _attend(q, k, v, scale=None):
    w = torch.softmax(_scores(q, k, scale), dim=-1)
    return w @ v


def kv_attend_before_append(query, key, value, cache_k, cache_v):
    out = _attend(query, cache_k, cache_v)
    return out, torch.cat([cache_k, key], dim=-2), torch.cat([cache_v, value], dim=-2)


def kv_prepend(query, key, value, cache_k, cache_v):
    ck, cv = torch.cat([key, cache_k], dim=-2), torch.cat([value, cache_v], dim=-2)
    return _attend(query, ck, cv), ck, cv


def kv_unscaled(query, key, value, cache_k, cache_v):
    ck, cv = torch.cat([cache_k, key], dim=-2), torch.cat([cache_v, value], dim=-2)
    return _attend(query, ck, cv, scale=1.0), ck, cv


def kv_top_left_causal(query, key, value, cache_k, cache_v):
    ck, cv = torch.cat([cache_k, key], dim=-2), torch.cat([cache_v, value], dim=-2)
    s = _scores(query, ck)
    allowed = torch.ones(1, ck.shape[-2], dtype=torch.bool).tril()  # the single query sees position 0
    w = torch.softmax(s.masked_fill(~allowed, float("-inf")), dim=-1)
    return w @ cv, ck, cv


def kv_old_cache_returned(query, key, value, cache_k, cache_v):
    ck, cv = torch.cat([cache_k, key], dim=-2), torch.cat([cache_v, value], dim=-2)
    return _attend(query, ck, cv), cache_k, cache_v


def kv_append_on_heads(query, key, value, cache_k, cache_v):
    ck, cv = torch.cat([cache_k, key], dim=1), torch.cat([cache_v, value], dim=1)
    return _attend(query, ck, cv), ck, cv


def kv_einsum_exp(query, key, value, cache_k, cache_v):
    ck = torch.cat((cache_k, key), dim=2)
    cv = torch.cat((cache_v, value), dim=2)
    s = torch.einsum("bhqd,bhkd->bhqk", query, ck) / math.sqrt(query.size(-1))
    e = (s - s.max(dim=-1, keepdim=True).values).exp()
    return torch.einsum("bhqk,bhkv->bhqv", e / e.sum(-1, keepdim=True), cv), ck, cv


WRONG = [
    Wrong("ex-08-1", online_no_rescale, "not rescaled"),
    Wrong("ex-08-1", online_inverted_rescale, "upside down"),
    Wrong("ex-08-1", online_block_max, "block's maximum"),
    Wrong("ex-08-1", online_no_shift, "without subtracting the maximum"),
    Wrong("ex-08-1", online_booleans, "got booleans"),
    Wrong("ex-08-1", online_by_attnlib, "not allowed"),
    Wrong("ex-08-2", tile_acc_not_rescaled, "output is not rescaled"),
    Wrong("ex-08-2", tile_l_not_rescaled, "running sum l is not rescaled"),
    Wrong("ex-08-2", tile_unscaled, "no 1/sqrt(d)"),
    Wrong("ex-08-2", tile_normalised_early, "divided by l inside"),
    Wrong("ex-08-2", tile_by_attnlib, "not allowed"),
    Wrong("ex-08-3", kv_attend_before_append, "before the new key"),
    Wrong("ex-08-3", kv_prepend, "in front of the cache"),
    Wrong("ex-08-3", kv_unscaled, "no 1/sqrt(d)"),
    Wrong("ex-08-3", kv_top_left_causal, "top-left causal"),
    Wrong("ex-08-3", kv_old_cache_returned, "cache is returned without"),
    Wrong("ex-08-3", kv_append_on_heads, "heads axis"),
]
RIGHT = [
    Right("ex-08-1", online_float32),
    Right("ex-08-1", online_log_space),
    Right("ex-08-2", tile_einsum_where),
    Right("ex-08-3", kv_einsum_exp),
]


# --------------------------------------------------------------------------- ex-08-4


def _grads(q, k, v, grad_out, rule):
    scale = 1 / math.sqrt(q.shape[-1])
    p = torch.softmax(q @ k.transpose(-2, -1) * scale, dim=-1)
    dp = grad_out @ v.transpose(-2, -1)
    ds = rule(p, dp)
    return ds @ k * scale, ds.transpose(-2, -1) @ q * scale, p.transpose(-2, -1) @ grad_out


def backward_without_d(q, k, v, grad_out):
    return _grads(q, k, v, grad_out, lambda p, dp: p * dp)


def backward_d_from_dp(q, k, v, grad_out):
    return _grads(q, k, v, grad_out, lambda p, dp: p * (dp - dp.sum(-1, keepdim=True)))


def backward_diagonal_jacobian(q, k, v, grad_out):
    return _grads(q, k, v, grad_out, lambda p, dp: p * (1 - p) * dp)


def backward_unscaled(q, k, v, grad_out):
    dq, dk, dv = attention_backward_einsum(q, k, v, grad_out)
    return dq * math.sqrt(q.shape[-1]), dk * math.sqrt(q.shape[-1]), dv


def backward_by_autograd(q, k, v, grad_out):
    q, k, v = (t.detach().requires_grad_(True) for t in (q, k, v))
    out = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), -1) @ v
    out.backward(grad_out)
    return q.grad, k.grad, v.grad


def attention_backward_einsum(q, k, v, grad_out):
    """Right: einsum, D from P * dP (equal to rowsum(dO * O)), float64 inside."""
    q, k, v, g = (t.double() for t in (q, k, v, grad_out))
    scale = q.shape[-1] ** -0.5
    s = torch.einsum("...ld,...sd->...ls", q, k) * scale
    p = (s - s.amax(-1, keepdim=True)).exp()
    p = p / p.sum(-1, keepdim=True)
    dp = torch.einsum("...le,...se->...ls", g, v)
    ds = p * dp - p * (p * dp).sum(-1, keepdim=True)  # the full softmax Jacobian
    dq = torch.einsum("...ls,...sd->...ld", ds, k) * scale
    dk = torch.einsum("...ls,...ld->...sd", ds, q) * scale
    dv = torch.einsum("...ls,...le->...se", p, g)
    return dq, dk, dv


def attention_backward_jacobian_loop(q, k, v, grad_out):
    """Right: the softmax Jacobian diag(p) - p p^T built row by row."""
    scale = 1 / math.sqrt(q.shape[-1])
    p = torch.softmax(q @ k.transpose(-2, -1) * scale, dim=-1)
    dp = grad_out @ v.transpose(-2, -1)
    jac = torch.diag_embed(p) - p.unsqueeze(-1) * p.unsqueeze(-2)  # (..., L, S, S)
    ds = (jac @ dp.unsqueeze(-1)).squeeze(-1)
    return ds @ k * scale, ds.transpose(-2, -1) @ q * scale, p.transpose(-2, -1) @ grad_out


WRONG += [
    Wrong("ex-08-4", backward_without_d, "coupling term D is missing"),
    Wrong("ex-08-4", backward_d_from_dp, "row sum of dP"),
    Wrong("ex-08-4", backward_diagonal_jacobian, "diagonal of the softmax Jacobian"),
    Wrong("ex-08-4", backward_unscaled, "scale is missing"),
    Wrong("ex-08-4", backward_by_autograd, "not allowed"),
]
RIGHT += [
    Right("ex-08-4", attention_backward_einsum),
    Right("ex-08-4", attention_backward_jacobian_loop),
]

# --------------------------------------------------------------------------- issue 33 item 14


def backward_dk_untransposed(q, k, v, grad_out):  # dK = dS Q: its dV is right
    scale = 1 / math.sqrt(q.shape[-1])
    p = torch.softmax(q @ k.transpose(-2, -1) * scale, dim=-1)
    dv = p.transpose(-2, -1) @ grad_out
    dp = grad_out @ v.transpose(-2, -1)
    ds = p * (dp - (grad_out * (p @ v)).sum(dim=-1, keepdim=True))
    return ds @ k * scale, ds @ q * scale, dv


WRONG += [
    Wrong("ex-08-4", backward_dk_untransposed, "dS is not transposed", not_named=("P is not transposed",))
]
