"""Chapter 07 exercises: cross-attention forward, the source mask, greedy decoding with attention."""

import math

import torch

from attnlib.attention import scaled_dot_product_attention
from attnlib.chapters.cross_attention import (
    TinyStepModel,
    cross_attention,
    decoder_masks,
    greedy_decode_steps,
    source_key_mask,
)
from attnlib.chapters.seq2seq import BOS, EOS, PAD
from attnlib.checks._cases import cases, inverted
from attnlib.checks.core import Exercise, Misconception, register
from attnlib.checks.exercise import register_written
from attnlib.checks.rules import ATTENTION_IMPLEMENTATIONS

# --------------------------------------------------------------------------- ex-07-1 cross-attention forward


def _cross_inputs(B, T, S, D_dec, D_enc, d_k, d_v, lengths, seed):
    gen = torch.Generator().manual_seed(seed)

    def randn(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float64)

    mask = torch.arange(S)[None, :] < torch.tensor(lengths)[:, None]  # (B, S)
    states = (randn(B, T, D_dec), randn(B, S, D_enc))
    return (*states, randn(D_dec, d_k), randn(D_enc, d_k), randn(D_enc, d_v), mask)


def _attend(q, k, v, mask, scale=None, causal=False):
    return scaled_dot_product_attention(
        q, k, v, attn_mask=mask, scale=scale, is_causal=causal, return_weights=True
    )


def _swapped_roles(dec, enc, w_q, w_k, w_v, mask):
    # queries from the encoder, keys and values from the decoder; the source mask no longer fits
    return _attend(enc @ w_q, dec @ w_k, dec @ w_v, None)


def _causal(dec, enc, w_q, w_k, w_v, mask):
    return _attend(dec @ w_q, enc @ w_k, enc @ w_v, mask[:, None, :], causal=True)


def _no_mask(dec, enc, w_q, w_k, w_v, mask):
    return _attend(dec @ w_q, enc @ w_k, enc @ w_v, None)


def _inverted_mask(dec, enc, w_q, w_k, w_v, mask):
    return _attend(dec @ w_q, enc @ w_k, enc @ w_v, ~mask[:, None, :])


def _no_scale(dec, enc, w_q, w_k, w_v, mask):
    return _attend(dec @ w_q, enc @ w_k, enc @ w_v, mask[:, None, :], scale=1.0)


def _model_scale(dec, enc, w_q, w_k, w_v, mask):
    return _attend(dec @ w_q, enc @ w_k, enc @ w_v, mask[:, None, :], scale=1.0 / math.sqrt(dec.shape[-1]))


def _softmax_over_targets(dec, enc, w_q, w_k, w_v, mask):
    q, k, v = dec @ w_q, enc @ w_k, enc @ w_v
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, T, S)
    scores = scores.masked_fill(~mask[:, None, :], float("-inf"))
    weights = torch.softmax(scores, dim=-2)  # over the T target positions: wrong
    return weights @ v, weights


def _mask_after_softmax(dec, enc, w_q, w_k, w_v, mask):
    q, k, v = dec @ w_q, enc @ w_k, enc @ w_v
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
    weights = weights * mask[:, None, :]  # zeroed, not renormalised
    return weights @ v, weights


