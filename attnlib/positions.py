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

from attnlib._tensors import check_tensors
from attnlib._validate import check_flag, check_greater, check_length, check_positive_int

__all__ = [
    "LearnedPositions",
    "alibi_bias",
    "alibi_slopes",
    "apply_rope",
    "rope_angles",
    "sinusoidal_encoding",
]

_FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def sinusoidal_encoding(
    n_positions: int,
    d_model: int,
    base: float = 10000.0,
    dtype: torch.dtype = torch.float32,
    *,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """The fixed sinusoidal position table of Vaswani et al. (2017).

    ``PE[p, 2i] = sin(p / base**(2i / d_model))`` and
    ``PE[p, 2i + 1] = cos(p / base**(2i / d_model))``. For an odd ``d_model``
    the last column is a sine.

    Parameters
    ----------
    n_positions : int
        Number of positions ``p = 0 .. n_positions - 1`` (0 or more).
    d_model : int
        Width of the table (0 or more).
    base : float, default 10000.0
        The wavelength base (10000 in the paper), above 1.
    dtype : torch.dtype, default torch.float32
        Floating dtype of the result (computed in float64, then cast).
    device : torch.device or str, optional
        Where the result lives (default: torch's default device), as for torch's
        factory functions.

    Returns
    -------
    torch.Tensor
        ``(n_positions, d_model)``.

    Examples
    --------
    >>> pe = sinusoidal_encoding(4, 6)
    >>> pe.shape
    torch.Size([4, 6])
    >>> pe[0].tolist()
    [0.0, 1.0, 0.0, 1.0, 0.0, 1.0]
    """
    fn = "sinusoidal_encoding"
    n_positions = check_length(fn, "n_positions", n_positions)
    d_model = check_length(fn, "d_model", d_model)
    base = check_greater(fn, "base", base, 1)
    if dtype not in _FLOATS:
        raise TypeError(f"{fn}: dtype must be a floating dtype, got {dtype}")
    p = torch.arange(n_positions, dtype=torch.float64)[:, None]  # (P, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # (ceil(D/2),): the even columns 2i
    angle = p / base ** (two_i / d_model)  # (P, ceil(D/2))
    pe = torch.zeros(n_positions, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle[:, : d_model // 2])
    return pe.to(dtype=dtype, device=device)


class LearnedPositions(nn.Module):
    """A trained vector per absolute position, added to the token embeddings.

    Positions ``>= max_len`` do not exist: a longer input raises ValueError
    (one reason learned positions cannot extrapolate, chapter 09).

    Parameters
    ----------
    max_len : int
        Number of positions that have a vector (1 or more).
    d_model : int
        Width of each vector (1 or more).

    Examples
    --------
    >>> positions = LearnedPositions(max_len=8, d_model=4)
    >>> positions(torch.zeros(2, 5, 4)).shape
    torch.Size([2, 5, 4])
    """

    def __init__(self, max_len: int, d_model: int):
        super().__init__()
        self.max_len = check_positive_int("LearnedPositions", "max_len", max_len)
        self.d_model = check_positive_int("LearnedPositions", "d_model", d_model)
        self.weight = nn.Parameter(torch.randn(self.max_len, self.d_model) * 0.02)  # (max_len, D)

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """Return ``x + weight[offset : offset + L]``.

        Parameters
        ----------
        x : torch.Tensor
            ``(..., L, d_model)`` token embeddings.
        offset : int, default 0
            Absolute position of ``x``'s first row (for decoding with a cache).

        Returns
        -------
        torch.Tensor
            ``x``'s shape.
        """
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"LearnedPositions: x must be a tensor, got {type(x).__name__}")
        if x.dim() < 2 or x.shape[-1] != self.d_model:
            raise ValueError(f"LearnedPositions: x must be (..., L, {self.d_model}), got {tuple(x.shape)}")
        offset = check_length("LearnedPositions", "offset", offset)
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
    positions : torch.Tensor
        ``(..., L)`` integer or float positions.
    dim : int
        The (even) feature size being rotated.
    base : float, default 10000.0
        The wavelength base, above 1.

    Returns
    -------
    tuple of torch.Tensor
        ``(cos, sin)``, each float64 ``(..., L, dim // 2)``, on ``positions``' device.

    Examples
    --------
    >>> cos, sin = rope_angles(torch.arange(3), 4)
    >>> cos.shape, sin[0].tolist()
    (torch.Size([3, 2]), [0.0, 0.0])
    """
    fn = "rope_angles"
    check_tensors(fn, positions=positions)
    dim = check_length(fn, "dim", dim)
    if dim % 2:
        raise ValueError(f"{fn}: dim must be even to form pairs, got {dim}")
    base = check_greater(fn, "base", base, 1)
    two_i = torch.arange(0, dim, 2, dtype=torch.float64, device=positions.device)  # (dim/2,)
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
    x : torch.Tensor
        ``(..., L, E)`` queries or keys, ``E`` even.
    positions : torch.Tensor, optional
        ``(L,)`` or broadcastable to ``(..., L)``; default ``arange(L)``.
    base : float, default 10000.0
        The wavelength base, above 1.

    Returns
    -------
    torch.Tensor
        ``x``'s shape and dtype (float16/bfloat16 are rotated in float32).

    Examples
    --------
    >>> x = torch.ones(1, 3, 4)
    >>> torch.equal(apply_rope(x)[:, 0], x[:, 0])  # position 0: identity
    True
    """
    fn = "apply_rope"
    check_tensors(fn, x=x)
    if not x.is_floating_point():
        raise TypeError(f"{fn}: x must be floating point, got {x.dtype}")
    if x.dim() < 2:
        raise ValueError(f"{fn}: x must be (..., L, E), got {tuple(x.shape)}")
    L, E = x.shape[-2], x.shape[-1]
    if E % 2:
        raise ValueError(f"{fn}: the last dimension E must be even to form pairs, got E={E}")
    base = check_greater(fn, "base", base, 1)
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


def alibi_slopes(num_heads: int, *, device: torch.device | str | None = None) -> torch.Tensor:
    """ALiBi's head slopes ``m_h = 2**(-8 (h + 1) / num_heads)``, h = 0 .. num_heads - 1.

    Parameters
    ----------
    num_heads : int
        Number of heads (1 or more).
    device : torch.device or str, optional
        Where the result lives (default: torch's default device).

    Returns
    -------
    torch.Tensor
        float32 ``(num_heads,)``: a geometric sequence from ``2**(-8/num_heads)``
        down to ``2**-8``.

    Examples
    --------
    >>> alibi_slopes(4)
    tensor([0.2500, 0.0625, 0.0156, 0.0039])
    """
    num_heads = check_positive_int("alibi_slopes", "num_heads", num_heads)
    h = torch.arange(1, num_heads + 1, dtype=torch.float64)
    return (2.0 ** (-8.0 * h / num_heads)).to(dtype=torch.float32, device=device)


def alibi_bias(
    num_heads: int,
    L: int,
    S: int,
    *,
    causal: bool = True,
    query_offset: int | None = None,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """ALiBi's additive bias (Press et al. 2022): ``-m_h * (i - j)``.

    Query ``i`` sits at position ``i + query_offset`` and key ``j`` at ``j``.
    ``query_offset`` defaults to ``S - L`` (the queries are the last ``L`` of
    the ``S`` positions, as when decoding with a KV cache; 0 when ``L == S``).

    Parameters
    ----------
    num_heads : int
        Number of heads (1 or more).
    L, S : int
        Number of queries and of keys (0 or more).
    causal : bool, default True
        True (the paper's setting): keys after the query get ``-inf``;
        False: the symmetric bias ``-m_h * |i - j|`` for encoders.
    query_offset : int, optional
        See above; 0 or more.
    device : torch.device or str, optional
        Where the result lives (default: torch's default device).

    Returns
    -------
    torch.Tensor
        float32 ``(num_heads, L, S)``, to add to the scores (e.g. as the float
        ``attn_mask`` of :func:`attnlib.scaled_dot_product_attention`).

    Examples
    --------
    >>> alibi_bias(1, 3, 3)[0]
    tensor([[ 0.0000,    -inf,    -inf],
            [-0.0039,  0.0000,    -inf],
            [-0.0078, -0.0039,  0.0000]])
    """
    fn = "alibi_bias"
    num_heads = check_positive_int(fn, "num_heads", num_heads)
    L = check_length(fn, "L", L)
    S = check_length(fn, "S", S)
    causal = check_flag(fn, "causal", causal)
    offset = S - L if query_offset is None else check_length(fn, "query_offset", query_offset)
    slopes = alibi_slopes(num_heads)  # (h,)
    i = torch.arange(L, dtype=torch.float32)[:, None] + offset  # (L, 1) absolute query positions
    j = torch.arange(S, dtype=torch.float32)[None, :]  # (1, S)
    relative = j - i  # (L, S): -(how far back key j is); 0 on the diagonal (written so, not as -0.0)
    if causal:
        bias = slopes[:, None, None] * relative  # (h, L, S)
        bias = bias.masked_fill(relative > 0, -math.inf)
    else:
        bias = -(slopes[:, None, None] * relative.abs()) + 0.0  # (h, L, S); + 0.0 turns -0.0 into 0.0
    return bias.to(device=device)
