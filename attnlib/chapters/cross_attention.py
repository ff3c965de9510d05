"""Cross attention: a decoder that looks at the encoder's states at every step.

Chapter 07 builds it. The queries come from the decoder, the keys and the
values from the encoder, so the query length T (target positions) and the key
length S (source positions) differ. Padded source positions are hidden by a
key padding mask of shape (B, 1, 1, S) that broadcasts over the heads and over
the T target positions. Cross attention has no causal mask: every target
position may read the whole source.

Token conventions are those of chapter 01 (`attnlib.chapters.seq2seq`): PAD = 0,
BOS = 1, EOS = 2.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from attnlib._validate import as_shape
from attnlib.attention import scaled_dot_product_attention
from attnlib.chapters.seq2seq import BOS, EOS, PAD
from attnlib.masks import causal_mask
from attnlib.modules import MultiHeadAttention

__all__ = [
    "BOS",
    "DIGIT_WORDS",
    "EOS",
    "PAD",
    "CrossAttentionSeq2Seq",
    "TinyStepModel",
    "cross_attention",
    "decoder_masks",
    "digits_to_words_batch",
    "digits_vocab",
    "greedy_decode_steps",
    "sinusoidal_positions",
    "source_key_mask",
    "token_strings",
]

DIGIT_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


# --------------------------------------------------------------------------- masks and the functional form


def source_key_mask(src_lengths: torch.Tensor, src_len: int | None = None) -> torch.Tensor:
    """The cross-attention mask of a right-padded source batch.

    Args:
        src_lengths: (B,) integer tensor, the true source lengths.
        src_len: S, the padded source length; defaults to max(src_lengths).

    Returns:
        bool (B, 1, 1, S), True at the real source tokens (j < src_lengths[b]).
        It broadcasts over the heads and over the T target positions of the
        scores (B, h, T, S).

    Raises:
        ValueError: lengths that are not 1-D integers in [0, S].
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
    positions = torch.arange(S, device=src_lengths.device)  # (S,)
    mask = positions[None, :] < src_lengths[:, None]  # (B, S)
    return mask[:, None, None, :]  # (B, 1, 1, S)


