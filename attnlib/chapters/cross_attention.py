"""Cross attention: a decoder that looks at the encoder's states at every step.

Chapter 07 builds it. The queries come from the decoder, the keys and the
values from the encoder, so the query length T (target positions) and the key
length S (source positions) differ. Padded source positions are hidden by a
key padding mask of shape (B, 1, 1, S) that broadcasts over the heads and over
the T target positions. Cross attention has no causal mask: every target
position may read the whole source; the decoder's self-attention has one.

Tokens are those of :mod:`attnlib.chapters.vocab` (PAD = 0, BOS = 1, EOS = 2,
digits from DIGIT_OFFSET, digit words from WORD_OFFSET).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from attnlib._validate import as_shape
from attnlib.attention import scaled_dot_product_attention
from attnlib.chapters.vocab import (
    BOS,
    DIGIT_OFFSET,
    DIGIT_WORDS,
    EOS,
    NUM_DIGITS,
    PAD,
    WORD_OFFSET,
    digits_vocab,
    greedy_decode_steps,
    token_strings,
)
from attnlib.masks import causal_mask, padding_mask
from attnlib.modules import MultiHeadAttention
from attnlib.positions import sinusoidal_encoding

__all__ = [
    "BOS",
    "DIGIT_WORDS",
    "EOS",
    "PAD",
    "CrossAttentionSeq2Seq",
    "DecoderLayer",
    "EncoderLayer",
    "SelfAttentionLayer",
    "TinyStepModel",
    "cross_attention",
    "decoder_masks",
    "digits_to_words_batch",
    "digits_vocab",
    "greedy_decode_steps",
    "source_key_mask",
    "token_strings",
]


# --------------------------------------------------------------------------- masks and the functional form


def source_key_mask(src_lengths: torch.Tensor, src_len: int | None = None) -> torch.Tensor:
    """The cross-attention mask of a right-padded source batch.

    Parameters
    ----------
    src_lengths
        (B,) integer tensor, the true source lengths.
    src_len
        S, the padded source length; defaults to max(src_lengths).

    Returns
    -------
    torch.Tensor
        bool (B, 1, 1, S), True at the real source tokens (j < src_lengths[b]).
        It broadcasts over the heads and over the T target positions of the
        scores (B, h, T, S).

    Raises
    ------
    ValueError
        lengths that are not 1-D integers in [0, S].
    """
    fn = "source_key_mask"
    if not isinstance(src_lengths, torch.Tensor):
        src_lengths = torch.as_tensor(src_lengths)
    if src_lengths.dim() != 1 or src_lengths.is_floating_point() or src_lengths.dtype == torch.bool:
        raise ValueError(
            f"{fn}: src_lengths must be a 1-D integer tensor (B,), got shape "
            f"{as_shape(src_lengths.shape)} and dtype {src_lengths.dtype}"
        )
    S = int(src_lengths.max()) if src_len is None else int(src_len)
    if len(src_lengths) and (int(src_lengths.min()) < 0 or int(src_lengths.max()) > S):
        raise ValueError(f"{fn}: src_lengths {src_lengths.tolist()} must lie in [0, S={S}]")
    return padding_mask(src_lengths, S)[:, None, None, :]  # (B, S) -> (B, 1, 1, S)


def decoder_masks(src_lengths: torch.Tensor, src_len: int, tgt_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The two masks of a Transformer decoder layer.

    Parameters
    ----------
    src_lengths
        (B,) integer tensor, the true source lengths.
    src_len
        S, the padded source length.
    tgt_len
        T, the number of target positions.

    Returns
    -------
    tuple of torch.Tensor
        `(self_mask, cross_mask)`: self_mask bool (T, T), lower triangular (causal:
        target position t may attend to positions <= t) for the decoder's
        self-attention; cross_mask bool (B, 1, 1, S) (`source_key_mask`) for the
        cross attention, which has no causal part.
    """
    if isinstance(tgt_len, bool) or not isinstance(tgt_len, int) or tgt_len < 1:
        raise ValueError(f"decoder_masks: tgt_len must be a positive integer, got {tgt_len!r}")
    self_mask = causal_mask(tgt_len)  # (T, T)
    return self_mask, source_key_mask(src_lengths, src_len)  # (T, T), (B, 1, 1, S)


