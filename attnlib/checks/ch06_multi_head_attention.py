"""Chapter 06 exercises: split heads, merge heads, the multi-head forward pass."""

from __future__ import annotations

import math

import torch

from attnlib.attention import scaled_dot_product_attention
from attnlib.checks._cases import cases
from attnlib.checks.core import Exercise, Misconception, register
from attnlib.checks.rules import ATTENTION_IMPLEMENTATIONS
from attnlib.modules import merge_heads as _merge
from attnlib.modules import split_heads as _split

# --------------------------------------------------------------------------- ex-06-1 split heads


def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """(B, L, h*d) -> (B, h, L, d)."""
    return _split(x, num_heads)


def _features(shape, seed):
    def make():
        g = torch.Generator().manual_seed(seed)
        return (torch.randn(shape, generator=g, dtype=torch.float64),)

    return make


def _split_inputs(shape, num_heads, seed):
    return lambda: (*_features(shape, seed)(), num_heads)


def _split_no_transpose_view(x, num_heads):
    B, L, D = x.shape
    return x.reshape(B, num_heads, L, D // num_heads)  # wrong: mixes tokens into heads


def _split_forgot_transpose(x, num_heads):
    B, L, D = x.shape
    return x.reshape(B, L, num_heads, D // num_heads)  # (B, L, h, d)


def _split_transpose_first(x, num_heads):
    B, L, D = x.shape
    return x.transpose(1, 2).reshape(B, num_heads, L, D // num_heads)  # (B, D, L) cut into rows


def _split_interleaved(x, num_heads):
    B, L, D = x.shape
    return x.reshape(B, L, D // num_heads, num_heads).permute(0, 3, 1, 2)  # head j: features j::h


register(
    Exercise(
        id="ex-06-1",
        function="split_heads",
        reference=split_heads,
        cases=cases(
            None,
            {
                "B=2, L=3, h*d=8 into h=2 heads of d=4": _split_inputs((2, 3, 8), 2, 0),
                "B=1, L=5, h*d=6 into h=3 heads of d=2": _split_inputs((1, 5, 6), 3, 1),
                "B=2, L=4, h*d=12 into h=4 heads of d=3": _split_inputs((2, 4, 12), 4, 2),
                "hidden: B=3, L=2, h*d=10 into h=5 heads": _split_inputs((3, 2, 10), 5, 3),
                "hidden: one token, B=2, h*d=6 into h=2": _split_inputs((2, 1, 6), 2, 4),
                "hidden: one head, B=2, L=3, d=4": _split_inputs((2, 3, 4), 1, 5),
            },
        ),
        misconceptions=[
            Misconception(
                "viewed as (B, h, L, d) directly, without a transpose",
                _split_no_transpose_view,
                "memory is laid out as (B, L, h*d): cut the feature axis into heads while the tokens "
                "are still on axis 1, and only then move the heads in front of the tokens. Viewing "
                "straight to (B, h, L, d) puts features of several tokens into one row.",
            ),
            Misconception(
                "left as (B, L, h, d): the transpose is missing",
                _split_forgot_transpose,
                "the heads must come before the tokens, (B, h, L, d): one more swap of two axes.",
            ),
            Misconception(
                "interleaved features: head j got features j, j+h, j+2h, ...",
                _split_interleaved,
                "head j owns the contiguous block of features j*d .. (j+1)*d - 1: view (B, L, h, d), "
                "not (B, L, d, h).",
            ),
            Misconception(
                "transposed before reshaping (features and tokens mixed)",
                _split_transpose_first,
                "cut the feature axis into heads first, while the tokens are still on axis 1: "
                "view (B, L, h, d), then move the head axis forward.",
            ),
        ],
        forbidden=("attnlib.modules.split_heads", "attnlib.split_heads"),
        hints=(
            "each token's h*d features are h blocks of d, one block per head; the heads become a "
            "separate axis in front of the tokens.",
            "a reshape only regroups numbers in memory order (B, L, h*d): cut the last axis into "
            "(h, d) first, then swap the token and head axes.",
            "two steps, in this order: a view that cuts the last axis into (h, d), with d = (h*d) // "
            "h, and a swap of the token and head axes.",
        ),
    )
)

# --------------------------------------------------------------------------- ex-06-2 merge heads


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(B, h, L, d) -> (B, L, h*d), the inverse of split_heads."""
    return _merge(x)


def _merge_no_transpose(x):
    B, h, L, d = x.shape
    return x.reshape(B, L, h * d)  # wrong: rows of different tokens are glued together


def _merge_wrong_order(x):
    B, h, L, d = x.shape
    return x.permute(0, 2, 3, 1).reshape(B, L, d * h)  # feature-major, heads interleaved


def _merge_sum(x):
    return x.sum(dim=1)  # (B, L, d): heads added instead of concatenated


def _merge_mean(x):
    return x.mean(dim=1)  # (B, L, d): heads averaged


register(
    Exercise(
        id="ex-06-2",
        function="merge_heads",
        reference=merge_heads,
        cases=cases(
            None,
            {
                "B=2, h=2, L=3, d=4 -> (2, 3, 8)": _features((2, 2, 3, 4), 10),
                "B=1, h=3, L=5, d=2 -> (1, 5, 6)": _features((1, 3, 5, 2), 11),
                "B=2, h=4, L=4, d=3 -> (2, 4, 12)": _features((2, 4, 4, 3), 12),
                "hidden: B=3, h=5, L=2, d=2": _features((3, 5, 2, 2), 13),
                "hidden: one token, B=2, h=3, d=2": _features((2, 3, 1, 2), 14),
                "hidden: square h = d = L = 3, B=1": _features((1, 3, 3, 3), 15),
            },
        ),
        misconceptions=[
            Misconception(
                "reshaped to (B, L, h*d) without transposing back",
                _merge_no_transpose,
                "the heads axis sits before the tokens: .transpose(1, 2) to (B, L, h, d) first, then "
                ".contiguous().view(B, L, h*d).",
            ),
            Misconception(
                "heads merged in the wrong order (features interleaved across heads)",
                _merge_wrong_order,
                "concatenate head 0's d features, then head 1's, and so on: the order (B, L, h, d), "
                "not (B, L, d, h), so that W_O's rows line up with the heads as in split_heads.",
            ),
            Misconception(
                "heads added (or averaged) instead of concatenated",
                _merge_sum,
                "multi-head attention concatenates the heads: the result has h*d features, one "
                "block per head.",
            ),
            Misconception(
                "heads averaged instead of concatenated",
                _merge_mean,
                "multi-head attention concatenates the heads: the result has h*d features, one "
                "block per head, not their mean.",
            ),
        ],
        forbidden=("attnlib.modules.merge_heads", "attnlib.merge_heads"),
        hints=(
            "merging undoes the split: each token gets back one vector made of its h head outputs "
            "side by side.",
            "bring the tokens back in front of the heads first; only then can a reshape glue each "
            "token's h blocks of d features together (transposed tensors need .contiguous() or reshape).",
            "two steps, in this order: swap the head and token axes back, then glue each token's h "
            "blocks of d features into h*d (a transposed tensor is not contiguous: view needs a copy "
            "first, reshape makes one).",
        ),
    )
)

# --------------------------------------------------------------------------- ex-06-3 the full forward


def _forward(x, w_q, w_k, w_v, w_o, num_heads, *, scale=None, split=_split, merge=_merge, project=True):
    q = split(x @ w_q, num_heads)  # (B, L, h*d_k) -> (B, h, L, d_k)
    k = split(x @ w_k, num_heads)  # (B, L, h*d_k) -> (B, h, L, d_k)
    v = split(x @ w_v, num_heads)  # (B, L, h*d_v) -> (B, h, L, d_v)
    heads = scaled_dot_product_attention(q, k, v, scale=scale)  # (B, h, L, d_v)
    merged = merge(heads)  # (B, L, h*d_v)
    return merged @ w_o if project else merged  # (B, L, d_model)


def _forward_keys_transposed_wrong(x, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = (_split(x @ w, num_heads) for w in (w_q, w_k, w_v))  # (B, h, L, d)
    scores = q @ k.transpose(1, 2) / math.sqrt(q.shape[-1])  # wrong axes: (B, L, h, d)
    return _merge(torch.softmax(scores, dim=-1) @ v) @ w_o


def multi_head_attention(
    x: torch.Tensor,
    w_q: torch.Tensor,
    w_k: torch.Tensor,
    w_v: torch.Tensor,
    w_o: torch.Tensor,
    num_heads: int,
) -> torch.Tensor:
    """Multi-head self-attention without biases or mask.

    x (B, L, d_model); w_q, w_k (d_model, h*d_k); w_v (d_model, h*d_v);
    w_o (h*d_v, d_model) -> (B, L, d_model).
    """
    return _forward(x, w_q, w_k, w_v, w_o, num_heads)


def _forward_softmax_over_queries(x, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = (_split(x @ w, num_heads) for w in (w_q, w_k, w_v))  # (B, h, L, d)
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-2)  # over queries
    return _merge(weights @ v) @ w_o


def _forward_one_big_head(x, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = x @ w_q, x @ w_k, x @ w_v  # (B, L, h*d): never split into heads
    d_k = q.shape[-1] // num_heads
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d_k), dim=-1)
    return (weights @ v) @ w_o


def _mha_inputs(B, L, d_model, h, d_k, d_v, seed):
    def make():
        g = torch.Generator().manual_seed(seed)

        def rnd(*shape, fan_in=1):
            return torch.randn(*shape, generator=g, dtype=torch.float64) / math.sqrt(fan_in)

        x = rnd(B, L, d_model)
        w_q, w_k = rnd(d_model, h * d_k, fan_in=d_model), rnd(d_model, h * d_k, fan_in=d_model)
        w_v, w_o = rnd(d_model, h * d_v, fan_in=d_model), rnd(h * d_v, d_model, fan_in=h * d_v)
        return x, 3 * w_q, 3 * w_k, w_v, w_o, h  # larger q, k make the scaling visible

    return make


register(
    Exercise(
        id="ex-06-3",
        function="multi_head_attention",
        reference=multi_head_attention,
        cases=cases(
            None,
            {
                "B=2, L=3, d_model=8, h=2 heads of d_k=d_v=4": _mha_inputs(2, 3, 8, 2, 4, 4, 20),
                "B=1, L=4, d_model=6, h=3 heads of d_k=d_v=2": _mha_inputs(1, 4, 6, 3, 2, 2, 21),
                "d_model=8, h=2, d_k=3, d_v=5: W_O is (h*d_v, d_model) = (10, 8)": _mha_inputs(
                    2, 3, 8, 2, 3, 5, 22
                ),
                "hidden: B=2, L=5, d_model=12, h=4 heads of d_k=d_v=3": _mha_inputs(2, 5, 12, 4, 3, 3, 23),
                "hidden: one token, B=2, d_model=6, h=2": _mha_inputs(2, 1, 6, 2, 3, 3, 24),
            },
        ),
        misconceptions=[
            Misconception(
                "scores divided by sqrt(d_model) instead of sqrt(d_k)",
                lambda x, wq, wk, wv, wo, h: _forward(x, wq, wk, wv, wo, h, scale=1 / math.sqrt(x.shape[-1])),
                "each head compares vectors of d_k = (h*d_k) / h features: scale its scores by "
                "1/sqrt(d_k), not 1/sqrt(d_model).",
            ),
            Misconception(
                "scores divided by sqrt(h*d_k), the width of all heads together, instead of sqrt(d_k)",
                lambda x, wq, wk, wv, wo, h: _forward(x, wq, wk, wv, wo, h, scale=wq.shape[-1] ** -0.5),
                "each head compares vectors of d_k = (h*d_k) / h features: scale its scores by "
                "1/sqrt(d_k), the width of one head, not of the projection of all of them.",
            ),
            Misconception(
                "heads split by viewing (B, h, L, d) directly, without a transpose",
                lambda x, wq, wk, wv, wo, h: _forward(x, wq, wk, wv, wo, h, split=_split_no_transpose_view),
                "split as in exercise 06.1: cut the features into (h, d) while the tokens are on axis"
                " 1, then swap axes; a direct view to (B, h, L, d) mixes tokens.",
            ),
            Misconception(
                "heads merged without transposing back",
                lambda x, wq, wk, wv, wo, h: _forward(x, wq, wk, wv, wo, h, merge=_merge_no_transpose),
                "merge as in exercise 06.2 before W_O: swap the head and token axes back first, then "
                "glue the heads' features together.",
            ),
            Misconception(
                "heads merged in the wrong order before W_O",
                lambda x, wq, wk, wv, wo, h: _forward(x, wq, wk, wv, wo, h, merge=_merge_wrong_order),
                "the merged vector is head 0's d_v features, then head 1's, ...: the rows of W_O "
                "follow that order.",
            ),
            Misconception(
                "keys transposed on the wrong axes (transpose(1, 2) instead of transpose(-2, -1))",
                _forward_keys_transposed_wrong,
                "after the split k is (B, h, L, d_k): the scores need k.transpose(-2, -1), "
                "(B, h, d_k, L), so that q @ k^T is (B, h, L, L).",
            ),
            Misconception(
                "W_O used transposed",
                lambda x, wq, wk, wv, wo, h: _forward(x, wq, wk, wv, wo.T, h),
                "W_O has shape (h*d_v, d_model): the merged heads (B, L, h*d_v) are multiplied by "
                "W_O itself, merged @ w_o.",
            ),
            Misconception(
                "the output projection W_O is missing",
                lambda x, wq, wk, wv, wo, h: _forward(x, wq, wk, wv, wo, h, project=False),
                "after merging the heads, multiply by W_O (h*d_v, d_model).",
            ),
            Misconception(
                "softmax over the wrong axis (over the queries)",
                _forward_softmax_over_queries,
                "each query's weights over the keys sum to 1: softmax along the last axis (dim=-1).",
            ),
            Misconception(
                "the heads are never split (one big head)",
                _forward_one_big_head,
                "split the projections into h heads of d_k features and attend within each head; one "
                "softmax over all h*d_k features is single-head attention.",
            ),
        ],
        forbidden=ATTENTION_IMPLEMENTATIONS,
        hints=(
            "h small attentions side by side: each head attends with its own slice of the "
            "projected features, and W_O mixes the heads back together.",
            "project once, split each projection into heads (B, h, L, d), run scaled dot-product "
            "attention per head with d_k the size of one head, merge, then the output projection.",
            "the chapter's four steps, with your two functions: the three projections, split into "
            "heads; per head softmax(Q K^T / sqrt(d_k)) V with d_k the width of one head; merge; the "
            "output projection W_O.",
        ),
    )
)
