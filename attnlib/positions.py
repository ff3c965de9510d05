"""Position information for attention (chapter 09).

Self-attention without positions is permutation-equivariant: permute the
tokens and the outputs are permuted the same way, so "ab" and "ba" look alike.
This module holds the four ways chapter 09 builds to tell positions apart:

* :func:`sinusoidal_encoding`: fixed sines and cosines added to the embeddings
  (Vaswani et al. 2017);
* :class:`LearnedPositions`: one trained vector per absolute position;
* :func:`apply_rope`: rotary embeddings, rotating queries and keys by their
  position so that ``q . k`` depends only on the offset (Su et al. 2021);
* :func:`alibi_bias`: a per-head linear penalty on the distance, added to the
  scores (Press et al. 2022).
"""

from __future__ import annotations

import math

import torch
from torch import nn

__all__ = [
    "LearnedPositions",
    "alibi_bias",
    "alibi_slopes",
    "apply_rope",
    "rope_angles",
    "sinusoidal_encoding",
]

_FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def _count(value, name: str, fn: str, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{fn}: {name} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{fn}: {name} must be >= {minimum}, got {value}")
    return value


def _base(base, fn: str) -> float:
    if isinstance(base, bool) or not isinstance(base, (int, float)):
        raise TypeError(f"{fn}: base must be a number, got {type(base).__name__}")
    if not base > 1:
        raise ValueError(f"{fn}: base must be > 1, got {base}")
    return float(base)


def sinusoidal_encoding(
    n_positions: int, d_model: int, base: float = 10000.0, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """The fixed sinusoidal position table of Vaswani et al. (2017).

    ``PE[p, 2i] = sin(p / base**(2i / d_model))`` and
    ``PE[p, 2i + 1] = cos(p / base**(2i / d_model))``. For an odd ``d_model``
    the last column is a sine.

    Parameters
    ----------
    n_positions : number of positions ``p = 0 .. n_positions - 1``.
    d_model : width of the table.
    base : the wavelength base (10000 in the paper).
    dtype : floating dtype of the result (computed in float64, then cast).

    Returns
    -------
    Tensor (n_positions, d_model).

    Examples
    --------
    >>> pe = sinusoidal_encoding(4, 6)
    >>> pe.shape
    torch.Size([4, 6])
    >>> pe[0].tolist()
    [0.0, 1.0, 0.0, 1.0, 0.0, 1.0]
    """
    fn = "sinusoidal_encoding"
    n_positions = _count(n_positions, "n_positions", fn)
    d_model = _count(d_model, "d_model", fn)
    base = _base(base, fn)
    if dtype not in _FLOATS:
        raise TypeError(f"{fn}: dtype must be a floating dtype, got {dtype}")
    p = torch.arange(n_positions, dtype=torch.float64)[:, None]  # (P, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # (ceil(D/2),): the even columns 2i
    angle = p / base ** (two_i / d_model)  # (P, ceil(D/2))
    pe = torch.zeros(n_positions, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle[:, : d_model // 2])
    return pe.to(dtype)


class LearnedPositions(nn.Module):
    """A trained vector per absolute position, added to the token embeddings.

    Positions ``>= max_len`` do not exist: a longer input raises ValueError
    (one reason learned positions cannot extrapolate, chapter 09).

    Parameters
    ----------
    max_len : number of positions that have a vector.
    d_model : width of each vector.
    """

    def __init__(self, max_len: int, d_model: int):
        super().__init__()
        self.max_len = _count(max_len, "max_len", "LearnedPositions", 1)
        self.d_model = _count(d_model, "d_model", "LearnedPositions", 1)
        self.weight = nn.Parameter(torch.randn(max_len, d_model) * 0.02)  # (max_len, D)

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """Return ``x + weight[offset : offset + L]``.

        Parameters
        ----------
        x : (..., L, d_model) token embeddings.
        offset : absolute position of ``x``'s first row (for decoding with a cache).

        Returns
        -------
        Tensor of ``x``'s shape.
        """
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"LearnedPositions: x must be a tensor, got {type(x).__name__}")
        if x.dim() < 2 or x.shape[-1] != self.d_model:
            raise ValueError(f"LearnedPositions: x must be (..., L, {self.d_model}), got {tuple(x.shape)}")
        offset = _count(offset, "offset", "LearnedPositions")
        L = x.shape[-2]
        if offset + L > self.max_len:
            raise ValueError(
                f"LearnedPositions: positions {offset}..{offset + L - 1} exceed max_len={self.max_len}"
            )
        return x + self.weight[offset : offset + L].to(x.dtype)  # (L, D) broadcasts over (..., L, D)

    def extra_repr(self) -> str:
        return f"max_len={self.max_len}, d_model={self.d_model}"


def rope_angles(
    positions: torch.Tensor, dim: int, base: float = 10000.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Cosines and sines of the rotary angles ``positions * base**(-2i / dim)``.

    Parameters
    ----------
    positions : (..., L) integer or float positions.
    dim : the (even) feature size being rotated.
    base : the wavelength base.

    Returns
    -------
    ``(cos, sin)``, each float64 (..., L, dim // 2).
    """
    two_i = torch.arange(0, dim, 2, dtype=torch.float64)  # (dim/2,)
    theta = positions.to(torch.float64)[..., None] * base ** (-two_i / dim)  # (..., L, dim/2)
    return torch.cos(theta), torch.sin(theta)


def apply_rope(x: torch.Tensor, positions: torch.Tensor | None = None, base: float = 10000.0) -> torch.Tensor:
    """Rotary position embedding (Su et al. 2021): rotate feature pairs by position.

    The pair ``(x[..., 2i], x[..., 2i+1])`` of the row at position ``p`` is
    rotated by the angle ``p * base**(-2i / E)``. Rotations preserve norms, the
    identity is applied at position 0, and for a query rotated at ``m`` and a
    key rotated at ``n`` the dot product depends on ``m - n`` only.

    Parameters
    ----------
    x : (..., L, E) queries or keys, E even.
    positions : (L,) or broadcastable to (..., L); default ``arange(L)``.
    base : the wavelength base.

    Returns
    -------
    Tensor of ``x``'s shape and dtype (float16/bfloat16 are rotated in float32).

    Examples
    --------
    >>> x = torch.ones(1, 3, 4)
    >>> torch.equal(apply_rope(x)[:, 0], x[:, 0])  # position 0: identity
    True
    """
    fn = "apply_rope"
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{fn}: x must be a tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"{fn}: x must be floating point, got {x.dtype}")
    if x.dim() < 2:
        raise ValueError(f"{fn}: x must be (..., L, E), got {tuple(x.shape)}")
    L, E = x.shape[-2], x.shape[-1]
    if E % 2:
        raise ValueError(f"{fn}: the last dimension E must be even to form pairs, got E={E}")
    base = _base(base, fn)
    if positions is None:
        positions = torch.arange(L, device=x.device)
    elif not isinstance(positions, torch.Tensor):
        raise TypeError(f"{fn}: positions must be a tensor or None, got {type(positions).__name__}")
    elif positions.dim() == 0 or positions.shape[-1] != L:
        raise ValueError(f"{fn}: positions must be (L,) or (..., L) with L={L}, got {tuple(positions.shape)}")
    cos, sin = rope_angles(positions, E, base)  # (..., L, E/2) each
    work = torch.float64 if x.dtype == torch.float64 else torch.float32
    cos, sin = cos.to(work), sin.to(work)
    pairs = x.to(work).unflatten(-1, (E // 2, 2))  # (..., L, E) -> (..., L, E/2, 2)
    even, odd = pairs[..., 0], pairs[..., 1]  # (..., L, E/2) each
    rotated = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)  # (..., L, E/2, 2)
    return rotated.flatten(-2).to(x.dtype)  # (..., L, E)


def alibi_slopes(num_heads: int) -> torch.Tensor:
    """ALiBi's head slopes ``m_h = 2**(-8 (h + 1) / num_heads)``, h = 0 .. num_heads - 1.

    Returns
    -------
    float32 tensor (num_heads,): a geometric sequence from ``2**(-8/num_heads)`` down to ``2**-8``.
    """
    num_heads = _count(num_heads, "num_heads", "alibi_slopes", 1)
    h = torch.arange(1, num_heads + 1, dtype=torch.float64)
    return (2.0 ** (-8.0 * h / num_heads)).to(torch.float32)


def alibi_bias(
    num_heads: int, L: int, S: int, *, causal: bool = True, query_offset: int | None = None
) -> torch.Tensor:
    """ALiBi's additive bias (Press et al. 2022): ``-m_h * (i - j)``.

    Query ``i`` sits at position ``i + query_offset`` and key ``j`` at ``j``.
    ``query_offset`` defaults to ``S - L`` (the queries are the last ``L`` of
    the ``S`` positions, as when decoding with a KV cache; 0 when ``L == S``).

    Parameters
    ----------
    num_heads, L, S : heads, queries, keys.
    causal : True (the paper's setting): keys after the query get ``-inf``;
        False: the symmetric bias ``-m_h * |i - j|`` for encoders.
    query_offset : see above.

    Returns
    -------
    float32 tensor (num_heads, L, S), to add to the scores (e.g. as the float
    ``attn_mask`` of :func:`attnlib.scaled_dot_product_attention`).

    Examples
    --------
    >>> alibi_bias(1, 3, 3)[0]
    tensor([[ 0.0000,    -inf,    -inf],
            [-0.0039,  0.0000,    -inf],
            [-0.0078, -0.0039,  0.0000]])
    """
    fn = "alibi_bias"
    L = _count(L, "L", fn)
    S = _count(S, "S", fn)
    if not isinstance(causal, bool):
        raise TypeError(f"{fn}: causal must be a bool, got {type(causal).__name__}")
    offset = S - L if query_offset is None else _count(query_offset, "query_offset", fn)
    slopes = alibi_slopes(num_heads)  # (h,)
    i = torch.arange(L, dtype=torch.float32)[:, None] + offset  # (L, 1) absolute query positions
    j = torch.arange(S, dtype=torch.float32)[None, :]  # (1, S)
    relative = j - i  # (L, S): -(how far back key j is); 0 on the diagonal (written so, not as -0.0)
    if causal:
        bias = slopes[:, None, None] * relative  # (h, L, S)
        bias = bias.masked_fill(relative > 0, -math.inf)
    else:
        bias = -(slopes[:, None, None] * relative.abs()) + 0.0  # (h, L, S); + 0.0 turns -0.0 into 0.0
    return bias