register(
    Exercise(
        id="ex-07-1",
        function="cross_attention",
        reference=cross_attention,
        cases=cases(
            None,
            {
                "one sentence: T=3 targets, S=5 sources (2 padded), D=4, d_k=d_v=2": lambda: _cross_inputs(
                    1, 3, 5, 4, 4, 2, 2, [3], 0
                ),
                "batch of 2, source lengths 5 and 2, T=4, S=6, D=6, d_k=3, d_v=2": lambda: _cross_inputs(
                    2, 4, 6, 6, 6, 3, 2, [5, 2], 1
                ),
                "one decoding step (T=1), D_dec=5 != D_enc=3, S=4, lengths 3 and 1": lambda: _cross_inputs(
                    2, 1, 4, 5, 3, 2, 3, [3, 1], 2
                ),
                "hidden: batch of 3, T=6 > S=4, D=8, d_k=4, d_v=5": lambda: _cross_inputs(
                    3, 6, 4, 8, 8, 4, 5, [4, 2, 3], 3
                ),
            },
        ),
        misconceptions=[
            Misconception(
                "queries from the encoder and keys/values from the decoder (roles swapped)",
                _swapped_roles,
                "in cross attention the decoder asks and the encoder answers: the queries are "
                "projections of the decoder states, the keys and values projections of the encoder "
                "states; the output has one row per target position, (B, T, d_v).",
            ),
            Misconception(
                "a causal mask in cross attention",
                _causal,
                "the causal mask belongs to the decoder's self-attention; every target position may"
                " read the whole source, so cross attention uses only the source (padding) mask.",
            ),
            Misconception(
                "the source mask is ignored",
                _no_mask,
                "padded source positions must get weight 0: apply source_mask, reshaped to (B, 1, S)"
                " so that it broadcasts over the T target positions, before the softmax.",
            ),
            Misconception(
                "the mask is inverted (attends only to the padding)",
                _inverted_mask,
                "True in source_mask means a real token that may be attended; fill the scores with"
                " -inf where the mask is False.",
            ),
            Misconception(
                "no 1/sqrt(d_k) scaling",
                _no_scale,
                "divide the scores q k^T by sqrt(d_k), the size of a query/key (w_q.shape[1]).",
            ),
            Misconception(
                "scaled by sqrt(D_dec) (the model size) instead of sqrt(d_k)",
                _model_scale,
                "the scale is 1/sqrt(d_k) with d_k = w_q.shape[1], the size after the projection.",
            ),
            Misconception(
                "softmax over the target axis instead of the source axis",
                _softmax_over_targets,
                "each target position's weights are a distribution over the S source positions:"
                " softmax over the last axis (dim=-1) of the (B, T, S) scores.",
            ),
            Misconception(
                "the mask is applied after the softmax (rows no longer sum to 1)",
                _mask_after_softmax,
                "mask the scores with -inf before the softmax, so that the real source positions"
                " share all of the weight.",
            ),
        ],
        rtol=1e-6,
        atol=1e-9,
        forbidden=ATTENTION_IMPLEMENTATIONS + ("attnlib.chapters.cross_attention.cross_attention",),
        hints=(
            "the decoder asks, the encoder answers: queries come from the target side, keys and"
            " values from the source side, and padded source positions get no weight.",
            "project the three, compare every target position with every source position (B, T, S),"
            " scale by the size of one query, block the padding before a softmax over the source"
            " axis, then average the values.",
            "queries from the decoder states, keys and values from the encoder states; scores (B, T, S)"
            " scaled by the square root of the query size; -inf where source_mask is False (insert an "
            "axis for T so it broadcasts); softmax over S; the weights mix the values. Return the "
            "output and the weights.",
        ),
    )
)


# --------------------------------------------------------------------------- ex-07-2 the source mask


def _mask_inputs(lengths, *sizes):
    """The inputs of ex-07-2 (lengths, S) and of ex-07-4 (lengths, S, T), the lengths as a tensor."""
    return torch.tensor(lengths), *sizes


def _mask_2d(lengths, S):
    return torch.arange(S)[None, :] < lengths[:, None]  # (B, S)


