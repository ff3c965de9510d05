"""Chapter 08 exercises: the online softmax update, one tile step, a KV-cache decoding step."""

from __future__ import annotations

import math

import numpy as np
import torch

from attnlib.checks._cases import cases
from attnlib.checks.core import Exercise, Misconception, register
from attnlib.checks.rules import ATTENTION_IMPLEMENTATIONS
from attnlib.efficient import online_softmax_update, tile_step, tiled_attention

# --------------------------------------------------------------------------- ex-08-1 online softmax


def online_softmax_step(m: float, l: float, block: np.ndarray) -> tuple[float, float]:
    """(m_new, l_new): running max and running sum of exp(s - m_new) after one more block."""
    return online_softmax_update(m, l, block)


def _state(m, l, block):
    return lambda: (m, l, np.array(block, dtype=float))


def _no_rescale(m, l, block):
    m_new = max(m, float(np.max(block)))
    return m_new, l + float(np.exp(block - m_new).sum())


def _inverted_rescale(m, l, block):
    m_new = max(m, float(np.max(block)))
    c = math.exp(m_new - m) if m > -math.inf else 0.0
    return m_new, c * l + float(np.exp(block - m_new).sum())


def _block_max_only(m, l, block):
    m_blk = float(np.max(block))
    return m_blk, l * math.exp(m - m_blk) + float(np.exp(block - m_blk).sum())


def _no_shift(m, l, block):
    with np.errstate(over="ignore"):  # exactly the overflow this mistake runs into
        return max(m, float(np.max(block))), l + float(np.exp(block).sum())


def _shift_after_exp(m, l, block):
    m_new = max(m, float(np.max(block)))
    scale = 0.0 if m == -math.inf else math.exp(m - m_new)
    with np.errstate(over="ignore", invalid="ignore"):  # exp(s) overflows before the shift can help
        return m_new, l * scale + float(np.exp(block).sum()) * math.exp(-m_new)


register(
    Exercise(
        id="ex-08-1",
        function="online_softmax_step",
        reference=online_softmax_step,
        cases=cases(
            None,
            {
                "the first block: m = -inf, l = 0, block [1, 3, 2]": _state(-math.inf, 0.0, [1.0, 3.0, 2.0]),
                "a new maximum: m = 2, l = 1.5, block [0.5, 4]": _state(2.0, 1.5, [0.5, 4.0]),
                "no new maximum: m = 5, l = 2.25, block [1, -2, 4.5]": _state(5.0, 2.25, [1.0, -2.0, 4.5]),
                # the text's "never exponentiate before subtracting the maximum": exp(760) overflows
                "large scores: m = 750, l = 1, block [760, 740]": _state(750.0, 1.0, [760.0, 740.0]),
                "hidden: large scores, m = 700, l = 3, block [710, 690]": _state(700.0, 3.0, [710.0, 690.0]),
                "hidden: a first block of large scores, m = -inf, block [800, 790]": _state(
                    -math.inf, 0.0, [800.0, 790.0]
                ),
                "hidden: a masked key, m = 1, l = 1, block [-inf, 2, 0]": _state(
                    1.0, 1.0, [-math.inf, 2.0, 0.0]
                ),
                "hidden: a block of one score, m = 0.5, l = 2, block [3]": _state(0.5, 2.0, [3.0]),
                "hidden: a smaller block, m = 4, l = 1.25, block [1, 2]": _state(4.0, 1.25, [1.0, 2.0]),
            },
        ),
        misconceptions=[
            Misconception(
                "the old sum is not rescaled when the maximum grows",
                _no_rescale,
                "l was a sum of exp(s - m_old); relative to the new maximum each of its terms is "
                "exp(s - m_new) = exp(s - m_old) * exp(m_old - m_new): multiply l by "
                "exp(m_old - m_new) before adding the block.",
            ),
            Misconception(
                "the rescaling factor is upside down, exp(m_new - m_old)",
                _inverted_rescale,
                "the maximum only grows, so the factor exp(m_old - m_new) is <= 1: old terms "
                "shrink relative to the new, larger maximum.",
            ),
            Misconception(
                "the new maximum is the block's maximum, not the running one",
                _block_max_only,
                "m_new = max(m_old, max(block)): a block whose scores are all smaller than "
                "an earlier one must not lower the running maximum.",
            ),
            Misconception(
                "the scores are exponentiated without subtracting the maximum",
                _no_shift,
                "l is the sum of exp(s - m), not of exp(s); without the shift exp overflows for "
                "scores above about 88 (float32) or 709 (float64).",
            ),
            Misconception(
                "exp(s) taken before the shift: exp(s) * exp(-m) is right on paper but overflows",
                _shift_after_exp,
                "exp(s) * exp(-m) equals exp(s - m) only in exact arithmetic: exp(s) alone overflows "
                "for scores above about 709 (float64). Subtract first, then exponentiate.",
            ),
        ],
        rtol=1e-9,
        atol=1e-12,
        forbidden=(
            "attnlib.efficient.online_softmax_update",
            "attnlib.efficient.online_softmax_numpy",
            "attnlib.efficient.online_update_",
            "attnlib.efficient.online_rescale_",
        ),
        hints=(
            "l is a sum of exponentials measured from the running maximum m; when a new block raises"
            " the maximum, the old sum must be re-measured from the new one.",
            "the new maximum is the larger of the old one and the block's; every old term shrinks by"
            " the same factor, which is at most 1.",
            "that factor is e to the power (old maximum - new maximum); after rescaling, the block adds"
            " its own exponentials, each measured from the new maximum, not the old one.",
        ),
    )
)

