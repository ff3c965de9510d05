"""Chapter 02 exercises: additive (Bahdanau) scores, weights and context, then the batched module."""

import numpy as np
import torch

from attnlib import numpy as anp
from attnlib.checks._cases import cases
from attnlib.checks.core import Exercise, Misconception, register, reset_parameters
from attnlib.checks.rules import SOFTMAX_IMPLEMENTATIONS
from attnlib.modules import AdditiveAttention

# --------------------------------------------------------------------------- ex-02-1: scores


def alignment_scores(s_prev: np.ndarray, H: np.ndarray, W: np.ndarray, U: np.ndarray, v: np.ndarray):
    """e_j = v^T tanh(W s_prev + U h_j) for every row h_j of H: (D_s,), (S, D_h) -> (S,)."""
    return anp.additive_scores(s_prev[None, :], H, W, U, v)[0]  # (1, S) -> (S,)


def _score_inputs(d_s, d_h, a, s, seed):
    rng = np.random.default_rng(seed)
    return (
        rng.normal(size=d_s),
        rng.normal(size=(s, d_h)),
        rng.normal(size=(a, d_s)),
        rng.normal(size=(a, d_h)),
        rng.normal(size=a),
    )


def _concatenated(s_prev, H, W, U, v):
    S = H.shape[0]
    both = np.concatenate([np.tile(W @ s_prev, (S, 1)), H @ U.T], axis=1)  # (S, 2A)
    return np.tanh(both) @ v  # (S, 2A) @ (A,): a shape error


register(
    Exercise(
        id="ex-02-1",
        function="alignment_scores",
        reference=alignment_scores,
        cases=cases(
            _score_inputs,
            {
                "decoder state of 3, 5 encoder states of 4, A = 6": (3, 4, 6, 5, 0),
                "one encoder state": (2, 3, 4, 1, 1),
                "equal sizes: D_s = D_h = A = 4, 7 states": (4, 4, 4, 7, 2),
                "hidden: D_s = 5, D_h = 8, A = 3, 9 states": (5, 8, 3, 9, 3),
            },
        ),
        misconceptions=[
            Misconception(
                "tanh applied to W s and U h separately, then added",
                lambda s, H, W, U, v: (np.tanh(H @ U.T) + np.tanh(W @ s)) @ v,
                "add W s_{i-1} and U h_j first, then take one tanh of the sum: v^T tanh(W s + U h).",
            ),
            Misconception(
                "no tanh",
                lambda s, H, W, U, v: (H @ U.T + W @ s) @ v,
                "without the tanh the score is linear in h_j; apply tanh to W s + U h before v.",
            ),
            Misconception(
                "W s and U h concatenated instead of added",
                _concatenated,
                "Bahdanau's score adds the two projections (both have A numbers); "
                "concatenating gives 2A numbers that v (A numbers) cannot reduce.",
            ),
            Misconception(
                "v applied before the tanh",
                lambda s, H, W, U, v: np.tanh((H @ U.T + W @ s) @ v),
                "v reduces the A-vector tanh(W s + U h) to one number: tanh first, then v.",
            ),
            Misconception(
                "U applied without transposing (H @ U instead of H @ U.T)",
                lambda s, H, W, U, v: np.tanh(W @ s + H @ U) @ v,
                "U has shape (A, D_h) and maps one column vector h_j to U h_j; with the states as the"
                " rows of H, all of them at once need U turned on its side, to give (S, A).",
            ),
        ],
        forbidden=(
            "attnlib.numpy.additive_scores",
            "attnlib.scores.additive_scores",
            "attnlib.additive_scores",
        ),
        hints=(
            "the score of position j compares the decoder state with h_j through one small "
            "hidden layer: project both to A numbers, add, squash, reduce to one number.",
            "W @ s_prev is (A,) and the same for every j; the encoder states can be projected all at "
            "once to (S, A); broadcasting adds the two.",
            "e_j = v^T tanh(W s_prev + U h_j) for every source position j; with the states h_j as the"
            " rows of H, the projections U h_j of all of them at once are one product of H with U "
            "turned on its side, shape (S, A).",
        ),
    )
)

