"""Attention layers built from the functions of `attnlib`."""

from __future__ import annotations

import torch
from torch import nn

from attnlib._validate import as_shape
from attnlib.attention import scaled_dot_product_attention
from attnlib.functional import masked_softmax
from attnlib.masks import as_additive_mask, combine_masks
from attnlib.scores import additive_scores

__all__ = [
    "AdditiveAttention",
    "MultiHeadAttention",
    "merge_heads",
    "parameter_count",
    "split_heads",
]


class AdditiveAttention(nn.Module):
    """Bahdanau (additive) attention: score(q, k) = v^T tanh(W_q q + W_k k).

    Args:
        query_dim: E_q, size of a decoder state.
        key_dim: E_k, size of an encoder state.
        hidden_dim: H, size of the hidden layer of the score network.
    """

    def __init__(self, query_dim: int, key_dim: int, hidden_dim: int):
        super().__init__()
        self.w_query = nn.Linear(query_dim, hidden_dim, bias=False)
        self.w_key = nn.Linear(key_dim, hidden_dim, bias=False)
        self.v = nn.Linear(hidden_dim, 1, bias=False)

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor | None = None,
        key_mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Attend from decoder states to encoder states.

        Args:
            query: (B, L, E_q), or (B, E_q) for a single decoder step.
            key: (B, S, E_k).
            value: (B, S, E_v); defaults to `key`.
            key_mask: bool (B, S), True for real tokens.

        Returns:
            `(context, weights)`: context (B, L, E_v) and weights (B, L, S), or
            (B, E_v) and (B, S) for a single step.
        """
        fn = "AdditiveAttention"
        if value is None:
            value = key
        if query.dim() not in (2, 3) or key.dim() != 3 or value.dim() != 3:
            raise ValueError(
                f"{fn}: expected query (B, L, E_q) or (B, E_q), key (B, S, E_k), value (B, S, E_v);"
                f" got query {as_shape(query.shape)}, key {as_shape(key.shape)},"
                f" value {as_shape(value.shape)}"
            )
        if key.shape[:2] != value.shape[:2]:
            raise ValueError(
                f"{fn}: key {as_shape(key.shape)} and value {as_shape(value.shape)}"
                " must share (B, S)"
            )
        single_step = query.dim() == 2
        if single_step:
            query = query.unsqueeze(1)  # (B, E_q) -> (B, 1, E_q)
        if key_mask is not None:
            if as_shape(key_mask.shape) != as_shape(key.shape[:2]):
                raise ValueError(
                    f"{fn}: key_mask must have shape (B, S) = {as_shape(key.shape[:2])},"
                    f" got {as_shape(key_mask.shape)}"
                )
            key_mask = key_mask.unsqueeze(1)  # (B, S) -> (B, 1, S), shared by every query
        v = self.v.weight.squeeze(0)  # (1, H) -> (H,)
        scores = additive_scores(query, key, self.w_query.weight, self.w_key.weight, v)  # (B, L, S)
        weights = masked_softmax(scores, key_mask, dim=-1)  # (B, L, S)
        context = weights @ value  # (B, L, S) @ (B, S, E_v) -> (B, L, E_v)
        if single_step:
            context, weights = context.squeeze(1), weights.squeeze(1)  # (B, E_v), (B, S)
        return context, weights


def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """(B, L, h*d) -> (B, h, L, d): give each head its own slice of the features."""
    B, L, D = x.shape
    if D % num_heads != 0:
        raise ValueError(
            f"split_heads: last dimension of {as_shape(x.shape)} is not divisible by "
            f"num_heads={num_heads}"
        )
    return x.view(B, L, num_heads, D // num_heads).transpose(1, 2)  # (B, h, L, d)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(B, h, L, d) -> (B, L, h*d): the inverse of `split_heads`."""
    B, h, L, d = x.shape
    return x.transpose(1, 2).contiguous().view(B, L, h * d)  # (B, L, h*d)


def parameter_count(
    embed_dim: int,
    num_heads: int,
    bias: bool = True,
    kdim: int | None = None,
    vdim: int | None = None,
) -> int:
    """Number of parameters of `MultiHeadAttention` (and of torch's MultiheadAttention).

    Four projections: E*E for queries, kdim*E for keys, vdim*E for values and
    E*E for the output, plus 4E biases. The number of heads does not change it.
    """
    if embed_dim % num_heads != 0:
        raise ValueError(f"embed_dim={embed_dim} is not divisible by num_heads={num_heads}")
    kdim = embed_dim if kdim is None else kdim
    vdim = embed_dim if vdim is None else vdim
    weights = embed_dim * (embed_dim + kdim + vdim + embed_dim)
    return weights + (4 * embed_dim if bias else 0)


