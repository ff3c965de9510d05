"""Independent bank for chapter 09, written from the exercise text only (#25)."""

import math

import torch
from bank import Right, Wrong

# ---- ex-09-1 sinusoidal_table ---------------------------------------------------


def _angles(n, d, *, k_exp=2, start=0, dtype=torch.float64):
    p = torch.arange(start, start + n, dtype=dtype)[:, None]
    k = torch.arange(d // 2, dtype=dtype)[None, :]
    return p / 10000 ** (k_exp * k / d)


def st_float32(n_positions, d_model):
    a = _angles(n_positions, d_model, dtype=torch.float32)
    return torch.stack([a.sin(), a.cos()], -1).flatten(-2)  # float32


def st_exponent_k(n_positions, d_model):
    a = _angles(n_positions, d_model, k_exp=1)  # 10000^{k/d}
    return torch.stack([a.sin(), a.cos()], -1).flatten(-2)


def st_swapped(n_positions, d_model):
    a = _angles(n_positions, d_model)
    return torch.stack([a.cos(), a.sin()], -1).flatten(-2)


def st_halves(n_positions, d_model):
    a = _angles(n_positions, d_model)
    return torch.cat([a.sin(), a.cos()], -1)  # not interleaved


def st_from_one(n_positions, d_model):
    a = _angles(n_positions, d_model, start=1)
    return torch.stack([a.sin(), a.cos()], -1).flatten(-2)


def st_exp_log(n_positions, d_model):
    pe = torch.zeros(n_positions, d_model, dtype=torch.float64)
    pos = torch.arange(n_positions, dtype=torch.float64).unsqueeze(1)
    div = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(10000.0) / d_model))
    pe[:, 0::2] = torch.sin(pos * div)
    pe[:, 1::2] = torch.cos(pos * div)
    return pe


