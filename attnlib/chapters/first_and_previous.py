"""Chapter 06's toy task: one attention layer whose heads can specialise.

Task ("first and previous"): a sequence of random tokens; at every position
t >= 1 the model must name two tokens, the one at position t - 1 and the one
at position 0. Each answer needs a different source position, so two heads can
split the work: one looks one step back, the other at the start.

Chapter 06 displays the source of all three functions, so their lines stay
within the page's 80 characters. `experiment(seed)` is the chapter's whole
experiment (a two-head and a one-head model, trained and measured); its spread
over seeds, float paths and thread counts is recorded by
`attnlib.chapters.spread` in spreads/ch06.json.
"""

from __future__ import annotations

import torch
from torch import nn

from attnlib.modules import MultiHeadAttention

__all__ = [
    "FirstAndPrevious",
    "evaluate",
    "experiment",
    "first_and_previous_batch",
    "head_roles",
    "summarise",
    "held_out_batch",
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
    of the "previous" loss. The initial weights and the batches come from
    `seed` alone (the global random state is left as it was).

    Returns
    -------
    (model, losses): the trained model and the loss of every step.
    """
    with torch.random.fork_rng(devices=[]):  # leave the global stream alone
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


# --------------------------------------------------------------------------
# The chapter's experiment, measured the same way for every seed.

TEST_SIZE = 2000


def held_out_batch(seed: int = 0, vocab_size: int = 8, seq_len: int = 8):
    """The held-out sequences of run `seed`: (tokens, previous, first).

    Each is long (TEST_SIZE, seq_len), from a generator seeded 1234 + seed.
    """
    generator = torch.Generator().manual_seed(1234 + seed)
    return first_and_previous_batch(TEST_SIZE, seq_len, vocab_size, generator)


@torch.no_grad()
def evaluate(model: FirstAndPrevious, tokens, previous, first):
    """Held-out accuracies (positions t >= 1) and the attention weights.

    Returns
    -------
    (acc_previous, acc_first, weights): two floats and weights
    (N, h, n, n).
    """
    prev_logits, first_logits, w = model(tokens, need_weights=True)
    right_prev = prev_logits[:, 1:].argmax(-1) == previous[:, 1:]
    right_first = first_logits[:, 1:].argmax(-1) == first[:, 1:]
    acc_prev = right_prev.float().mean().item()
    acc_first = right_first.float().mean().item()
    return acc_prev, acc_first, w


def head_roles(weights: torch.Tensor) -> tuple[list, list]:
    """Mean weight of each head on the first and on the previous token.

    Only the queries t >= 2 count (there, position 0 and position t - 1
    differ).

    Parameters
    ----------
    weights : (N, h, n, n) attention weights.

    Returns
    -------
    (on_first, on_previous): two lists of h floats.
    """
    if weights.dim() != 4 or weights.shape[-1] < 3:
        raise ValueError(f"head_roles: weights must be (N, h, n, n) with n >= 3, got {tuple(weights.shape)}")
    t = torch.arange(2, weights.shape[-1])
    on_first = weights[:, :, 2:, 0].mean(dim=(0, 2))  # (h,)
    on_previous = weights[:, :, t, t - 1].mean(dim=(0, 2))  # (h,)
    return on_first.tolist(), on_previous.tolist()


def _first_below(losses, level=0.1):
    """First step whose loss is below `level` (len(losses) if none)."""
    return next((i for i, v in enumerate(losses) if v < level), len(losses))


def summarise(two_heads, one_head, losses_2, losses_1, seed: int = 0):
    """The numbers chapter 06 states, for one run (see `experiment`)."""
    tokens, previous, first = held_out_batch(seed)
    acc_prev_2, acc_first_2, w2 = evaluate(two_heads, tokens, previous, first)
    acc_prev_1, acc_first_1, w1 = evaluate(one_head, tokens, previous, first)
    first_2, prev_2 = head_roles(w2)
    first_1, prev_1 = head_roles(w1)
    # the role each head of the two-head model gives most weight to
    roles = [0 if first_2[h] > prev_2[h] else 1 for h in range(2)]
    return {
        "acc_prev_2": acc_prev_2,
        "acc_first_2": acc_first_2,
        "acc_prev_1": acc_prev_1,
        "acc_first_1": acc_first_1,
        "on_first_2": first_2,
        "on_previous_2": prev_2,
        "specialised_min": min(max(first_2[h], prev_2[h]) for h in range(2)),
        "roles_differ": float(roles[0] != roles[1]),
        "on_first_1": first_1[0],
        "on_previous_1": prev_1[0],
        "step_below_2": _first_below(losses_2),
        "step_below_1": _first_below(losses_1),
        "end_loss_2": sum(losses_2[-20:]) / 20,
        "end_loss_1": sum(losses_1[-20:]) / 20,
    }


def experiment(seed: int = 0, steps: int = 300) -> dict:
    """Chapter 06's experiment for one seed: a dict of numbers.

    Trains a two-head and a one-head `FirstAndPrevious` (width 32) for
    `steps` steps from `seed` and measures them on `held_out_batch(seed)`
    (keys as in `summarise`).
    """
    two_heads, losses_2 = train_first_and_previous(2, steps, seed=seed)
    one_head, losses_1 = train_first_and_previous(1, steps, seed=seed)
    return summarise(two_heads, one_head, losses_2, losses_1, seed)
