"""Chapter 05 exercises: a padding mask from lengths, a causal mask, masked attention."""

from __future__ import annotations

import math

import torch

from attnlib.attention import scaled_dot_product_attention
from attnlib.checks._cases import cases, inverted
from attnlib.checks.core import Exercise, Misconception, register
from attnlib.checks.exercise import register_written
from attnlib.checks.rules import ATTENTION_IMPLEMENTATIONS
from attnlib.masks import causal_mask, padding_mask

# --------------------------------------------------------------------------- ex-05-1 padding mask


def padding_mask_from_lengths(lengths: torch.Tensor, max_len: int) -> torch.Tensor:
    """bool (B, max_len), True where position j < lengths[b] (a real token)."""
    return padding_mask(lengths, max_len)


def _lengths(values, max_len):
    return lambda: (torch.tensor(values, dtype=torch.long), max_len)


register(
    Exercise(
        id="ex-05-1",
        function="padding_mask_from_lengths",
        reference=padding_mask_from_lengths,
        cases=cases(
            None,
            {
                "lengths [3, 1] padded to 4": _lengths([3, 1], 4),
                "lengths [2, 5, 4] padded to 5 (one full row)": _lengths([2, 5, 4], 5),
                "lengths [0, 2] padded to 3 (an empty sequence)": _lengths([0, 2], 3),
                "hidden: lengths [6, 1, 3, 6] padded to 7": _lengths([6, 1, 3, 6], 7),
                "hidden: one position, lengths [1, 0, 1]": _lengths([1, 0, 1], 1),
            },
        ),
        misconceptions=[
            Misconception(
                "the mask is inverted (True marks the padding)",
                inverted(padding_mask),
                "in this course True means *may attend*: real tokens are True, padding is False.",
            ),
            Misconception(
                "positions <= length are kept (one padding position too many)",
                lambda lengths, max_len: torch.arange(max_len)[None, :] <= lengths[:, None],
                "positions are counted from 0, so a sequence of length n occupies 0 .. n-1: use "
                "`positions < length`, not `<=`.",
            ),
            Misconception(
                "the mask is (max_len, B) instead of (B, max_len)",
                lambda lengths, max_len: padding_mask(lengths, max_len).T,
                "one row per sequence: the positions run along the last axis and the sequences down "
                "the first, (B, max_len).",
            ),
            Misconception(
                "positions compared with the lengths without a trailing axis (arange(max_len) < lengths)",
                # a shape error whenever B != max_len (named when the learner's code raises the same
                # error), a 1-D result otherwise
                lambda lengths, max_len: torch.arange(max_len) < lengths,
                "a (max_len,) row and a (B,) vector line up along the same axis, element by element; "
                "to compare every position with every length, the lengths must stand in a column of "
                "shape (B, 1) that broadcasts against the row.",
            ),
        ],
        forbidden=("attnlib.masks.padding_mask", "attnlib.padding_mask"),
        hints=(
            "a position is a real token exactly when its index is smaller than its sequence's length; "
            "the mask holds True/False.",
            "compare a row of positions 0 .. max_len-1 with a column of lengths: broadcasting gives "
            "one row per sequence.",
            "the comparison of a (1, max_len) row with a (B, 1) column broadcasts to (B, max_len); "
            "make sure the result is bool, not the lengths' integer dtype.",
        ),
    )
)

# --------------------------------------------------------------------------- ex-05-2 causal mask


def build_causal_mask(q_len: int, k_len: int) -> torch.Tensor:
    """bool (q_len, k_len), True where key j <= query i (top-left aligned, like torch's is_causal)."""
    return causal_mask(q_len, k_len)


