"""Recurrent encoder-decoders for chapters 01 (the bottleneck) and 02 (additive alignment).

Two GRU sequence-to-sequence models on small generated token tasks:

* :class:`Seq2SeqGRU`: the decoder sees the source only through the encoder's
  final hidden state, one fixed-size context vector (Sutskever et al. 2014,
  Cho et al. 2014);
* :class:`Seq2SeqAdditiveAttention`: at every step the decoder attends over all
  encoder states with :class:`attnlib.AdditiveAttention` (Bahdanau et al. 2014).

Both share the token conventions below, the same ``forward`` / ``encode`` /
``greedy_decode`` signatures, and the helpers :func:`train_seq2seq`,
:func:`sequence_accuracy` and :func:`token_accuracy`.

Token conventions: ``PAD = 0``, ``BOS = 1``, ``EOS = 2``; the digits 0-9 are the
tokens 3..12 (``DIGIT_OFFSET = 3``, ``VOCAB_SIZE = 13``). Batches are right-padded
with ``PAD``; a target ends with ``EOS``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import nn

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
    "shift_right",
    "source_lengths",
    "sequence_accuracy",
    "token_accuracy",
    "train_seq2seq",
    "unshuffle_batch",
]

PAD, BOS, EOS = 0, 1, 2
DIGIT_OFFSET = 3
VOCAB_SIZE = 13
TASKS = ("copy", "reverse", "sort")


# --------------------------------------------------------------------------- tokens


def encode_digits(digits: Sequence[int]) -> list[int]:
    """Digits 0-9 -> tokens 3..12."""
    out = []
    for d in digits:
        d = int(d)
        if not 0 <= d <= 9:
            raise ValueError(f"encode_digits: expected digits 0-9, got {d}")
        out.append(d + DIGIT_OFFSET)
    return out


def decode_tokens(tokens, stop_at_eos: bool = True) -> str:
    """Tokens -> a readable string: digits as '0'-'9', BOS as '<s>', EOS as '</s>', PAD skipped.

    Stops after the first EOS when ``stop_at_eos``. Accepts a list or a 1-D tensor.
    """
    if isinstance(tokens, torch.Tensor):
        if tokens.dim() != 1:
            raise ValueError(f"decode_tokens: expected a 1-D sequence, got shape {tuple(tokens.shape)}")
        tokens = tokens.tolist()
    parts = []
    for t in tokens:
        t = int(t)
        if t == PAD:
            continue
        if t == BOS:
            parts.append("<s>")
        elif t == EOS:
            parts.append("</s>")
            if stop_at_eos:
                break
        else:
            parts.append(str(t - DIGIT_OFFSET) if t < DIGIT_OFFSET + 10 else f"<{t}>")
    return " ".join(parts)


def source_lengths(src: torch.Tensor) -> torch.Tensor:
    """True lengths (B,) of a right-padded batch (B, S): the number of non-PAD tokens."""
    if src.dim() != 2:
        raise ValueError(f"source_lengths: expected src (B, S), got shape {tuple(src.shape)}")
    return (src != PAD).sum(dim=1)


def shift_right(tgt: torch.Tensor) -> torch.Tensor:
    """Teacher-forcing decoder input: BOS followed by the target without its last token, (B, T)."""
    bos = torch.full_like(tgt[:, :1], BOS)
    return torch.cat([bos, tgt[:, :-1]], dim=1)  # (B, T)


def _pad(rows: list[list[int]]) -> torch.Tensor:
    width = max(len(r) for r in rows)
    out = torch.full((len(rows), width), PAD, dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.tensor(r, dtype=torch.long)
    return out


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

    Args:
        task: "copy", "reverse" or "sort".
        batch_size: B.
        length: an int, or a range (min, max) of lengths, both included.
        generator: a seeded ``torch.Generator`` for reproducible batches.

    Returns:
        ``(src, tgt)``: src (B, S) digit tokens, tgt (B, T) with T = S + 1: the
        answer's tokens, then EOS; both right-padded with PAD.
    """
    if task not in TASKS:
        raise ValueError(f"digit_task_batch: task must be one of {TASKS}, got {task!r}")
    src_rows, tgt_rows = [], []
    for n in _lengths(batch_size, length, generator):
        digits = torch.randint(0, 10, (n,), generator=generator).tolist()
        answer = {"copy": digits, "reverse": digits[::-1], "sort": sorted(digits)}[task]
        src_rows.append(encode_digits(digits))
        tgt_rows.append(encode_digits(answer) + [EOS])
    return _pad(src_rows), _pad(tgt_rows)