register(
    Exercise(
        id="ex-07-2",
        function="source_mask",
        reference=source_key_mask,
        cases=cases(
            _mask_inputs,
            {
                "lengths [3, 1, 4], S=4": ([3, 1, 4], 4),
                "lengths [2, 5], S=6 (the last column is padding everywhere)": ([2, 5], 6),
                "one sequence without padding: lengths [3], S=3": ([3], 3),
                "hidden: lengths [4, 2, 5, 1], S=5": ([4, 2, 5, 1], 5),
                "hidden: an empty source, lengths [0, 2], S=2": ([0, 2], 2),
            },
        ),
        misconceptions=[
            Misconception(
                "the mask is inverted (True at the padding)",
                inverted(source_key_mask),
                "True means may attend: True at the real tokens, positions j < length.",
            ),
            Misconception(
                "off by one: positions j <= length",
                lambda lengths, S: (torch.arange(S)[None, :] <= lengths[:, None])[:, None, None, :],
                "positions are counted from 0, so a source of length n has real tokens at 0 ... n-1: j < n.",
            ),
            Misconception(
                "shape (B, S, 1): the mask would run along the target axis",
                lambda lengths, S: _mask_2d(lengths, S)[:, :, None],
                "the scores are (B, h, T, S): the source axis is the last one. Put the S positions"
                " last and size-1 axes for heads and targets: (B, 1, 1, S).",
            ),
            Misconception(
                "shape (B, 1, S, 1): the source positions on the target axis",
                lambda lengths, S: _mask_2d(lengths, S)[:, None, :, None],
                "the source axis is the last one of the scores (B, h, T, S): the S positions go last,"
                " with size-1 axes for the heads and the targets before them.",
            ),
            Misconception(
                "shape (B, S): does not broadcast over heads and targets",
                _mask_2d,
                "(B, S) against scores (B, h, T, S) would align B with T and S with S; insert size-1 "
                "axes for the heads and the targets: (B, 1, 1, S).",
            ),
            Misconception(
                "shape (B, 1, S): fits single-head scores (B, T, S) but not (B, h, T, S)",
                lambda lengths, S: _mask_2d(lengths, S)[:, None, :],
                "with heads the scores have four axes; (B, 1, S) would line B up with the heads."
                " Use (B, 1, 1, S).",
            ),
        ],
        forbidden=(
            "attnlib.chapters.cross_attention.source_key_mask",
            "attnlib.masks.padding_mask",
            "attnlib.padding_mask",
        ),
        hints=(
            "a source position may be attended when it holds a real token, i.e. its index is below"
            " that sequence's length; the mask must broadcast against scores (B, h, T, S).",
            "build the (B, S) comparison of positions with lengths, then give it size-1 axes for the"
            " heads and the target positions.",
            "compare a row of source positions with a column of lengths (True where the position is "
            "before its sequence's end), then add the axes that the (B, heads, T, S) scores need so the"
            " bool mask broadcasts over heads and queries.",
        ),
    )
)


# --------------------------------------------------------------------------- ex-07-3 greedy decoding


def _decode_inputs(batch_size, src_len, seed, eos_bias, max_len):
    model = TinyStepModel(batch_size, src_len, seed=seed, eos_bias=eos_bias)
    return model.step, model.initial_state(), batch_size, max_len


def _greedy_variant(*, pad_after=True, pad_eos=False, feed_bos=False, stop_batch=False):
    """A greedy decoder with one of the mistakes of ex-07-3 switched on (by default: none)."""

    def decode(step, state, batch_size, max_len):
        prev = torch.full((batch_size,), BOS, dtype=torch.long)
        finished = torch.zeros(batch_size, dtype=torch.bool)
        out = []
        for _ in range(max_len):
            logits, state = step(prev, state)
            token = logits.argmax(dim=-1)
            if pad_after:
                token = torch.where(finished, PAD, token)
            is_eos = token == EOS
            finished = finished | is_eos
            out.append(torch.where(is_eos, PAD, token) if pad_eos else token)
            prev = torch.full_like(token, BOS) if feed_bos else token
            if stop_batch and is_eos.any():
                break
        return torch.stack(out, dim=1)

    return decode


