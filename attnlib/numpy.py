"""NumPy mirrors of the attnlib functions, for the chapters before PyTorch.

Same names, shapes, fully-masked-row policy (zero weights, zero output) and
errors as the PyTorch versions; the checks themselves live in
`attnlib._validate` and are shared.
"""

from __future__ import annotations

import math

import numpy as np

from attnlib._validate import (
    as_shape,
    broadcast_batch,
    check_attention,
    check_floating,
    check_length,
    check_lengths,
    check_query_key,
)

__all__ = [
    "additive_scores",
    "causal_mask",
    "cosine_scores",
    "dot_scores",
    "general_scores",
    "logsumexp",
    "padding_mask",
    "scaled_dot_product_attention",
    "scaled_dot_scores",
    "softmax",
]

_LOW_PRECISION = (np.float16,)


def _as_float(fn: str, **arrays) -> list[np.ndarray]:
    """Convert to arrays and insist they are floating and of one dtype."""
    out = {name: np.asarray(a) for name, a in arrays.items()}
    check_floating(
        fn, [(n, str(a.dtype), np.issubdtype(a.dtype, np.floating)) for n, a in out.items()]
    )
    return list(out.values())


def _upcast(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float32) if x.dtype in _LOW_PRECISION else x


def _shifted_exp(x: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`(max, exp(x - max), sum)` along `axis`, keeping it; an all -inf row is shifted by 0."""
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0).astype(x.dtype)
    e = np.exp(x - m)
    return m, e, np.sum(e, axis=axis, keepdims=True)


def softmax(x: np.ndarray, dim: int = -1) -> np.ndarray:
    """Softmax along `dim`; an all -inf slice gives zeros. Returns the shape and dtype of `x`."""
    (x,) = _as_float("softmax", x=x)
    xf = _upcast(x)
    _, e, s = _shifted_exp(xf, dim)
    out = e / np.where(s > 0, s, 1.0).astype(xf.dtype)
    return out.astype(x.dtype)


def logsumexp(x: np.ndarray, dim: int = -1, keepdim: bool = False) -> np.ndarray:
    """log(sum(exp(x), dim)) without overflow; -inf for an all -inf slice."""
    (x,) = _as_float("logsumexp", x=x)
    xf = _upcast(x)
    m, _, s = _shifted_exp(xf, dim)
    positive = s > 0
    out = m + np.log(np.where(positive, s, 1.0).astype(xf.dtype))
    out = np.where(positive, out, -np.inf).astype(xf.dtype)
    if not keepdim:
        out = np.squeeze(out, axis=dim)
    return out.astype(x.dtype)


def _t(x: np.ndarray) -> np.ndarray:
    """Swap the last two axes: (..., S, E) -> (..., E, S)."""
    return np.swapaxes(x, -1, -2)


def dot_scores(query: np.ndarray, key: np.ndarray) -> np.ndarray:
    """query (..., L, E), key (..., S, E) -> scores q_i . k_j (..., L, S)."""
    query, key = _as_float("dot_scores", query=query, key=key)
    check_query_key("dot_scores", query.shape, key.shape)
    return query @ _t(key)  # (..., L, S)


def scaled_dot_scores(query: np.ndarray, key: np.ndarray, scale: float | None = None) -> np.ndarray:
    """query (..., L, E), key (..., S, E) -> (q_i . k_j) * scale (..., L, S); scale 1/sqrt(E)."""
    query, key = _as_float("scaled_dot_scores", query=query, key=key)
    check_query_key("scaled_dot_scores", query.shape, key.shape)
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1])
    return (query @ _t(key)) * query.dtype.type(scale)  # (..., L, S)


def general_scores(query: np.ndarray, key: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """query (..., L, E_q), key (..., S, E_k), weight (E_q, E_k) -> q_i W k_j (..., L, S)."""
    fn = "general_scores"
    query, key, weight = _as_float(fn, query=query, key=key, weight=weight)
    q_shape, k_shape, w_shape = as_shape(query.shape), as_shape(key.shape), as_shape(weight.shape)
    if query.ndim < 2 or key.ndim < 2:
        raise ValueError(f"{fn}: query {q_shape} and key {k_shape} need at least 2 dimensions")
    if w_shape != (q_shape[-1], k_shape[-1]):
        raise ValueError(
            f"{fn}: weight must have shape (E_q, E_k) = {(q_shape[-1], k_shape[-1])} for "
            f"query {q_shape} and key {k_shape}, got {w_shape}"
        )
    broadcast_batch(fn, query=q_shape, key=k_shape)
    return (query @ weight) @ _t(key)  # (..., L, E_k) @ (..., E_k, S) -> (..., L, S)


def cosine_scores(query: np.ndarray, key: np.ndarray, eps: float = 1e-8) -> np.ndarray:
    """query (..., L, E), key (..., S, E) -> cosine similarities (..., L, S).

    Norms are clamped at `eps`, so a zero vector scores 0.
    """
    query, key = _as_float("cosine_scores", query=query, key=key)
    check_query_key("cosine_scores", query.shape, key.shape)
    q = query / np.maximum(np.linalg.norm(query, axis=-1, keepdims=True), eps)  # (..., L, E)
    k = key / np.maximum(np.linalg.norm(key, axis=-1, keepdims=True), eps)  # (..., S, E)
    return (q @ _t(k)).astype(query.dtype)  # (..., L, S)


def additive_scores(
    query: np.ndarray, key: np.ndarray, w_query: np.ndarray, w_key: np.ndarray, v: np.ndarray
) -> np.ndarray:
    """v^T tanh(W_q q_i + W_k k_j).

    query (..., L, E_q), key (..., S, E_k), w_query (H, E_q), w_key (H, E_k),
    v (H,) -> scores (..., L, S).
    """
    fn = "additive_scores"
    query, key, w_query, w_key, v = _as_float(
        fn, query=query, key=key, w_query=w_query, w_key=w_key, v=v
    )
    q_shape, k_shape = as_shape(query.shape), as_shape(key.shape)
    if query.ndim < 2 or key.ndim < 2:
        raise ValueError(f"{fn}: query {q_shape} and key {k_shape} need at least 2 dimensions")
    if v.ndim != 1:
        raise ValueError(f"{fn}: v must have shape (H,), got {as_shape(v.shape)}")
    H = v.shape[0]
    expected = {"w_query": (H, q_shape[-1]), "w_key": (H, k_shape[-1])}
    for name, w in (("w_query", w_query), ("w_key", w_key)):
        if as_shape(w.shape) != expected[name]:
            raise ValueError(
                f"{fn}: {name} must have shape (H, E) = {expected[name]} for query {q_shape}, "
                f"key {k_shape} and v {as_shape(v.shape)}, got {as_shape(w.shape)}"
            )
    broadcast_batch(fn, query=q_shape, key=k_shape)
    q = query @ w_query.T  # (..., L, H)
    k = key @ w_key.T  # (..., S, H)
    hidden = np.tanh(q[..., :, None, :] + k[..., None, :, :])  # (..., L, S, H)
    return hidden @ v  # (..., L, S)


def scaled_dot_product_attention(
    query: np.ndarray,
    key: np.ndarray,
    value: np.ndarray,
    attn_mask: np.ndarray | None = None,
    is_causal: bool = False,
    scale: float | None = None,
    return_weights: bool = False,
):
    """softmax(q k^T * scale + mask) v, the NumPy twin of the PyTorch version.

    Args:
        query: (..., L, E); key: (..., S, E); value: (..., S, Ev).
        attn_mask: None, bool broadcastable to (..., L, S) (True = may attend),
            or float broadcastable to (..., L, S) added to the scores.
        is_causal: forbid key j > query i, top-left aligned.
        scale: None means 1/sqrt(E).
        return_weights: also return the weights.

    Returns:
        output (..., L, Ev), or `(output, weights)` with weights (..., L, S).
        Fully masked rows give zero weights and zero output.
    """
    fn = "scaled_dot_product_attention"
    query, key, value = _as_float(fn, query=query, key=key, value=value)
    mask = None if attn_mask is None else np.asarray(attn_mask)
    _, L, S = check_attention(
        fn, query.shape, key.shape, value.shape, None if mask is None else mask.shape
    )
    if mask is not None and not (mask.dtype == np.bool_ or np.issubdtype(mask.dtype, np.floating)):
        raise TypeError(f"{fn}: attn_mask must be bool or floating, got dtype {mask.dtype}")

    out_dtype = query.dtype
    query, key, value = _upcast(query), _upcast(key), _upcast(value)
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1])
    scores = (query @ _t(key)) * query.dtype.type(scale)  # (..., L, S)
    if is_causal:
        scores = np.where(causal_mask(L, S), scores, -np.inf)  # (..., L, S)
    if mask is not None:
        if mask.dtype == np.bool_:
            scores = np.where(mask, scores, -np.inf)  # broadcasts to (..., L, S)
        else:
            scores = scores + mask.astype(scores.dtype)  # broadcasts to (..., L, S)
    scores = scores.astype(query.dtype)
    weights = softmax(scores, dim=-1)  # (..., L, S)
    output = (weights @ value).astype(out_dtype)  # (..., L, Ev)
    if return_weights:
        return output, weights.astype(out_dtype)
    return output


def padding_mask(lengths, max_len: int | None = None) -> np.ndarray:
    """lengths (B,) -> bool (B, max_len), True for real tokens; max_len defaults to max(lengths)."""
    fn = "padding_mask"
    if isinstance(lengths, np.ndarray):
        if lengths.ndim != 1:
            raise ValueError(f"{fn}: lengths must be 1-D (B,), got shape {as_shape(lengths.shape)}")
        values = lengths.tolist()
    else:
        values = list(lengths)
    ints, max_len = check_lengths(fn, values, max_len)
    lens = np.asarray(ints, dtype=np.int64).reshape(-1)  # (B,)
    return np.arange(max_len)[None, :] < lens[:, None]  # (B, max_len)


def causal_mask(q_len: int, k_len: int | None = None, diagonal: int = 0) -> np.ndarray:
    """bool (q_len, k_len), True where key j <= i + diagonal (top-left aligned)."""
    fn = "causal_mask"
    q_len = check_length(fn, "q_len", q_len)
    k_len = q_len if k_len is None else check_length(fn, "k_len", k_len)
    if isinstance(diagonal, bool) or not isinstance(diagonal, int):
        raise ValueError(f"{fn}: diagonal must be an integer, got {diagonal!r}")
    return np.tri(q_len, k_len, k=diagonal, dtype=bool)  # (L, S)
