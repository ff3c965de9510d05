"""Chapter 09's experiment: which position encoding lets attention find "the token two back".

The task needs order and nothing else: at every position ``i >= 2`` the model
names the token at ``i - 2`` (positions 0 and 1 name a blank). Digits are
random, so content alone cannot help. A one-block causal model
(:class:`PositionalCausalModel`) is trained on short strings and tested on
strings up to four times longer, once per encoding of
:mod:`attnlib.positions`:

* ``"none"``: no position information at all;
* ``"sinusoidal"``, ``"learned"``: a vector per absolute position added to the embeddings;
* ``"rope"``: queries and keys rotated by position (relative by construction);
* ``"alibi"``: a distance penalty added to the scores.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from attnlib.attention import scaled_dot_product_attention
from attnlib.modules import merge_heads, split_heads
from attnlib.positions import LearnedPositions, alibi_bias, apply_rope, sinusoidal_encoding

__all__ = ["ENCODINGS", "OFFSET", "PositionalCausalModel", "offset_batch", "offset_accuracy", "train_offset"]

ENCODINGS = ("none", "sinusoidal", "learned", "rope", "alibi")
OFFSET = 2  # the model names the token OFFSET positions back
N_DIGITS = 10
BLANK = N_DIGITS  # the answer where there is no token OFFSET positions back


def offset_batch(
    batch_size: int, length: int, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random digit strings and their targets, each long (batch_size, length)."""
    x = torch.randint(0, N_DIGITS, (batch_size, length), generator=generator)  # (B, L)
    y = torch.full_like(x, BLANK)  # (B, L)
    y[:, OFFSET:] = x[:, :-OFFSET]  # y[:, i] = x[:, i - OFFSET]
    return x, y


class CausalSelfAttention(nn.Module):
    """Causal multi-head self-attention that can rotate (RoPE) or bias (ALiBi) by position."""

    def __init__(self, d_model: int, num_heads: int, encoding: str):
        super().__init__()
        self.num_heads, self.encoding = num_heads, encoding
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        L = x.shape[1]
        q, k, v = self.qkv(x).chunk(3, dim=-1)  # (B, L, D) -> 3 x (B, L, D)
        q, k, v = (split_heads(t, self.num_heads) for t in (q, k, v))  # 3 x (B, h, L, d)
        if self.encoding == "rope":
            q, k = apply_rope(q), apply_rope(k)  # rotate row p by its position p
        if self.encoding == "alibi":
            bias = alibi_bias(self.num_heads, L, L).to(x.dtype)  # (h, L, L), -inf above the diagonal
            out = scaled_dot_product_attention(q, k, v, attn_mask=bias)
        else:
            out = scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, h, L, d)
        return self.out(merge_heads(out))  # (B, h, L, d) -> (B, L, D)


class PositionalCausalModel(nn.Module):
    """Embedding (+ absolute positions) -> one pre-norm attention block -> logits."""

    def __init__(self, encoding: str, d_model: int = 32, num_heads: int = 2, max_len: int = 128):
        super().__init__()
        if encoding not in ENCODINGS:
            raise ValueError(f"encoding must be one of {ENCODINGS}, got {encoding!r}")
        self.encoding = encoding
        self.embed = nn.Embedding(N_DIGITS, d_model)
        self.learned = LearnedPositions(max_len, d_model) if encoding == "learned" else None
        self.register_buffer("sinusoid", sinusoidal_encoding(max_len, d_model), persistent=False)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, num_heads, encoding)
        self.ffn = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.ReLU(), nn.Linear(4 * d_model, d_model))
        self.head = nn.Linear(d_model, N_DIGITS + 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Digits (B, L) -> logits (B, L, N_DIGITS + 1)."""
        h = self.embed(x)  # (B, L) -> (B, L, D)
        if self.encoding == "sinusoidal":
            h = h + self.sinusoid[: x.shape[1]]  # (L, D) broadcasts over the batch
        elif self.encoding == "learned":
            h = self.learned(h)
        h = h + self.attn(self.norm1(h))
        h = h + self.ffn(self.norm2(h))
        return self.head(h)


def train_offset(
    encoding: str, steps: int = 400, lengths: tuple[int, int] = (8, 16), batch_size: int = 64, seed: int = 0
) -> tuple[PositionalCausalModel, list[float]]:
    """Train one model on strings of random length in ``lengths``; return it and its losses."""
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)  # the initial weights
    model = PositionalCausalModel(encoding)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(steps):
        length = int(torch.randint(lengths[0], lengths[1] + 1, (), generator=generator))
        x, y = offset_batch(batch_size, length, generator)
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())  # (B*L, V) vs (B*L,)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return model, losses


@torch.no_grad()
def offset_accuracy(model: nn.Module, length: int, n: int = 256, seed: int = 1) -> float:
    """Share of positions ``i >= OFFSET`` answered correctly on fresh strings of one length."""
    x, y = offset_batch(n, length, torch.Generator().manual_seed(seed))
    pred = model(x).argmax(-1)  # (n, L)
    return (pred[:, OFFSET:] == y[:, OFFSET:]).float().mean().item()