register(
    Exercise(
        id="ex-07-3",
        function="greedy_decode",
        reference=greedy_decode_steps,
        cases=cases(
            _decode_inputs,
            {
                "4 sequences, max_len=8 (seed 7): they end at different steps": (4, 5, 7, 0.0, 8),
                "4 sequences, max_len=8 (seed 12): one never ends": (4, 5, 12, 0.0, 8),
                "4 sequences, max_len=6 (seed 2, EOS bias 1)": (4, 5, 2, 1.0, 6),
                "hidden: 4 sequences, max_len=8 (seed 17, EOS bias 1)": (4, 5, 17, 1.0, 8),
                "hidden: one sequence, one step": (1, 3, 5, 0.0, 1),
                "hidden: 3 sequences, max_len=10 (seed 4, EOS bias 2)": (3, 4, 4, 2.0, 10),
            },
        ),
        misconceptions=[
            Misconception(
                "does not stop at EOS: tokens after EOS are kept",
                _greedy_variant(pad_after=False),
                "once a sequence has produced EOS it is finished: every later position holds PAD.",
            ),
            Misconception(
                "the EOS itself is replaced by PAD",
                _greedy_variant(pad_eos=True),
                "keep the EOS token in the output; only the positions after it become PAD.",
            ),
            Misconception(
                "feeds BOS (a fixed token) at every step instead of the prediction",
                _greedy_variant(feed_bos=True),
                "at inference there is no gold token: the next input is the token just predicted.",
            ),
            Misconception(
                "stops the whole batch when the first sequence ends",
                _greedy_variant(stop_batch=True),
                "sequences end at different steps: run all max_len steps (the output is (B, max_len))"
                " and PAD only the finished rows.",
            ),
        ],
        forbidden=("attnlib.chapters.cross_attention.greedy_decode_steps",),
        hints=(
            "at inference there is no gold token: each step's most likely token is the next step's"
            " input, and a finished sequence writes only PAD after its EOS.",
            "keep, for every row, whether it has produced EOS yet; run all max_len steps for the whole"
            " batch, and keep the EOS itself.",
            "start every row from BOS; at each of max_len steps feed the previous token and the state "
            "to step and keep the arg-max; rows that already produced EOS get PAD; remember which rows "
            "have just finished, and feed each step's token to the next.",
        ),
    )
)


# --------------------------------------------------------------------------- ex-07-4 which mask where


register(
    Exercise(
        id="ex-07-4",
        function="decoder_masks",
        reference=decoder_masks,
        cases=cases(
            _mask_inputs,
            {
                "lengths [3, 2], S=4, T=3": ([3, 2], 4, 3),
                "lengths [1, 4, 2], S=5, T=4": ([1, 4, 2], 5, 4),
                "one pair, S=2, T=5 (more targets than sources)": ([2], 2, 5),
                "hidden: lengths [5, 3], S=6, T=6": ([5, 3], 6, 6),
                "hidden: one target position, lengths [1, 3], S=3, T=1": ([1, 3], 3, 1),
            },
        ),
        misconceptions=[
            Misconception(
                "a causal mask in the cross attention too",
                lambda lengths, S, T: (
                    torch.ones(T, T, dtype=torch.bool).tril(),
                    source_key_mask(lengths, S) & torch.ones(T, S, dtype=torch.bool).tril(),
                ),
                "cross attention reads the source, which is known in full before decoding starts:"
                " its mask is only the padding mask (B, 1, 1, S). The causal mask is for self-attention.",
            ),
            Misconception(
                "no causal mask in the decoder's self-attention",
                lambda lengths, S, T: (torch.ones(T, T, dtype=torch.bool), source_key_mask(lengths, S)),
                "in self-attention target position t must not see positions after t (the words it is"
                " about to predict): a lower-triangular (T, T) mask.",
            ),
            Misconception(
                "the causal mask is transposed (upper triangular: attends to the future)",
                lambda lengths, S, T: (
                    torch.ones(T, T, dtype=torch.bool).triu(),
                    source_key_mask(lengths, S),
                ),
                "row t (the query) may see columns j <= t: torch.tril, not torch.triu.",
            ),
            Misconception(
                "the two masks returned in the wrong order (cross mask first)",
                lambda lengths, S, T: (
                    source_key_mask(lengths, S),
                    torch.ones(T, T, dtype=torch.bool).tril(),
                ),
                "return (self_mask, cross_mask): the decoder's causal (T, T) mask first.",
            ),
            Misconception(
                "the cross mask has shape (B, S): not broadcast over heads and targets",
                lambda lengths, S, T: (torch.ones(T, T, dtype=torch.bool).tril(), _mask_2d(lengths, S)),
                "give the cross mask size-1 axes for heads and target positions: (B, 1, 1, S).",
            ),
        ],
        forbidden=("attnlib.chapters.cross_attention.decoder_masks",),
        hints=(
            "the decoder's self-attention must not see the future of the target; the cross"
            " attention reads a source that is known in full and only has to skip its padding.",
            "return two masks, in this order: one (T, T) for the self-attention, one that broadcasts"
            " against (B, h, T, S) for the cross attention.",
            "self_mask: exercise 05.2's causal mask for T queries and T keys (booleans, the lower "
            "triangle with its diagonal); cross_mask: the (B, 1, 1, S) source mask of exercise 07.2.",
        ),
    )
)


