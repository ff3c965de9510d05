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
from functools import partial

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
    "alignment_experiment",
    "alignment_metrics",
    "bottleneck_experiment",
    "bottleneck_metrics",
    "decode_tokens",
    "digit_task_batch",
    "encode_digits",
    "exact_match",
    "final_state_context",
    "greedy_decode_steps",
    "lookup_metrics",
    "run_gru",
    "seeded_model",
    "sequence_accuracy",
    "shift_right",
    "source_lengths",
    "token_accuracy",
    "train_reverse_model",
    "train_seq2seq",
    "train_unshuffle_attention",
    "train_unshuffle_baseline",
    "train_unshuffle_models",
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
    Trains in train mode and leaves the model in eval mode, ready to decode.
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
    """Share of sequences whose greedy decoding equals the target exactly (through EOS).

    Puts the model in eval mode (no random position offset) and leaves it there.
    """
    model.eval()
    pred = model.greedy_decode(src, tgt.shape[1], src_lengths)  # (B, T)
    return exact_match(pred, tgt).float().mean().item()


@torch.no_grad()
def token_accuracy(model: nn.Module, src, tgt, src_lengths=None) -> float:
    """Share of non-PAD target tokens that greedy decoding gets right, position by position.

    Puts the model in eval mode (no random position offset) and leaves it there.
    """
    model.eval()
    pred = model.greedy_decode(src, tgt.shape[1], src_lengths)  # (B, T)
    real = tgt != PAD
    return ((pred == tgt) & real).sum().item() / real.sum().item()


# --------------------------------------------------------------------------- the chapters' experiments
# Chapters 01 and 02 train their models here, each from its own seeded generators
# (no dependence on the global RNG a notebook's earlier cells left), and
# ``attnlib.chapters.spread`` runs the same functions over seeds, float paths and
# thread counts (attnlib/chapters/spreads/ch01.json, ch02.json).


def _mean(values) -> float:
    return sum(values) / len(values)


def seeded_model(seed: int, cls: type, *args, **kwargs) -> nn.Module:
    """``cls(*args, **kwargs)`` with its initial weights drawn from ``seed``.

    The global RNG is left as it was (``torch.random.fork_rng``), so the weights
    depend on ``seed`` alone, not on what ran before.

    Parameters
    ----------
    seed : int
        Seeds torch's generator for the construction.
    cls : type
        An ``nn.Module`` class, e.g. :class:`Seq2SeqGRU`.
    *args, **kwargs
        Its arguments.

    Returns
    -------
    torch.nn.Module
    """
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seeded_model: seed must be an int, got {type(seed).__name__}")
    if seed < 0:
        raise ValueError(f"seeded_model: seed must be non-negative, got {seed}")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return cls(*args, **kwargs)


# Chapter 01 shows this source: lines kept within 80 columns.
# fmt: off
BOTTLENECK_TEST_LENGTHS = (2, 4, 6, 8, 10, 12, 14, 16, 20, 24)
BOTTLENECK_POSITION_LENGTH = 12


def train_reverse_model(seed=0, steps=500, batch=64, lengths=(1, 16)):
    """Chapter 01's run: a Seq2SeqGRU (E = 16, d_h = 64) learns to reverse.

    Weights and batches come from seed. Returns (model, losses per step).
    """
    model = seeded_model(seed, Seq2SeqGRU, VOCAB_SIZE, emb_dim=16,
                         hidden_dim=64)
    losses = train_seq2seq(
        model, lambda g: digit_task_batch("reverse", batch, lengths, g),
        steps=steps, lr=5e-3, seed=seed,
    )
    return model, losses