register(
    Exercise(
        id="ex-05-2",
        function="build_causal_mask",
        reference=build_causal_mask,
        cases=cases(
            None,
            {
                "square: 4 queries, 4 keys": (4, 4),
                "3 queries, 5 keys (top-left aligned)": (3, 5),
                "5 queries, 2 keys": (5, 2),
                "hidden: square 6 x 6": (6, 6),
                "hidden: 2 queries, 7 keys": (2, 7),
                "hidden: one query, one key": (1, 1),
                "hidden: 6 queries, 1 key": (6, 1),
            },
        ),
        misconceptions=[
            Misconception(
                "the mask is inverted (True marks the future)",
                inverted(causal_mask),
                "True means *may attend*: query i may attend to keys 0 .. i, so the True entries "
                "are on and below the diagonal.",
            ),
            Misconception(
                "strictly lower triangular (a token may not attend to itself)",
                lambda q_len, k_len: causal_mask(q_len, k_len, diagonal=-1),
                "the diagonal must be True: position i may attend to itself (j <= i, not j < i).",
            ),
            Misconception(
                "upper triangular (the transposed mask)",
                lambda q_len, k_len: torch.triu(torch.ones(q_len, k_len, dtype=torch.bool)),
                "rows are queries and columns keys: row i is True for columns j <= i (torch.tril).",
            ),
            Misconception(
                "one key too many (diagonal=1: each query also sees the next key)",
                lambda q_len, k_len: causal_mask(q_len, k_len, diagonal=1),
                "query i may attend to keys 0 .. i and no further: the diagonal of torch.tril stays 0.",
            ),
            Misconception(
                "aligned at the bottom right instead of the top left",
                lambda q_len, k_len: causal_mask(q_len, k_len, diagonal=k_len - q_len),
                "with diagonal 0 row i allows keys 0 .. i whatever k_len is (top left, as torch's "
                "is_causal); the bottom-right alignment is the KV-cache variant.",
            ),
        ],
        forbidden=("attnlib.masks.causal_mask", "attnlib.causal_mask"),
        hints=(
            "query i may look at itself and at earlier keys, never at later ones; True means may attend.",
            "entry (i, j) is True when j <= i, counted from the top left whatever the number of keys: "
            "a lower triangle that includes the diagonal.",
            "torch has a function that keeps the lower triangle of a matrix (diagonal included), and "
            "comparing a column of query indices with a row of key indices gives the same (q_len, k_len) "
            "mask.",
        ),
    )
)

# --------------------------------------------------------------------------- ex-05-3 masked attention