# --------------------------------------------------------------------------- ex-08-2 tile step


def tile_update(m, l, acc, q_tile, k_tile, v_tile):
    """(m, l, acc) after folding one (keys, values) tile into the running state."""
    return tile_step(m, l, acc, q_tile, k_tile, v_tile)


def _tile_inputs(shape_q, bk, dv, first, seed):
    def make():
        g = torch.Generator().manual_seed(seed)
        *lead, bq, d = shape_q
        q = torch.randn(*shape_q, generator=g, dtype=torch.float64)
        k = torch.randn(*lead, bk, d, generator=g, dtype=torch.float64)
        v = torch.randn(*lead, bk, dv, generator=g, dtype=torch.float64)
        if first:
            m = torch.full((*lead, bq, 1), -math.inf, dtype=torch.float64)
            l = torch.zeros(*lead, bq, 1, dtype=torch.float64)
            acc = torch.zeros(*lead, bq, dv, dtype=torch.float64)
        else:  # the state left by an earlier tile of keys
            k0 = torch.randn(*lead, bk, d, generator=g, dtype=torch.float64)
            v0 = torch.randn(*lead, bk, dv, generator=g, dtype=torch.float64)
            start = (
                torch.full((*lead, bq, 1), -math.inf, dtype=torch.float64),
                torch.zeros(*lead, bq, 1, dtype=torch.float64),
                torch.zeros(*lead, bq, dv, dtype=torch.float64),
            )
            m, l, acc = tile_step(*start, q, 2.0 * k0, v0)
        return m, l, acc, q, k, v

    return make


def _tile_no_acc_rescale(m, l, acc, q, k, v):
    m_new, l_new, _ = tile_step(m, l, acc, q, k, v)
    shift = torch.where(m_new == -math.inf, torch.zeros_like(m_new), m_new)
    p = torch.exp(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]) - shift)
    return m_new, l_new, acc + p @ v


def _tile_no_l_rescale(m, l, acc, q, k, v):
    m_new, _, acc_new = tile_step(m, l, acc, q, k, v)
    shift = torch.where(m_new == -math.inf, torch.zeros_like(m_new), m_new)
    p = torch.exp(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]) - shift)
    return m_new, l + p.sum(dim=-1, keepdim=True), acc_new


def _tile_unscaled(m, l, acc, q, k, v):
    return tile_step(m, l, acc, q, k, v, scale=1.0)


def _tile_normalised_early(m, l, acc, q, k, v):
    m_new, l_new, acc_new = tile_step(m, l, acc, q, k, v)
    return m_new, l_new, acc_new / l_new


def _tile_divided_by_d(m, l, acc, q, k, v):
    return tile_step(m, l, acc, q, k, v, scale=1.0 / q.shape[-1])