def st_loop(n_positions, d_model):
    pe = torch.empty(n_positions, d_model, dtype=torch.float64)
    for p in range(n_positions):
        for k in range(d_model // 2):
            angle = p / 10000 ** (2 * k / d_model)
            pe[p, 2 * k] = math.sin(angle)
            pe[p, 2 * k + 1] = math.cos(angle)
    return pe


# ---- ex-09-2 rope ----------------------------------------------------------------


def _rope_pairs(x, *, sign=1.0, k_exp=2, positions=None, out_dtype=None):
    L, E = x.shape[-2:]
    p = torch.arange(L, dtype=torch.float64) if positions is None else positions
    theta = 10000.0 ** (-k_exp * torch.arange(E // 2, dtype=torch.float64) / E)
    phi = p[:, None] * theta[None, :]
    cos, sin = phi.cos(), sign * phi.sin()
    a, b = x[..., 0::2].double(), x[..., 1::2].double()
    out = torch.stack([a * cos - b * sin, a * sin + b * cos], -1).flatten(-2)
    return out.to(x.dtype if out_dtype is None else out_dtype)


def rope_inverse_rotation(x):
    return _rope_pairs(x, sign=-1.0)


def rope_exponent_k(x):
    return _rope_pairs(x, k_exp=1)


def rope_halves_layout(x):
    L, E = x.shape[-2:]
    perm = torch.cat([torch.arange(0, E, 2), torch.arange(1, E, 2)])
    inv = torch.argsort(perm)
    y = x[..., inv]  # (x_k, x_{k+E/2}) paired
    return _rope_pairs(y)[..., perm]


def rope_float64_out(x):
    return _rope_pairs(x, out_dtype=torch.float64)  # dtype not kept


def rope_positions_from_one(x):
    L = x.shape[-2]
    return _rope_pairs(x, positions=torch.arange(1, L + 1, dtype=torch.float64))


def rope_complex(x):
    L, E = x.shape[-2:]
    theta = 10000.0 ** (-2 * torch.arange(E // 2, dtype=torch.float64) / E)
    rot = torch.polar(
        torch.ones(L, E // 2, dtype=torch.float64), torch.arange(L, dtype=torch.float64)[:, None] * theta
    )
    z = torch.view_as_complex(x.double().reshape(*x.shape[:-1], E // 2, 2).contiguous())
    return torch.view_as_real(z * rot).flatten(-2).to(x.dtype)


def rope_loop(x):
    out = x.clone()
    L, E = x.shape[-2:]
    for p in range(L):
        for k in range(E // 2):
            phi = p * 10000 ** (-2 * k / E)
            a, b = x[..., p, 2 * k], x[..., p, 2 * k + 1]
            out[..., p, 2 * k] = a * math.cos(phi) - b * math.sin(phi)
            out[..., p, 2 * k + 1] = a * math.sin(phi) + b * math.cos(phi)
    return out


# ---- ex-09-3 alibi -----------------------------------------------------------------


def _alibi(h, L, *, slope_shift=1, sign=-1.0, upper=float("-inf"), dtype=torch.float32, lower_mask=False):
    r = torch.arange(h, dtype=torch.float64)
    slopes = 2.0 ** (-8 * (r + slope_shift) / h)
    i = torch.arange(L)[:, None]
    j = torch.arange(L)[None, :]
    dist = (i - j).double()
    bias = sign * slopes[:, None, None] * dist
    if lower_mask:
        bias = bias.masked_fill(j < i, upper)
    else:
        bias = bias.masked_fill(j > i, upper)
    return bias.to(dtype)


def al_slope_from_zero(num_heads, L):
    return _alibi(num_heads, L, slope_shift=0)  # 2^{-8r/h}


def al_positive(num_heads, L):
    return _alibi(num_heads, L, sign=1.0)


def al_float64(num_heads, L):
    return _alibi(num_heads, L, dtype=torch.float64)


def al_minus_1e9(num_heads, L):
    return _alibi(num_heads, L, upper=-1e9)


def al_inverted(num_heads, L):
    return _alibi(num_heads, L, lower_mask=True)  # -inf below the diagonal


def al_no_mask(num_heads, L):
    slopes = 2.0 ** (-8 * torch.arange(1, num_heads + 1) / num_heads)
    dist = (torch.arange(L)[:, None] - torch.arange(L)[None, :]).abs()
    return (-slopes[:, None, None] * dist).float()  # |i - j|, no -inf above


def al_loop(num_heads, L):
    out = torch.empty(num_heads, L, L, dtype=torch.float32)
    for r in range(num_heads):
        slope = 2 ** (-8 * (r + 1) / num_heads)
        for i in range(L):
            for j in range(L):
                out[r, i, j] = -slope * (i - j) if j <= i else -math.inf
    return out


def al_where(num_heads, L):
    slopes = torch.pow(2.0, -8.0 * torch.arange(1, num_heads + 1) / num_heads)
    pos = torch.arange(L)
    rel = (pos[None, :] - pos[:, None]).float()  # j - i
    bias = slopes.view(-1, 1, 1) * rel
    return torch.where(rel <= 0, bias, torch.tensor(float("-inf"))).float()


# ---- ex-09-4 rope_halves -------------------------------------------------------------


def _halves(x, positions, *, theta_exp=2, sign=1.0):
    E = x.shape[-1]
    half = E // 2
    theta = 10000.0 ** (-theta_exp * torch.arange(half, dtype=torch.float64) / E)
    phi = positions.double()[:, None] * theta[None, :]
    cos, sin = phi.cos(), sign * phi.sin()
    a, b = x[..., :half].double(), x[..., half:].double()
    return torch.cat([a * cos - b * sin, a * sin + b * cos], -1).to(x.dtype)


def rh_ignores_positions(x, positions):
    return _halves(x, torch.arange(x.shape[-2]))


def rh_adjacent_pairs(x, positions):
    return _rope_pairs(x, positions=positions.double())


def rh_theta_over_E(x, positions):
    return _halves(x, positions, theta_exp=1)  # 10000^{-k/E}


def rh_inverse(x, positions):
    return _halves(x, positions, sign=-1.0)


def rh_positions_from_zero_offset(x, positions):
    return _halves(x, positions - positions[0])  # relative to the first row


def rh_rotate_half(x, positions):
    # as Llama's code writes it: x * cos + rotate_half(x) * sin
    E = x.shape[-1]
    inv_freq = 1.0 / (10000 ** (torch.arange(0, E, 2, dtype=torch.float64) / E))
    freqs = torch.outer(positions.to(torch.float64), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    x1, x2 = x[..., : E // 2], x[..., E // 2 :]
    rotated = torch.cat((-x2, x1), dim=-1)
    return (x.double() * emb.cos() + rotated.double() * emb.sin()).to(x.dtype)


def rh_half_dim_exponent(x, positions):
    # 10000^{-k/(E/2)} is the same as 10000^{-2k/E}
    E = x.shape[-1]
    theta = 10000.0 ** (-torch.arange(E // 2, dtype=torch.float64) / (E // 2))
    phi = positions.double()[:, None] * theta
    a, b = x[..., : E // 2], x[..., E // 2 :]
    c, s = phi.cos().to(x.dtype), phi.sin().to(x.dtype)
    return torch.cat([a * c - b * s, a * s + b * c], dim=-1)


WRONG = [
    Wrong("ex-09-1", st_exponent_k, "exponent k/d instead of 2k/d"),
    Wrong("ex-09-1", st_swapped, "sin and cos swapped"),
    Wrong("ex-09-1", st_halves, "sin and cos in halves, not interleaved"),
    Wrong("ex-09-1", st_from_one, "positions counted from 1"),
    Wrong("ex-09-2", rope_inverse_rotation, "rotation in the wrong direction"),
    Wrong("ex-09-2", rope_exponent_k, "theta exponent k/E instead of 2k/E"),
    Wrong("ex-09-2", rope_halves_layout, "halves layout instead of pairs"),
    Wrong("ex-09-2", rope_positions_from_one, "positions counted from 1"),
    Wrong("ex-09-3", al_slope_from_zero, "slopes 2^{-8r/h}, off by one"),
    Wrong("ex-09-3", al_positive, "bias positive (sign)"),
    Wrong("ex-09-3", al_minus_1e9, "-1e9 instead of -inf"),
    Wrong("ex-09-3", al_inverted, "-inf below the diagonal"),
    Wrong("ex-09-3", al_no_mask, "symmetric |i-j|, no -inf above the diagonal"),
    Wrong("ex-09-4", rh_ignores_positions, "positions ignored (arange)"),
    Wrong("ex-09-4", rh_adjacent_pairs, "adjacent pairs, not halves"),
    Wrong("ex-09-4", rh_theta_over_E, "theta 10000^{-k/E}"),
    Wrong("ex-09-4", rh_inverse, "rotation in the wrong direction"),
    Wrong("ex-09-4", rh_positions_from_zero_offset, "positions re-based to 0"),
]
RIGHT = [
    # The texts of 09.1-09.3 ask for a floating-point result, not a width (the check compares
    # at the question's precision): another float dtype is right.
    Right("ex-09-1", st_float32),
    Right("ex-09-2", rope_float64_out),
    Right("ex-09-3", al_float64),
    Right("ex-09-1", st_exp_log),
    Right("ex-09-1", st_loop),
    Right("ex-09-2", rope_complex),
    Right("ex-09-2", rope_loop),
    Right("ex-09-3", al_loop),
    Right("ex-09-3", al_where),
    Right("ex-09-4", rh_rotate_half),
    Right("ex-09-4", rh_half_dim_exponent),
]

# What the feedback must say for the mistake to count as named (the check's
# vocabulary, read off the feedback); None: a known gap, the answer loses marks
# but nothing names its mistake (see tests/checks/independent_banks.py).
NAMED = {
    "st_exponent_k": "exponent i/d instead of 2i/d",
    "st_swapped": "sine and cosine swapped",
    "st_halves": "two halves instead of interleaved",
    "st_from_one": "positions counted from 1",
    "rope_inverse_rotation": "rotates the other way",
    "rope_exponent_k": "exponent i/E instead of 2i/E",
    "rope_halves_layout": "pairs the two halves",
    "rope_positions_from_one": "positions counted from 1",
    "al_slope_from_zero": "slopes start at h = 0",
    "al_positive": "sign flipped",
    "al_minus_1e9": "-1e9 instead of -inf",
    "al_inverted": "the -inf on the wrong side",
    "al_no_mask": "instead of -inf",
    "rh_ignores_positions": "ignores the positions argument",
    "rh_adjacent_pairs": "pairs neighbouring features",
    "rh_theta_over_E": "exponent k/E instead of 2k/E",
    "rh_inverse": "rotates the other way",
    "rh_positions_from_zero_offset": "ignores the positions argument",
}