def masked_attention(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """(output (..., L, Ev), weights (..., L, S)); a fully masked row gets zero weights and output."""
    return scaled_dot_product_attention(query, key, value, attn_mask=mask, return_weights=True)


def _scores(query, key, scale=True):
    d_k = query.shape[-1]
    s = query @ key.transpose(-2, -1)  # (..., L, S)
    return s / math.sqrt(d_k) if scale else s


def _mask_after_softmax(query, key, value, mask):
    weights = torch.softmax(_scores(query, key), dim=-1) * mask  # rows no longer sum to 1
    return weights @ value, weights


def _naive_nan(query, key, value, mask):
    weights = torch.softmax(_scores(query, key).masked_fill(~mask, float("-inf")), dim=-1)
    return weights @ value, weights


def _large_negative(query, key, value, mask):
    weights = torch.softmax(_scores(query, key).masked_fill(~mask, -1e9), dim=-1)
    return weights @ value, weights


def _inverted(query, key, value, mask):
    return scaled_dot_product_attention(query, key, value, attn_mask=~mask, return_weights=True)


def _unscaled(query, key, value, mask):
    return scaled_dot_product_attention(query, key, value, attn_mask=mask, scale=1.0, return_weights=True)


def _scaled_by_keys(query, key, value, mask):
    return scaled_dot_product_attention(
        query, key, value, attn_mask=mask, scale=1.0 / math.sqrt(key.shape[-2]), return_weights=True
    )


def _attention_inputs(q_shape, k_shape, v_shape, mask, seed):
    def make():
        g = torch.Generator().manual_seed(seed)
        q = torch.randn(q_shape, generator=g, dtype=torch.float64)
        k = torch.randn(k_shape, generator=g, dtype=torch.float64)
        v = torch.randn(v_shape, generator=g, dtype=torch.float64)
        return q, k, v, mask()

    return make


def _attention_inputs_scaled(q_shape, k_shape, v_shape, mask, seed, scale):
    make = _attention_inputs(q_shape, k_shape, v_shape, mask, seed)

    def scaled():
        q, k, v, m = make()
        return q * scale, k * scale, v, m

    return scaled


def _key_padding_3d():
    return padding_mask([4, 2])[:, None, :]  # (B, 1, S): the same keys for every query


def _with_empty_row():
    m = causal_mask(3, 4).clone()
    m[1] = False  # query 1 may attend to nothing
    return m  # (L, S)


def _hidden_4d():
    return padding_mask([5, 0, 3])[:, None, None, :]  # (B, 1, 1, S); sequence 1 is empty


register(
    Exercise(
        id="ex-05-3",
        function="masked_attention",
        reference=masked_attention,
        cases=cases(
            None,
            {
                "key padding: B=2, L=3, S=4, lengths [4, 2], mask (B, 1, S)": _attention_inputs(
                    (2, 3, 5), (2, 4, 5), (2, 4, 3), _key_padding_3d, 0
                ),
                "causal (L, S) = (4, 4) mask, batch of 2": _attention_inputs(
                    (2, 4, 4), (2, 4, 4), (2, 4, 2), lambda: causal_mask(4), 1
                ),
                "a fully masked query row: L=3, S=4, row 1 may attend to nothing": _attention_inputs(
                    (3, 6), (4, 6), (4, 3), _with_empty_row, 2
                ),
                "hidden: one query, S=3, large scores (in the hundreds)": _attention_inputs_scaled(
                    (1, 8), (3, 8), (3, 2), lambda: torch.tensor([[True, False, True]]), 4, 12.0
                ),
                "hidden: B=3, h=2, L=2, S=5, key mask (B, 1, 1, S), one empty sequence": _attention_inputs(
                    (3, 2, 2, 4), (3, 2, 5, 4), (3, 2, 5, 3), _hidden_4d, 3
                ),
            },
        ),
        misconceptions=[
            Misconception(
                "the mask is applied after the softmax (rows no longer sum to 1)",
                _mask_after_softmax,
                "mask the *scores* (set the blocked ones to -inf) and then take the softmax, so "
                "that the remaining weights of each row sum to 1.",
            ),
            Misconception(
                "a fully masked row gives NaN (softmax of a row of -inf)",
                _naive_nan,
                "exp(-inf - (-inf)) is NaN: a row with no allowed key must come out as zero weights "
                "and a zero output. The mask itself tells which rows allow no key at all.",
            ),
            Misconception(
                "masked scores set to -1e9: a fully masked row attends uniformly to everything",
                _large_negative,
                "a row of equal -1e9 scores has a uniform softmax, so the output averages the "
                "padding; the course's policy is zero weights and a zero output for such a row.",
            ),
            Misconception(
                "the mask is inverted (True treated as 'blocked')",
                _inverted,
                "True means *may attend*: keep the scores where mask is True, block where it is False.",
            ),
            Misconception(
                "scaled by sqrt(S), the number of keys, instead of sqrt(d_k)",
                _scaled_by_keys,
                "d_k is the size of one query/key vector (query.shape[-1]), not the number of keys.",
            ),
            Misconception(
                "no 1/sqrt(d_k) scaling",
                _unscaled,
                "divide the scores q k^T by sqrt(d_k), the size of the last axis of query.",
            ),
        ],
        forbidden=ATTENTION_IMPLEMENTATIONS + ("attnlib.functional.masked_softmax", "attnlib.masked_softmax"),
        hints=(
            "a blocked key must get weight exactly 0 while the allowed keys of the row still share "
            "all of the weight; a row with no allowed key gets zero weights and a zero output.",
            "block before the softmax, not after, with a score no allowed key can lose to (-inf); "
            "a row of only -inf gives NaN, so zero such rows afterwards.",
            "the softmax of a row with no allowed key is 0/0 whatever you block with, so no choice of"
            " score fixes that row: the mask tells which rows they are, and the course's convention "
            "gives them zero weights and a zero output. Both results keep the shapes of unmasked "
            "attention.",
        ),
    )
)

# The written question of solutions/05-masks.ipynb (graded by hand): check_all lists it.
register_written("q-05-1", points=1)