register(
    Exercise(
        id="ex-08-2",
        function="tile_update",
        reference=tile_update,
        cases=cases(
            None,
            {
                "the first tile: 4 queries, 3 keys, d = 8 (m = -inf, l = 0, acc = 0)": _tile_inputs(
                    (4, 8), 3, 5, True, 0
                ),
                "a second tile after an earlier one: 4 queries, 6 keys": _tile_inputs((4, 8), 6, 5, False, 1),
                "batched heads: (2, 3) x 5 queries, 4 keys, d = 6": _tile_inputs(
                    (2, 3, 5, 6), 4, 2, False, 2
                ),
                "hidden: one query, 7 keys, later tile": _tile_inputs((1, 16), 7, 3, False, 3),
                "hidden: batch 2, first tile": _tile_inputs((2, 3, 4), 5, 4, True, 4),
                "hidden: a tile of one key, later tile": _tile_inputs((2, 3, 4), 1, 2, False, 5),
            },
        ),
        misconceptions=[
            Misconception(
                "the accumulated output is not rescaled",
                _tile_no_acc_rescale,
                "acc holds sums of exp(s - m_old) v; when the maximum grows to m_new, multiply acc "
                "by exp(m_old - m_new), like l, before adding p @ v_tile.",
            ),
            Misconception(
                "the running sum l is not rescaled when the maximum grows",
                _tile_no_l_rescale,
                "l holds sums of exp(s - m_old): multiply it by exp(m_old - m_new) before adding the"
                " tile's row sums, exactly as acc.",
            ),
            Misconception(
                "no 1/sqrt(d) scaling of the scores",
                _tile_unscaled,
                "the scores are q k^T / sqrt(d), d = q_tile.shape[-1].",
            ),
            Misconception(
                "acc is divided by l inside the step",
                _tile_normalised_early,
                "keep acc unnormalised while tiles arrive; divide by l once, after the last tile.",
            ),
            Misconception(
                "the scores are divided by d instead of sqrt(d)",
                _tile_divided_by_d,
                "the scale is 1/sqrt(d), not 1/d.",
            ),
        ],
        rtol=1e-9,
        atol=1e-12,
        forbidden=(
            "attnlib.efficient.tile_step",
            "attnlib.efficient.online_update_",
            "attnlib.efficient.online_rescale_",
        )
        + ATTENTION_IMPLEMENTATIONS,
        hints=(
            "the online softmax of the previous exercise, for a whole tile of queries at once, with"
            " a running weighted sum of values (acc) next to the running sum l.",
            "both l and acc were measured from the old maximum: when a row's maximum grows, both"
            " shrink by the same factor before the tile's contribution is added; acc stays"
            " unnormalised until the last tile.",
            "s = q k^T / sqrt(d); m_new = max(m, rowmax(s)); c = exp(m - m_new); "
            "p = exp(s - m_new); l = c l + rowsum(p); acc = c acc + p @ v. Return (m_new, l, acc).",
        ),
    )
)

# --------------------------------------------------------------------------- ex-08-3 KV cache


def kv_decode_step(query, key, value, cache_k, cache_v):
    """(output (B, H, 1, dv), cache_k (B, H, P+1, d), cache_v (B, H, P+1, dv)).

    Append the new token's key and value to the cache, then let its query
    attend to every cached position (itself included).
    """
    cache_k = torch.cat([cache_k, key], dim=-2)
    cache_v = torch.cat([cache_v, value], dim=-2)
    return tiled_attention(query, cache_k, cache_v), cache_k, cache_v


def _decode_inputs(B, H, P, d, dv, seed):
    def make():
        g = torch.Generator().manual_seed(seed)
        q = torch.randn(B, H, 1, d, generator=g, dtype=torch.float64)
        k = torch.randn(B, H, 1, d, generator=g, dtype=torch.float64)
        v = torch.randn(B, H, 1, dv, generator=g, dtype=torch.float64)
        ck = torch.randn(B, H, P, d, generator=g, dtype=torch.float64)
        cv = torch.randn(B, H, P, dv, generator=g, dtype=torch.float64)
        return q, k, v, ck, cv

    return make


def _attend_before_append(query, key, value, cache_k, cache_v):
    out = tiled_attention(query, cache_k, cache_v)
    return out, torch.cat([cache_k, key], dim=-2), torch.cat([cache_v, value], dim=-2)


def _prepend(query, key, value, cache_k, cache_v):
    ck, cv = torch.cat([key, cache_k], dim=-2), torch.cat([value, cache_v], dim=-2)
    return tiled_attention(query, ck, cv), ck, cv


def _unscaled_decode(query, key, value, cache_k, cache_v):
    ck, cv = torch.cat([cache_k, key], dim=-2), torch.cat([cache_v, value], dim=-2)
    return tiled_attention(query, ck, cv, scale=1.0), ck, cv


def _append_on_heads(query, key, value, cache_k, cache_v):
    ck, cv = torch.cat([cache_k, key], dim=1), torch.cat([cache_v, value], dim=1)
    return tiled_attention(query, ck, cv), ck, cv


def _old_cache_returned(query, key, value, cache_k, cache_v):
    ck, cv = torch.cat([cache_k, key], dim=-2), torch.cat([cache_v, value], dim=-2)
    return tiled_attention(query, ck, cv), cache_k, cache_v