# fmt: on
@torch.no_grad()
def bottleneck_metrics(model: nn.Module, losses: list[float]) -> dict:
    """Chapter 01's numbers for a trained reversing model.

    Parameters
    ----------
    model : nn.Module
        A trained model with ``greedy_decode``.
    losses : list of float
        Its training loss per step (at least 250 steps).

    Returns
    -------
    dict
        ``loss_first``, ``loss_mid``, ``loss_last``: mean loss of steps 1-50,
        201-250 and the last 50; ``seq_acc`` and ``tok_acc``: exact-sequence and
        token accuracy on 500 new strings of each length of
        ``BOTTLENECK_TEST_LENGTHS`` (test sets seeded 1000 + length);
        ``per_position``: token accuracy at each of the 12 output positions of
        500 strings of length 12 (seeded 2000).
    """
    if len(losses) < 250:
        raise ValueError(f"bottleneck_metrics: expected at least 250 losses, got {len(losses)}")
    model.eval()
    seq_acc, tok_acc = [], []
    for n in BOTTLENECK_TEST_LENGTHS:
        src, tgt = digit_task_batch("reverse", 500, n, torch.Generator().manual_seed(1000 + n))
        pred = model.greedy_decode(src, max_len=tgt.shape[1])
        real = tgt != PAD
        seq_acc.append(exact_match(pred, tgt).float().mean().item())
        tok_acc.append(((pred == tgt) & real).sum().item() / real.sum().item())
    n = BOTTLENECK_POSITION_LENGTH
    src, tgt = digit_task_batch("reverse", 500, n, torch.Generator().manual_seed(2000))
    pred = model.greedy_decode(src, max_len=tgt.shape[1])
    per_position = (pred[:, :n] == tgt[:, :n]).float().mean(dim=0)
    return {
        "loss_first": _mean(losses[:50]),
        "loss_mid": _mean(losses[200:250]),
        "loss_last": _mean(losses[-50:]),
        "seq_acc": seq_acc,
        "tok_acc": tok_acc,
        "per_position": per_position.tolist(),
    }


def bottleneck_experiment(seed: int = 0) -> dict:
    """Chapter 01's experiment for one ``seed``: :func:`bottleneck_metrics` of :func:`train_reverse_model`."""
    return bottleneck_metrics(*train_reverse_model(seed))


# Chapter 02 shows this source: lines kept within 80 columns.
# fmt: off
ALIGNMENT_PAIR_COUNTS = tuple(range(2, 10))


def train_unshuffle_models(seed=0, steps=600, batch=64, pairs=(1, 6)):
    """Chapter 02's run: the attention model and chapter 01's model,
    one after the other, on the same un-shuffle batches (seeded by seed).

    Returns (attention model, its losses, model without attention, its
    losses). The two trainings share nothing, so the chapter may run them
    at once, each on its own core: the same numbers.
    """
    model, losses = train_unshuffle_attention(seed, steps, batch, pairs)
    baseline, baseline_losses = train_unshuffle_baseline(seed, steps, batch,
                                                         pairs)
    return model, losses, baseline, baseline_losses


def train_unshuffle_attention(seed=0, steps=600, batch=64, pairs=(1, 6)):
    """The attention model (d_h = 32) on chains of pairs[0] to pairs[1]
    pairs, batch chains a step. Returns (the trained model, its losses).
    """
    model = seeded_model(seed, Seq2SeqAdditiveAttention, VOCAB_SIZE,
                         emb_dim=16, hidden_dim=32)
    make_batch = partial(unshuffle_batch, batch, pairs)  # (generator)
    losses = train_seq2seq(model, make_batch, steps, lr=1e-2, seed=seed)
    return model, losses


def train_unshuffle_baseline(seed=0, steps=600, batch=64, pairs=(1, 6)):
    """Chapter 01's model (E = 16, a 64-number context) on the same
    batches as train_unshuffle_attention. Returns (model, its losses).
    """
    baseline = seeded_model(seed, Seq2SeqGRU, VOCAB_SIZE, emb_dim=16,
                            hidden_dim=64)
    make_batch = partial(unshuffle_batch, batch, pairs)  # (generator)
    losses = train_seq2seq(baseline, make_batch, steps, lr=1e-2,
                           seed=seed)
    return baseline, losses


