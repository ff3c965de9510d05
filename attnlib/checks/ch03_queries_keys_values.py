"""Chapter 03 exercises: projections, the score matrix, the row softmax, attention in matrix form."""

import math

import numpy as np

from attnlib import numpy as anp
from attnlib.checks._cases import cases, this_is_book, x_wq_wk
from attnlib.checks.core import Exercise, Misconception, register
from attnlib.checks.exercise import register_written
from attnlib.checks.rules import (
    ATTENTION_IMPLEMENTATIONS,
    SCALED_SCORE_IMPLEMENTATIONS,
    SOFTMAX_IMPLEMENTATIONS,
)

# --------------------------------------------------------------------------- references


def project_qkv(x, w_q, w_k, w_v):
    """x (..., L, d_model), W_Q and W_K (d_model, d_k), W_V (d_model, d_v) -> (Q, K, V)."""
    return x @ w_q, x @ w_k, x @ w_v  # (..., L, d_k), (..., L, d_k), (..., L, d_v)


def attention_scores(x, w_q, w_k):
    """x (..., L, d_model), W_Q and W_K (d_model, d_k) -> Q K^T / sqrt(d_k), shape (..., L, L)."""
    return anp.scaled_dot_scores(x @ w_q, x @ w_k)


def row_softmax(scores):
    """Softmax of every row (the last axis) of scores (..., L, S)."""
    return anp.softmax(scores, dim=-1)


def attention_output(q, k, v):
    """q (..., L, d_k), k (..., S, d_k), v (..., S, d_v) -> softmax(q k^T / sqrt(d_k)) v, (..., L, d_v)."""
    return anp.scaled_dot_product_attention(q, k, v)


# --------------------------------------------------------------------------- inputs

WORDS = np.array([[1, 0, 0], [0, 1, 0], [1, 1, 0], [0, 0, 1]], dtype=np.float64)


def _worked_weights():
    rng = np.random.RandomState(42)  # the legacy generator that np.random.seed(42) sets
    return tuple(rng.randint(3, size=(3, 3)).astype(np.float64) for _ in range(3))


def _worked_example():
    return (WORDS.copy(), *_worked_weights())


def _projections(shape_x, d_k, d_v, seed):
    rng = np.random.default_rng(seed)
    d_model = shape_x[-1]
    x = rng.normal(size=shape_x)
    return (
        x,
        rng.normal(size=(d_model, d_k)),
        rng.normal(size=(d_model, d_k)),
        rng.normal(size=(d_model, d_v)),
    )


def _random(shape, seed, scale=1.0):
    return (np.random.default_rng(seed).normal(size=shape) * scale,)


def _qkv(L, S, d_k, d_v, seed, batch=()):
    rng = np.random.default_rng(seed)
    return (
        rng.normal(size=(*batch, L, d_k)) * 1.5,
        rng.normal(size=(*batch, S, d_k)) * 1.5,
        rng.normal(size=(*batch, S, d_v)),
    )


def _worked_qkv():
    x, w_q, w_k, w_v = _worked_example()
    return x @ w_q, x @ w_k, x @ w_v


# --------------------------------------------------------------------------- wrong variants


def _softmax_cols(s):
    return anp.softmax(s, dim=-2)


def _softmax_no_keepdims(s):
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1)  # (..., L, S) / (..., L): broadcasts against the wrong axis


def _softmax_no_keepdims_unshifted(s):
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(s)
        return e / e.sum(axis=-1)  # the same slip, written without the max shift


def _softmax_axis0(s):
    e = np.exp(s - s.max(axis=0, keepdims=True))
    return e / e.sum(axis=0, keepdims=True)  # axis 0: the columns of a matrix, the batch of a stack


def _t(a):
    return np.swapaxes(a, -1, -2)


register(
    Exercise(
        id="ex-03-1",
        function="project_qkv",
        reference=project_qkv,
        cases=cases(
            _projections,
            {
                "the worked example: 4 words, 3x3 weights from seed 42": _worked_example,
                "5 tokens, d_model=4 -> d_k=3, d_v=2": ((5, 4), 3, 2, 0),
                "a batch: x (2, 5, 4)": ((2, 5, 4), 3, 3, 1),
                "hidden: one token, x (1, 4) -> d_k=2, d_v=3": ((1, 4), 2, 3, 3),
                "hidden: x (2, 3, 6, 8) -> d_k=4, d_v=5": ((2, 3, 6, 8), 4, 5, 2),
            },
        ),
        misconceptions=[
            Misconception(
                "multiplying by the weights transposed (x @ W.T)",
                lambda x, w_q, w_k, w_v: (x @ w_q.T, x @ w_k.T, x @ w_v.T),
                "W_Q has shape (d_model, d_k): a row vector of size d_model times W_Q gives size d_k, "
                "so write x @ W_Q with no transpose.",
            ),
            Misconception(
                "keys and values swapped",
                lambda x, w_q, w_k, w_v: (x @ w_q, x @ w_v, x @ w_k),
                "return (Q, K, V) in that order: K uses W_K and V uses W_V.",
            ),
            Misconception(
                "one weight matrix used for all three",
                lambda x, w_q, w_k, w_v: (x @ w_q, x @ w_q, x @ w_q),
                "each of Q, K and V has its own learned projection.",
            ),
        ],
        hints=(
            "each token's embedding is mapped three times, by three different learned matrices, "
            "into a query, a key and a value.",
            "x is (..., L, d_model) and each weight is (d_model, d_out): a row vector times the matrix "
            "gives d_out numbers, for every token at once.",
            "each projection is one matrix product of x with its weight matrix as it is given "
            "(d_model rows: no transpose); return the three projections in the order the exercise "
            "names them.",
        ),
    )
)

