"""Independent bank for chapter 08, written from the exercise text only (#25)."""

import math

import numpy as np
import torch
import torch.nn.functional as F
from bank import Right, Wrong

# ---- ex-08-1 online_softmax_step --------------------------------------------


def _exp_shift(x, m):
    # e^{x - m} that is 0 where x = -inf (also when m = -inf)
    x = np.asarray(x, dtype=float)
    if m == -math.inf:
        return np.zeros_like(x)
    return np.exp(x - m)


def os_no_rescale(m, l, block):
    m_new = max(m, float(np.max(block)))
    return m_new, l + float(_exp_shift(block, m_new).sum())  # old l not rescaled


def os_rescale_inverted(m, l, block):
    m_new = max(m, float(np.max(block)))
    c = 0.0 if m == -math.inf else math.exp(m_new - m)  # e^{m_new - m}
    return m_new, l * c + float(_exp_shift(block, m_new).sum())


def os_block_max_only(m, l, block):
    m_new = float(np.max(block))  # forgets the old maximum
    c = 0.0 if m == -math.inf else math.exp(m - m_new)
    return m_new, l * c + float(_exp_shift(block, m_new).sum())


def os_unshifted_block(m, l, block):
    m_new = max(m, float(np.max(block)))
    c = 0.0 if m == -math.inf else math.exp(m - m_new)
    return m_new, l * c + float(np.exp(block).sum()) * math.exp(-m_new)


def os_old_max_for_block(m, l, block):
    m_new = max(m, float(np.max(block)))
    c = 0.0 if m == -math.inf else math.exp(m - m_new)
    shift = float(np.max(block)) if m == -math.inf else m
    return m_new, l * c + float(np.exp(np.asarray(block) - shift).sum())  # old m


def os_one_by_one(m, l, block):
    for s in np.asarray(block, dtype=float).tolist():
        if s == -math.inf:
            continue
        if s > m:
            l = l * (math.exp(m - s) if m != -math.inf else 0.0) + 1.0
            m = s
        else:
            l = l + math.exp(s - m)
    return m, l


def os_where(m, l, block):
    block = np.asarray(block, dtype=float)
    m_new = max(float(m), float(block.max(initial=-np.inf)))
    if m_new == -np.inf:
        return m_new, float(l)
    scale = np.exp(m - m_new) if np.isfinite(m) else 0.0
    return m_new, float(l * scale + np.exp(block - m_new).sum())


# ---- ex-08-2 tile_update ------------------------------------------------------


def _tile(
    m, l, acc, q, k, v, *, scale=True, rescale_acc=True, rescale_l=True, normalise=False, inverted=False
):
    s = q @ k.transpose(-2, -1)
    if scale:
        s = s / math.sqrt(q.shape[-1])
    m_new = torch.maximum(m, s.amax(-1, keepdim=True))
    c = torch.exp(m - m_new) if not inverted else torch.exp(m_new - m)
    c = torch.nan_to_num(c, posinf=0.0)
    p = torch.exp(s - m_new)
    l_new = (c * l if rescale_l else l) + p.sum(-1, keepdim=True)
    acc_new = (c * acc if rescale_acc else acc) + p @ v
    if normalise:
        acc_new = acc_new / l_new
    return m_new, l_new, acc_new


def tu_unscaled(m, l, acc, q_tile, k_tile, v_tile):
    return _tile(m, l, acc, q_tile, k_tile, v_tile, scale=False)


def tu_acc_not_rescaled(m, l, acc, q_tile, k_tile, v_tile):
    return _tile(m, l, acc, q_tile, k_tile, v_tile, rescale_acc=False)


def tu_l_not_rescaled(m, l, acc, q_tile, k_tile, v_tile):
    return _tile(m, l, acc, q_tile, k_tile, v_tile, rescale_l=False)


def tu_normalised(m, l, acc, q_tile, k_tile, v_tile):
    return _tile(m, l, acc, q_tile, k_tile, v_tile, normalise=True)


def tu_c_inverted(m, l, acc, q_tile, k_tile, v_tile):
    return _tile(m, l, acc, q_tile, k_tile, v_tile, inverted=True)


def tu_rowmax_wrong_axis(m, l, acc, q_tile, k_tile, v_tile):
    s = q_tile @ k_tile.transpose(-2, -1) / math.sqrt(q_tile.shape[-1])
    m_new = torch.maximum(m, s.amax(-2, keepdim=True).amax(-1, keepdim=True))  # tile max
    c = torch.exp(m - m_new)
    p = torch.exp(s - m_new)
    return m_new, c * l + p.sum(-1, keepdim=True), c * acc + p @ v_tile


