"""Chapter 06's toy task: one attention layer whose heads can specialise.

Task ("first and previous"): a sequence of random tokens; at every position
t >= 1 the model must name two tokens, the one at position t - 1 and the one
at position 0. Each answer needs a different source position, so two heads can
split the work: one looks one step back, the other at the start.

Chapter 06 displays the source of all three functions, so their lines stay
within the page's 80 characters.
"""

from __future__ import annotations

import torch
from torch import nn

from attnlib.modules import MultiHeadAttention

__all__ = [
    "FirstAndPrevious",
    "first_and_previous_batch",
    "train_first_and_previous",
]


def first_and_previous_batch(
    batch_size: int,
    seq_len: int,
    vocab_size: int,
    generator: torch.Generator,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A batch of the task.

    Returns
    -------
    (tokens, previous, first), each long (batch_size, seq_len):
    previous[:, t] = tokens[:, t - 1] (position 0 has no previous token
    and holds tokens[:, -1]; leave it out of the loss) and
    first[:, t] = tokens[:, 0].
    """
    if seq_len < 2 or vocab_size < 2 or batch_size < 1:
        raise ValueError(
            "first_and_previous_batch: need batch_size >= 1, seq_len >= 2, "
            f"vocab_size >= 2, got {batch_size}, {seq_len}, {vocab_size}"
        )
    shape = (batch_size, seq_len)
    tokens = torch.randint(0, vocab_size, shape, generator=generator)  # (B, n)
    # previous[:, t] = tokens[:, t - 1]
    previous = torch.roll(tokens, shifts=1, dims=1)  # (B, n)
    first = tokens[:, :1].expand(batch_size, seq_len)  # (B, n)
    return tokens, previous, first


class FirstAndPrevious(nn.Module):
    """Embeddings, one causal multi-head attention layer, two read-outs.

    Parameters
    ----------
    vocab_size : number of distinct tokens.
    seq_len : n, the (fixed) sequence length.
    embed_dim : d_model.
    num_heads : h; each head has d_model / h features.
    """

    def __init__(
        self,
        vocab_size: int,
        seq_len: int,
        embed_dim: int,
        num_heads: int,
    ):
        super().__init__()
        self.token_embedding = nn.Embedding(vocab_size, embed_dim)
        self.position_embedding = nn.Embedding(seq_len, embed_dim)
        self.attention = MultiHeadAttention(embed_dim, num_heads)
        self.read_previous = nn.Linear(embed_dim, vocab_size)
        self.read_first = nn.Linear(embed_dim, vocab_size)

    def forward(self, tokens: torch.Tensor, need_weights: bool = False):
        """tokens (B, n) -> (previous logits, first logits, weights).

        Both logits are (B, n, vocab_size); weights is (B, h, n, n), one
        map per head, when `need_weights`, else None.
        """
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.token_embedding(tokens)  # (B, n, d_model)
        x = x + self.position_embedding(positions)  # + (n, d_model)
        out, weights = self.attention(
            x,
            x,
            x,
            is_causal=True,
            need_weights=need_weights,
            average_attn_weights=False,
        )  # (B, n, d_model), (B, h, n, n)
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
    """Train a `FirstAndPrevious` with Adam on fresh random batches.

    The loss is the sum of the two cross entropies; position 0 is left out
    of the "previous" loss. Deterministic on CPU for a given seed.

    Returns
    -------
    (model, losses): the trained model and the loss of every step.
    """
    torch.manual_seed(seed)
    model = FirstAndPrevious(vocab_size, seq_len, embed_dim, num_heads)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    generator = torch.Generator().manual_seed(seed)
    cross_entropy = nn.CrossEntropyLoss()
    losses = []
    for _ in range(steps):
        batch = (batch_size, seq_len, vocab_size, generator)
        tokens, previous, first = first_and_previous_batch(*batch)
        prev_logits, first_logits, _ = model(tokens)  # (B, n, V) each
        # position 0 has no previous token: leave it out
        prev_logits = prev_logits[:, 1:].reshape(-1, vocab_size)
        loss = cross_entropy(prev_logits, previous[:, 1:].reshape(-1))
        first_logits = first_logits.reshape(-1, vocab_size)
        loss = loss + cross_entropy(first_logits, first.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return model, losses