# --------------------------------------------------------------------------- ex-07-5 decoder layer forward
# (appended by the chapters-01-02-07 helper: the learner writes the decoder step of chapter 07's model)


def decoder_layer_forward(layer, y, memory, src_mask):
    """Chapter 07's DecoderLayer: causal self-attention, cross attention, feed-forward, post-norm.

    layer: an attnlib.chapters.cross_attention.DecoderLayer; y (B, T, d) the decoder's
    inputs; memory (B, S, d) the encoder's output; src_mask bool (B, 1, 1, S). -> (B, T, d).
    """
    a, _ = layer.self_attn(y, y, y, is_causal=True)  # target t reads targets <= t
    y = layer.norm1(y + a)
    c, _ = layer.cross_attn(y, memory, memory, attn_mask=src_mask)  # queries from the decoder
    y = layer.norm2(y + c)
    return layer.norm3(y + layer.ffn(y))  # (B, T, d)


def _decoder_layer_inputs(seed, B, T, S, lengths, d_model=8, num_heads=2):
    from attnlib.chapters.cross_attention import DecoderLayer
    from attnlib.checks.core import reset_parameters

    def make():
        g = torch.Generator().manual_seed(seed)
        layer = reset_parameters(DecoderLayer(d_model, num_heads, 2 * d_model), g).double()
        with torch.no_grad():  # LayerNorm gains near 1, so that every sub-layer shows
            for norm in (layer.norm1, layer.norm2, layer.norm3):
                norm.weight.add_(1.0)
        y = torch.randn(B, T, d_model, generator=g, dtype=torch.float64)
        memory = torch.randn(B, S, d_model, generator=g, dtype=torch.float64)
        return layer.eval(), y, memory, source_key_mask(torch.tensor(lengths), S)

    return make


def _layer_variant(causal_self=True, causal_cross=False, source_mask=True, residual=True, pre_norm=False):
    def forward(layer, y, memory, src_mask):
        def sub(x, norm, fn):
            if pre_norm:
                return x + fn(norm(x))
            return norm(x + fn(x)) if residual else norm(fn(x))

        y = sub(y, layer.norm1, lambda x: layer.self_attn(x, x, x, is_causal=causal_self)[0])
        mask = src_mask if source_mask else None
        y = sub(
            y,
            layer.norm2,
            lambda x: layer.cross_attn(x, memory, memory, attn_mask=mask, is_causal=causal_cross)[0],
        )
        return sub(y, layer.norm3, layer.ffn)

    return forward


def _no_self_attention(layer, y, memory, src_mask):
    c, _ = layer.cross_attn(y, memory, memory, attn_mask=src_mask)
    y = layer.norm2(y + c)
    return layer.norm3(y + layer.ffn(y))