def tu_einsum(m, l, acc, q_tile, k_tile, v_tile):
    s = torch.einsum("...qd,...kd->...qk", q_tile, k_tile) * q_tile.shape[-1] ** -0.5
    m_new = torch.max(m, torch.max(s, dim=-1, keepdim=True).values)
    c = torch.where(torch.isinf(m), torch.zeros_like(m), torch.exp(m - m_new))
    p = torch.exp(s - m_new)
    return m_new, l * c + p.sum(-1, keepdim=True), acc * c + torch.einsum("...qk,...kv->...qv", p, v_tile)


# ---- ex-08-3 kv_decode_step ----------------------------------------------------


def _attend(q, k, v, scale=True, dim=-1):
    s = q @ k.transpose(-2, -1)
    if scale:
        s = s / math.sqrt(q.shape[-1])
    return torch.softmax(s, dim=dim) @ v


def kv_attend_then_append(query, key, value, cache_k, cache_v):
    out = _attend(query, cache_k, cache_v)
    return out, torch.cat([cache_k, key], -2), torch.cat([cache_v, value], -2)


def kv_prepend(query, key, value, cache_k, cache_v):
    k, v = torch.cat([key, cache_k], -2), torch.cat([value, cache_v], -2)
    return _attend(query, k, v), k, v  # new token at the start


def kv_unscaled(query, key, value, cache_k, cache_v):
    k, v = torch.cat([cache_k, key], -2), torch.cat([cache_v, value], -2)
    return _attend(query, k, v, scale=False), k, v


def kv_softmax_query_axis(query, key, value, cache_k, cache_v):
    k, v = torch.cat([cache_k, key], -2), torch.cat([cache_v, value], -2)
    return _attend(query, k, v, dim=-2), k, v  # softmax over the one query


def kv_only_new(query, key, value, cache_k, cache_v):
    k, v = torch.cat([cache_k, key], -2), torch.cat([cache_v, value], -2)
    return _attend(query, key, value), k, v  # attends to itself only


def kv_sdpa(query, key, value, cache_k, cache_v):
    # "PyTorch operations, not attnlib": torch's own attention is one
    k = torch.cat((cache_k, key), dim=2)
    v = torch.cat((cache_v, value), dim=2)
    return F.scaled_dot_product_attention(query, k, v), k, v


def kv_einsum(query, key, value, cache_k, cache_v):
    k = torch.cat([cache_k, key], dim=-2)
    v = torch.cat([cache_v, value], dim=-2)
    s = torch.einsum("bhqd,bhkd->bhqk", query, k) / math.sqrt(k.shape[-1])
    w = (s - s.amax(-1, keepdim=True)).exp()
    return torch.einsum("bhqk,bhkv->bhqv", w / w.sum(-1, keepdim=True), v), k, v


# ---- ex-08-4 attention_backward ------------------------------------------------


def _fwd(q, k, v):
    scale = 1 / math.sqrt(q.shape[-1])
    a = torch.softmax(q @ k.transpose(-2, -1) * scale, -1)
    return a, a @ v, scale


def ab_no_scale(q, k, v, grad_out):
    a, c, _ = _fwd(q, k, v)
    dv = a.transpose(-2, -1) @ grad_out
    da = grad_out @ v.transpose(-2, -1)
    de = a * (da - (grad_out * c).sum(-1, keepdim=True))
    return de @ k, de.transpose(-2, -1) @ q, dv  # 1/sqrt(d) forgotten


def ab_no_D(q, k, v, grad_out):
    a, c, scale = _fwd(q, k, v)
    dv = a.transpose(-2, -1) @ grad_out
    de = a * (grad_out @ v.transpose(-2, -1))  # softmax derivative without -D
    return de @ k * scale, de.transpose(-2, -1) @ q * scale, dv


def ab_D_wrong_axis(q, k, v, grad_out):
    a, c, scale = _fwd(q, k, v)
    dv = a.transpose(-2, -1) @ grad_out
    da = grad_out @ v.transpose(-2, -1)
    de = a * (da - (a * da).sum(-2, keepdim=True))  # column sums
    return de @ k * scale, de.transpose(-2, -1) @ q * scale, dv


def ab_dv_wrong(q, k, v, grad_out):
    a, c, scale = _fwd(q, k, v)
    da = grad_out @ v.transpose(-2, -1)
    de = a * (da - (grad_out * c).sum(-1, keepdim=True))
    dv = (a.sum(-2, keepdim=True).transpose(-2, -1)) * grad_out.sum(-2, keepdim=True)
    return de @ k * scale, de.transpose(-2, -1) @ q * scale, dv


def ab_dq_dk_swapped(q, k, v, grad_out):
    a, c, scale = _fwd(q, k, v)
    dv = a.transpose(-2, -1) @ grad_out
    da = grad_out @ v.transpose(-2, -1)
    de = a * (da - (grad_out * c).sum(-1, keepdim=True))
    return de.transpose(-2, -1) @ q * scale, de @ k * scale, dv  # dq, dk swapped