register(
    Exercise(
        id="ex-03-2",
        function="attention_scores",
        reference=attention_scores,
        cases=cases(
            x_wq_wk,
            {
                '"This is book": 3 tokens, d_model=5, d_k=3': this_is_book,
                "6 tokens, d_model=4, d_k=2": ((6, 4), 2, 3),
                "a batch: x (2, 4, 6), d_k=3": ((2, 4, 6), 3, 4),
                "hidden: x (3, 5, 8), d_k=4": ((3, 5, 8), 4, 5),
                "hidden: one token, d_model=6, d_k=4": ((1, 6), 4, 6),
            },
        ),
        misconceptions=[
            Misconception(
                "no 1/sqrt(d_k)",
                lambda x, w_q, w_k: (x @ w_q) @ _t(x @ w_k),
                "divide the dot products by sqrt(d_k) (d_k = W_Q.shape[-1]).",
            ),
            Misconception(
                "sqrt(d_model) instead of sqrt(d_k)",
                lambda x, w_q, w_k: (x @ w_q) @ _t(x @ w_k) / math.sqrt(x.shape[-1]),
                "the scale is the size of a query/key vector, d_k = W_Q.shape[-1], not the embedding "
                "size d_model = x.shape[-1].",
            ),
            Misconception(
                "divided by d_k instead of sqrt(d_k)",
                lambda x, w_q, w_k: (x @ w_q) @ _t(x @ w_k) / w_q.shape[-1],
                "the standard deviation of q.k grows like sqrt(d_k): divide by its square root.",
            ),
            Misconception(
                "K transposed with .T, which reverses the batch axes too (or not transposed at all)",
                # batched inputs make NumPy refuse both Q @ K.T and Q @ K with the same error; the
                # judge names this variant when the learner's code raises it
                lambda x, w_q, w_k: (x @ w_q) @ (x @ w_k).T / math.sqrt(w_q.shape[-1]),
                "with leading (batch) axes .T reverses every axis, the batch axes too: transpose only"
                " the last two axes of the keys (NumPy has a function that swaps two chosen axes).",
            ),
            Misconception(
                "forgetting the transpose (Q @ K)",
                lambda x, w_q, w_k: (x @ w_q) @ (x @ w_k) / math.sqrt(w_q.shape[-1]),
                "entry (i, j) is q_i . k_j: multiply Q by K turned on its side (its last two axes "
                "swapped, so that batches stay in place).",
            ),
            Misconception(
                "the scores transposed (K Q^T)",
                lambda x, w_q, w_k: (x @ w_k) @ _t(x @ w_q) / math.sqrt(w_q.shape[-1]),
                "row i belongs to query i: put Q on the left, Q @ K^T.",
            ),
        ],
        forbidden=SCALED_SCORE_IMPLEMENTATIONS,
        hints=(
            "score (i, j) says how well query i matches key j: their dot product, scaled so that it "
            "does not grow with the vector size.",
            "all dot products at once are one matrix product of the queries with the keys turned on "
            "their side; the scale uses d_k, the size of one query/key vector.",
            "scores = Q K^T / sqrt(d_k), with Q = x W_Q, K = x W_K and d_k the width of W_Q; for "
            "batched x transpose only the last two axes of K.",
        ),
    )
)