def cross_attention(
    decoder_states: torch.Tensor,
    encoder_states: torch.Tensor,
    w_q: torch.Tensor,
    w_k: torch.Tensor,
    w_v: torch.Tensor,
    source_mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Single-head cross attention: queries from the decoder, keys and values from the encoder.

    Parameters
    ----------
    decoder_states
        (B, T, D_dec), one state per target position.
    encoder_states
        (B, S, D_enc), one state per source position.
    w_q, w_k, w_v
        (D_dec, d_k), (D_enc, d_k) and (D_enc, d_v).
    source_mask
        None, or bool (B, S) with True at real source tokens.

    Returns
    -------
    tuple of torch.Tensor
        `(output, weights)`: output (B, T, d_v), weights (B, T, S); each row of
        weights sums to 1 over the real source tokens.

    Raises
    ------
    ValueError
        shapes that do not fit together (named in the message).
    """
    fn = "cross_attention"
    if decoder_states.dim() != 3 or encoder_states.dim() != 3:
        raise ValueError(
            f"{fn}: expected decoder_states (B, T, D_dec) and encoder_states (B, S, D_enc), got "
            f"{as_shape(decoder_states.shape)} and {as_shape(encoder_states.shape)}"
        )
    B, T, D_dec = decoder_states.shape
    B_enc, S, D_enc = encoder_states.shape
    if B != B_enc:
        raise ValueError(f"{fn}: batch sizes differ: decoder {B}, encoder {B_enc}")
    if (
        w_q.shape[0] != D_dec
        or w_k.shape[0] != D_enc
        or w_v.shape[0] != D_enc
        or w_q.shape[1] != w_k.shape[1]
    ):  # noqa: E501
        raise ValueError(
            f"{fn}: w_q {as_shape(w_q.shape)} must be (D_dec={D_dec}, d_k), w_k {as_shape(w_k.shape)}"
            f" (D_enc={D_enc}, d_k), w_v {as_shape(w_v.shape)} (D_enc={D_enc}, d_v)"
        )
    mask = None
    if source_mask is not None:
        if as_shape(source_mask.shape) != (B, S) or source_mask.dtype != torch.bool:
            raise ValueError(
                f"{fn}: source_mask must be bool (B, S) = {(B, S)}, got {as_shape(source_mask.shape)}"
                f" of dtype {source_mask.dtype}"
            )
        mask = source_mask[:, None, :]  # (B, S) -> (B, 1, S), the same for every target position
    q = decoder_states @ w_q  # (B, T, D_dec) @ (D_dec, d_k) -> (B, T, d_k)
    k = encoder_states @ w_k  # (B, S, D_enc) @ (D_enc, d_k) -> (B, S, d_k)
    v = encoder_states @ w_v  # (B, S, D_enc) @ (D_enc, d_v) -> (B, S, d_v)
    return scaled_dot_product_attention(q, k, v, attn_mask=mask, return_weights=True)  # (B,T,d_v), (B,T,S)


# --------------------------------------------------------------------------- the toy translation task


def digits_to_words_batch(
    batch_size: int,
    length,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """A batch of the task "read a digit string aloud": 4 0 7 <eos> -> four zero seven <eos>.

    Parameters
    ----------
    batch_size
        B.
    length
        number of digits, an int or a range (min, max), both included.
    generator
        a seeded torch.Generator.

    Returns
    -------
    tuple of torch.Tensor
        `(src, tgt)`: src (B, S) = digit tokens (DIGIT_OFFSET + d) then EOS,
        tgt (B, S) = word tokens (WORD_OFFSET + d) then EOS, right-padded with
        PAD; S = 1 + the longest length. See `digits_vocab` for the names.
    """
    lo, hi = (length, length) if isinstance(length, int) else (int(length[0]), int(length[1]))
    if not 1 <= lo <= hi:
        raise ValueError(
            f"digits_to_words_batch: length must be >= 1 or (min, max) with 1 <= min <= max, got {length}"
        )
    lengths = torch.randint(lo, hi + 1, (batch_size,), generator=generator)  # (B,)
    S = int(lengths.max()) + 1
    digits = torch.randint(0, NUM_DIGITS, (batch_size, S), generator=generator)  # (B, S)
    real = padding_mask(lengths, S)  # (B, S), True at the digits
    end = torch.where(torch.arange(S) == lengths[:, None], EOS, PAD)  # (B, S): EOS after the digits
    src = torch.where(real, digits + DIGIT_OFFSET, end)  # (B, S)
    tgt = torch.where(real, digits + WORD_OFFSET, end)  # (B, S)
    return src, tgt


# --------------------------------------------------------------------------- the model
# Chapter 07 prints the source of the four classes below: lines kept within 80 columns.
# fmt: off


class SelfAttentionLayer(nn.Module):
    """What chapter 07's encoder and decoder layers both begin with.

    An optional self-attention sub-layer, residual and followed by
    LayerNorm (post-norm, as in Vaswani et al. 2017).
    self_attention=False drops it: self_attend then returns x as it is.
    """

    def __init__(self, d_model, num_heads, self_attention=True):
        super().__init__()
        self.self_attn = (
            MultiHeadAttention(d_model, num_heads) if self_attention else None
        )
        self.norm1 = nn.LayerNorm(d_model)

    def self_attend(self, x, **mask):
        """x (B, N, d) -> (B, N, d); mask: attn_mask= or is_causal=."""
        if self.self_attn is None:
            return x
        a, _ = self.self_attn(x, x, x, **mask)  # (B, N, d)
        return self.norm1(x + a)


class EncoderLayer(SelfAttentionLayer):
    """Chapter 07's encoder layer (post-norm, as in Vaswani et al. 2017).

    Self-attention over the source (padded keys hidden), then a
    feed-forward net; each sub-layer residual and followed by LayerNorm.
    self_attention=False drops the first sub-layer.
    """

    def __init__(self, d_model, num_heads, ffn_dim, self_attention=True):
        super().__init__(d_model, num_heads, self_attention)
        self.ffn = nn.Sequential(
            nn.Linear(d_model, ffn_dim), nn.ReLU(), nn.Linear(ffn_dim, d_model)
        )
        self.norm2 = nn.LayerNorm(d_model)

    def forward(self, x, src_mask):
        """x (B, S, d), src_mask bool (B, 1, 1, S) -> (B, S, d)."""
        x = self.self_attend(x, attn_mask=src_mask)  # padded keys hidden
        return self.norm2(x + self.ffn(x))  # (B, S, d)


class DecoderLayer(SelfAttentionLayer):
    """Chapter 07's decoder layer (post-norm, as in Vaswani et al. 2017).

    Causal self-attention over the target prefix, cross attention
    (queries from the decoder, keys and values from the encoder's
    memory, source mask, no causal mask), a feed-forward net; each
    sub-layer residual and followed by LayerNorm.
    self_attention=False drops the first sub-layer.
    """

    def __init__(self, d_model, num_heads, ffn_dim, self_attention=True):
        super().__init__(d_model, num_heads, self_attention)
        self.cross_attn = MultiHeadAttention(d_model, num_heads)
        self.norm2 = nn.LayerNorm(d_model)
        self.ffn = nn.Sequential(
            nn.Linear(d_model, ffn_dim), nn.ReLU(), nn.Linear(ffn_dim, d_model)
        )
        self.norm3 = nn.LayerNorm(d_model)

    def forward(self, y, memory, src_mask, need_weights=False):
        """y (B, T, d), memory (B, S, d), src_mask (B, 1, 1, S).

        Returns (y (B, T, d), cross-attention weights (B, h, T, S), or
        None when need_weights is False).
        """
        y = self.self_attend(y, is_causal=True)  # t sees <= t
        c, weights = self.cross_attn(
            y, memory, memory, attn_mask=src_mask,  # no causal mask
            need_weights=need_weights, average_attn_weights=False,
        )  # queries (B, T, d) from the decoder; keys, values (B, S, d)
        y = self.norm2(y + c)
        return self.norm3(y + self.ffn(y)), weights  # (B, T, d)


class CrossAttentionSeq2Seq(nn.Module):
    """Chapter 07's one-layer Transformer encoder-decoder (Vaswani 2017).

    Token embedding + sinusoidal positions, one EncoderLayer, one
    DecoderLayer, a linear layer to the vocabulary. In training, the
    positions start at a random offset in [0, position_shift], so that
    positions beyond the training lengths are not new at test time.
    Same forward and greedy_decode as chapter 01's Seq2SeqGRU.

    Parameters
    ----------
    vocab_size
        V, shared by source and target.
    d_model
        d, size of embeddings, states and attention.
    num_heads
        h; d must be divisible by it.
    ffn_dim
        hidden size of the feed-forward nets (default 2d).
    self_attention
        encoder self-attention and causal decoder self-attention
        (True), or cross attention only (False).
    position_shift
        largest random position offset in training.
    """

    def __init__(self, vocab_size, d_model=32, num_heads=2, ffn_dim=None,
                 self_attention=True, position_shift=0):
        super().__init__()
        ffn_dim = ffn_dim or 2 * d_model
        self.d_model, self.position_shift = d_model, position_shift
        self.embedding = nn.Embedding(vocab_size, d_model, padding_idx=PAD)
        self.encoder = EncoderLayer(d_model, num_heads, ffn_dim, self_attention)
        self.decoder = DecoderLayer(d_model, num_heads, ffn_dim, self_attention)
        self.out = nn.Linear(d_model, vocab_size)

    def embed(self, tokens, offset=0):
        """tokens (B, n) -> embedding + positions offset.. (B, n, d)."""
        n = tokens.shape[1]
        pe = sinusoidal_encoding(offset + n, self.d_model)[offset:]  # (n, d)
        return self.embedding(tokens) + pe.to(tokens.device)  # (B, n, d)

    def encode(self, src, src_lengths=None, offset=0):
        """src (B, S) -> (memory (B, S, d), src_mask bool (B, 1, 1, S))."""
        if src_lengths is None:
            src_lengths = (src != PAD).sum(dim=1)  # (B,)
        src_mask = source_key_mask(src_lengths, src.shape[1])  # (B, 1, 1, S)
        return self.encoder(self.embed(src, offset), src_mask), src_mask

    def decode(self, memory, src_mask, tgt_in, offset=0, need_weights=False):
        """tgt_in (B, T) -> (logits (B, T, V), weights (B, h, T, S) or None)."""
        y, weights = self.decoder(
            self.embed(tgt_in, offset), memory, src_mask, need_weights
        )
        return self.out(y), weights  # (B, T, V)

    def forward(self, src, tgt_in, src_lengths=None):
        """Teacher forcing: src (B, S), tgt_in (B, T) -> logits (B, T, V)."""
        offset = 0
        if self.training and self.position_shift:
            offset = int(torch.randint(0, self.position_shift + 1, ()))
        memory, src_mask = self.encode(src, src_lengths, offset)
        return self.decode(memory, src_mask, tgt_in, offset)[0]

    def forward_with_attention(self, src, tgt_in, src_lengths=None,
                               average_heads=True):
        """(logits (B, T, V), cross-attention weights (B, T, S)).

        With average_heads=False the weights are per head (B, h, T, S).
        """
        memory, src_mask = self.encode(src, src_lengths)
        logits, w = self.decode(memory, src_mask, tgt_in, need_weights=True)
        return logits, w.mean(dim=1) if average_heads else w

    @torch.no_grad()
    def greedy_decode(self, src, max_len, src_lengths=None):
        """Greedy tokens (B, max_len), PAD after EOS."""
        return self.greedy_decode_with_attention(src, max_len, src_lengths)[0]

    @torch.no_grad()
    def greedy_decode_with_attention(self, src, max_len, src_lengths=None):
        """Greedy (tokens (B, max_len), mean weights (B, max_len, S)).

        Each step reruns the decoder on the whole prefix (no KV cache:
        chapter 08 adds one).
        """
        memory, src_mask = self.encode(src, src_lengths)
        weights = []

        def step(prev, prefix):  # prev (B,), prefix (B, t - 1)
            prefix = torch.cat([prefix, prev[:, None]], dim=1)  # (B, t)
            logits, w = self.decode(memory, src_mask, prefix, need_weights=True)
            weights.append(w[:, :, -1].mean(dim=1))  # step t's row: (B, S)
            return logits[:, -1], prefix  # (B, V)

        start = torch.zeros(len(src), 0, dtype=torch.long)  # the empty prefix
        tokens = greedy_decode_steps(step, start, len(src), max_len)
        return tokens, torch.stack(weights, dim=1)  # (B, max_len, S)


# fmt: on
class TinyStepModel(nn.Module):
    """A tiny, seeded decoder with cross attention, for the greedy-decoding exercise.

    `step(prev_tokens (B,), state) -> (logits (B, V), state)` where the state is
    the GRU hidden state (B, d_h); the memory (B, S, d_h) is fixed at construction.
    Untrained: its weights are random, `eos_bias` is added to the EOS logit so
    that different sequences end at different steps, and PAD and BOS are never
    predicted (their logits are -inf).
    """

    def __init__(
        self,
        batch_size: int,
        src_len: int,
        vocab_size: int = 6,
        hidden_dim: int = 8,
        seed: int = 0,
        eos_bias: float = 0.0,
    ):
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        self.embedding = nn.Parameter(torch.randn(vocab_size, hidden_dim, generator=gen))
        self.cell = nn.GRUCell(hidden_dim, hidden_dim)
        with torch.no_grad():
            for p in self.cell.parameters():
                p.copy_(torch.randn(p.shape, generator=gen) / math.sqrt(hidden_dim))
        self.w_out = nn.Parameter(torch.randn(2 * hidden_dim, vocab_size, generator=gen))
        # buffers, so that .to(device) and .double() move them with the weights
        memory = torch.randn(batch_size, src_len, hidden_dim, generator=gen)  # (B, S, d_h)
        self.register_buffer("memory", memory)
        self.register_buffer("h0", torch.randn(batch_size, hidden_dim, generator=gen))  # (B, d_h)
        self.eos_bias = eos_bias

    def initial_state(self) -> torch.Tensor:
        return self.h0.clone()

    @torch.no_grad()
    def step(self, prev_tokens: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.cell(self.embedding[prev_tokens], state)  # (B, d_h)
        context = scaled_dot_product_attention(h[:, None, :], self.memory, self.memory)[:, 0]  # (B, d_h)
        logits = torch.cat([h, context], dim=-1) @ self.w_out  # (B, 2 d_h) @ (2 d_h, V) -> (B, V)
        logits[:, EOS] += self.eos_bias
        logits[:, [PAD, BOS]] = float("-inf")  # never predicted
        return logits, h


# --------------------------------------------------------------------------- chapter 07's experiment
# Three models trained on the same batches, then measured; `experiment(seed)` is the whole of it, and
# attnlib.chapters.spread records its spread over seeds, float paths and thread counts (spreads/ch07.json).

MODEL_NAMES = ("full", "cross only", "GRU (ch. 01)")
STEPS, BATCH, TRAIN_LENGTHS = 300, 32, (1, 12)
TEST_LENGTHS = (2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 24)


# fmt: off
def build_model(name, vocab_size):
    """One of chapter 07's three models, by name (see MODEL_NAMES)."""
    from attnlib.chapters.seq2seq import Seq2SeqGRU

    if name == "GRU (ch. 01)":  # one context vector, no attention
        return Seq2SeqGRU(vocab_size, emb_dim=32, hidden_dim=64)
    if name not in MODEL_NAMES:
        raise ValueError(f"build_model: name must be one of {MODEL_NAMES}")
    return CrossAttentionSeq2Seq(
        vocab_size, d_model=32, num_heads=2, position_shift=24,
        self_attention=(name == "full"),
    )


def train_models(seed=0, steps=STEPS):
    """Train the three models from `seed` on the same batches.

    Every model starts from weights drawn after torch.manual_seed(seed)
    and sees the same `steps` batches of BATCH pairs of 1-12 digits
    (chapter 01's train_seq2seq, Adam, learning rate 3e-3). The global
    random state is left as it was.

    Returns
    -------
    (trained, losses): dicts keyed by MODEL_NAMES, the trained models
    and the loss of every step.
    """
    from attnlib.chapters.seq2seq import train_seq2seq

    def make_batch(generator):
        return digits_to_words_batch(BATCH, TRAIN_LENGTHS, generator)

    trained, losses = {}, {}
    for name in MODEL_NAMES:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)  # initial weights; position offsets
            model = build_model(name, len(digits_vocab()))
            losses[name] = train_seq2seq(model, make_batch, steps,
                                         lr=3e-3, seed=seed)
        trained[name] = model
    return trained, losses