class MultiHeadAttention(nn.Module):
    """Multi-head attention, batch first, equal to `torch.nn.MultiheadAttention` (no dropout).

    Args:
        embed_dim: E, model size; also the size of every head's output concatenated.
        num_heads: h; each head has d = E / h features.
        bias: add biases to the four projections.
        kdim: size of the key inputs (default E).
        vdim: size of the value inputs (default E).
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        bias: bool = True,
        kdim: int | None = None,
        vdim: int | None = None,
    ):
        super().__init__()
        if num_heads <= 0 or embed_dim % num_heads != 0:
            raise ValueError(f"embed_dim={embed_dim} is not divisible by num_heads={num_heads}")
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.kdim = embed_dim if kdim is None else kdim
        self.vdim = embed_dim if vdim is None else vdim
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.k_proj = nn.Linear(self.kdim, embed_dim, bias=bias)
        self.v_proj = nn.Linear(self.vdim, embed_dim, bias=bias)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)  # h*d_v -> E

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        attn_mask: torch.Tensor | None = None,
        key_mask: torch.Tensor | None = None,
        is_causal: bool = False,
        need_weights: bool = False,
        average_attn_weights: bool = True,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Multi-head attention of `query` over `key`/`value`.

        Args:
            query: (B, L, E).
            key: (B, S, kdim).
            value: (B, S, vdim).
            attn_mask: bool broadcastable to (B, h, L, S), e.g. (L, S), True =
                may attend; or a float mask added to the scores.
            key_mask: bool (B, S), True for real tokens (the opposite of torch's
                `key_padding_mask`).
            is_causal: forbid key j > query i (top-left aligned).
            need_weights: also return the attention weights.
            average_attn_weights: average the weights over the heads.

        Returns:
            `(output, weights)`: output (B, L, E); weights None, (B, L, S) when
            averaged, or (B, h, L, S) per head.
        """
        fn = "MultiHeadAttention"
        if query.dim() != 3 or key.dim() != 3 or value.dim() != 3:
            raise ValueError(
                f"{fn}: expected batch-first query (B, L, E), key (B, S, kdim), value (B, S, vdim),"
                f" got {as_shape(query.shape)}, {as_shape(key.shape)}, {as_shape(value.shape)}"
            )
        B, S = key.shape[0], key.shape[1]
        h = self.num_heads
        q = split_heads(self.q_proj(query), h)  # (B, L, E) -> (B, h, L, d)
        k = split_heads(self.k_proj(key), h)  # (B, S, kdim) -> (B, h, S, d)
        v = split_heads(self.v_proj(value), h)  # (B, S, vdim) -> (B, h, S, d)

        mask = attn_mask
        if key_mask is not None:
            if as_shape(key_mask.shape) != (B, S):
                raise ValueError(
                    f"{fn}: key_mask must have shape (B, S) = {(B, S)},"
                    f" got {as_shape(key_mask.shape)}"
                )
            key_mask = key_mask[:, None, None, :]  # (B, S) -> (B, 1, 1, S), same for all heads
            if mask is not None and mask.is_floating_point():
                mask = mask + as_additive_mask(key_mask, mask.dtype)  # broadcasts to (B, 1, L, S)
            else:
                mask = combine_masks(mask, key_mask)
        out = scaled_dot_product_attention(
            q, k, v, attn_mask=mask, is_causal=is_causal, return_weights=need_weights
        )
        weights = None
        if need_weights:
            out, weights = out  # (B, h, L, d), (B, h, L, S)
            if average_attn_weights:
                weights = weights.mean(dim=1)  # (B, h, L, S) -> (B, L, S)
        out = self.out_proj(merge_heads(out))  # (B, h, L, d) -> (B, L, E)
        return out, weights

    @classmethod
    def from_torch(cls, mha: nn.MultiheadAttention) -> MultiHeadAttention:
        """Copy the weights of a `torch.nn.MultiheadAttention` into a new module.

        The copy computes the same outputs and weights (batch first, and with
        `key_mask = ~key_padding_mask`). Dropout is not copied: compare in eval
        mode or with dropout=0.
        """
        if mha.bias_k is not None or mha.add_zero_attn:
            raise ValueError("MultiHeadAttention.from_torch: add_bias_kv/add_zero_attn unsupported")
        E, h = mha.embed_dim, mha.num_heads
        bias = mha.in_proj_bias is not None
        ref = next(mha.parameters())
        new = cls(E, h, bias=bias, kdim=mha.kdim, vdim=mha.vdim).to(ref.device, ref.dtype)
        if mha._qkv_same_embed_dim:
            w_q, w_k, w_v = mha.in_proj_weight.chunk(3, dim=0)  # (3E, E) -> 3 x (E, E)
        else:
            w_q, w_k, w_v = mha.q_proj_weight, mha.k_proj_weight, mha.v_proj_weight
        with torch.no_grad():
            new.q_proj.weight.copy_(w_q)
            new.k_proj.weight.copy_(w_k)
            new.v_proj.weight.copy_(w_v)
            new.out_proj.weight.copy_(mha.out_proj.weight)
            if bias:
                b_q, b_k, b_v = mha.in_proj_bias.chunk(3)  # (3E,) -> 3 x (E,)
                new.q_proj.bias.copy_(b_q)
                new.k_proj.bias.copy_(b_k)
                new.v_proj.bias.copy_(b_v)
                new.out_proj.bias.copy_(mha.out_proj.bias)
        return new