# --------------------------------------------------------------------------- ex-02-2: weights


def alignment_weights(scores: np.ndarray):
    """Softmax of every row of scores (T, S) over the source positions (the last axis)."""
    return anp.softmax(scores, dim=-1)


def _naive_softmax(e):
    with np.errstate(over="ignore", invalid="ignore"):
        return np.exp(e) / np.exp(e).sum(axis=-1, keepdims=True)


def _sum_normalised(e):
    with np.errstate(divide="ignore", invalid="ignore"):  # a row summing to 0 is this mistake's own
        return e / e.sum(axis=-1, keepdims=True)


def _global_max_softmax(e):
    with np.errstate(over="ignore", invalid="ignore"):
        x = np.exp(e - e.max())
        return x / x.sum(axis=-1, keepdims=True)


def _no_keepdims_softmax(e):
    x = np.exp(e - e.max(axis=-1, keepdims=True))
    return x / x.sum(axis=-1)


def _weight_inputs(shape, seed, scale=1.0):
    return (np.random.default_rng(seed).normal(size=shape) * scale,)


register(
    Exercise(
        id="ex-02-2",
        function="alignment_weights",
        reference=alignment_weights,
        cases=cases(
            _weight_inputs,
            {
                "3 decoder steps, 4 source positions": ((3, 4), 0),
                "one decoder step, 5 source positions": ((1, 5), 1),
                "large scores (around 1000)": lambda: (
                    np.array([[1000.0, 1001.0, 999.0], [5.0, 800.0, 801.0]]),
                ),
                # the text's "softmax of each row": a global maximum underflows the second row
                "two rows 1000 apart": lambda: (np.array([[1000.0, 1001.0, 999.0], [0.0, 1.0, 2.0]]),),
                "hidden: 6 steps, 6 positions": lambda: _weight_inputs((6, 6), 3, scale=3.0),
                "hidden: two rows 1000 apart": lambda: (
                    np.array([[1000.0, 1001.5, 999.0, 998.0], [0.5, 2.0, 1.0, -1.0]]),
                ),
                "hidden: three rows, one near 1000": lambda: (
                    np.array([[-5.0, -3.0, -4.0], [995.0, 996.0, 994.0], [0.0, 0.0, 0.0]]),
                ),
            },
        ),
        misconceptions=[
            Misconception(
                "softmax over the wrong axis (over decoder steps)",
                lambda e: anp.softmax(e, dim=0),
                "each decoder step i distributes its attention over the source positions j: "
                "normalise along the last axis, so that every row sums to 1.",
            ),
            Misconception(
                "exp without normalising",
                lambda e: np.exp(e - e.max(axis=-1, keepdims=True)),
                "divide by the sum over the source positions so that the weights sum to 1.",
            ),
            Misconception(
                "scores divided by their sum (no exp)",
                _sum_normalised,
                "the softmax takes exp of the scores first: weights must be positive.",
            ),
            Misconception(
                "exp of the raw scores (overflows for large scores)",
                _naive_softmax,
                "subtract each row's maximum before exp: softmax(e) = softmax(e - max e), "
                "and exp(1000) overflows.",
            ),
            Misconception(
                "the global maximum subtracted instead of each row's maximum",
                _global_max_softmax,
                "a row far below the largest score of the whole array underflows to all zeros (0/0): "
                "subtract each row's own maximum (axis=-1, keepdims=True).",
            ),
            Misconception(
                "the sum taken without keepdims (divides along the wrong axis)",
                _no_keepdims_softmax,
                "e.sum(axis=-1) has shape (T,), which broadcasts against the columns, not the rows: "
                "keep the axis with keepdims=True, shape (T, 1).",
            ),
        ],
        forbidden=SOFTMAX_IMPLEMENTATIONS,
        hints=(
            "each decoder step distributes one unit of attention over the source positions: the "
            "weights of a row are positive and sum to 1 (a softmax along the last axis).",
            "exp of a score of 1000 overflows; the softmax does not change when the same number is "
            "subtracted from a whole row, so subtract the row's maximum first.",
            "w_ij = exp(e_ij - m_i) / sum_k exp(e_ik - m_i), with m_i the largest score of row i; "
            "keep the reduced axes so that they line up with the rows.",
        ),
    )
)