register(
    Exercise(
        id="ex-03-3",
        function="row_softmax",
        reference=row_softmax,
        cases=cases(
            _random,
            {
                "2 queries, 4 keys": ((2, 4), 6, 2.0),
                "square 4 x 4": ((4, 4), 7, 2.0),
                "a batch (2, 3, 5)": ((2, 3, 5), 8, 2.0),
                "hidden: (2, 2, 3, 6)": ((2, 2, 3, 6), 9, 3.0),
                "hidden: one key per row (3, 1)": ((3, 1), 10, 2.0),
            },
        ),
        misconceptions=[
            Misconception(
                "softmax over the wrong axis (columns)",
                _softmax_cols,
                "each query's weights over the keys must sum to 1: normalise along the last axis "
                "(axis=-1, keepdims=True), not down the columns.",
            ),
            Misconception(
                "normalised over the whole array",
                lambda s: np.exp(s - s.max()) / np.exp(s - s.max()).sum(),
                "sum along the last axis only, with keepdims=True, so that every row sums to 1.",
            ),
            Misconception(
                "no exponential",
                lambda s: s / s.sum(axis=-1, keepdims=True),
                "softmax is exp(s) / sum(exp(s)); without exp weights can be negative.",
            ),
            Misconception(
                "the row sums taken without keepdims (divides along the wrong axis)",
                _softmax_no_keepdims,
                "sum(axis=-1) drops the axis, so the division lines the sums up with the columns: "
                "use keepdims=True, shape (..., L, 1).",
                variants=(_softmax_no_keepdims_unshifted,),
            ),
            Misconception(
                "softmax over axis 0 (the first axis) instead of the last",
                _softmax_axis0,
                "axis 0 is the columns of one matrix and the batch of a stack of them: the weights of "
                "one query run along the last axis, axis=-1, whatever the number of leading axes.",
            ),
        ],
        forbidden=SOFTMAX_IMPLEMENTATIONS,
        hints=(
            "each query's weights over the keys are positive and sum to 1: a softmax of every row "
            "(the last axis).",
            "exponentiate, then divide each row by its own sum; keep the summed axis so that the "
            "division lines up with the rows, and subtract the row maximum first so exp cannot overflow.",
            "w_ij = exp(s_ij - m_i) / sum_k exp(s_ik - m_i), with m_i the largest score of row i; "
            "keep the reduced axes so that they line up with the rows.",
        ),
    )
)

register(
    Exercise(
        id="ex-03-4",
        function="attention_output",
        reference=attention_output,
        cases=cases(
            _qkv,
            {
                "the worked example's Q, K, V (4 words)": _worked_qkv,
                "2 queries, 5 keys, d_k=4, d_v=3": (2, 5, 4, 3, 10),
                "a batch of 2: 3 queries, 3 keys, d_k=2, d_v=5": (3, 3, 2, 5, 11, (2,)),
                "hidden: (2, 2) batch, 4 queries, 6 keys": (4, 6, 8, 3, 12, (2, 2)),
                "hidden: one query, one key": (1, 1, 4, 2, 13),
            },
        ),
        misconceptions=[
            Misconception(
                "no 1/sqrt(d_k)",
                lambda q, k, v: anp.softmax(q @ _t(k), dim=-1) @ v,
                "scale the scores by 1/sqrt(d_k) before the softmax.",
            ),
            Misconception(
                "softmax over the wrong axis (columns)",
                lambda q, k, v: anp.softmax(q @ _t(k) / math.sqrt(q.shape[-1]), dim=-2) @ v,
                "the weights of one query sum to 1 over the keys: softmax along the last axis.",
            ),
            Misconception(
                "sqrt(d_v) instead of sqrt(d_k)",
                lambda q, k, v: anp.softmax(q @ _t(k) / math.sqrt(v.shape[-1]), dim=-1) @ v,
                "the scale comes from the size of the vectors in the dot product, d_k = q.shape[-1].",
            ),
            Misconception(
                "k.T on batched keys: .T reverses the batch axes too",
                # batched inputs make NumPy refuse q @ k.T; named when the learner's code raises the same
                lambda q, k, v: anp.softmax(q @ k.T / math.sqrt(q.shape[-1]), dim=-1) @ v,
                "with leading (batch) axes .T reverses every axis, the batch axes too: transpose only"
                " the last two axes of the keys (NumPy has a function that swaps two chosen axes).",
            ),
            Misconception(
                "the weights transposed (W^T V)",
                lambda q, k, v: _t(anp.softmax(q @ _t(k) / math.sqrt(q.shape[-1]), dim=-1)) @ v,
                "output row i is sum_j w_ij v_j: weights (L, S) @ values (S, d_v).",
            ),
        ],
        forbidden=ATTENTION_IMPLEMENTATIONS,
        hints=(
            "each output row is a weighted average of the values; the weights come from how well the "
            "query matches each key.",
            "scores (..., L, S) from queries and keys, scaled by 1/sqrt(d_k); a stable softmax over the "
            "keys (the last axis); then weights times values.",
            "output = softmax(Q K^T / sqrt(d_k)) V, the softmax along the keys (the last axis, row "
            "maximum subtracted), K transposed on its last two axes only; shape (..., L, d_v).",
        ),
    )
)

# The written question of solutions/03-queries-keys-values.ipynb (graded by hand): check_all lists it.
register_written("q-03-1", points=1)
