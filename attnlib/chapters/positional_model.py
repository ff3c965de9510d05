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

:func:`experiment` is the chapter's whole measurement (five models, accuracy
against test length, loss curves) as one seeded function, so that
:mod:`attnlib.chapters.spread` can repeat it over seeds, float paths and thread
counts; :func:`order_blind_ceiling` is the best accuracy any model that cannot
see order can reach on the task, computed exactly from the task.
"""

from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F
from torch import nn

from attnlib.attention import scaled_dot_product_attention
from attnlib.modules import merge_heads, split_heads
from attnlib.positions import LearnedPositions, alibi_bias, apply_rope, sinusoidal_encoding

__all__ = [
    "ENCODINGS",
    "OFFSET",
    "TEST_LENGTHS",
    "PositionalCausalModel",
    "experiment",
    "offset_accuracy",
    "offset_batch",
    "order_blind_ceiling",
    "train_offset",
]

ENCODINGS = ("none", "sinusoidal", "learned", "rope", "alibi")
OFFSET = 2  # the model names the token OFFSET positions back
N_DIGITS = 10
BLANK = N_DIGITS  # the answer where there is no token OFFSET positions back
TRAIN_LENGTHS = (8, 16)  # training strings are 8 to 16 digits long
TEST_LENGTHS = (8, 16, 24, 32, 48, 64)  # up to four times the longest training string
STEPS = 400
LOSS_WINDOW = 20  # the loss curves are means over this many steps


def offset_batch(
    batch_size: int, length: int, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random digit strings and their targets, each long (batch_size, length)."""
    # (B, L) random digits
    x = torch.randint(0, N_DIGITS, (batch_size, length), generator=generator)
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
        # 3 x (B, L, D) -> 3 x (B, h, L, d)
        q, k, v = (split_heads(t, self.num_heads) for t in (q, k, v))
        if self.encoding == "rope":
            q, k = apply_rope(q), apply_rope(k)  # rotate row p by its position p
        if self.encoding == "alibi":
            # (h, L, L): a slope per head, -inf above the diagonal
            bias = alibi_bias(self.num_heads, L, L).to(x.dtype)
            out = scaled_dot_product_attention(q, k, v, attn_mask=bias)
        else:
            out = scaled_dot_product_attention(q, k, v, is_causal=True)
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
    with torch.random.fork_rng():  # the initial weights, leaving the global RNG as it was
        torch.manual_seed(seed)
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


@functools.lru_cache(maxsize=16)
def _expected_max_counts(max_draws: int, symbols: int) -> tuple[float, ...]:
    """E[largest count] when i symbols are drawn uniformly from ``symbols``, for i = 0 .. max_draws."""
    # P(every count <= c after i draws) = i! / symbols**i * [t**i] (sum_{j <= c} t**j / j!) ** symbols
    expected = [0.0] * (max_draws + 1)
    for c in range(max_draws):
        truncated = [1.0 / math.factorial(j) for j in range(c + 1)]
        power = [1.0] + [0.0] * max_draws  # coefficients of t**0 .. t**max_draws
        for _ in range(symbols):
            power = [
                sum(power[n - j] * truncated[j] for j in range(min(c, n) + 1)) for n in range(max_draws + 1)
            ]
        beyond = [1.0 - power[i] * math.factorial(i) / symbols**i for i in range(max_draws + 1)]
        expected = [e + b for e, b in zip(expected, beyond, strict=True)]  # E[max] = sum_c P(max > c)
        if max(beyond) < 1e-17:
            break
    return tuple(expected)


def order_blind_ceiling(length: int, n_symbols: int = N_DIGITS) -> float:
    """Best expected accuracy on strings of one length for a model that cannot see order.

    The bound is for chapter 09's model, whose one causal attention layer is
    followed by position-wise layers only. Without positions such a model
    computes at position ``i`` a function of the token ``x_i`` and of the
    *multiset* of ``x_0..x_i`` (the attention's weighted sum over the keys
    does not depend on their order). Given that multiset, every arrangement of
    ``x_0..x_{i-1}`` is equally likely, so the token ``OFFSET`` back is each of
    them with equal chance: the best guess is the most frequent digit, right
    with probability ``E[largest count among i digits] / i``. The ceiling is
    that mean over the scored positions ``i = OFFSET .. length - 1`` (as
    :func:`offset_accuracy` scores them).

    It does not bound a deeper model: from a second causal layer on, each
    position reads the first layer's summaries of every shorter prefix, and
    order can be recovered from those (causal language models without
    positional encodings learn positional information: Haviv et al. 2022,
    Kazemnejad et al. 2023).

    Parameters
    ----------
    length : int
        The string length, ``> OFFSET``.
    n_symbols : int, optional
        Digits drawn uniformly (10).

    Returns
    -------
    float
    """
    for name, value, low in (("length", length, OFFSET + 1), ("n_symbols", n_symbols, 1)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"order_blind_ceiling: {name} must be an int, got {type(value).__name__}")
        if value < low:
            raise ValueError(f"order_blind_ceiling: {name} must be >= {low}, got {value}")
    positions = range(OFFSET, length)
    expected = _expected_max_counts(length - 1, n_symbols)
    return sum(expected[i] / i for i in positions) / len(positions)


def experiment(seed: int = 0) -> dict:
    """Chapter 09's measurement: train one model per encoding, test it at every length.

    Each model trains for ``STEPS`` steps on strings of ``TRAIN_LENGTHS``
    digits (weights and batches from ``seed``) and is tested on 512 fresh
    strings of each of ``TEST_LENGTHS`` (drawn from ``1000 + seed``).

    Parameters
    ----------
    seed : int, optional

    Returns
    -------
    dict
        ``"test_lengths"``; per encoding ``e``: ``"acc_e"`` (one accuracy per
        test length) and ``"loss_e"`` (the training loss, mean of every
        ``LOSS_WINDOW`` steps).
    """
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"experiment: seed must be a non-negative int, got {seed!r}")
    metrics: dict = {"test_lengths": list(TEST_LENGTHS)}
    for encoding in ENCODINGS:
        model, losses = train_offset(encoding, steps=STEPS, lengths=TRAIN_LENGTHS, seed=seed)
        model.eval()
        test_seed = 1000 + seed
        metrics[f"acc_{encoding}"] = [offset_accuracy(model, n, n=512, seed=test_seed) for n in TEST_LENGTHS]
        smooth = torch.tensor(losses).unflatten(0, (-1, LOSS_WINDOW)).mean(1)  # (STEPS / LOSS_WINDOW,)
        metrics[f"loss_{encoding}"] = smooth.tolist()
    return metrics
