"""NumPy mirrors of the attnlib functions, for the chapters before PyTorch (chapters 1 to 3).

Same names, shapes, fully-masked-row policy (zero weights, zero output) and
errors as the PyTorch versions; the checks themselves live in
`attnlib._validate` and are shared. So are the docstrings' parameter, return
and error sections: a line such as ``{dot_scores}`` in a docstring below is
filled in from `attnlib._doc` (``help(dot_scores)`` shows the full text).
"""

from __future__ import annotations

import functools

import numpy as np

from attnlib._doc import NUMPY
from attnlib._validate import (
    check_additive,
    check_attention,
    check_causal,
    check_dim,
    check_flag,
    check_floating,
    check_general,
    check_keepdim,
    check_lengths,
    check_query_key,
    kept_shape,
    lengths_list,
    scale_or_default,
)

__all__ = [
    "additive_scores",
    "causal_mask",
    "cosine_scores",
    "dot_scores",
    "general_scores",
    "log_softmax",
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
    check_floating(fn, [(n, str(a.dtype), np.issubdtype(a.dtype, np.floating)) for n, a in out.items()])
    return list(out.values())


def _query_key(fn: str, query, key) -> list[np.ndarray]:
    """query (..., L, E) and key (..., S, E) as floating arrays of one dtype, batch dimensions broadcast."""
    query, key = _as_float(fn, query=query, key=key)
    check_query_key(fn, query.shape, key.shape)
    return [query, key]


def _quiet(fn):
    """Run ``fn`` without NumPy's floating point warnings: NaN/inf inputs give NaN quietly, as in torch."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with np.errstate(all="ignore"):
            return fn(*args, **kwargs)

    return wrapper


def _upcast(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float32) if x.dtype in _LOW_PRECISION else x


def _x_dim(fn: str, x: object, dim: object) -> tuple[np.ndarray, int]:
    """``x`` as a floating array and ``dim`` as one of its axes (>= 0)."""
    (x,) = _as_float(fn, x=x)
    return x, check_dim(fn, dim, x.ndim)


def _empty_along(x: np.ndarray, dim: int) -> bool:
    """True when the slices along ``dim`` hold no entries (a 0-d array is one entry)."""
    return x.ndim > 0 and x.shape[dim] == 0


def _nonzero(s: np.ndarray) -> np.ndarray:
    """``s`` with zeros replaced by 1 (NaN stays NaN, so it propagates)."""
    return np.where(s == 0, 1.0, s).astype(s.dtype)


def _shifted_exp(x: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(max, exp(x - max), sum)`` along a non-empty ``axis``, keeping it.

    An all -inf row is shifted by 0; a NaN or +inf maximum is kept, so that
    the row becomes NaN exactly as in torch.
    """
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(m == -np.inf, 0.0, m).astype(x.dtype)
    with np.errstate(invalid="ignore", over="ignore"):  # NaN/inf rows give NaN, as in torch
        e = np.exp(x - m)
    return m, e, np.sum(e, axis=axis, keepdims=True)


@NUMPY
def softmax(x: np.ndarray, dim: int = -1) -> np.ndarray:
    """Softmax along ``dim``, the NumPy twin of :func:`attnlib.softmax`.

    Parameters
    ----------
    x : array_like
        Floating array of any shape; ``-inf`` entries get weight 0.
    dim : int
        The axis that sums to one.

    Returns
    -------
    numpy.ndarray
        Shape and dtype of ``x``; an all ``-inf`` slice gives zeros, a slice
        holding NaN or ``+inf`` is all NaN (as ``torch.softmax``).

    Raises
    ------
    {x_dim_errors}

    Examples
    --------
    >>> softmax(np.array([0.0, 0.0, -np.inf]))
    array([0.5, 0.5, 0. ])
    """
    x, dim = _x_dim("softmax", x, dim)
    if _empty_along(x, dim):
        return x.copy()
    _, e, s = _shifted_exp(_upcast(x), dim)
    with np.errstate(invalid="ignore"):
        # an all -inf slice has s == 0 and e == 0; dividing by 1 keeps it at zero
        out = e / _nonzero(s)
    return out.astype(x.dtype)


@NUMPY
def log_softmax(x: np.ndarray, dim: int = -1) -> np.ndarray:
    """Log of ``softmax(x, dim)``, the NumPy twin of :func:`attnlib.log_softmax`.

    Parameters
    ----------
    x : array_like
        Floating array of any shape.
    dim : int
        The axis over which the probabilities sum to one.

    Returns
    -------
    numpy.ndarray
        Shape and dtype of ``x``; ``-inf`` everywhere for an all ``-inf`` slice,
        all NaN for a slice holding NaN or ``+inf``.

    Raises
    ------
    {x_dim_errors}

    Examples
    --------
    >>> log_softmax(np.array([0.0, 0.0]))
    array([-0.69314718, -0.69314718])
    """
    x, dim = _x_dim("log_softmax", x, dim)
    if _empty_along(x, dim):
        return x.copy()
    xf = _upcast(x)
    m, _, s = _shifted_exp(xf, dim)
    with np.errstate(invalid="ignore"):
        out = xf - m - np.log(_nonzero(s))
    return out.astype(x.dtype)


def logsumexp(x: np.ndarray, dim: int = -1, keepdim: bool = False) -> np.ndarray:
    """``log(sum(exp(x), dim))`` without overflow, the NumPy twin of :func:`attnlib.logsumexp`.

    Parameters
    ----------
    x : array_like
        Floating array of any shape.
    dim : int
        The axis to reduce.
    keepdim : bool
        Keep ``dim`` with size 1.

    Returns
    -------
    numpy.ndarray
        Reduced array, dtype of ``x``: ``-inf`` for an all ``-inf`` or empty
        slice, NaN for a slice holding NaN, ``+inf`` for one holding ``+inf``.

    Raises
    ------
    TypeError
        ``x`` is not floating, ``dim`` not an int, ``keepdim`` not a bool.
    ValueError
        ``dim`` is out of range.

    Examples
    --------
    >>> float(logsumexp(np.array([1000.0, 1000.0])))  # log(2 e^1000)
    1000.6931471805599
    """
    fn = "logsumexp"
    x, dim = _x_dim(fn, x, dim)
    check_keepdim(fn, keepdim)
    xf = _upcast(x)
    if _empty_along(x, dim):  # the log of an empty sum
        out = np.full(kept_shape(x.shape, dim), -np.inf, dtype=xf.dtype)
    else:
        m = np.max(xf, axis=dim, keepdims=True)
        m = np.where(np.isinf(m), 0.0, m).astype(xf.dtype)  # torch's shift: +inf stays +inf
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            s = np.sum(np.exp(xf - m), axis=dim, keepdims=True)
            out = np.where(s == 0, -np.inf, m + np.log(_nonzero(s))).astype(xf.dtype)
    if not keepdim and x.ndim > 0:
        out = np.squeeze(out, axis=dim)
    return out.astype(x.dtype)


def _t(x: np.ndarray) -> np.ndarray:
    """Swap the last two axes: (..., S, E) -> (..., E, S)."""
    return np.swapaxes(x, -1, -2)


@_quiet
@NUMPY
def dot_scores(query: np.ndarray, key: np.ndarray) -> np.ndarray:
    """Dot-product scores ``q_i^T k_j``, the NumPy twin of :func:`attnlib.dot_scores`.

    {dot_scores}

    Examples
    --------
    >>> dot_scores(np.array([[1.0, 2.0]]), np.array([[3.0, 4.0], [1.0, 0.0]]))
    array([[11.,  1.]])
    """
    query, key = _query_key("dot_scores", query, key)
    return (_upcast(query) @ _t(_upcast(key))).astype(query.dtype)  # (..., L, S)


@_quiet
@NUMPY
def scaled_dot_scores(query: np.ndarray, key: np.ndarray, scale: float | None = None) -> np.ndarray:
    """Scaled dot-product scores ``(q_i^T k_j) * scale``, the twin of :func:`attnlib.scaled_dot_scores`.

    {scaled_dot_scores}

    Examples
    --------
    >>> scaled_dot_scores(np.ones((1, 4)), np.ones((1, 4)))
    array([[2.]])
    """
    fn = "scaled_dot_scores"
    query, key = _query_key(fn, query, key)
    scale = scale_or_default(fn, scale, query.shape[-1])
    q = _upcast(query)
    return ((q @ _t(_upcast(key))) * q.dtype.type(scale)).astype(query.dtype)  # (..., L, S)


@_quiet
@NUMPY
def general_scores(query: np.ndarray, key: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """Bilinear scores ``q_i^T W k_j``, the NumPy twin of :func:`attnlib.general_scores`.

    {general_scores}

    Examples
    --------
    >>> general_scores(np.array([[1.0, 2.0]]), np.array([[1.0]]), np.array([[1.0], [1.0]]))
    array([[3.]])
    """
    fn = "general_scores"
    query, key, weight = _as_float(fn, query=query, key=key, weight=weight)
    check_general(fn, query.shape, key.shape, weight.shape)
    out = (_upcast(query) @ _upcast(weight)) @ _t(_upcast(key))  # (..., L, E_k) @ (..., E_k, S)
    return out.astype(query.dtype)  # (..., L, S)


@_quiet
@NUMPY
def cosine_scores(query: np.ndarray, key: np.ndarray, eps: float = 1e-8) -> np.ndarray:
    """Cosine similarities, the NumPy twin of :func:`attnlib.cosine_scores`.

    Norms are clamped at ``eps``, so a zero vector scores 0.

    {cosine_scores}

    Examples
    --------
    >>> cosine_scores(np.array([[1.0, 0.0]]), np.array([[2.0, 0.0], [0.0, 0.0]]))
    array([[1., 0.]])
    """
    query, key = _query_key("cosine_scores", query, key)
    dtype, query, key = query.dtype, _upcast(query), _upcast(key)
    q = query / np.maximum(np.linalg.norm(query, axis=-1, keepdims=True), eps)  # (..., L, E)
    k = key / np.maximum(np.linalg.norm(key, axis=-1, keepdims=True), eps)  # (..., S, E)
    return (q @ _t(k)).astype(dtype)  # (..., L, S)


@_quiet
@NUMPY
def additive_scores(
    query: np.ndarray, key: np.ndarray, w_query: np.ndarray, w_key: np.ndarray, v: np.ndarray
) -> np.ndarray:
    """Additive scores ``v^T tanh(W_q q_i + W_k k_j)``, the twin of :func:`attnlib.additive_scores`.

    {additive_scores}

    Examples
    --------
    >>> additive_scores(np.zeros((1, 2)), np.zeros((3, 2)), np.ones((4, 2)), np.ones((4, 2)), np.ones(4))
    array([[0., 0., 0.]])
    """
    fn = "additive_scores"
    query, key, w_query, w_key, v = _as_float(fn, query=query, key=key, w_query=w_query, w_key=w_key, v=v)
    check_additive(fn, query.shape, key.shape, w_query.shape, w_key.shape, v.shape)
    dtype = query.dtype
    q = _upcast(query) @ _upcast(w_query).T  # (..., L, H)
    k = _upcast(key) @ _upcast(w_key).T  # (..., S, H)
    hidden = np.tanh(q[..., :, None, :] + k[..., None, :, :])  # (..., L, S, H)
    return (hidden @ _upcast(v)).astype(dtype)  # (..., L, S)


def scaled_dot_product_attention(
    query: np.ndarray,
    key: np.ndarray,
    value: np.ndarray,
    attn_mask: np.ndarray | None = None,
    is_causal: bool = False,
    scale: float | None = None,
    return_weights: bool = False,
):
    """``softmax(q k^T * scale + mask) v``, the twin of :func:`attnlib.scaled_dot_product_attention`.

    Parameters
    ----------
    query : array_like
        (..., L, E), floating.
    key : array_like
        (..., S, E).
    value : array_like
        (..., S, Ev). The three share one dtype; leading dimensions broadcast.
    attn_mask : array_like, optional
        bool broadcastable to (..., L, S) (True = may attend), or float
        broadcastable to (..., L, S) added to the scores.
    is_causal : bool
        Forbid key j > query i, top-left aligned; combined with ``attn_mask``.
    scale : float, optional
        None means ``1/sqrt(E)`` (1 when E = 0).
    return_weights : bool
        Also return the weights.

    Returns
    -------
    numpy.ndarray or tuple of numpy.ndarray
        output (..., L, Ev), or ``(output, weights)`` with weights (..., L, S).
        Fully masked rows give zero weights and zero output.

    Raises
    ------
    TypeError
        Non-floating inputs, different dtypes, a mask neither bool nor
        floating, non-bool flags, a non-number ``scale``.
    ValueError
        Rank < 2, E or S mismatch, batch dimensions or a mask that do not broadcast.

    Examples
    --------
    >>> q, k = np.array([[1.0, 0.0]]), np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> scaled_dot_product_attention(q, k, np.array([[1.0], [3.0]]), attn_mask=np.array([True, False]))
    array([[1.]])
    """
    fn = "scaled_dot_product_attention"
    query, key, value = _as_float(fn, query=query, key=key, value=value)
    mask = None if attn_mask is None else np.asarray(attn_mask)
    if mask is not None and not (mask.dtype == np.bool_ or np.issubdtype(mask.dtype, np.floating)):
        raise TypeError(f"{fn}: attn_mask must be bool or floating, got dtype {mask.dtype}")
    is_causal = check_flag(fn, "is_causal", is_causal)
    return_weights = check_flag(fn, "return_weights", return_weights)
    _, L, S = check_attention(fn, query.shape, key.shape, value.shape, None if mask is None else mask.shape)
    scale = scale_or_default(fn, scale, query.shape[-1])

    out_dtype = query.dtype
    query, key, value = _upcast(query), _upcast(key), _upcast(value)
    with np.errstate(invalid="ignore", over="ignore"):  # NaN/inf inputs give NaN quietly, as in torch
        return _attend(query, key, value, mask, is_causal, scale, return_weights, out_dtype, L, S)


def _attend(query, key, value, mask, is_causal, scale, return_weights, out_dtype, L, S):
    """The computation of `scaled_dot_product_attention`, on checked and upcast arrays."""
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
    """Mask of the real tokens of a right-padded batch, the twin of :func:`attnlib.padding_mask`.

    Parameters
    ----------
    lengths : array_like of int
        (B,) true lengths.
    max_len : int, optional
        Padded length; defaults to ``max(lengths)``.

    Returns
    -------
    numpy.ndarray
        bool (B, max_len), True at positions ``j < lengths[b]``.

    Raises
    ------
    TypeError
        ``lengths`` is not a sequence (e.g. a bare int).
    ValueError
        Non-integer or negative lengths, lengths > ``max_len``, or not 1-D.

    Examples
    --------
    >>> padding_mask([1, 2])
    array([[ True, False],
           [ True,  True]])
    """
    values = lengths_list("padding_mask", lengths, np.ndarray, "array")
    ints, max_len = check_lengths("padding_mask", values, max_len)
    lens = np.asarray(ints, dtype=np.int64).reshape(-1)  # (B,)
    return np.arange(max_len)[None, :] < lens[:, None]  # (B, max_len)


@NUMPY
def causal_mask(q_len: int, k_len: int | None = None, diagonal: int = 0) -> np.ndarray:
    """Causal mask, the NumPy twin of :func:`attnlib.causal_mask`.

    Parameters
    ----------
    q_len : int
        L >= 0.
    k_len : int, optional
        S >= 0; defaults to ``q_len``.
    diagonal : int
        Shift of the allowed band.

    Returns
    -------
    numpy.ndarray
        bool (q_len, k_len), True where key ``j <= i + diagonal`` (top-left aligned).

    Raises
    ------
    {causal_errors}

    Examples
    --------
    >>> causal_mask(2)
    array([[ True, False],
           [ True,  True]])
    """
    q_len, k_len, diagonal = check_causal("causal_mask", q_len, k_len, diagonal)
    return np.tri(q_len, k_len, k=diagonal, dtype=bool)  # (L, S)