def diagonal_share(weights):
    """Share of target rows whose largest weight is on the aligned token.

    weights (B, T, S): target word i is aligned with source token i.
    """
    T = weights.shape[1]
    aligned = weights.argmax(dim=-1) == torch.arange(T)  # (B, T)
    return aligned.float().mean().item()
# fmt: on


def held_out_generator(seed: int, offset: int) -> torch.Generator:
    """The generator of one test set: seeded 100000 * seed + offset (offset alone for seed 0)."""
    return torch.Generator().manual_seed(100_000 * seed + offset)


@torch.no_grad()
def measure(trained: dict, losses: dict, seed: int = 0) -> dict:
    """The numbers chapter 07 states about one run (see `experiment`).

    Parameters
    ----------
    trained, losses : dict
        As returned by `train_models`.
    seed : int
        Chooses the test sets (the chapter's are those of seed 0).

    Returns
    -------
    dict
        Per model (key "full", "cross" or "gru"): ``params_*``, ``loss_start_*`` and ``loss_*``
        (mean loss of the first 10 and of the last 20 steps),
        ``acc_*`` (greedy exact-sequence accuracy at each of TEST_LENGTHS, 100 numbers each),
        and on the same numbers ``tok_greedy_*`` and ``tok_forced_*`` (token accuracy: the share
        of target positions, words and ``<eos>``, right; greedy decoding, and one teacher-forced
        pass with the gold previous words, argmax at every position) and ``acc_forced_*`` (the
        teacher-forced pass's exact-sequence accuracy, equal to ``acc_*`` by construction); for the two
        Transformer models ``diag_*_10`` and ``diag_*_18`` (teacher-forced rows whose largest
        cross-attention weight is on the aligned token, 100 numbers); for the full model's two
        drawn examples (10 and 18 digits, greedy) ``example10_*`` and ``example18_*`` (exact, and
        the share of rows whose largest weight is on the aligned token).
    """
    from attnlib.chapters.seq2seq import exact_match, shift_right

    keys = dict(zip(MODEL_NAMES, ("full", "cross", "gru"), strict=True))
    out = {}
    for name, model in trained.items():
        key = keys[name]
        model.eval()
        out[f"params_{key}"] = sum(p.numel() for p in model.parameters())
        out[f"loss_start_{key}"] = float(sum(losses[name][:10]) / 10)
        out[f"loss_{key}"] = float(sum(losses[name][-20:]) / 20)
        scores = {"acc": [], "acc_forced": [], "tok_greedy": [], "tok_forced": []}
        for length in TEST_LENGTHS:
            src, tgt = digits_to_words_batch(100, length, held_out_generator(seed, 1000 + length))
            real = tgt != PAD  # (B, T); no PAD here: every number has `length` digits
            greedy = model.greedy_decode(src, tgt.shape[1])  # (B, T), its own predictions
            forced = model(src, shift_right(tgt)).argmax(dim=-1)  # (B, T), gold inputs
            for name_, pred in (("", greedy), ("_forced", forced)):
                scores[f"acc{name_}"].append(exact_match(pred, tgt).float().mean().item())
            for name_, pred in (("greedy", greedy), ("forced", forced)):
                right = ((pred == tgt) & real).sum().item() / real.sum().item()
                scores[f"tok_{name_}"].append(right)
        for metric, values in scores.items():
            out[f"{metric}_{key}"] = values
        if key != "gru":
            for length in (10, 18):
                src, tgt = digits_to_words_batch(100, length, held_out_generator(seed, 500 + length))
                _, w = model.forward_with_attention(src, shift_right(tgt))  # (B, T, S)
                out[f"diag_{key}_{length}"] = diagonal_share(w)
    full = trained["full"]
    for length, offset in ((10, 7), (18, 3)):
        src, tgt = digits_to_words_batch(1, length, held_out_generator(seed, offset))
        pred, w = full.greedy_decode_with_attention(src, tgt.shape[1])  # (1, T), (1, T, S)
        out[f"example{length}_exact"] = float(exact_match(pred, tgt)[0])
        out[f"example{length}_diag"] = diagonal_share(w)
    return out


def experiment(seed: int = 0) -> dict:
    """Chapter 07's experiment for one seed: train the three models, then `measure` them."""
    trained, losses = train_models(seed)
    return measure(trained, losses, seed)