def _causal_top_left(query, key, value, cache_k, cache_v):
    ck, cv = torch.cat([cache_k, key], dim=-2), torch.cat([cache_v, value], dim=-2)
    return tiled_attention(query, ck, cv, is_causal=True), ck, cv


register(
    Exercise(
        id="ex-08-3",
        function="kv_decode_step",
        reference=kv_decode_step,
        cases=cases(
            None,
            {
                "B=1, H=2, 5 cached positions, d=4": _decode_inputs(1, 2, 5, 4, 4, 0),
                "B=2, H=3, 1 cached position, d=8, dv=3": _decode_inputs(2, 3, 1, 8, 3, 1),
                "an empty cache: B=1, H=1, d=4": _decode_inputs(1, 1, 0, 4, 2, 2),
                "hidden: B=3, H=2, 9 cached positions": _decode_inputs(3, 2, 9, 6, 5, 3),
                "hidden: an empty cache, B=2, H=2": _decode_inputs(2, 2, 0, 3, 3, 4),
            },
        ),
        misconceptions=[
            Misconception(
                "the query attends to the cache before the new key and value are appended",
                _attend_before_append,
                "the new token may attend to itself: append its key and value first, then attend.",
            ),
            Misconception(
                "the new key and value are put in front of the cache",
                _prepend,
                "positions are in order: the new token is the last one, after everything already in "
                "the cache.",
            ),
            Misconception(
                "no 1/sqrt(d) scaling of the scores",
                _unscaled_decode,
                "the scores are q k^T / sqrt(d), d = query.shape[-1].",
            ),
            Misconception(
                "a top-left causal mask on the single new query (it then sees only position 0)",
                _causal_top_left,
                "one new query is the *last* position: it may attend to every cached key; a causal "
                "mask for decoding must be aligned at the lower right (diagonal = P).",
            ),
            Misconception(
                "appended along the heads axis (dim=1) instead of the sequence axis",
                _append_on_heads,
                "the cache is (B, H, P, d): the positions are the second-to-last axis, and the new "
                "token goes at its end.",
            ),
            Misconception(
                "the cache is returned without the new key and value",
                _old_cache_returned,
                "the next step needs this token's key and value too: return the appended caches,"
                " (B, H, P+1, d) and (B, H, P+1, dv).",
            ),
        ],
        rtol=1e-9,
        atol=1e-12,
        forbidden=("attnlib.efficient.decode_step", "attnlib.efficient.KVCache"),
        hints=(
            "the new token's key and value join the cache first (it may attend to itself), then its"
            " one query attends to every position in the cache.",
            "append along the sequence axis (dim=-2), the new position last; a single query that is"
            " the last position needs no mask.",
            "caches grow by one position at the end of their sequence axis; weights = softmax(q K^T /"
            " sqrt(d)) over every cached position, the new one included; output = weights V. Return "
            "the output and both grown caches.",
        ),
    )
)

# --------------------------------------------------------------------------- ex-08-4 the backward pass


def attention_backward(q, k, v, grad_out):
    """(dq, dk, dv): the gradients of softmax(q k^T / sqrt(d)) v, given dL/d(output).

    FlashAttention-2's formulas (chapter 08): P = softmax(S), O = P V,
    dV = P^T dO, dP = dO V^T, D = rowsum(dO * O), dS = P * (dP - D),
    dQ = dS K / sqrt(d), dK = dS^T Q / sqrt(d).
    """
    return _backward_variant(q, k, v, grad_out)


def _backward_variant(
    q, k, v, grad_out, *, ds_rule="flash", scaled=True, transpose_p=True, transpose_ds=True
):
    scale = 1.0 / math.sqrt(q.shape[-1])
    s = q @ k.transpose(-2, -1) * scale  # (..., L, S)
    p = torch.softmax(s, dim=-1)
    out = p @ v  # (..., L, Ev)
    dv = (p.transpose(-2, -1) if transpose_p else p) @ grad_out  # (..., S, Ev)
    dp = grad_out @ v.transpose(-2, -1)  # (..., L, S)
    if ds_rule == "flash":
        ds = p * (dp - (grad_out * out).sum(dim=-1, keepdim=True))
    elif ds_rule == "no D":
        ds = p * dp
    elif ds_rule == "D from dP":
        ds = p * (dp - dp.sum(dim=-1, keepdim=True))
    else:  # "diagonal": the elementwise derivative p (1 - p) of each weight alone
        ds = p * (1 - p) * dp
    c = scale if scaled else 1.0
    return ds @ k * c, (ds.transpose(-2, -1) if transpose_ds else ds) @ q * c, dv


