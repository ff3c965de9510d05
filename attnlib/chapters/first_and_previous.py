"""Chapter 06's toy task: a one-layer multi-head attention model whose heads can specialise.

Task ("first and previous"): a sequence of random tokens; at every position
t >= 1 the model must name two tokens, the one at position t - 1 and the one
at position 0. Each answer needs a different source position, so two heads can
split the work: one looks one step back, the other at the start.
"""

from __future__ import annotations

import torch
from torch import nn

from attnlib.modules import MultiHeadAttention

__all__ = ["FirstAndPrevious", "first_and_previous_batch", "train_first_and_previous"]


def first_and_previous_batch(
    batch_size: int, seq_len: int, vocab_size: int, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A batch of the task.

    Returns:
        `(tokens, previous, first)`, each long (batch_size, seq_len):
        previous[:, t] = tokens[:, t - 1] (position 0 has no previous token and
        holds tokens[:, -1]; leave it out of the loss), first[:, t] = tokens[:, 0].
    """
    if seq_len < 2 or vocab_size < 2 or batch_size < 1:
        raise ValueError(
            f"first_and_previous_batch: need batch_size >= 1, seq_len >= 2, vocab_size >= 2, "
            f"got {batch_size}, {seq_len}, {vocab_size}"
        )
    tokens = torch.randint(0, vocab_size, (batch_size, seq_len), generator=generator)  # (B, T)
    previous = torch.roll(tokens, shifts=1, dims=1)  # (B, T): previous[:, t] = tokens[:, t-1]
    first = tokens[:, :1].expand(batch_size, seq_len)  # (B, T)
    return tokens, previous, first


class FirstAndPrevious(nn.Module):
    """Token + learned position embeddings, one causal multi-head attention layer, two readouts.

    Args:
        vocab_size: V, number of distinct tokens.
        seq_len: T, the (fixed) sequence length.
        embed_dim: d_model.
        num_heads: h; each head has d_model / h features.
    """

    def __init__(self, vocab_size: int, seq_len: int, embed_dim: int, num_heads: int):
        super().__init__()
        self.token_embedding = nn.Embedding(vocab_size, embed_dim)
        self.position_embedding = nn.Embedding(seq_len, embed_dim)
        self.attention = MultiHeadAttention(embed_dim, num_heads)
        self.read_previous = nn.Linear(embed_dim, vocab_size)
        self.read_first = nn.Linear(embed_dim, vocab_size)

    def forward(self, tokens: torch.Tensor, need_weights: bool = False):
        """tokens (B, T) -> (previous logits (B, T, V), first logits (B, T, V), weights).

        weights is (B, h, T, T), one map per head, when `need_weights`, else None.
        """
        positions = torch.arange(tokens.shape[1], device=tokens.device)  # (T,)
        x = self.token_embedding(tokens) + self.position_embedding(positions)  # (B, T, d_model)
        out, weights = self.attention(
            x, x, x, is_causal=True, need_weights=need_weights, average_attn_weights=False
        )  # (B, T, d_model), (B, h, T, T)
        return self.read_previous(out), self.read_first(out), weights


def train_first_and_previous(
    num_heads: int,
    steps: int = 300,
    vocab_size: int = 8,
    seq_len: int = 8,
    embed_dim: int = 32,
    batch_size: int = 128,
    lr: float = 1e-2,
    seed: int = 0,
) -> tuple[FirstAndPrevious, list[float]]:
    """Train a `FirstAndPrevious` model with Adam on fresh random batches; return it and its losses.

    The loss is the sum of the two cross entropies; position 0 is left out of
    the "previous" loss. Deterministic on CPU for a given seed.
    """
    torch.manual_seed(seed)
    model = FirstAndPrevious(vocab_size, seq_len, embed_dim, num_heads)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    generator = torch.Generator().manual_seed(seed)
    cross_entropy = nn.CrossEntropyLoss()
    losses = []
    for _ in range(steps):
        tokens, previous, first = first_and_previous_batch(batch_size, seq_len, vocab_size, generator)
        prev_logits, first_logits, _ = model(tokens)  # (B, T, V) each
        loss = cross_entropy(prev_logits[:, 1:].reshape(-1, vocab_size), previous[:, 1:].reshape(-1))
        loss = loss + cross_entropy(first_logits.reshape(-1, vocab_size), first.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return model, losses