# --------------------------------------------------------------------------- ex-02-3: context


def attention_context(weights: np.ndarray, H: np.ndarray):
    """c_i = sum_j w_ij h_j: weights (T, S), H (S, D_h) -> (T, D_h)."""
    return weights @ H  # (T, S) @ (S, D_h) -> (T, D_h)


def _context_inputs(t, s, d, seed):
    rng = np.random.default_rng(seed)
    return anp.softmax(rng.normal(size=(t, s)) * 2, dim=-1), rng.normal(size=(s, d))


register(
    Exercise(
        id="ex-02-3",
        function="attention_context",
        reference=attention_context,
        cases=cases(
            _context_inputs,
            {
                "2 steps over 4 states of size 3": (2, 4, 3, 0),
                "square: 5 steps over 5 states of size 2": (5, 5, 2, 1),
                "one step over 6 states of size 4": (1, 6, 4, 2),
                "hidden: 3 steps over 7 states of size 5": (3, 7, 5, 3),
            },
        ),
        misconceptions=[
            Misconception(
                "the encoder states summed without the weights",
                lambda w, H: np.tile(H.sum(axis=0), (w.shape[0], 1)),
                "weight each h_j by w_ij before summing: the weights are what makes the context "
                "different at every step.",
            ),
            Misconception(
                "the plain average of the encoder states",
                lambda w, H: np.tile(H.mean(axis=0), (w.shape[0], 1)),
                "an average gives every h_j the same weight 1/S; use the attention weights w_ij instead.",
            ),
            Misconception(
                "weights transposed",
                lambda w, H: w.T @ H,
                "row i of the weights belongs to decoder step i: weights (T, S) @ H (S, D_h).",
            ),
            Misconception(
                "the weighted states summed over the decoder steps instead of the source positions",
                lambda w, H: (w[:, :, None] * H[None, :, :]).sum(axis=0),
                "c_i sums over the source positions j (axis 1 of the weights), one context per step i.",
            ),
        ],
        hints=(
            "the context of step i is a weighted average of the encoder states, with that step's "
            "attention weights.",
            "c_i = sum_j w_ij h_j: the sum runs over the source positions j, once for every step i.",
            "all steps at once: one matrix product, with the steps as the rows of the weights and the"
            " features of the states as the columns of H: (T, S) and (S, D_h) give (T, D_h).",
        ),
    )
)

# --------------------------------------------------------------------------- ex-02-4: batched module


def additive_attention_forward(module: AdditiveAttention, query, keys, key_mask):
    """One decoder step for a batch.

    query (B, D_s), keys (B, S, D_h), key_mask bool (B, S) -> (context (B, D_h), weights (B, S)).
    """
    return module(query, keys, key_mask=key_mask)


def _module_inputs(b, s, d_s, d_h, a, lengths, seed):
    g = torch.Generator().manual_seed(seed)  # private: never torch's global generator
    module = reset_parameters(AdditiveAttention(d_s, d_h, a).double(), g)
    query = torch.randn(b, d_s, dtype=torch.float64, generator=g)
    keys = torch.randn(b, s, d_h, dtype=torch.float64, generator=g)
    key_mask = torch.arange(s)[None, :] < torch.tensor(lengths)[:, None]  # (B, S)
    return module, query, keys, key_mask


def _parts(module, query, keys):
    w_q, w_k = module.w_query.weight, module.w_key.weight  # (A, D_s), (A, D_h)
    v = module.v.weight[0]  # (A,)
    return w_q, w_k, v


def _scores(module, query, keys):
    w_q, w_k, v = _parts(module, query, keys)
    return torch.tanh((query @ w_q.T)[:, None, :] + keys @ w_k.T) @ v  # (B, S)


