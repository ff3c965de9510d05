"""The Transformer block (chapter 10), built on attnlib's own MultiHeadAttention.

One block is two sublayers, each wrapped in a residual connection and a
LayerNorm (He et al. 2016; Ba et al. 2016):

* pre-norm (``norm_first=True``, Xiong et al. 2020)::

      x = x + drop(attn(norm1(x)))
      x = x + drop(ffn(norm2(x)))

* post-norm (``norm_first=False``, Vaswani et al. 2017)::

      x = norm1(x + drop(attn(x)))
      x = norm2(x + drop(ffn(x)))

``ffn`` is the position-wise feed-forward net ``W2 act(W1 x)``. Chapter 10
switches parts off to measure why each is there (``residual``, ``layer_norm``,
``feed_forward``); the defaults are the standard block, equal to
``torch.nn.TransformerEncoderLayer`` (see :meth:`TransformerBlock.from_torch`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from attnlib._tensors import check_tensors
from attnlib._validate import check_choice, check_flag, check_greater, check_positive_int, check_probability
from attnlib.efficient import KVCache, decode_step
from attnlib.modules import MultiHeadAttention, merge_heads, split_heads

__all__ = ["TransformerBlock"]

_ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu}


class TransformerBlock(nn.Module):
    """A Transformer encoder block (or, with ``is_causal=True``, a decoder-only block).

    Parameters
    ----------
    d_model : int
        Model width ``D``.
    num_heads : int
        Attention heads ``h`` (``D`` divisible by ``h``).
    d_ff : int
        Hidden width of the feed-forward net.
    dropout : float, default 0.0
        Dropout on the attention weights, inside the feed-forward net and on
        each sublayer's output (as ``nn.TransformerEncoderLayer``).
    norm_first : bool, default True
        Pre-norm (True) or post-norm (False).
    activation : {"relu", "gelu"}, default "relu"
        The feed-forward net's activation.
    layer_norm_eps : float, default 1e-5
        LayerNorm's epsilon (above 0).
    residual, layer_norm, feed_forward : bool, default True
        Keyword-only switches for the ablations of chapter 10; all True is the
        standard block.

    Examples
    --------
    >>> block = TransformerBlock(d_model=8, num_heads=2, d_ff=16)
    >>> block(torch.zeros(3, 5, 8), is_causal=True).shape
    torch.Size([3, 5, 8])
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int,
        dropout: float = 0.0,
        norm_first: bool = True,
        activation: str = "relu",
        layer_norm_eps: float = 1e-5,
        *,
        residual: bool = True,
        layer_norm: bool = True,
        feed_forward: bool = True,
    ):
        super().__init__()
        fn = "TransformerBlock"
        d_model = check_positive_int(fn, "d_model", d_model)
        num_heads = check_positive_int(fn, "num_heads", num_heads)
        d_ff = check_positive_int(fn, "d_ff", d_ff)
        activation = check_choice(fn, "activation", activation, tuple(_ACTIVATIONS))
        dropout = check_probability(fn, "dropout", dropout)
        layer_norm_eps = check_greater(fn, "layer_norm_eps", layer_norm_eps, 0)
        norm_first, residual = check_flag(fn, "norm_first", norm_first), check_flag(fn, "residual", residual)
        layer_norm = check_flag(fn, "layer_norm", layer_norm)
        feed_forward = check_flag(fn, "feed_forward", feed_forward)
        self.norm_first = norm_first
        self.residual = residual
        self.activation = activation
        self.attn = MultiHeadAttention(d_model, num_heads, dropout)  # dropout on the attention weights
        self.linear1 = nn.Linear(d_model, d_ff) if feed_forward else None
        self.linear2 = nn.Linear(d_ff, d_model) if feed_forward else None
        self.ff_dropout = nn.Dropout(dropout)  # between the two feed-forward layers
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps) if layer_norm else nn.Identity()
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps) if layer_norm else nn.Identity()
        self.dropout1 = nn.Dropout(dropout)  # on the attention sublayer's output
        self.dropout2 = nn.Dropout(dropout)  # on the feed-forward sublayer's output

    # -- the two sublayers -------------------------------------------------
    def self_attention(self, x: torch.Tensor, **masks) -> torch.Tensor:
        """Multi-head self-attention of x (B, L, D) -> (B, L, D).

        ``masks``: ``attn_mask``, ``key_mask``, ``is_causal``, by keyword, as in
        :meth:`forward` (they go to :class:`attnlib.MultiHeadAttention`, which
        also drops out attention weights in training).
        """
        out, _ = self.attn(x, x, x, **masks)  # query, key and value all x
        return out

    def feed_forward(self, x: torch.Tensor) -> torch.Tensor:
        """The position-wise net ``linear2(drop(act(linear1(x))))``, (B, L, D) -> (B, L, D)."""
        hidden = _ACTIVATIONS[self.activation](self.linear1(x))  # (B, L, D) -> (B, L, d_ff)
        return self.linear2(self.ff_dropout(hidden))  # (B, L, d_ff) -> (B, L, D)

    def _add(self, x: torch.Tensor, sublayer_out: torch.Tensor) -> torch.Tensor:
        return x + sublayer_out if self.residual else sublayer_out

    # -- the block ---------------------------------------------------------
    def forward(
        self,
        x: torch.Tensor,
        attn_mask: torch.Tensor | None = None,
        key_mask: torch.Tensor | None = None,
        is_causal: bool = False,
    ) -> torch.Tensor:
        """Apply the block.

        Parameters
        ----------
        x : torch.Tensor
            ``(B, L, D)``.
        attn_mask : torch.Tensor, optional
            bool (True = may attend) or float mask broadcastable to ``(B, h, L, L)``.
        key_mask : torch.Tensor, optional
            bool ``(B, L)``, True for real tokens.
        is_causal : bool, default False
            Forbid attending to later positions.

        Returns
        -------
        torch.Tensor
            ``(B, L, D)``.
        """
        self._check_x("TransformerBlock", x)
        return self._sublayers(
            x, lambda y: self.self_attention(y, attn_mask=attn_mask, key_mask=key_mask, is_causal=is_causal)
        )

    def _check_x(self, fn: str, x: object) -> None:
        """x must be a tensor (TypeError) of shape (B, L, D) (ValueError)."""
        check_tensors(fn, x=x)
        if x.dim() != 3 or x.shape[-1] != self.attn.embed_dim:
            raise ValueError(f"{fn}: x must be (B, L, {self.attn.embed_dim}), got {tuple(x.shape)}")

    def _sublayers(self, x: torch.Tensor, attend) -> torch.Tensor:
        """The residual and LayerNorm wiring of the block around ``attend`` and the feed-forward net.

        ``attend`` maps (B, L, D) -> (B, L, D): the self-attention sublayer (with
        its masks), or its cached version in :meth:`forward_cached`.
        """
        if self.norm_first:  # x + sublayer(norm(x))
            x = self._add(x, self.dropout1(attend(self.norm1(x))))
            if self.linear1 is not None:
                x = self._add(x, self.dropout2(self.feed_forward(self.norm2(x))))
        else:  # norm(x + sublayer(x))
            x = self.norm1(self._add(x, self.dropout1(attend(x))))
            if self.linear1 is not None:
                x = self.norm2(self._add(x, self.dropout2(self.feed_forward(x))))
        return x

    @torch.no_grad()
    def forward_cached(self, x: torch.Tensor, cache: KVCache) -> torch.Tensor:
        """Decode new positions with a KV cache: causal self-attention over cache + x.

        Parameters
        ----------
        x : torch.Tensor
            ``(B, t, D)``, the next ``t`` positions (usually ``t = 1``).
        cache : KVCache
            This block's cache (batch ``B``, kv_heads ``h``, head_dim ``D / h``);
            the new keys and values are appended.

        Returns
        -------
        torch.Tensor
            ``(B, t, D)``: equal to the last ``t`` rows of ``forward`` on the whole
            sequence with ``is_causal=True`` (in eval mode). Runs without autograd:
            a cache is for generation, not training.
        """
        self._check_x("TransformerBlock.forward_cached", x)
        h = self.attn.num_heads

        def attend(y: torch.Tensor) -> torch.Tensor:
            q = split_heads(self.attn.q_proj(y), h)  # (B, t, D) -> (B, h, t, d)
            k = split_heads(self.attn.k_proj(y), h)  # (B, t, D) -> (B, h, t, d)
            v = split_heads(self.attn.v_proj(y), h)  # (B, t, D) -> (B, h, t, d)
            # (B, h, t, d): the new rows attend to the cache and to themselves
            out = decode_step(q, k, v, cache)
            return self.attn.out_proj(merge_heads(out))  # (B, h, t, d) -> (B, t, D)

        return self._sublayers(x, attend)

    def new_cache(self, batch: int, capacity: int) -> KVCache:
        """An empty KV cache sized for this block: ``batch`` rows of ``capacity`` positions."""
        ref = self.attn.q_proj.weight
        return KVCache(
            batch, self.attn.num_heads, capacity, self.attn.head_dim, dtype=ref.dtype, device=ref.device
        )

    @classmethod
    def from_torch(cls, layer: nn.TransformerEncoderLayer) -> TransformerBlock:
        """A block computing the same function as a ``torch.nn.TransformerEncoderLayer``.

        The layer must be ``batch_first=True`` with ``relu`` or ``gelu``; its
        dropout probability is copied (compare in eval mode). Masks differ in
        polarity: torch's boolean ``src_mask`` / ``src_key_padding_mask`` are
        True where attention is *forbidden*, attnlib's ``attn_mask`` /
        ``key_mask`` True where it is *allowed*.
        """
        if not isinstance(layer, nn.TransformerEncoderLayer):
            raise TypeError(f"from_torch: expected nn.TransformerEncoderLayer, got {type(layer).__name__}")
        if not layer.self_attn.batch_first:
            raise ValueError("from_torch: the layer must be batch_first=True")
        act = layer.activation
        if act is F.relu or isinstance(act, nn.ReLU):
            activation = "relu"
        elif act is F.gelu or isinstance(act, nn.GELU):
            activation = "gelu"
        else:
            raise ValueError(f"from_torch: activation {act!r} is not relu or gelu")
        d_model, num_heads = layer.self_attn.embed_dim, layer.self_attn.num_heads
        ref = layer.linear1.weight
        block = cls(
            d_model,
            num_heads,
            layer.linear1.out_features,
            dropout=layer.dropout.p,
            norm_first=layer.norm_first,
            activation=activation,
            layer_norm_eps=layer.norm1.eps,
        ).to(ref.device, ref.dtype)
        block.attn = MultiHeadAttention.from_torch(layer.self_attn)
        block.load_state_dict({**block.state_dict(), **_subset(layer.state_dict(), block)}, strict=True)
        return block


def _subset(state: dict, block: TransformerBlock) -> dict:
    """The feed-forward and LayerNorm parameters, which share their names with torch's layer."""
    names = ("linear1.", "linear2.", "norm1.", "norm2.")
    return {k: v for k, v in state.items() if k.startswith(names) and k in block.state_dict()}