def unshuffle_batch(batch_size: int, num_pairs, generator: torch.Generator | None = None):
    """A batch of chapter 02's un-shuffle task.

    Draw a chain of distinct digits x_0, x_1, ..., x_n and cut it into the n
    consecutive pairs (x_0 x_1), (x_1 x_2), ..., (x_{n-1} x_n). The source keeps
    the first pair in front and shuffles the others behind it (the seed tutorial
    keeps its starting pair [0, 1] in front the same way); each pair is two
    digit tokens. The target is every pair in chain order, then EOS. To emit
    pair i the decoder must find the source pair whose first digit is the last
    digit it wrote: a lookup by content, which is what attention does.

    Args:
        batch_size: B.
        num_pairs: n, an int or a range (min, max), 1 <= n <= 9 (digits are distinct).
        generator: a seeded ``torch.Generator``.

    Returns:
        ``(src, tgt)``: src (B, 2 n_max) and tgt (B, 2 n_max + 1), right-padded with PAD.
    """
    src_rows, tgt_rows = [], []
    for n in _lengths(batch_size, num_pairs, generator):
        if n > 9:
            raise ValueError(f"unshuffle_batch: at most 9 pairs of distinct digits, got {n}")
        chain = torch.randperm(10, generator=generator)[: n + 1].tolist()
        pairs = [[chain[i], chain[i + 1]] for i in range(n)]
        order = [0] + (torch.randperm(n - 1, generator=generator) + 1).tolist()
        src_rows.append(encode_digits([d for i in order for d in pairs[i]]))
        tgt_rows.append(encode_digits([d for p in pairs for d in p]) + [EOS])
    return _pad(src_rows), _pad(tgt_rows)


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


def _run_gru(gru: nn.GRU, x: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Run a batch-first GRU over right-padded inputs; states after each sequence's last real token."""
    packed = nn.utils.rnn.pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
    out, h_n = gru(packed)
    out, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])
    return out, h_n  # (B, S, D*H) zero at padding, (num_layers*D, B, H)


def final_state_context(
    embedding: nn.Embedding, gru: nn.GRU, src: torch.Tensor, src_lengths: torch.Tensor | None = None
) -> torch.Tensor:
    """Chapter 01's context vector: the top layer's GRU state after each sequence's last real token.

    embedding: nn.Embedding(V, E); gru: a unidirectional batch-first nn.GRU(E, H);
    src: (B, S) right-padded tokens; src_lengths (B,) (default: count of non-PAD).
    Returns (B, H). PAD positions after the end never touch the state.
    """
    lengths = _check_src("final_state_context", src, src_lengths)
    if gru.bidirectional or not gru.batch_first:
        raise ValueError("final_state_context: expected a unidirectional GRU with batch_first=True")
    _, h_n = _run_gru(gru, embedding(src), lengths)  # (L, B, H)
    return h_n[-1]  # (B, H)