def _mask_after_softmax(module, query, keys, key_mask):
    weights = torch.softmax(_scores(module, query, keys), dim=-1) * key_mask  # zeroed, not renormalised
    return (weights[:, :, None] * keys).sum(dim=1), weights


def _no_mask(module, query, keys, key_mask):
    return module(query, keys)


def _mask_with_zero(module, query, keys, key_mask):
    weights = torch.softmax(_scores(module, query, keys).masked_fill(~key_mask, 0.0), dim=-1)
    return (weights[:, :, None] * keys).sum(dim=1), weights


def _softmax_over_batch(module, query, keys, key_mask):
    scores = _scores(module, query, keys).masked_fill(~key_mask, float("-inf"))
    weights = torch.softmax(scores, dim=0)
    return (weights[:, :, None] * keys).sum(dim=1), weights


def _concatenated_t(module, query, keys, key_mask):
    w_q, w_k, v = _parts(module, query, keys)
    S = keys.shape[1]
    both = torch.cat([(query @ w_q.T)[:, None, :].expand(-1, S, -1), keys @ w_k.T], dim=-1)  # (B, S, 2A)
    scores = torch.tanh(both) @ v  # shape error
    weights = torch.softmax(scores.masked_fill(~key_mask, float("-inf")), dim=-1)
    return (weights[:, :, None] * keys).sum(dim=1), weights


register(
    Exercise(
        id="ex-02-4",
        function="additive_attention_forward",
        reference=additive_attention_forward,
        cases=cases(
            _module_inputs,
            {
                "batch of 2, lengths 4 and 2 (padded to 4)": (2, 4, 3, 5, 6, [4, 2], 0),
                "batch of 3, lengths 5, 1, 3": (3, 5, 4, 2, 3, [5, 1, 3], 1),
                "batch of 2, no padding": (2, 3, 2, 2, 4, [3, 3], 2),
                "hidden: batch of 2, one source position": (2, 1, 3, 4, 5, [1, 1], 4),
                "hidden: batch of 4, lengths 6, 2, 4, 1": (4, 6, 5, 3, 7, [6, 2, 4, 1], 3),
            },
        ),
        misconceptions=[
            Misconception(
                "the padding mask is ignored",
                _no_mask,
                "PAD positions must get weight 0: set their scores to -inf before the softmax.",
            ),
            Misconception(
                "the mask is applied after the softmax",
                _mask_after_softmax,
                "zeroing weights after the softmax leaves rows that no longer sum to 1: "
                "mask the scores (with -inf) before the softmax.",
            ),
            Misconception(
                "masked scores set to 0 instead of -inf",
                _mask_with_zero,
                "a score of 0 still gets weight exp(0) > 0: masked scores must be -inf.",
            ),
            Misconception(
                "softmax over the batch axis",
                _softmax_over_batch,
                "the softmax runs over the source positions (the last axis), separately for each sequence.",
            ),
            Misconception(
                "W s and U h concatenated instead of added",
                _concatenated_t,
                "add the projections W s (B, 1, A) and U h (B, S, A), broadcasting over S; "
                "do not concatenate them.",
            ),
        ],
        rtol=1e-6,
        atol=1e-8,
        forbidden=(
            "module()",
            ".forward",
            "attnlib.modules.AdditiveAttention",
            "attnlib.AdditiveAttention",
            "attnlib.scores.additive_scores",
            "attnlib.additive_scores",
        ),
        hints=(
            "the same three steps as before (scores, weights, context), now for a batch at once, and "
            "padded source positions must get weight 0.",
            "the module holds W (w_query), U (w_key) and v as Linear weights; a blocked score must "
            "lose the softmax completely, whatever the other scores are.",
            "scores (B, S) = tanh(W s[:, None, :] + U h) @ v; -inf where key_mask is False; softmax "
            "over the last axis; context = sum_j w_j h_j: (B, D_h). Return (context, weights).",
        ),
    )
)