def _roles_swapped(layer, y, memory, src_mask):
    a, _ = layer.self_attn(y, y, y, is_causal=True)
    y = layer.norm1(y + a)
    c, _ = layer.cross_attn(memory, y, y)  # queries from the encoder
    return layer.norm3(c + layer.ffn(c))


register(
    Exercise(
        id="ex-07-5",
        function="decoder_layer_forward",
        reference=decoder_layer_forward,
        cases=cases(
            None,
            {
                "batch of 2, T=4 targets, S=5 sources (lengths 5 and 3)": _decoder_layer_inputs(
                    1, 2, 4, 5, [5, 3]
                ),
                "one step: T=1, S=3, lengths 2": _decoder_layer_inputs(2, 1, 1, 3, [2]),
                "more targets than sources: T=6, S=2, lengths 2 and 1": _decoder_layer_inputs(
                    3, 2, 6, 2, [2, 1]
                ),
                "hidden: batch of 3, T=5, S=6, lengths 6, 1, 4, 4 heads": _decoder_layer_inputs(
                    4, 3, 5, 6, [6, 1, 4], d_model=8, num_heads=4
                ),
            },
        ),
        misconceptions=[
            Misconception(
                "self-attention without the causal mask",
                _layer_variant(causal_self=False),
                "in teacher forcing every target position is in the input: the decoder's "
                "self-attention needs is_causal=True, so position t cannot read the tokens after it.",
            ),
            Misconception(
                "a causal mask on the cross attention",
                _layer_variant(causal_cross=True),
                "the whole source is known before decoding starts: cross attention takes the source "
                "(padding) mask only, never a causal mask.",
            ),
            Misconception(
                "the source mask is ignored in the cross attention",
                _layer_variant(source_mask=False),
                "padded source positions must get weight 0: pass src_mask as the cross "
                "attention's attn_mask.",
            ),
            Misconception(
                "a residual connection is missing (norm(sublayer(x)) instead of norm(x + sublayer(x)))",
                _layer_variant(residual=False),
                "every sub-layer is residual: add its input to its output before the LayerNorm.",
            ),
            Misconception(
                "pre-norm (x + sublayer(norm(x))) instead of the post-norm of this layer",
                _layer_variant(pre_norm=True),
                "chapter 07's layer normalises after the residual sum: y = norm(y + sublayer(y)), "
                "as in Vaswani et al. (2017).",
            ),
            Misconception(
                "the self-attention sub-layer is skipped",
                _no_self_attention,
                "the decoder layer starts with causal self-attention over the target prefix (norm1), "
                "before the cross attention (norm2).",
            ),
            Misconception(
                "queries from the encoder in the cross attention",
                _roles_swapped,
                "the queries come from the decoder (one row per target position); keys and values "
                "from the encoder's memory.",
            ),
        ],
        rtol=1e-6,
        atol=1e-8,
        forbidden=(
            "layer()",
            ".forward",
            ".self_attend",
            "attnlib.chapters.cross_attention.DecoderLayer",
            "attnlib.chapters.cross_attention.CrossAttentionSeq2Seq",
            "attnlib.transformer",
            "torch.nn.TransformerDecoderLayer",
            "torch.nn.TransformerDecoder",
            "torch.nn.Transformer",
        ),
        hints=(
            "a decoder layer is three residual sub-layers, each followed by its LayerNorm: "
            "self-attention over the targets, cross attention to the source, the feed-forward net.",
            "the self-attention is causal and has no source mask; the cross attention takes its "
            "queries from the decoder, keys and values from memory, and the source mask only.",
            "three sublayers in order, each followed by the residual addition and its own LayerNorm "
            "(post-norm): causal self-attention on y; cross attention with queries from y and keys and "
            "values from memory (the source mask belongs here); the feed-forward network.",
        ),
    )
)

# The written question of solutions/07-cross-attention.ipynb (graded by hand): check_all lists it.
register_written("q-07-1", points=1)