class Seq2SeqGRU(nn.Module):
    """GRU encoder-decoder without attention: the decoder sees one fixed-size context vector.

    The encoder reads the source; its final hidden state (every layer's) starts
    the decoder, and the top layer's final state is also fed to the decoder at
    every step next to the previous token (as in Cho et al. 2014). Nothing else
    from the source reaches the decoder.

    Args:
        vocab_size: V (shared by source and target).
        emb_dim: E, token embedding size.
        hidden_dim: H, GRU state size: the size of the context vector.
        num_layers: stacked GRU layers in the encoder and the decoder.
    """

    def __init__(self, vocab_size: int, emb_dim: int, hidden_dim: int, num_layers: int = 1):
        super().__init__()
        self.vocab_size, self.hidden_dim, self.num_layers = vocab_size, hidden_dim, num_layers
        self.embedding = nn.Embedding(vocab_size, emb_dim, padding_idx=PAD)
        self.encoder = nn.GRU(emb_dim, hidden_dim, num_layers, batch_first=True)
        self.decoder = nn.GRU(emb_dim + hidden_dim, hidden_dim, num_layers, batch_first=True)
        self.out = nn.Linear(hidden_dim, vocab_size)

    def encode(self, src: torch.Tensor, src_lengths: torch.Tensor | None = None):
        """src (B, S) -> (encoder_states (B, S, H), context (B, H)); states are zero at PAD."""
        lengths = _check_src("Seq2SeqGRU.encode", src, src_lengths)
        states, h_n = _run_gru(self.encoder, self.embedding(src), lengths)  # (B, S, H), (L, B, H)
        self._h_n = h_n
        return states, h_n[-1]  # (B, S, H), (B, H)

    def decode(self, encoder_states, context, tgt_in, src_mask=None, hidden=None):
        """Teacher-forced decoding from the context alone: tgt_in (B, T) -> logits (B, T, V).

        ``encoder_states`` and ``src_mask`` are accepted for a signature shared with
        the attention model and ignored: this is the bottleneck.
        """
        if hidden is None:
            hidden = context.unsqueeze(0).repeat(self.num_layers, 1, 1)  # (L, B, H)
        T = tgt_in.shape[1]
        x = torch.cat([self.embedding(tgt_in), context.unsqueeze(1).expand(-1, T, -1)], dim=-1)  # (B, T, E+H)
        out, hidden = self.decoder(x, hidden)  # (B, T, H)
        return self.out(out), hidden  # (B, T, V)

    def forward(self, src, tgt_in, src_lengths=None):
        """Teacher forcing: src (B, S), tgt_in (B, T) (BOS + target[:-1]) -> logits (B, T, V)."""
        states, context = self.encode(src, src_lengths)
        hidden = self._h_n.contiguous()
        logits, _ = self.decode(states, context, tgt_in, hidden=hidden)
        return logits

    @torch.no_grad()
    def greedy_decode(self, src, max_len: int, src_lengths=None):
        """Greedy decoding, one token at a time: (B, S) -> tokens (B, max_len), PAD after EOS."""
        states, context = self.encode(src, src_lengths)
        hidden = self._h_n.contiguous()
        token = torch.full((src.shape[0], 1), BOS, dtype=torch.long, device=src.device)
        outputs = []
        for _ in range(max_len):  # T sequential steps: step t needs step t-1's token
            logits, hidden = self.decode(states, context, token, hidden=hidden)  # (B, 1, V)
            token = logits.argmax(dim=-1)  # (B, 1)
            outputs.append(token)
        return _after_eos_to_pad(torch.cat(outputs, dim=1))  # (B, max_len)