def _backward_inputs(lead, L, S, d, dv, seed, logit_scale=1.0):
    def make():
        g = torch.Generator().manual_seed(seed)
        q = torch.randn(*lead, L, d, generator=g, dtype=torch.float64) * logit_scale
        k = torch.randn(*lead, S, d, generator=g, dtype=torch.float64)
        v = torch.randn(*lead, S, dv, generator=g, dtype=torch.float64)
        grad_out = torch.randn(*lead, L, dv, generator=g, dtype=torch.float64)
        return q, k, v, grad_out

    return make


register(
    Exercise(
        id="ex-08-4",
        function="attention_backward",
        reference=attention_backward,
        cases=cases(
            None,
            {
                "one head: 4 queries, 4 keys, d = 3": _backward_inputs((), 4, 4, 3, 3, 0),
                "2 heads, 5 queries, 7 keys, d = 4, dv = 3": _backward_inputs((2,), 5, 7, 4, 3, 1),
                "batch 2 x 3 heads, 6 queries, 6 keys": _backward_inputs((2, 3), 6, 6, 4, 4, 2),
                "hidden: one query, 9 keys": _backward_inputs((2,), 1, 9, 5, 2, 3),
                "hidden: one key (every weight is 1)": _backward_inputs((3,), 4, 1, 2, 3, 4),
                "hidden: large logits (nearly one-hot weights)": _backward_inputs(
                    (2,), 5, 5, 4, 4, 5, logit_scale=8.0
                ),
            },
        ),
        misconceptions=[
            Misconception(
                "dS = P * dP: the softmax's coupling term D is missing",
                lambda q, k, v, g: _backward_variant(q, k, v, g, ds_rule="no D"),
                "every weight of a row depends on every score of the row (they sum to 1): the "
                "gradient of a score subtracts the row's weighted average of dP, D.",
            ),
            Misconception(
                "D is the row sum of dP instead of the row sum of P * dP",
                lambda q, k, v, g: _backward_variant(q, k, v, g, ds_rule="D from dP"),
                "D is a weighted average of dP over the row, weighted by P; it also equals "
                "rowsum(dO * O), which FlashAttention uses because O is at hand.",
            ),
            Misconception(
                "only the diagonal of the softmax Jacobian, p (1 - p)",
                lambda q, k, v, g: _backward_variant(q, k, v, g, ds_rule="diagonal"),
                "p_i (1 - p_i) is the derivative of p_i by s_i alone; p_i also depends on every "
                "other score s_j of its row (derivative -p_i p_j).",
            ),
            Misconception(
                "the 1/sqrt(d) scale is missing from dQ and dK",
                lambda q, k, v, g: _backward_variant(q, k, v, g, scaled=False),
                "S = Q K^T / sqrt(d): by the chain rule dQ and dK carry the same factor 1/sqrt(d).",
            ),
            Misconception(
                "dV = P dO: P is not transposed",
                lambda q, k, v, g: _backward_variant(q, k, v, g, transpose_p=False),
                "O = P V, so dV = P^T dO: value j collects the gradients of the queries that weighted it.",
            ),
            Misconception(
                "dK = dS Q: dS is not transposed",
                lambda q, k, v, g: _backward_variant(q, k, v, g, transpose_ds=False),
                "S = Q K^T, so key j's gradient collects the score gradients of column j: dK = dS^T Q "
                "(times the scale); dS Q pairs the rows instead, and is (L, d) rather than (S, d).",
            ),
        ],
        rtol=1e-7,
        atol=1e-9,
        forbidden=(
            ".backward",
            "torch.autograd",
            "torch.func",
            "attnlib.efficient",
            "attnlib.checks",
        )
        + ATTENTION_IMPLEMENTATIONS,
        hints=(
            "go backwards through the three steps of the forward pass (the scores, the softmax, the "
            "weighted sum of the values): each step turns the gradient of its output into the "
            "gradients of its inputs.",
            "a matrix product's gradients are products with the other factor transposed; the "
            "softmax couples a row: de_j = a_j (da_j - sum_i a_i da_i).",
            "work in the order dV, dA, dE, dQ, dK: dV and dA come from C = A V like any matrix "
            "product; dE applies the softmax rule above to every row at once, with D holding each "
            "row's sum; dQ and dK come from E = Q K^T / sqrt(d), a matrix product scaled by "
            "1 / sqrt(d).",
        ),
    )
)
