"""Recurrent encoder-decoders for chapters 01 (the bottleneck) and 02 (additive alignment).

Two GRU sequence-to-sequence models on small generated token tasks:

* :class:`Seq2SeqGRU` (chapter 01 builds it): the decoder sees the source only
  through the encoder's final hidden state, one fixed-size context vector
  (Sutskever et al. 2014, Cho et al. 2014);
* :class:`Seq2SeqAdditiveAttention` (chapter 02 builds it): at every step the
  decoder attends over all encoder states with :class:`attnlib.AdditiveAttention`
  (Bahdanau et al. 2014).

Both have ``encode`` (returns everything ``decode`` needs), ``decode``,
``forward(src, tgt_in) -> logits`` and ``greedy_decode(src, max_len) -> tokens``;
:func:`train_seq2seq` (chapter 01) trains any of them, and chapter 07's model too.
The tokens (``PAD``, ``BOS``, ``EOS``, digits from ``DIGIT_OFFSET``) live in
:mod:`attnlib.chapters.vocab` and are re-exported here.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from attnlib.chapters.vocab import (
    BOS,
    DIGIT_OFFSET,
    EOS,
    NUM_DIGITS,
    PAD,
    VOCAB_SIZE,
    decode_tokens,
    encode_digits,
    exact_match,
    greedy_decode_steps,
    pad_rows,
    shift_right,
)
from attnlib.masks import padding_mask
from attnlib.modules import AdditiveAttention

__all__ = [
    "BOS",
    "DIGIT_OFFSET",
    "EOS",
    "PAD",
    "VOCAB_SIZE",
    "Seq2SeqAdditiveAttention",
    "Seq2SeqGRU",
    "decode_tokens",
    "digit_task_batch",
    "encode_digits",
    "exact_match",
    "final_state_context",
    "greedy_decode_steps",
    "run_gru",
    "sequence_accuracy",
    "shift_right",
    "source_lengths",
    "token_accuracy",
    "train_seq2seq",
    "unshuffle_batch",
]

TASKS = ("copy", "reverse", "sort")


# --------------------------------------------------------------------------- tasks


def source_lengths(src: torch.Tensor) -> torch.Tensor:
    """True lengths (B,) of a right-padded batch (B, S): the number of non-PAD tokens."""
    if src.dim() != 2:
        raise ValueError(f"source_lengths: expected src (B, S), got shape {tuple(src.shape)}")
    return (src != PAD).sum(dim=1)


def _lengths(batch_size: int, length, generator: torch.Generator | None) -> list[int]:
    if isinstance(length, int):
        lo = hi = length
    else:
        lo, hi = (int(x) for x in length)
    if lo < 1 or hi < lo:
        raise ValueError(f"length must be an int >= 1 or a range (min, max), 1 <= min <= max; got {length}")
    return torch.randint(lo, hi + 1, (batch_size,), generator=generator).tolist()


def digit_task_batch(task: str, batch_size: int, length, generator: torch.Generator | None = None):
    """A batch of a digit task: copy, reverse or sort a random digit string.

    Parameters
    ----------
    task
        "copy", "reverse" or "sort".
    batch_size
        B.
    length
        an int, or a range (min, max) of lengths, both included.
    generator
        a seeded ``torch.Generator`` for reproducible batches.

    Returns
    -------
    tuple of torch.Tensor
        ``(src, tgt)``: src (B, S) digit tokens, tgt (B, T) with T = S + 1: the
        answer's tokens, then EOS; both right-padded with PAD.
    """
    if task not in TASKS:
        raise ValueError(f"digit_task_batch: task must be one of {TASKS}, got {task!r}")
    src_rows, tgt_rows = [], []
    for n in _lengths(batch_size, length, generator):
        digits = torch.randint(0, NUM_DIGITS, (n,), generator=generator).tolist()
        answer = {"copy": digits, "reverse": digits[::-1], "sort": sorted(digits)}[task]
        src_rows.append(encode_digits(digits))
        tgt_rows.append(encode_digits(answer) + [EOS])
    return pad_rows(src_rows), pad_rows(tgt_rows)


def unshuffle_batch(batch_size: int, num_pairs, generator: torch.Generator | None = None):
    """A batch of chapter 02's un-shuffle task.

    Draw a chain of distinct digits x_0, x_1, ..., x_n and cut it into the n
    consecutive pairs (x_0 x_1), (x_1 x_2), ..., (x_{n-1} x_n). The source keeps
    the first pair in front and shuffles the others behind it (as the tutorial
    the task comes from keeps its starting pair [0, 1] in front); each pair is
    two digit tokens. The target is every pair in chain order, then EOS. To emit
    pair i the decoder must find the source pair whose first digit is the last
    digit it wrote: a lookup by content, which is what attention does.

    Parameters
    ----------
    batch_size
        B.
    num_pairs
        n, an int or a range (min, max), 1 <= n <= 9 (digits are distinct).
    generator
        a seeded ``torch.Generator``.

    Returns
    -------
    tuple of torch.Tensor
        ``(src, tgt)``: src (B, 2 n_max) and tgt (B, 2 n_max + 1), right-padded with PAD.
    """
    src_rows, tgt_rows = [], []
    for n in _lengths(batch_size, num_pairs, generator):
        if n > NUM_DIGITS - 1:
            raise ValueError(f"unshuffle_batch: at most 9 pairs of distinct digits, got {n}")
        chain = torch.randperm(NUM_DIGITS, generator=generator)[: n + 1].tolist()
        pairs = [[chain[i], chain[i + 1]] for i in range(n)]
        order = [0] + (torch.randperm(n - 1, generator=generator) + 1).tolist()
        src_rows.append(encode_digits([d for i in order for d in pairs[i]]))
        tgt_rows.append(encode_digits([d for p in pairs for d in p]) + [EOS])
    return pad_rows(src_rows), pad_rows(tgt_rows)


# --------------------------------------------------------------------------- models


def _check_src(fn: str, src: torch.Tensor, src_lengths: torch.Tensor | None) -> torch.Tensor:
    if not isinstance(src, torch.Tensor) or src.dim() != 2 or src.dtype != torch.long:
        shape = tuple(src.shape) if isinstance(src, torch.Tensor) else type(src).__name__
        raise ValueError(f"{fn}: expected src as a LongTensor (B, S), got {shape}")
    if src_lengths is None:
        src_lengths = source_lengths(src)
    src_lengths = torch.as_tensor(src_lengths, dtype=torch.long)
    if src_lengths.shape != src.shape[:1]:
        raise ValueError(
            f"{fn}: src_lengths must have shape (B,) = ({src.shape[0]},), got {tuple(src_lengths.shape)}"
        )
    if (src_lengths < 1).any() or (src_lengths > src.shape[1]).any():
        raise ValueError(f"{fn}: src_lengths must lie in [1, S={src.shape[1]}], got {src_lengths.tolist()}")
    return src_lengths


# Chapter 01 prints the source of run_gru and Seq2SeqGRU: lines kept within 80 columns.
# fmt: off
def run_gru(gru: nn.GRU, x: torch.Tensor, lengths: torch.Tensor):
    """Run a batch-first GRU over right-padded inputs x (B, S, E).

    Returns the outputs (B, S, D*d_h), zero at padding, and the states
    h_n (num_layers*D, B, d_h) after each sequence's last real token.
    """
    packed = nn.utils.rnn.pack_padded_sequence(
        x, lengths.cpu(), batch_first=True, enforce_sorted=False
    )
    out, h_n = gru(packed)  # the GRU stops at each sequence's end
    out, _ = nn.utils.rnn.pad_packed_sequence(
        out, batch_first=True, total_length=x.shape[1]
    )
    return out, h_n  # (B, S, D*d_h), (num_layers*D, B, d_h)


# fmt: on
def final_state_context(
    embedding: nn.Embedding, gru: nn.GRU, src: torch.Tensor, src_lengths: torch.Tensor | None = None
) -> torch.Tensor:
    """Chapter 01's context vector: the top layer's GRU state after each sequence's last real token.

    embedding: nn.Embedding(V, E); gru: a unidirectional batch-first nn.GRU(E, d_h);
    src: (B, S) right-padded tokens; src_lengths (B,) (default: count of non-PAD).
    Returns (B, d_h). PAD positions after the end never touch the state.
    """
    lengths = _check_src("final_state_context", src, src_lengths)
    if gru.bidirectional or not gru.batch_first:
        raise ValueError("final_state_context: expected a unidirectional GRU with batch_first=True")
    _, h_n = run_gru(gru, embedding(src), lengths)  # (num_layers, B, d_h)
    return h_n[-1]  # (B, d_h)


# Chapter 01 prints this source: lines kept within 80 columns.
# fmt: off
class Seq2SeqGRU(nn.Module):
    """Chapter 01's GRU encoder-decoder: the decoder sees one context vector.

    The encoder's state after the last real source token is the context c
    (B, d_h). It starts the decoder, and it is fed to the decoder at every
    step next to the previous token (as in Cho et al. 2014). Nothing else
    from the source reaches the decoder.

    Parameters
    ----------
    vocab_size
        V, shared by source and target.
    emb_dim
        E, size of a token embedding.
    hidden_dim
        d_h, GRU state size: the size of the context vector.
    """

    def __init__(self, vocab_size: int, emb_dim: int, hidden_dim: int):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, emb_dim, padding_idx=PAD)
        self.encoder = nn.GRU(emb_dim, hidden_dim, batch_first=True)
        self.decoder = nn.GRU(emb_dim + hidden_dim, hidden_dim,
                              batch_first=True)
        self.out = nn.Linear(hidden_dim, vocab_size)

    def encode(self, src, src_lengths=None):
        """src (B, S) -> (encoder states (B, S, d_h), context c (B, d_h))."""
        lengths = _check_src("Seq2SeqGRU.encode", src, src_lengths)
        x = self.embedding(src)  # (B, S) -> (B, S, E)
        states, h_n = run_gru(self.encoder, x, lengths)  # h_n: (1, B, d_h)
        return states, h_n[-1]  # (B, S, d_h), (B, d_h)

    def decode(self, encoder_states, context, tgt_in, hidden=None):
        """Decoder steps for the tokens tgt_in (B, T), from the state hidden.

        hidden (1, B, d_h) defaults to the context: the first step.
        Returns (logits (B, T, V), hidden after the last step (1, B, d_h)).
        encoder_states is ignored: this is the bottleneck.
        """
        if hidden is None:
            hidden = context[None]  # (1, B, d_h): start from c
        T = tgt_in.shape[1]
        c = context[:, None, :].expand(-1, T, -1)  # (B, T, d_h): every step
        x = torch.cat([self.embedding(tgt_in), c], dim=-1)  # (B, T, E + d_h)
        out, hidden = self.decoder(x, hidden)  # (B, T, d_h), (1, B, d_h)
        return self.out(out), hidden  # (B, T, V), (1, B, d_h)

    def forward(self, src, tgt_in, src_lengths=None):
        """Teacher forcing: src (B, S), tgt_in (B, T) -> logits (B, T, V)."""
        states, context = self.encode(src, src_lengths)
        logits, _ = self.decode(states, context, tgt_in)
        return logits

    @torch.no_grad()
    def greedy_decode(self, src, max_len, src_lengths=None):
        """Greedy tokens (B, max_len), PAD after EOS (greedy_decode_steps)."""
        states, context = self.encode(src, src_lengths)

        def step(prev, hidden):  # prev (B,) -> logits (B, V)
            logits, hidden = self.decode(states, context, prev[:, None], hidden)
            return logits[:, 0], hidden

        return greedy_decode_steps(step, context[None], len(src), max_len)


# fmt: on


# Chapter 02 prints this source: lines kept within 80 columns.
# fmt: off
class Seq2SeqAdditiveAttention(nn.Module):
    """Chapter 02's GRU encoder-decoder with additive (Bahdanau) attention.

    Encoder: a bidirectional GRU (Bahdanau et al. 2014), so h_j (2 d_h
    numbers) has read the source from both sides. Decoder: a GRUCell started
    from a projection of the backward state at the first token. At step i it
    scores every h_j against s_{i-1}, e_ij = v^T tanh(W s_{i-1} + U h_j),
    masks PAD, and takes c_i = sum_j alpha_ij h_j; then
    s_i = GRU([y_{i-1}; c_i], s_{i-1}) and logits = Linear([s_i; c_i]).

    Parameters
    ----------
    vocab_size, emb_dim
        V and E (the size of a token embedding).
    hidden_dim
        d_h, the decoder state and each encoder direction.
    attn_dim
        d_a, width of the score network (default d_h).
    bidirectional
        a bidirectional encoder (default True).
    """

    def __init__(self, vocab_size, emb_dim, hidden_dim, attn_dim=None,
                 bidirectional=True):
        super().__init__()
        enc_dim = hidden_dim * (2 if bidirectional else 1)
        self.embedding = nn.Embedding(vocab_size, emb_dim, padding_idx=PAD)
        self.encoder = nn.GRU(emb_dim, hidden_dim, batch_first=True,
                              bidirectional=bidirectional)
        self.init_state = nn.Linear(hidden_dim, hidden_dim)
        self.attention = AdditiveAttention(
            hidden_dim, enc_dim, attn_dim or hidden_dim
        )  # scores of s_{i-1} (d_h) against h_j (enc_dim)
        self.cell = nn.GRUCell(emb_dim + enc_dim, hidden_dim)
        self.out = nn.Linear(hidden_dim + enc_dim, vocab_size)

    def encode(self, src, src_lengths=None):
        """src (B, S) -> (states H, key_mask (B, S), s_0 (B, d_h)).

        H (B, S, enc_dim) holds the encoder states h_j, one per row.
        """
        lengths = _check_src("Seq2SeqAdditiveAttention", src, src_lengths)
        x = self.embedding(src)  # (B, S, E)
        states, h_n = run_gru(self.encoder, x, lengths)  # h_n: (D, B, d_h)
        s0 = torch.tanh(self.init_state(h_n[-1]))  # backward state at token 0
        key_mask = padding_mask(lengths, src.shape[1])  # (B, S), True = real
        return states, key_mask, s0

    def decode(self, states, key_mask, s, tgt_in):
        """Decoder steps for tgt_in (B, T) from the state s (B, d_h).

        Returns (logits (B, T, V), weights (B, T, S), state after the
        last step (B, d_h)).
        """
        emb = self.embedding(tgt_in)  # (B, T, E)
        all_logits, all_weights = [], []
        for i in range(tgt_in.shape[1]):  # step i needs s_{i-1}
            context, weights = self.attention(
                s, states, key_mask=key_mask
            )  # c_i (B, enc_dim), alpha_i (B, S)
            s = self.cell(torch.cat([emb[:, i], context], dim=-1), s)
            all_logits.append(self.out(torch.cat([s, context], dim=-1)))
            all_weights.append(weights)
        logits = torch.stack(all_logits, dim=1)  # (B, T, V)
        return logits, torch.stack(all_weights, dim=1), s  # ..., (B, T, S)

    def forward(self, src, tgt_in, src_lengths=None):
        """Teacher forcing: logits (B, T, V)."""
        return self.forward_with_attention(src, tgt_in, src_lengths)[0]

    def forward_with_attention(self, src, tgt_in, src_lengths=None):
        """Teacher forcing: (logits (B, T, V), weights (B, T, S))."""
        states, key_mask, s0 = self.encode(src, src_lengths)
        logits, weights, _ = self.decode(states, key_mask, s0, tgt_in)
        return logits, weights

    @torch.no_grad()
    def greedy_decode(self, src, max_len, src_lengths=None):
        """Greedy tokens (B, max_len), PAD after EOS."""
        return self.greedy_decode_with_attention(src, max_len, src_lengths)[0]

    @torch.no_grad()
    def greedy_decode_with_attention(self, src, max_len, src_lengths=None):
        """Greedy (tokens (B, max_len), each step's weights (B, max_len, S))."""
        states, key_mask, s0 = self.encode(src, src_lengths)
        weights = []

        def step(prev, s):  # prev (B,) -> logits (B, V)
            logits, w, s = self.decode(states, key_mask, s, prev[:, None])
            weights.append(w)  # (B, 1, S)
            return logits[:, 0], s

        tokens = greedy_decode_steps(step, s0, len(src), max_len)
        return tokens, torch.cat(weights, dim=1)  # (B, max_len, S)


# fmt: on
# --------------------------------------------------------------------------- training and metrics


# Chapter 01 prints this source: lines kept within 80 columns.
# fmt: off
def train_seq2seq(
    model: nn.Module,
    make_batch: Callable[[torch.Generator], tuple[torch.Tensor, torch.Tensor]],
    steps: int,
    lr: float = 3e-3,
    seed: int = 0,
    clip: float = 1.0,
) -> list[float]:
    """Chapter 01's training loop: teacher forcing, Adam, cross-entropy.

    make_batch(generator) returns (src (B, S), tgt (B, T)), tgt ending
    with EOS and right-padded with PAD; the generator is seeded with
    seed, so the batches are reproducible. Returns the loss per step.
    """
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    losses = []
    for _ in range(steps):
        src, tgt = make_batch(generator)
        logits = model(src, shift_right(tgt))  # (B, T, V)
        loss = F.cross_entropy(
            logits.flatten(0, 1), tgt.flatten(), ignore_index=PAD
        )  # mean over the real (non-PAD) target tokens
        optimizer.zero_grad()
        loss.backward()
        if clip:  # keep one bad batch from blowing up the recurrence
            nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        losses.append(loss.item())
    model.eval()
    return losses


# fmt: on
@torch.no_grad()
def sequence_accuracy(model: nn.Module, src, tgt, src_lengths=None) -> float:
    """Share of sequences whose greedy decoding equals the target exactly (through EOS)."""
    model.eval()
    pred = model.greedy_decode(src, tgt.shape[1], src_lengths)  # (B, T)
    return exact_match(pred, tgt).float().mean().item()


@torch.no_grad()
def token_accuracy(model: nn.Module, src, tgt, src_lengths=None) -> float:
    """Share of non-PAD target tokens that greedy decoding gets right, position by position."""
    model.eval()
    pred = model.greedy_decode(src, tgt.shape[1], src_lengths)  # (B, T)
    real = tgt != PAD
    return ((pred == tgt) & real).sum().item() / real.sum().item()