class Seq2SeqAdditiveAttention(nn.Module):
    """GRU encoder-decoder with additive (Bahdanau) attention.

    The encoder is a bidirectional GRU, as in Bahdanau et al. (2014): the state
    h_j at position j has read the whole source from both sides, so it can say
    "I am the pair that follows digit 7" rather than only "I have seen these
    tokens so far". The two directions are concatenated: h_j has 2H features.
    The decoder is a GRUCell started from a projection of the backward
    direction's state at the first token (as in the paper). At step i it scores
    every h_j against its previous state s_{i-1} with
    e_ij = v^T tanh(W s_{i-1} + U h_j), masks PAD, takes the softmax over j and
    the context c_i = sum_j a_ij h_j, then updates s_i = GRU([y_{i-1}; c_i], s_{i-1})
    and predicts y_i from [s_i; c_i].

    Args:
        vocab_size: V. emb_dim: E. hidden_dim: H (decoder state; each encoder direction).
        attn_dim: A, hidden size of the score network (default H).
        bidirectional: use a bidirectional encoder (default True).
    """

    def __init__(
        self,
        vocab_size: int,
        emb_dim: int,
        hidden_dim: int,
        attn_dim: int | None = None,
        bidirectional: bool = True,
    ):
        super().__init__()
        self.vocab_size, self.hidden_dim, self.bidirectional = vocab_size, hidden_dim, bidirectional
        enc_dim = hidden_dim * (2 if bidirectional else 1)
        self.embedding = nn.Embedding(vocab_size, emb_dim, padding_idx=PAD)
        self.encoder = nn.GRU(emb_dim, hidden_dim, batch_first=True, bidirectional=bidirectional)
        self.init_state = nn.Linear(hidden_dim, hidden_dim)
        self.attention = AdditiveAttention(hidden_dim, enc_dim, attn_dim or hidden_dim)
        self.cell = nn.GRUCell(emb_dim + enc_dim, hidden_dim)
        self.out = nn.Linear(hidden_dim + enc_dim, vocab_size)

    def encode(self, src: torch.Tensor, src_lengths: torch.Tensor | None = None):
        """src (B, S) -> (encoder_states (B, S, D*H), initial decoder state s_0 (B, H))."""
        lengths = _check_src("Seq2SeqAdditiveAttention.encode", src, src_lengths)
        states, h_n = _run_gru(self.encoder, self.embedding(src), lengths)  # (B, S, D*H), (D, B, H)
        s0 = torch.tanh(self.init_state(h_n[-1]))  # (B, H): backward state at token 0 (or final forward)
        self._mask = torch.arange(src.shape[1], device=src.device)[None, :] < lengths.to(src.device)[:, None]
        return states, s0

    def decode(self, encoder_states, s0, tgt_in, src_mask, return_weights=False, hidden=None):
        """Teacher-forced decoding: tgt_in (B, T) -> logits (B, T, V) (and weights (B, T, S))."""
        s = s0 if hidden is None else hidden  # (B, H)
        emb = self.embedding(tgt_in)  # (B, T, E)
        all_logits, all_weights = [], []
        for i in range(tgt_in.shape[1]):
            context, weights = self.attention(s, encoder_states, key_mask=src_mask)  # (B, 2H), (B, S)
            s = self.cell(torch.cat([emb[:, i], context], dim=-1), s)  # (B, H)
            all_logits.append(self.out(torch.cat([s, context], dim=-1)))  # (B, V)
            all_weights.append(weights)
        logits = torch.stack(all_logits, dim=1)  # (B, T, V)
        if return_weights:
            return logits, torch.stack(all_weights, dim=1), s  # (B, T, V), (B, T, S)
        return logits, s

    def forward(self, src, tgt_in, src_lengths=None, return_weights: bool = False):
        """Teacher forcing: logits (B, T, V); with ``return_weights`` also the weights (B, T, S)."""
        states, s0 = self.encode(src, src_lengths)
        result = self.decode(states, s0, tgt_in, self._mask, return_weights=return_weights)
        return result[:2] if return_weights else result[0]

    @torch.no_grad()
    def greedy_decode(self, src, max_len: int, src_lengths=None, return_weights: bool = False):
        """Greedy decoding: tokens (B, max_len), PAD after EOS; ``return_weights``: also (B, max_len, S)."""
        states, s = self.encode(src, src_lengths)
        mask = self._mask
        token = torch.full((src.shape[0], 1), BOS, dtype=torch.long, device=src.device)
        outputs, weights = [], []
        for _ in range(max_len):
            logits, w, s = self.decode(states, None, token, mask, return_weights=True, hidden=s)
            token = logits.argmax(dim=-1)  # (B, 1)
            outputs.append(token)
            weights.append(w)
        tokens = _after_eos_to_pad(torch.cat(outputs, dim=1))  # (B, max_len)
        if return_weights:
            return tokens, torch.cat(weights, dim=1)  # (B, max_len, S)
        return tokens


def _after_eos_to_pad(tokens: torch.Tensor) -> torch.Tensor:
    """Replace every token after the first EOS of each row by PAD."""
    seen_eos = (tokens == EOS).long().cumsum(dim=1)  # (B, T)
    after = (seen_eos - (tokens == EOS).long()) > 0  # strictly after the first EOS
    return tokens.masked_fill(after, PAD)


# --------------------------------------------------------------------------- training and metrics


def train_seq2seq(
    model: nn.Module,
    make_batch: Callable[[torch.Generator], tuple[torch.Tensor, torch.Tensor]],
    steps: int,
    lr: float = 3e-3,
    seed: int = 0,
    clip: float = 1.0,
) -> list[float]:
    """Train with teacher forcing, Adam and cross-entropy that ignores PAD; return the loss per step.

    ``make_batch(generator)`` returns ``(src, tgt)`` (tgt ending with EOS, PAD-padded);
    it gets a ``torch.Generator`` seeded with ``seed``, so the batches (and, on a
    CPU, the whole run, if the model was built after a seed) are reproducible.
    """
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    losses = []
    for _ in range(steps):
        src, tgt = make_batch(generator)
        logits = model(src, shift_right(tgt))  # (B, T, V)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1), ignore_index=PAD)
        optimizer.zero_grad()
        loss.backward()
        if clip:
            nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        losses.append(loss.item())
    model.eval()
    return losses


def exact_match(pred: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
    """Per-sequence correctness (B,) bool: pred equals tgt at every non-PAD target position.

    pred and tgt are (B, T); positions where the target is PAD are ignored (so
    anything a model writes after its EOS does not count).
    """
    if pred.shape != tgt.shape:
        raise ValueError(f"exact_match: pred {tuple(pred.shape)} and tgt {tuple(tgt.shape)} differ")
    real = tgt != PAD  # (B, T)
    return ((pred == tgt) | ~real).all(dim=1)  # (B,)


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