def ab_jacobian(q, k, v, grad_out):
    # the full softmax Jacobian diag(a) - a a^T, row by row
    a, c, scale = _fwd(q, k, v)
    dv = torch.einsum("...ls,...lv->...sv", a, grad_out)
    da = torch.einsum("...lv,...sv->...ls", grad_out, v)
    jac = torch.diag_embed(a) - a[..., :, None] * a[..., None, :]
    de = torch.einsum("...lst,...lt->...ls", jac, da)
    dq = torch.einsum("...ls,...sd->...ld", de, k) * scale
    dk = torch.einsum("...ls,...ld->...sd", de, q) * scale
    return dq, dk, dv


def ab_rowsum_a_da(q, k, v, grad_out):
    a, c, scale = _fwd(q, k, v)
    da = grad_out @ v.mT
    de = a * (da - (a * da).sum(-1, keepdim=True))
    return (de * scale) @ k, (de * scale).mT @ q, a.mT @ grad_out


WRONG = [
    Wrong("ex-08-1", os_no_rescale, "old l not rescaled"),
    Wrong("ex-08-1", os_rescale_inverted, "rescale factor inverted e^{m_new-m}"),
    Wrong("ex-08-1", os_block_max_only, "old maximum forgotten"),
    Wrong("ex-08-1", os_unshifted_block, "block exponentiated before shifting"),
    Wrong("ex-08-1", os_old_max_for_block, "block shifted by old max"),
    Wrong("ex-08-2", tu_unscaled, "scores not scaled by 1/sqrt(d)"),
    Wrong("ex-08-2", tu_acc_not_rescaled, "acc not rescaled by c"),
    Wrong("ex-08-2", tu_l_not_rescaled, "l not rescaled by c"),
    Wrong("ex-08-2", tu_normalised, "acc normalised by l"),
    Wrong("ex-08-2", tu_c_inverted, "c inverted e^{m'-m}"),
    Wrong("ex-08-2", tu_rowmax_wrong_axis, "max over the whole tile"),
    Wrong("ex-08-3", kv_attend_then_append, "attend before append"),
    Wrong("ex-08-3", kv_prepend, "new token prepended"),
    Wrong("ex-08-3", kv_unscaled, "not scaled"),
    Wrong("ex-08-3", kv_softmax_query_axis, "softmax over query axis"),
    Wrong("ex-08-3", kv_only_new, "attends to itself only"),
    Wrong("ex-08-4", ab_no_scale, "1/sqrt(d) missing in dq dk"),
    Wrong("ex-08-4", ab_no_D, "softmax derivative without D"),
    Wrong("ex-08-4", ab_D_wrong_axis, "D summed over wrong axis"),
    Wrong("ex-08-4", ab_dv_wrong, "dV wrong (outer sums)"),
    Wrong("ex-08-4", ab_dq_dk_swapped, "dq and dk swapped"),
]
RIGHT = [
    Right("ex-08-1", os_one_by_one),
    Right("ex-08-1", os_where),
    Right("ex-08-2", tu_einsum),
    Right("ex-08-3", kv_sdpa),
    Right("ex-08-3", kv_einsum),
    Right("ex-08-4", ab_jacobian),
    Right("ex-08-4", ab_rowsum_a_da),
]

# What the feedback must say for the mistake to count as named (the check's
# vocabulary, read off the feedback); None: a known gap, the answer loses marks
# but nothing names its mistake (see tests/checks/independent_banks.py).
NAMED = {
    "os_no_rescale": "the old sum is not rescaled",
    "os_rescale_inverted": "upside down",
    "os_block_max_only": "the block's maximum, not the running one",
    "os_unshifted_block": "taken before the shift",
    "os_old_max_for_block": None,
    "tu_unscaled": "no 1/sqrt(d)",
    "tu_acc_not_rescaled": "the accumulated output is not rescaled",
    "tu_l_not_rescaled": "the running sum l is not rescaled",
    "tu_normalised": "acc is divided by l",
    "tu_c_inverted": None,
    "tu_rowmax_wrong_axis": None,
    "kv_attend_then_append": "before the new key and value are appended",
    "kv_prepend": "in front of the cache",
    "kv_unscaled": "no 1/sqrt(d)",
    "kv_softmax_query_axis": None,
    "kv_only_new": None,
    "ab_no_scale": "scale is missing from dQ and dK",
    "ab_no_D": "the softmax's coupling term D is missing",
    "ab_D_wrong_axis": None,
    "ab_dv_wrong": None,
    "ab_dq_dk_swapped": None,
}
