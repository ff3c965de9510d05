"""Multi-head latent attention (MLA, DeepSeek-V2): cache one small latent per token, not K and V.

Chapter 08's KV cache stores ``2 H d_h`` numbers per token and layer; MQA and GQA
shrink it by sharing key-value heads. MLA (DeepSeek-AI 2024, "DeepSeek-V2", Sec. 2.1)
instead stores a latent ``c = x W_dkv`` of ``d_c`` numbers and rebuilds every head's
key and value from it: ``k_h = c W_uk[h]``, ``v_h = c W_uv[h]``.

RoPE does not commute with ``W_uk`` (the rotation sits between the query and the
key's up-projection), so MLA adds a *decoupled* rotary part: a key of ``d_r``
numbers ``k_r = RoPE(x W_kr)``, shared by all heads and cached beside ``c``, and a
rotary query per head. A score is ``(q_h . k_h + q_r,h . k_r) / sqrt(d_h + d_r)``.
The cache: ``d_c + d_r`` numbers per token and layer.

At decoding the up-projections are *absorbed*: ``q_h . (c W_uk[h]) = (q_h W_uk[h]^T) . c``,
so each head's query is moved into the latent space once and scored against the
cached latents directly, and ``sum_j w_j (c_j W_uv[h]) = (sum_j w_j c_j) W_uv[h]``: no
key or value is ever rebuilt. :meth:`LatentAttention.decode_step` computes both ways
(``absorbed=True`` or ``False``); they agree to rounding (tested in float64).

This module leaves out MLA's compression of the queries (it saves activation
memory in training, not cache) and its normalisations.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from attnlib._tensors import check_floating_tensors
from attnlib._validate import check_choice, check_positive_int
from attnlib.positions import apply_rope

__all__ = ["LatentAttention", "LatentCache", "cache_bytes_per_token"]


def cache_bytes_per_token(
    kind: str,
    *,
    num_heads: int,
    head_dim: int,
    kv_heads: int | None = None,
    latent_dim: int | None = None,
    rope_dim: int | None = None,
    layers: int = 1,
    bytes_per_element: int = 2,
) -> int:
    """Bytes a KV cache holds per token for MHA, MQA, GQA or MLA.

    * ``"mha"``: keys and values of every head, ``2 H d_h`` elements;
    * ``"mqa"``: one shared key-value head, ``2 d_h``;
    * ``"gqa"``: ``kv_heads`` key-value heads, ``2 G d_h``;
    * ``"mla"``: the latent and the decoupled rotary key, ``d_c + d_r``.

    Each times ``layers`` and ``bytes_per_element`` (2 for float16/bfloat16).

    Parameters
    ----------
    kind : str
        ``"mha"``, ``"mqa"``, ``"gqa"`` or ``"mla"``.
    num_heads, head_dim : int
        ``H`` and ``d_h`` of the queries.
    kv_heads : int, optional
        ``G`` for ``"gqa"`` (it must divide ``H``).
    latent_dim, rope_dim : int, optional
        ``d_c`` and ``d_r`` for ``"mla"``.
    layers : int, default 1
    bytes_per_element : int, default 2

    Returns
    -------
    int

    Examples
    --------
    >>> cache_bytes_per_token("mha", num_heads=8, head_dim=64)
    2048
    >>> cache_bytes_per_token("mla", num_heads=8, head_dim=64, latent_dim=256, rope_dim=32)
    576
    """
    fn = "cache_bytes_per_token"
    kind = check_choice(fn, "kind", kind, ("mha", "mqa", "gqa", "mla"))
    heads = check_positive_int(fn, "num_heads", num_heads)
    d_h = check_positive_int(fn, "head_dim", head_dim)
    layers = check_positive_int(fn, "layers", layers)
    size = check_positive_int(fn, "bytes_per_element", bytes_per_element)
    if kind == "mha":
        elements = 2 * heads * d_h
    elif kind == "mqa":
        elements = 2 * d_h
    elif kind == "gqa":
        if kv_heads is None:
            raise ValueError(f"{fn}: kind='gqa' needs kv_heads")
        groups = check_positive_int(fn, "kv_heads", kv_heads)
        if heads % groups:
            raise ValueError(f"{fn}: kv_heads must divide num_heads, got {groups} and {heads}")
        elements = 2 * groups * d_h
    else:
        if latent_dim is None or rope_dim is None:
            raise ValueError(f"{fn}: kind='mla' needs latent_dim and rope_dim")
        d_c = check_positive_int(fn, "latent_dim", latent_dim)
        elements = d_c + check_positive_int(fn, "rope_dim", rope_dim)
    return elements * layers * size


class LatentCache:
    """What MLA keeps per token: the latent ``c`` ``(B, t, d_c)`` and the rotated key ``k_r`` ``(B, t, d_r)``.

    Parameters
    ----------
    None
        A new cache is empty; :meth:`~attnlib.variants.LatentAttention.decode_step` appends to it.

    Examples
    --------
    >>> cache = LatentCache()
    >>> cache.append(torch.zeros(1, 3, 6), torch.zeros(1, 3, 4))
    >>> cache.length, cache.elements_per_token()
    (3, 10)
    """

    def __init__(self):
        self.latent: torch.Tensor | None = None  # (B, t, d_c)
        self.rope_key: torch.Tensor | None = None  # (B, t, d_r)

    @property
    def length(self) -> int:
        """Tokens cached so far."""
        return 0 if self.latent is None else self.latent.shape[1]

    def append(self, latent: torch.Tensor, rope_key: torch.Tensor) -> None:
        """Add ``latent`` ``(B, s, d_c)`` and ``rope_key`` ``(B, s, d_r)`` after what is cached."""
        if self.latent is None:
            self.latent, self.rope_key = latent, rope_key
        else:
            self.latent = torch.cat([self.latent, latent], dim=1)
            self.rope_key = torch.cat([self.rope_key, rope_key], dim=1)

    def elements_per_token(self) -> int:
        """``d_c + d_r``: the numbers cached per token (0 when empty)."""
        if self.latent is None:
            return 0
        return self.latent.shape[-1] + self.rope_key.shape[-1]


class LatentAttention(nn.Module):
    """Causal multi-head latent attention with a decoupled rotary key (DeepSeek-V2's MLA).

    Parameters
    ----------
    d_model : int
        Width of the residual stream ``D``.
    num_heads : int
        ``H``.
    head_dim : int
        ``d_h``, the width of each head's content query, key and value.
    latent_dim : int
        ``d_c``, the cached latent's width.
    rope_dim : int
        ``d_r``, the decoupled rotary key's width (even).
    base : float, default 10000.0
        RoPE's base.

    Shapes: ``forward(x)`` maps ``(B, n, D)`` to ``(B, n, D)``.

    Examples
    --------
    >>> _ = torch.manual_seed(0)
    >>> mla = LatentAttention(16, num_heads=2, head_dim=8, latent_dim=6, rope_dim=4)
    >>> mla(torch.randn(1, 5, 16)).shape
    torch.Size([1, 5, 16])
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        head_dim: int,
        latent_dim: int,
        rope_dim: int,
        base: float = 10000.0,
    ):
        super().__init__()
        fn = "LatentAttention"
        d_model = check_positive_int(fn, "d_model", d_model)
        self.num_heads = check_positive_int(fn, "num_heads", num_heads)
        self.head_dim = check_positive_int(fn, "head_dim", head_dim)
        self.latent_dim = check_positive_int(fn, "latent_dim", latent_dim)
        self.rope_dim = check_positive_int(fn, "rope_dim", rope_dim)
        if self.rope_dim % 2:
            raise ValueError(f"{fn}: rope_dim must be even to form pairs, got {rope_dim}")
        self.base = base
        h, d_h, d_c, d_r = self.num_heads, self.head_dim, self.latent_dim, self.rope_dim
        self.w_dkv = nn.Linear(d_model, d_c, bias=False)  # down to the cached latent
        self.w_uk = nn.Linear(d_c, h * d_h, bias=False)  # latent -> every head's content key
        self.w_uv = nn.Linear(d_c, h * d_h, bias=False)  # latent -> every head's value
        self.w_kr = nn.Linear(d_model, d_r, bias=False)  # the shared rotary key (cached)
        self.w_q = nn.Linear(d_model, h * d_h, bias=False)  # content queries
        self.w_qr = nn.Linear(d_model, h * d_r, bias=False)  # rotary queries, one per head
        self.w_o = nn.Linear(h * d_h, d_model, bias=False)

    def _heads(self, x: torch.Tensor, width: int) -> torch.Tensor:
        return x.unflatten(-1, (self.num_heads, width)).transpose(1, 2)  # (B, s, H*w) -> (B, H, s, w)

    def _queries(self, x: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        q = self._heads(self.w_q(x), self.head_dim)  # (B, H, s, d_h)
        q_r = apply_rope(self._heads(self.w_qr(x), self.rope_dim), positions, self.base)  # (B, H, s, d_r)
        return q, q_r

    def _latents(self, x: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        c = self.w_dkv(x)  # (B, s, d_c)
        k_r = apply_rope(self.w_kr(x), positions, self.base)  # (B, s, d_r)
        return c, k_r

    def _attend(self, q, q_r, c, k_r, q_start: int, absorbed: bool) -> torch.Tensor:
        """Attention of queries at positions ``q_start...`` over cached ``c``, ``k_r``; ``(B, H, s, d_h)``."""
        s, t = q.shape[-2], c.shape[1]
        scale = 1.0 / math.sqrt(self.head_dim + self.rope_dim)
        rope_scores = q_r @ k_r[:, None].transpose(-1, -2)  # (B, H, s, t)
        if absorbed:
            w_uk = self.w_uk.weight.unflatten(0, (self.num_heads, self.head_dim))  # (H, d_h, d_c)
            q_latent = q @ w_uk  # (B, H, s, d_c): the query moved into the latent space
            content = q_latent @ c[:, None].transpose(-1, -2)  # (B, H, s, t)
        else:
            k = self._heads(self.w_uk(c), self.head_dim)  # (B, H, t, d_h): rebuilt keys
            content = q @ k.transpose(-1, -2)  # (B, H, s, t)
        scores = (content + rope_scores) * scale
        query_pos = torch.arange(q_start, q_start + s, device=q.device)[:, None]  # (s, 1)
        allowed = torch.arange(t, device=q.device)[None, :] <= query_pos  # (s, t) causal
        weights = scores.masked_fill(~allowed, float("-inf")).softmax(dim=-1)  # (B, H, s, t)
        if absorbed:
            w_uv = self.w_uv.weight.unflatten(0, (self.num_heads, self.head_dim))  # (H, d_h, d_c)
            mixed = weights @ c[:, None]  # (B, H, s, d_c): mix the latents first
            return mixed @ w_uv.transpose(-1, -2)  # (B, H, s, d_h)
        v = self._heads(self.w_uv(c), self.head_dim)  # (B, H, t, d_h): rebuilt values
        return weights @ v

    def _merge(self, heads: torch.Tensor) -> torch.Tensor:
        return self.w_o(heads.transpose(1, 2).flatten(-2))  # (B, H, s, d_h) -> (B, s, D)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Causal self-attention over ``x`` ``(B, n, D)``, keys and values rebuilt from the latents."""
        check_floating_tensors("LatentAttention.forward", x=x)
        if x.dim() != 3:
            raise ValueError(f"LatentAttention.forward: x must be (B, n, D), got {tuple(x.shape)}")
        positions = torch.arange(x.shape[1], device=x.device)
        q, q_r = self._queries(x, positions)
        c, k_r = self._latents(x, positions)
        return self._merge(self._attend(q, q_r, c, k_r, 0, absorbed=False))

    def decode_step(self, x: torch.Tensor, cache: LatentCache, *, absorbed: bool = True) -> torch.Tensor:
        """Append the next tokens ``x`` ``(B, s, D)`` to ``cache``; return their outputs ``(B, s, D)``.

        ``absorbed=True`` scores the queries against the cached latents directly;
        ``False`` rebuilds every head's keys and values from them. Both give the
        outputs of :meth:`forward` on the whole sequence.
        """
        fn = "LatentAttention.decode_step"
        check_floating_tensors(fn, x=x)
        if x.dim() != 3:
            raise ValueError(f"{fn}: x must be (B, s, D), got {tuple(x.shape)}")
        if not isinstance(absorbed, bool):
            raise TypeError(f"{fn}: absorbed must be a bool, got {type(absorbed).__name__}")
        start = cache.length
        positions = torch.arange(start, start + x.shape[1], device=x.device)
        c, k_r = self._latents(x, positions)
        cache.append(c, k_r)
        q, q_r = self._queries(x, positions)
        return self._merge(self._attend(q, q_r, cache.latent, cache.rope_key, start, absorbed))
