"""Linear attention and retention: attention with a recurrent state, chapter 01's RNN again.

Softmax attention weighs key ``j`` by ``exp(q_i . k_j)``, which does not factor, so
every query reads every key. Replace it with a product of feature maps,
``phi(q_i) . phi(k_j)``, and the sums factor (Katharopoulos et al. 2020, "Transformers
are RNNs"):

    out_i = phi(q_i) S_i / (phi(q_i) . z_i),   S_i = sum_{j<=i} phi(k_j)^T v_j,   z_i = sum_{j<=i} phi(k_j)

``S`` is a ``(d, d_v)`` state and ``z`` a ``(d,)`` one, updated once per token: the
cost of a new token is constant, like an RNN's, and there is no cache that grows.
:func:`linear_attention` computes all positions at once (the parallel form, for
training), :func:`linear_attention_recurrent` and :class:`LinearAttentionState` one
token at a time; they agree to rounding.

Retention (Sun et al. 2023, RetNet) drops the normaliser and decays the state:
``S_n = gamma S_{n-1} + k_n^T v_n``, ``o_n = q_n S_n``; its parallel form is
``(Q K^T * D) V`` with ``D[n, m] = gamma^(n - m)`` for ``m <= n``
(:func:`retention`, :func:`retention_recurrent`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from attnlib._tensors import check_floating_tensors, check_tensors
from attnlib._validate import broadcast_shapes

__all__ = [
    "LinearAttentionState",
    "elu_feature_map",
    "linear_attention",
    "linear_attention_recurrent",
    "retention",
    "retention_recurrent",
]


def elu_feature_map(x: torch.Tensor) -> torch.Tensor:
    """Katharopoulos et al.'s feature map ``elu(x) + 1``: positive, so every weight is positive.

    Parameters
    ----------
    x : torch.Tensor
        Any shape, floating.

    Returns
    -------
    torch.Tensor
        ``x``'s shape, every entry > 0.

    Examples
    --------
    >>> elu_feature_map(torch.tensor([-100.0, 0.0, 2.0]))
    tensor([0., 1., 3.])
    """
    check_tensors("elu_feature_map", x=x)
    return F.elu(x) + 1


def _check_qkv(fn: str, query, key, value) -> tuple[int, int, int]:
    check_floating_tensors(fn, query=query, key=key, value=value)
    if query.dim() < 2 or key.dim() < 2 or value.dim() < 2:
        raise ValueError(
            f"{fn}: query, key and value must be (..., n, d), got {tuple(query.shape)}, "
            f"{tuple(key.shape)}, {tuple(value.shape)}"
        )
    n, d = query.shape[-2:]
    if key.shape[-2:] != (n, d):
        raise ValueError(f"{fn}: key must be (..., n, d) = (..., {n}, {d}), got {tuple(key.shape)}")
    if value.shape[-2] != n:
        raise ValueError(f"{fn}: value must have n = {n} positions like query, got {tuple(value.shape)}")
    return n, d, value.shape[-1]


def linear_attention(query, key, value, *, causal: bool = True, feature_map=elu_feature_map) -> torch.Tensor:
    """Linear attention, all positions at once: ``phi(Q) phi(K)^T`` in place of ``softmax(Q K^T)``.

    Causal: ``out_i = sum_{j<=i} (phi(q_i).phi(k_j)) v_j / sum_{j<=i} phi(q_i).phi(k_j)``.
    This parallel form builds the ``(n, n)`` products (as training code does, for
    speed on short sequences); the non-causal form ``phi(Q) (phi(K)^T V)`` never does.

    Parameters
    ----------
    query, key : torch.Tensor
        ``(..., n, d)``.
    value : torch.Tensor
        ``(..., n, d_v)``.
    causal : bool, default True
        Query ``i`` reads keys ``j <= i`` only.
    feature_map : callable, default :func:`~attnlib.variants.elu_feature_map`
        ``phi``, applied to queries and keys; it must give positive features.

    Returns
    -------
    torch.Tensor
        ``(..., n, d_v)``.

    Examples
    --------
    >>> q = k = torch.zeros(1, 2, 1)
    >>> v = torch.tensor([[[1.0], [3.0]]])
    >>> linear_attention(q, k, v).flatten().tolist()  # equal weights: running means
    [1.0, 2.0]
    """
    fn = "linear_attention"
    _check_qkv(fn, query, key, value)
    if not isinstance(causal, bool):
        raise TypeError(f"{fn}: causal must be a bool, got {type(causal).__name__}")
    pq, pk = feature_map(query), feature_map(key)  # (..., n, d)
    if not causal:
        state = pk.transpose(-1, -2) @ value  # (..., d, d_v)
        norm = pk.sum(dim=-2, keepdim=True)  # (..., 1, d)
        return (pq @ state) / (pq * norm).sum(dim=-1, keepdim=True)
    scores = (pq @ pk.transpose(-1, -2)).tril()  # (..., n, n): phi(q_i).phi(k_j), j <= i
    return (scores @ value) / scores.sum(dim=-1, keepdim=True)


class LinearAttentionState:
    """The recurrent state of causal linear attention: ``S`` ``(..., d, d_v)`` and ``z`` ``(..., d)``.

    :meth:`step` reads one token's query, key and value, adds the key-value outer
    product to the state and returns the token's output: the same work at every
    position, whatever came before (chapter 01's recurrence, with a matrix state).

    Parameters
    ----------
    feature_map : callable, default :func:`~attnlib.variants.elu_feature_map`
        ``phi``.

    Examples
    --------
    >>> state = LinearAttentionState()
    >>> state.step(torch.zeros(1), torch.zeros(1), torch.tensor([1.0])).tolist()
    [1.0]
    >>> state.step(torch.zeros(1), torch.zeros(1), torch.tensor([3.0])).tolist()
    [2.0]
    """

    def __init__(self, feature_map=elu_feature_map):
        self.feature_map = feature_map
        self.kv: torch.Tensor | None = None  # (..., d, d_v)
        self.k_sum: torch.Tensor | None = None  # (..., d)
        self.tokens = 0

    def step(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        """One token: ``query``, ``key`` ``(..., d)``, ``value`` ``(..., d_v)``; returns ``(..., d_v)``."""
        fn = "LinearAttentionState.step"
        check_floating_tensors(fn, query=query, key=key, value=value)
        if query.shape[-1:] != key.shape[-1:]:
            shapes = f"{tuple(query.shape)} and {tuple(key.shape)}"
            raise ValueError(f"{fn}: query and key must share d, got {shapes}")
        pq, pk = self.feature_map(query), self.feature_map(key)  # (..., d)
        outer = pk[..., :, None] * value[..., None, :]  # (..., d, d_v)
        self.kv = outer if self.kv is None else self.kv + outer
        self.k_sum = pk if self.k_sum is None else self.k_sum + pk
        self.tokens += 1
        num = (pq[..., None, :] @ self.kv).squeeze(-2)  # (..., d_v)
        return num / (pq * self.k_sum).sum(dim=-1, keepdim=True)


def linear_attention_recurrent(query, key, value, *, feature_map=elu_feature_map) -> torch.Tensor:
    """Causal linear attention token by token; the result of :func:`~attnlib.variants.linear_attention`.

    One :class:`~attnlib.variants.LinearAttentionState` step per position.

    Parameters
    ----------
    query, key : torch.Tensor
        ``(..., n, d)``.
    value : torch.Tensor
        ``(..., n, d_v)``.
    feature_map : callable, default :func:`~attnlib.variants.elu_feature_map`
        ``phi``.

    Returns
    -------
    torch.Tensor
        ``(..., n, d_v)``.

    Examples
    --------
    >>> q = torch.randn(1, 5, 3, dtype=torch.float64)
    >>> torch.allclose(linear_attention_recurrent(q, q, q), linear_attention(q, q, q))
    True
    """
    n, _, dv = _check_qkv("linear_attention_recurrent", query, key, value)
    # attnlib's own broadcasting: torch.broadcast_shapes imports sympy on first use (1-7 s)
    batch = broadcast_shapes(
        query.shape[:-2], key.shape[:-2], value.shape[:-2], what="linear_attention_recurrent: batch shapes"
    )
    state = LinearAttentionState(feature_map)
    outs = [state.step(query[..., t, :], key[..., t, :], value[..., t, :]) for t in range(n)]
    if not outs:
        return value.new_zeros(*batch, 0, dv)
    return torch.stack([o.expand(*batch, dv) for o in outs], dim=-2)


def _decay(fn: str, decay, like: torch.Tensor) -> torch.Tensor:
    """``decay`` as a tensor ``(..., 1, 1)`` that broadcasts over ``like``'s leading dimensions; in (0, 1]."""
    if isinstance(decay, bool) or not isinstance(decay, (int, float, torch.Tensor)):
        raise TypeError(f"{fn}: decay must be a float or a tensor, got {type(decay).__name__}")
    gamma = torch.as_tensor(decay, dtype=like.dtype, device=like.device)
    if not bool(((gamma > 0) & (gamma <= 1)).all()):
        raise ValueError(f"{fn}: decay must lie in (0, 1], got {decay}")
    return gamma[..., None, None]  # (..., 1, 1)


def retention(query, key, value, decay) -> torch.Tensor:
    """Retention, parallel (Sun et al. 2023): ``(Q K^T * D) V``, ``D[n, m] = decay^(n - m)`` for ``m <= n``.

    No softmax and no normaliser: a key's weight is its dot product, shrunk by
    ``decay`` for every step of distance. (RetNet normalises the output per head
    afterwards; that is not part of this function.)

    Parameters
    ----------
    query, key : torch.Tensor
        ``(..., n, d)``.
    value : torch.Tensor
        ``(..., n, d_v)``.
    decay : float or torch.Tensor
        ``gamma`` in (0, 1]; a tensor broadcasts over the leading dimensions (one per head).

    Returns
    -------
    torch.Tensor
        ``(..., n, d_v)``.

    Examples
    --------
    >>> q = k = torch.ones(1, 3, 1)
    >>> v = torch.ones(1, 3, 1)
    >>> retention(q, k, v, 0.5).flatten().tolist()  # 1, 1 + 0.5, 1 + 0.5 + 0.25
    [1.0, 1.5, 1.75]
    """
    fn = "retention"
    n, _, _ = _check_qkv(fn, query, key, value)
    gamma = _decay(fn, decay, query)  # (..., 1, 1)
    i = torch.arange(n, device=query.device)
    distance = (i[:, None] - i[None, :]).to(query.dtype)  # (n, n)
    causal = distance >= 0
    d = torch.where(causal, gamma ** distance.clamp(min=0), torch.zeros((), dtype=query.dtype))  # (..., n, n)
    return ((query @ key.transpose(-1, -2)) * d) @ value


def retention_recurrent(query, key, value, decay) -> torch.Tensor:
    """Retention token by token: ``S_n = decay S_{n-1} + k_n^T v_n``, ``o_n = q_n S_n``.

    The result of :func:`~attnlib.variants.retention`, one state update per position.

    Parameters
    ----------
    query, key : torch.Tensor
        ``(..., n, d)``.
    value : torch.Tensor
        ``(..., n, d_v)``.
    decay : float or torch.Tensor
        ``gamma`` in (0, 1], as in :func:`~attnlib.variants.retention`.

    Returns
    -------
    torch.Tensor
        ``(..., n, d_v)``.

    Examples
    --------
    >>> q = torch.randn(2, 4, 3, dtype=torch.float64)
    >>> torch.allclose(retention_recurrent(q, q, q, 0.9), retention(q, q, q, 0.9))
    True
    """
    fn = "retention_recurrent"
    n, d, dv = _check_qkv(fn, query, key, value)
    gamma = _decay(fn, decay, query)  # (..., 1, 1)
    batch = broadcast_shapes(
        query.shape[:-2], key.shape[:-2], value.shape[:-2], gamma.shape[:-2], what=f"{fn}: batch shapes"
    )
    state = query.new_zeros(*batch, d, dv)  # (..., d, d_v)
    outs = []
    for t in range(n):
        state = gamma * state + key[..., t, :, None] * value[..., t, None, :]  # decay, then add k^T v
        outs.append((query[..., t, None, :] @ state).squeeze(-2))  # (..., d_v)
    if not outs:
        return query.new_zeros(*batch, 0, dv)
    return torch.stack(outs, dim=-2)
