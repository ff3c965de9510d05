"""Answer bank for chapter 09 (positions): plausible wrong answers and correct alternatives."""

import math

import numpy as np
import torch
from bank import Right, Wrong

# --------------------------------------------------------------------------- ex-09-1


def table_cos_in_even_columns(n_positions, d_model):
    pe = torch.zeros(n_positions, d_model, dtype=torch.float64)
    for p in range(n_positions):
        for i in range(d_model // 2):
            angle = p / 10000 ** (2 * i / d_model)
            pe[p, 2 * i], pe[p, 2 * i + 1] = math.cos(angle), math.sin(angle)
    return pe


def table_exponent_i_over_d(n_positions, d_model):
    p = torch.arange(n_positions, dtype=torch.float64)[:, None]
    i = torch.arange(d_model // 2, dtype=torch.float64)
    angle = p / 10000 ** (i / d_model)
    pe = torch.empty(n_positions, d_model, dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(angle), torch.cos(angle)
    return pe


def table_halves(n_positions, d_model):
    p = np.arange(n_positions)[:, None]
    angle = p / 10000 ** (2 * np.arange(d_model // 2) / d_model)
    return torch.from_numpy(np.concatenate([np.sin(angle), np.cos(angle)], axis=1))


def table_with_library(n_positions, d_model):
    from attnlib.positions import sinusoidal_encoding

    return sinusoidal_encoding(n_positions, d_model, dtype=torch.float64)


def table_numpy_loop(n_positions, d_model):
    pe = np.zeros((n_positions, d_model))
    for p in range(n_positions):
        for c in range(0, d_model, 2):
            pe[p, c] = np.sin(p / 10000 ** (c / d_model))
            pe[p, c + 1] = np.cos(p / 10000 ** (c / d_model))
    return torch.tensor(pe)


def table_exp_log_float32(n_positions, d_model):
    position = torch.arange(n_positions).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
    pe = torch.zeros(n_positions, d_model)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe  # float32, as the Annotated Transformer writes it


# --------------------------------------------------------------------------- ex-09-2


def _angles(L, E, dtype, sign=1.0, exponent=2.0, start=0):
    p = torch.arange(start, start + L, dtype=torch.float64)[:, None]
    theta = sign * p * 10000.0 ** (-exponent * torch.arange(E // 2, dtype=torch.float64) / E)
    return torch.cos(theta).to(dtype), torch.sin(theta).to(dtype)


def rope_clockwise(x):
    cos, sin = _angles(x.shape[-2], x.shape[-1], x.dtype)
    a, b = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2], out[..., 1::2] = a * cos + b * sin, -a * sin + b * cos
    return out


def rope_rotate_half(x):
    E = x.shape[-1]
    cos, sin = _angles(x.shape[-2], E, x.dtype)
    cos, sin = torch.cat([cos, cos], -1), torch.cat([sin, sin], -1)
    rotated = torch.cat([-x[..., E // 2 :], x[..., : E // 2]], dim=-1)
    return x * cos + rotated * sin


def rope_positions_from_one(x):
    cos, sin = _angles(x.shape[-2], x.shape[-1], x.dtype, start=1)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)


def rope_with_library(x):
    import attnlib.positions as pos

    return pos.apply_rope(x)


def rope_complex(x):
    L, E = x.shape[-2], x.shape[-1]
    k2 = torch.arange(0, E, 2, dtype=torch.float64)  # float64 frequencies: float64 work on a float64 x
    theta = torch.arange(L, dtype=torch.float64)[:, None] * 10000.0 ** (-k2 / E)
    z = torch.view_as_complex(x.to(torch.float64).reshape(*x.shape[:-1], E // 2, 2).contiguous())
    return torch.view_as_real(z * torch.polar(torch.ones_like(theta), theta)).flatten(-2).to(x.dtype)


def rope_float32_frequencies(x):
    """Right formula, but the frequencies come from torch's default dtype (float32): on a float64
    x the rows at position 39 are about 1e-7 off, float32's precision where float64's is asked."""
    L, E = x.shape[-2], x.shape[-1]
    freq = torch.exp(-(2 * torch.arange(E // 2) / E) * math.log(10000.0))  # float32
    phi = torch.arange(L)[:, None] * freq  # float32 (L, E/2)
    out = x.clone()
    out[..., 0::2] = x[..., 0::2] * torch.cos(phi) - x[..., 1::2] * torch.sin(phi)
    out[..., 1::2] = x[..., 0::2] * torch.sin(phi) + x[..., 1::2] * torch.cos(phi)
    return out


def rope_loop(x):
    out = x.clone()
    L, E = x.shape[-2], x.shape[-1]
    for p in range(L):
        for i in range(E // 2):
            t = p / 10000 ** (2 * i / E)
            a, b = x[..., p, 2 * i], x[..., p, 2 * i + 1]
            out[..., p, 2 * i] = a * math.cos(t) - b * math.sin(t)
            out[..., p, 2 * i + 1] = a * math.sin(t) + b * math.cos(t)
    return out


# --------------------------------------------------------------------------- ex-09-3


def alibi_slopes_from_zero(num_heads, L):
    m = torch.tensor([2 ** (-8 * h / num_heads) for h in range(num_heads)])
    i, j = torch.arange(L)[:, None], torch.arange(L)[None, :]
    return (-m[:, None, None] * (i - j)).masked_fill(j > i, -math.inf)


def alibi_positive(num_heads, L):
    m = 2.0 ** (-8.0 * torch.arange(1, num_heads + 1) / num_heads)
    i, j = torch.arange(L)[:, None], torch.arange(L)[None, :]
    return (m[:, None, None] * (i - j)).masked_fill(j > i, -math.inf)


def alibi_no_causal_mask(num_heads, L):
    m = 2.0 ** (-8.0 * torch.arange(1, num_heads + 1) / num_heads)
    i, j = torch.arange(L)[:, None], torch.arange(L)[None, :]
    return -m[:, None, None] * (i - j).clamp(min=0)


def alibi_with_library(num_heads, L):
    from attnlib import positions

    return positions.alibi_bias(num_heads, L, L)


def alibi_where(num_heads, L):
    m = torch.pow(2.0, -8.0 * (torch.arange(num_heads) + 1) / num_heads).view(-1, 1, 1)
    rel = torch.arange(L).view(1, -1) - torch.arange(L).view(-1, 1)  # j - i
    return torch.where(rel <= 0, m * rel, torch.tensor(-math.inf))


def alibi_loop(num_heads, L):
    out = torch.full((num_heads, L, L), -math.inf)
    for h in range(num_heads):
        slope = 0.5 ** (8 * (h + 1) / num_heads)
        for i in range(L):
            for j in range(i + 1):
                out[h, i, j] = -slope * (i - j)
    return out


# --------------------------------------------------------------------------- ex-09-4


def _phi(positions, E):
    k = torch.arange(E // 2, dtype=torch.float64)
    return positions.to(torch.float64)[:, None] * 10000.0 ** (-2 * k / E)  # (L, E/2)


def halves_rotating_neighbours(x, positions):
    phi = _phi(positions, x.shape[-1])
    cos, sin = torch.cos(phi).to(x.dtype), torch.sin(phi).to(x.dtype)
    out = x.clone()
    out[..., 0::2] = x[..., 0::2] * cos - x[..., 1::2] * sin
    out[..., 1::2] = x[..., 0::2] * sin + x[..., 1::2] * cos
    return out


def halves_from_zero(x, positions):
    return halves_rotate_half(x, torch.arange(x.shape[-2]))


def halves_rotate_half_wrong_sign(x, positions):
    E = x.shape[-1]
    phi = torch.cat([_phi(positions, E)] * 2, dim=-1)
    x1, x2 = x[..., : E // 2], x[..., E // 2 :]
    return x * torch.cos(phi).to(x.dtype) + torch.cat((x2, -x1), dim=-1) * torch.sin(phi).to(x.dtype)


def halves_repeat_interleave(x, positions):
    E = x.shape[-1]
    phi = _phi(positions, E).repeat_interleave(2, dim=-1)  # (L, E)
    x1, x2 = x[..., : E // 2], x[..., E // 2 :]
    return x * torch.cos(phi).to(x.dtype) + torch.cat((-x2, x1), dim=-1) * torch.sin(phi).to(x.dtype)


def halves_with_library(x, positions):
    from attnlib.positions import apply_rope

    E = x.shape[-1]
    order = torch.stack((torch.arange(E // 2), torch.arange(E // 2) + E // 2), -1).flatten()
    return apply_rope(x[..., order], positions)[..., order.argsort()]


def halves_rotate_half(x, positions):
    """As Hugging Face's Llama writes it: x * cos + rotate_half(x) * sin, angles duplicated by cat."""
    E = x.shape[-1]
    phi = torch.cat([_phi(positions, E)] * 2, dim=-1)  # (L, E)
    x1, x2 = x[..., : E // 2], x[..., E // 2 :]
    return x * torch.cos(phi).to(x.dtype) + torch.cat((-x2, x1), dim=-1) * torch.sin(phi).to(x.dtype)


def halves_complex(x, positions):
    E = x.shape[-1]
    z = torch.complex(x[..., : E // 2].to(torch.float64), x[..., E // 2 :].to(torch.float64))
    phi = _phi(positions, E)
    turned = z * torch.polar(torch.ones_like(phi), phi)
    return torch.cat((turned.real, turned.imag), dim=-1).to(x.dtype)


def halves_loop(x, positions):
    out = x.clone()
    E = x.shape[-1]
    for r, p in enumerate(positions.tolist()):
        for k in range(E // 2):
            t = p / 10000 ** (2 * k / E)
            a, b = x[..., r, k], x[..., r, k + E // 2]
            out[..., r, k] = a * math.cos(t) - b * math.sin(t)
            out[..., r, k + E // 2] = a * math.sin(t) + b * math.cos(t)
    return out


def halves_float64_for_any_input(x, positions):
    """Right values, but always float64: the text asks for x's dtype."""
    x = x.double()
    E = x.shape[-1]
    k = torch.arange(E // 2, dtype=torch.float64)
    phi = positions.double()[:, None] * 10000.0 ** (-2 * k / E)
    a, b = x[..., : E // 2], x[..., E // 2 :]
    return torch.cat((a * phi.cos() - b * phi.sin(), a * phi.sin() + b * phi.cos()), dim=-1)


def halves_float32_angles_kept_dtype(x, positions):
    """Angles in float32, result in x's dtype: right to float32's precision."""
    E = x.shape[-1]
    inv = 1.0 / 10000 ** (torch.arange(0, E, 2, dtype=torch.float32) / E)
    phi = positions.float()[:, None] * inv  # (L, E/2)
    cos, sin = torch.cat((phi.cos(), phi.cos()), -1), torch.cat((phi.sin(), phi.sin()), -1)
    rotated = torch.cat((-x[..., E // 2 :], x[..., : E // 2]), dim=-1)
    return (x * cos.to(x.dtype) + rotated * sin.to(x.dtype)).to(x.dtype)


WRONG = [
    Wrong("ex-09-1", table_cos_in_even_columns, "sine and cosine swapped"),
    Wrong("ex-09-1", table_exponent_i_over_d, "exponent i/d"),
    Wrong("ex-09-1", table_halves, "two halves"),
    Wrong("ex-09-1", table_with_library, "not allowed"),
    Wrong("ex-09-2", rope_clockwise, "rotates the other way"),
    Wrong("ex-09-2", rope_rotate_half, "pairs the two halves"),
    Wrong("ex-09-2", rope_positions_from_one, "counted from 1"),
    Wrong("ex-09-2", rope_with_library, "not allowed"),
    Wrong("ex-09-2", rope_float32_frequencies, "float32's precision"),
    Wrong("ex-09-3", alibi_slopes_from_zero, "slopes start at h = 0"),
    Wrong("ex-09-3", alibi_positive, "sign flipped"),
    Wrong("ex-09-3", alibi_no_causal_mask, "future keys get 0"),
    Wrong("ex-09-3", alibi_with_library, "not allowed"),
    Wrong("ex-09-4", halves_rotating_neighbours, "pairs neighbouring features"),
    Wrong("ex-09-4", halves_from_zero, "ignores the positions argument"),
    Wrong("ex-09-4", halves_rotate_half_wrong_sign, "rotates the other way"),
    Wrong("ex-09-4", halves_repeat_interleave, "repeat_interleave"),
    Wrong("ex-09-4", halves_with_library, "not allowed"),
    Wrong("ex-09-4", halves_float64_for_any_input, "dtype is not kept"),
]

RIGHT = [
    Right("ex-09-1", table_numpy_loop),
    Right("ex-09-1", table_exp_log_float32),
    Right("ex-09-2", rope_complex),
    Right("ex-09-2", rope_loop),
    Right("ex-09-3", alibi_where),
    Right("ex-09-3", alibi_loop),
    Right("ex-09-4", halves_rotate_half),
    Right("ex-09-4", halves_complex),
    Right("ex-09-4", halves_loop),
    Right("ex-09-4", halves_float32_angles_kept_dtype),
]