# fmt: on
@torch.no_grad()
def lookup_metrics(model: Seq2SeqAdditiveAttention, num_pairs: int, count: int = 200, seed: int = 12) -> dict:
    """Where the trained attention model looks, on ``count`` chains of ``num_pairs`` pairs.

    Teacher-forced, so every step has its right input. The steps that write the
    second digit of a pair (the lookups) are measured.

    Parameters
    ----------
    model : Seq2SeqAdditiveAttention
    num_pairs : int
        n, 2 to 9.
    count : int, optional
        Chains (default 200).
    seed : int, optional
        Seeds the chains (default 12).

    Returns
    -------
    dict
        ``on_the_digit``: share of second-digit steps whose largest weight is on
        the source token equal to the digit being written; ``top_second`` and
        ``top_first``: mean largest weight of the second-digit steps and of the
        first-digit steps of pairs 2..n; ``second_right``: share of second-digit
        steps whose most likely token is the right digit.
    """
    if not isinstance(model, Seq2SeqAdditiveAttention):
        raise TypeError(f"lookup_metrics: expected a Seq2SeqAdditiveAttention, got {type(model).__name__}")
    if not 2 <= num_pairs <= NUM_DIGITS - 1:
        raise ValueError(f"lookup_metrics: num_pairs must be in [2, 9], got {num_pairs}")
    model.eval()
    src, tgt = unshuffle_batch(count, num_pairs, torch.Generator().manual_seed(seed))
    logits, weights = model.forward_with_attention(src, shift_right(tgt))  # (B, T, V), (B, T, S)
    end = 2 * num_pairs
    second = weights[:, 1:end:2]  # rows writing the second digit of pairs 1..n
    target_digit = tgt[:, 1:end:2]  # (B, n)
    looked_at = src.gather(1, second.argmax(dim=-1))
    return {
        "on_the_digit": (looked_at == target_digit).float().mean().item(),
        "top_second": second.max(dim=-1).values.mean().item(),
        "top_first": weights[:, 2:end:2].max(dim=-1).values.mean().item(),
        "second_right": (logits[:, 1:end:2].argmax(dim=-1) == target_digit).float().mean().item(),
    }


@torch.no_grad()
def alignment_metrics(model, losses, baseline, baseline_losses) -> dict:
    """Chapter 02's numbers for the two trained models.

    Parameters
    ----------
    model : Seq2SeqAdditiveAttention
    losses : list of float
    baseline : Seq2SeqGRU
    baseline_losses : list of float
        What :func:`train_unshuffle_models` returns.

    Returns
    -------
    dict
        ``loss_attention``, ``loss_baseline``: mean loss of the last 50 steps;
        ``acc_attention``, ``acc_baseline``: exact-sequence accuracy on 500 new
        chains of each count of ``ALIGNMENT_PAIR_COUNTS`` (seeded 3000 + n);
        for the attention model per pair count (teacher-forced, 200 chains,
        see :func:`lookup_metrics`): ``on_the_digit``, ``second_right``,
        ``top_second``, ``top_first``.
    """
    acc_attention, acc_baseline = [], []
    for n in ALIGNMENT_PAIR_COUNTS:
        src, tgt = unshuffle_batch(500, n, torch.Generator().manual_seed(3000 + n))
        for acc, m in ((acc_attention, model), (acc_baseline, baseline)):
            m.eval()
            pred = m.greedy_decode(src, max_len=tgt.shape[1])
            acc.append(exact_match(pred, tgt).float().mean().item())
    lookups = [lookup_metrics(model, n) for n in ALIGNMENT_PAIR_COUNTS]
    return {
        "loss_attention": _mean(losses[-50:]),
        "loss_baseline": _mean(baseline_losses[-50:]),
        "acc_attention": acc_attention,
        "acc_baseline": acc_baseline,
        **{key: [row[key] for row in lookups] for key in lookups[0]},
    }


def alignment_experiment(seed: int = 0) -> dict:
    """Chapter 02's experiment for one ``seed``: :func:`alignment_metrics` of the trained models."""
    return alignment_metrics(*train_unshuffle_models(seed))