def decoder_masks(
    src_lengths: torch.Tensor, src_len: int, tgt_len: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The two masks of a Transformer decoder layer.

    Args:
        src_lengths: (B,) integer tensor, the true source lengths.
        src_len: S, the padded source length.
        tgt_len: T, the number of target positions.

    Returns:
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

    Args:
        decoder_states: (B, T, D_dec), one state per target position.
        encoder_states: (B, S, D_enc), one state per source position.
        w_q: (D_dec, d_k), w_k: (D_enc, d_k), w_v: (D_enc, d_v).
        source_mask: None, or bool (B, S) with True at real source tokens.

    Returns:
        `(output, weights)`: output (B, T, d_v), weights (B, T, S); each row of
        weights sums to 1 over the real source tokens.

    Raises:
        ValueError: shapes that do not fit together (named in the message).
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
    if w_q.shape[0] != D_dec or w_k.shape[0] != D_enc or w_v.shape[0] != D_enc or w_q.shape[1] != w_k.shape[1]:  # noqa: E501
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


def digits_vocab() -> list[str]:
    """The shared vocabulary: PAD, BOS, EOS, the ten digits, the ten digit words (23 tokens)."""
    return ["<pad>", "<bos>", "<eos>", *(str(d) for d in range(10)), *DIGIT_WORDS]


def digits_to_words_batch(
    batch_size: int,
    length,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """A batch of the task "read a digit string aloud": 4 0 7 <eos> -> four zero seven <eos>.

    Args:
        batch_size: B.
        length: number of digits, an int or a range (min, max), both included.
        generator: a seeded torch.Generator.

    Returns:
        `(src, tgt)` as in `attnlib.chapters.seq2seq`: src (B, S) = digit tokens (3 + d)
        then EOS, tgt (B, S) = word tokens (13 + d) then EOS, right-padded with
        PAD; S = 1 + the longest length. See `digits_vocab` for the names.
    """
    lo, hi = (length, length) if isinstance(length, int) else (int(length[0]), int(length[1]))
    if not 1 <= lo <= hi:
        raise ValueError(
            f"digits_to_words_batch: length must be >= 1 or (min, max) with 1 <= min <= max, got {length}"
        )
    lengths = torch.randint(lo, hi + 1, (batch_size,), generator=generator)  # (B,)
    S = int(lengths.max()) + 1
    digits = torch.randint(0, 10, (batch_size, S), generator=generator)  # (B, S)
    position = torch.arange(S)[None, :]  # (1, S)
    real = position < lengths[:, None]  # (B, S)
    eos = position == lengths[:, None]  # (B, S)
    src = torch.where(real, digits + 3, torch.where(eos, EOS, PAD))  # (B, S)
    tgt = torch.where(real, digits + 13, torch.where(eos, EOS, PAD))  # (B, S)
    return src, tgt


def token_strings(ids, vocab: list[str], stop_at_eos: bool = True) -> list[str]:
    """Token ids -> token names, PAD dropped (and nothing after the first EOS)."""
    out = []
    for i in [int(t) for t in ids]:
        if i == PAD:
            continue
        out.append(vocab[i])
        if stop_at_eos and i == EOS:
            break
    return out


# --------------------------------------------------------------------------- greedy decoding


def greedy_decode_steps(
    step: Callable[[torch.Tensor, object], tuple[torch.Tensor, object]],
    state: object,
    batch_size: int,
    max_len: int,
) -> torch.Tensor:
    """Greedy decoding with any step function.

    Args:
        step: `step(prev_tokens (B,), state) -> (logits (B, V), new_state)`.
        state: the decoder state before the first step.
        batch_size: B.
        max_len: number of tokens to produce.

    Returns:
        long (B, max_len): at each step the argmax token, fed back as the next
        input; after a sequence has produced EOS it holds PAD.
    """
    prev = torch.full((batch_size,), BOS, dtype=torch.long)  # (B,)
    finished = torch.zeros(batch_size, dtype=torch.bool)  # (B,)
    out = []
    for _ in range(max_len):
        logits, state = step(prev, state)  # (B, V)
        token = logits.argmax(dim=-1)  # (B,)
        token = torch.where(finished, PAD, token)  # PAD after EOS
        out.append(token)
        finished = finished | (token == EOS)
        prev = token  # feed the prediction back, never the gold token
    return torch.stack(out, dim=1)  # (B, max_len)


# --------------------------------------------------------------------------- the model


def sinusoidal_positions(length: int, dim: int) -> torch.Tensor:
    """Vaswani et al.'s position encodings (length, dim): sin and cos of position / 10000^(2i/dim).

    Defined for any length, so a model can be run on sequences longer than it was trained on.
    """
    position = torch.arange(length, dtype=torch.float32)[:, None]  # (length, 1)
    freq = torch.exp(-math.log(10000.0) * torch.arange(0, dim, 2, dtype=torch.float32) / dim)  # (dim/2,)
    angles = position * freq  # (length, dim/2)
    pe = torch.zeros(length, dim)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(angles), torch.cos(angles)
    return pe  # (length, dim)


class _Block(nn.Module):
    """Residual attention sub-layer (optional), residual feed-forward sub-layer, post-norm."""

    def __init__(self, d_model: int, num_heads: int, ffn_dim: int, cross: bool):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads)
        self.norm1 = nn.LayerNorm(d_model)
        self.cross_attn = MultiHeadAttention(d_model, num_heads) if cross else None
        self.norm2 = nn.LayerNorm(d_model) if cross else None
        self.ffn = nn.Sequential(nn.Linear(d_model, ffn_dim), nn.ReLU(), nn.Linear(ffn_dim, d_model))
        self.norm3 = nn.LayerNorm(d_model)


class CrossAttentionSeq2Seq(nn.Module):
    """A one-layer Transformer-style encoder-decoder (Vaswani et al. 2017), small enough for a CPU.

    Encoder: token embedding + sinusoidal positions, self-attention over the
    source with the key padding mask (B, 1, 1, S), feed-forward. Decoder: token
    embedding + positions, *causal* self-attention over the target prefix
    (mask (T, T)), then **cross attention**: queries from the decoder (B, T, d),
    keys and values from the encoder (B, S, d), the source mask (B, 1, 1, S) and
    no causal mask; feed-forward; a linear layer to the vocabulary. Every
    sub-layer is residual and followed by LayerNorm.

    Same `forward(src, tgt_in, src_lengths=None)` and
    `greedy_decode(src, max_len, src_lengths=None)` as `attnlib.chapters.seq2seq.Seq2SeqGRU`.

    Args:
        vocab_size: V, shared by source and target.
        d_model: d, size of embeddings, states and attention.
        num_heads: h; d must be divisible by it.
        ffn_dim: hidden size of the feed-forward sub-layers (default 2d).
    """

    def __init__(
        self,
        vocab_size: int,
        d_model: int = 32,
        num_heads: int = 2,
        ffn_dim: int | None = None,
        self_attention: bool = True,
        position_shift: int = 0,
    ):
        super().__init__()
        self.vocab_size, self.d_model, self.num_heads = vocab_size, d_model, num_heads
        self.self_attention, self.position_shift = self_attention, position_shift
        self._shift = 0
        ffn_dim = ffn_dim or 2 * d_model
        self.embedding = nn.Embedding(vocab_size, d_model, padding_idx=PAD)
        self.enc = _Block(d_model, num_heads, ffn_dim, cross=False)
        self.dec = _Block(d_model, num_heads, ffn_dim, cross=True)
        self.out = nn.Linear(d_model, vocab_size)

    def _embed(self, tokens: torch.Tensor) -> torch.Tensor:
        T = tokens.shape[1]
        pe = sinusoidal_positions(self._shift + T, self.d_model)[self._shift :].to(tokens.device)  # (T, d)
        return self.embedding(tokens) + pe  # (B, T, d)

    def encode(
        self, src: torch.Tensor, src_lengths: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """src (B, S) -> (memory (B, S, d), source mask bool (B, 1, 1, S))."""
        if not isinstance(src, torch.Tensor) or src.dim() != 2:
            shape = as_shape(src.shape) if isinstance(src, torch.Tensor) else type(src).__name__
            raise ValueError(f"CrossAttentionSeq2Seq.encode: expected src (B, S), got {shape}")
        if src_lengths is None:
            src_lengths = (src != PAD).sum(dim=1)  # (B,)
        src_mask = source_key_mask(torch.as_tensor(src_lengths).to(src.device), src.shape[1])  # (B, 1, 1, S)
        x = self._embed(src)  # (B, S, d)
        if self.self_attention:
            a, _ = self.enc.self_attn(x, x, x, attn_mask=src_mask)  # (B, S, d); padded keys hidden
            x = self.enc.norm1(x + a)
        memory = self.enc.norm3(x + self.enc.ffn(x))  # (B, S, d)
        return memory, src_mask

    def decode(
        self,
        memory: torch.Tensor,
        src_mask: torch.Tensor,
        tgt_in: torch.Tensor,
        need_weights: bool = False,
        average_heads: bool = True,
    ):
        """Teacher-forced decoder: tgt_in (B, T) -> logits (B, T, V), and the cross-attention
        weights (B, T, S) (averaged) or (B, h, T, S) (per head) or None."""
        y = self._embed(tgt_in)  # (B, T, d)
        if self.self_attention:
            a, _ = self.dec.self_attn(y, y, y, is_causal=True)  # (B, T, d); position t sees <= t
            y = self.dec.norm1(y + a)
        c, weights = self.dec.cross_attn(
            y, memory, memory, attn_mask=src_mask, need_weights=need_weights,
            average_attn_weights=average_heads,
        )  # queries (B, T, d) from the decoder; keys, values (B, S, d) from the encoder
        y = self.dec.norm2(y + c)
        y = self.dec.norm3(y + self.dec.ffn(y))
        return self.out(y), weights  # (B, T, V)

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor, src_lengths: torch.Tensor | None = None):
        """Teacher forcing: src (B, S), tgt_in (B, T) -> logits (B, T, V)."""
        if self.training and self.position_shift:
            self._shift = int(torch.randint(0, self.position_shift + 1, ()))
        memory, src_mask = self.encode(src, src_lengths)
        logits = self.decode(memory, src_mask, tgt_in)[0]
        self._shift = 0
        return logits

    def forward_with_attention(
        self,
        src: torch.Tensor,
        tgt_in: torch.Tensor,
        src_lengths: torch.Tensor | None = None,
        average_heads: bool = True,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Logits (B, T, V) and cross-attention weights (B, T, S), or (B, h, T, S) per head."""
        memory, src_mask = self.encode(src, src_lengths)
        return self.decode(memory, src_mask, tgt_in, need_weights=True, average_heads=average_heads)

    def start(self, src: torch.Tensor, src_lengths: torch.Tensor | None = None) -> dict:
        """The decoding state before the first step: the encoder's memory and the empty prefix."""
        memory, src_mask = self.encode(src, src_lengths)
        prefix = torch.zeros(src.shape[0], 0, dtype=torch.long, device=src.device)
        return {"memory": memory, "src_mask": src_mask, "prefix": prefix, "weights": None}

    def step(self, prev_tokens: torch.Tensor, state: dict) -> tuple[torch.Tensor, dict]:
        """One decoding step: prev_tokens (B,) -> next-token logits (B, V) and the new state.

        The decoder reruns on the whole prefix (no KV cache: chapter 08 adds one);
        state["weights"] holds the cross-attention weights (B, t, S) of the prefix.
        """
        prefix = torch.cat([state["prefix"], prev_tokens[:, None]], dim=1)  # (B, t)
        logits, weights = self.decode(state["memory"], state["src_mask"], prefix, need_weights=True)
        return logits[:, -1], dict(state, prefix=prefix, weights=weights)  # (B, V)

    @torch.no_grad()
    def greedy_decode(
        self,
        src: torch.Tensor,
        max_len: int,
        src_lengths: torch.Tensor | None = None,
        return_weights: bool = False,
    ):
        """Greedy tokens (B, max_len), PAD after EOS; with `return_weights` also the
        cross-attention weights (B, max_len, S) of every step (averaged over heads)."""
        was_training = self.training
        self.eval()
        final = {}

        def step(prev, state):
            logits, state = self.step(prev, state)
            final["state"] = state
            return logits, state

        tokens = greedy_decode_steps(step, self.start(src, src_lengths), src.shape[0], max_len)
        self.train(was_training)
        if return_weights:
            return tokens, final["state"]["weights"]  # (B, max_len, S)
        return tokens


class TinyStepModel(nn.Module):
    """A tiny, seeded decoder with cross attention, for the greedy-decoding exercise.

    `step(prev_tokens (B,), state) -> (logits (B, V), state)` where the state is
    the GRU hidden state (B, H); the memory (B, S, H) is fixed at construction.
    Untrained: its weights are random, `eos_bias` is added to the EOS logit so
    that different sequences end at different steps, and PAD and BOS are never
    predicted (their logits are -inf).
    """

    def __init__(self, batch_size: int, src_len: int, vocab_size: int = 6, hidden_dim: int = 8,
                 seed: int = 0, eos_bias: float = 0.0):
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        self.embedding = nn.Parameter(torch.randn(vocab_size, hidden_dim, generator=gen))
        self.cell = nn.GRUCell(hidden_dim, hidden_dim)
        with torch.no_grad():
            for p in self.cell.parameters():
                p.copy_(torch.randn(p.shape, generator=gen) / math.sqrt(hidden_dim))
        self.w_out = nn.Parameter(torch.randn(2 * hidden_dim, vocab_size, generator=gen))
        self.memory = torch.randn(batch_size, src_len, hidden_dim, generator=gen)  # (B, S, H)
        self.h0 = torch.randn(batch_size, hidden_dim, generator=gen)  # (B, H)
        self.eos_bias = eos_bias

    def initial_state(self) -> torch.Tensor:
        return self.h0.clone()

    @torch.no_grad()
    def step(self, prev_tokens: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.cell(self.embedding[prev_tokens], state)  # (B, H)
        context = scaled_dot_product_attention(h[:, None, :], self.memory, self.memory)[:, 0]  # (B, H)
        logits = torch.cat([h, context], dim=-1) @ self.w_out  # (B, 2H) @ (2H, V) -> (B, V)
        logits[:, EOS] += self.eos_bias
        logits[:, [PAD, BOS]] = float("-inf")  # never predicted
        return logits, h
