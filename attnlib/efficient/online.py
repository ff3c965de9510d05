"""The online softmax: a softmax read block by block (chapter 08, first half).

The NumPy functions follow one query row through its blocks of scores, as the
chapter does by hand; :func:`online_update_` is the same update on PyTorch
tensors for a whole tile of rows, and :func:`tile_step` wraps it with the
scores of one (query block, key block) tile. :mod:`attnlib.efficient.tiled`
runs the same rescaling (:func:`online_rescale_`) in its loop.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

from attnlib._tensors import check_tensors
from attnlib._validate import check_positive_int, check_real, scale_or_default

__all__ = [
    "OnlineSoftmaxState",
    "online_attention_row_numpy",
    "online_softmax_numpy",
    "online_softmax_update",
    "online_rescale_",
    "online_update_",
    "tile_step",
]


@dataclass
class OnlineSoftmaxState:
    """The running state of an online softmax after some blocks.

    Parameters
    ----------
    m : float
        The running maximum of the scores seen so far.
    l : float
        The running sum of ``exp(s - m)``.
    seen : int
        How many scores have been consumed so far.
    acc : numpy.ndarray, optional
        Attention only: the running sum of ``exp(s - m) * v``, ``(Ev,)``.

    Examples
    --------
    >>> _, states = online_softmax_numpy(np.array([0.0, 0.0, 0.0]), block_size=2)
    >>> [(s.m, s.seen) for s in states]
    [(0.0, 2), (0.0, 3)]
    """

    m: float
    l: float
    seen: int
    acc: np.ndarray | None = field(default=None)

    def __post_init__(self):
        # plain Python numbers, whatever came in (a NumPy scalar prints as np.float64(...))
        self.m, self.l, self.seen = float(self.m), float(self.l), int(self.seen)


def online_softmax_update(m: float, l: float, block: np.ndarray) -> tuple[float, float]:
    """One step of the online softmax: fold a block of scores into ``(m, l)``.

    Parameters
    ----------
    m : float
        Running maximum of the scores seen so far (``-inf`` before the first block).
    l : float
        Running sum of ``exp(score - m)`` over the scores seen so far (``0`` at first).
    block : array_like
        ``(k,)``, the next scores.

    Returns
    -------
    tuple of float
        ``(m_new, l_new)``: the running maximum and the running sum, rescaled to ``m_new``.

    Examples
    --------
    >>> m, l = online_softmax_update(-math.inf, 0.0, np.array([0.0, 0.0]))
    >>> m, l
    (0.0, 2.0)
    >>> online_softmax_update(m, l, np.array([math.log(2.0)]))  # the max moves: l is rescaled
    (0.6931471805599453, 2.0)
    """
    m, l = check_real("online_softmax_update", "m", m), check_real("online_softmax_update", "l", l)
    block = np.asarray(block, dtype=float)
    if block.ndim != 1:
        raise ValueError(f"online_softmax_update: block must be 1-D with shape (k,), got shape {block.shape}")
    if block.size == 0:
        return m, l
    m_new = float(np.maximum(m, block.max()))  # np.maximum keeps a NaN, Python's max may not
    if m_new == -math.inf:  # everything seen so far is masked
        return m_new, 0.0
    l_new = l * math.exp(m - m_new) + float(np.exp(block - m_new).sum())
    return m_new, l_new


def online_softmax_numpy(scores: np.ndarray, block_size: int) -> tuple[np.ndarray, list[OnlineSoftmaxState]]:
    """Softmax of one row of scores, computed block by block with a running max and sum.

    The scores are read once for the running statistics; the weights then
    need one more pass ``exp(s - m) / l`` with the final ``m`` and ``l``. Only
    two numbers are carried between blocks.

    Parameters
    ----------
    scores : array_like
        ``(S,)``, one row of scores (``-inf`` entries are masked keys).
    block_size : int
        How many scores are read at a time.

    Returns
    -------
    weights : numpy.ndarray
        ``(S,)``, ``softmax(scores)``; all zeros when every score is ``-inf``.
    states : list of OnlineSoftmaxState
        The state ``(m, l, seen)`` after each block, for display.

    Examples
    --------
    >>> weights, states = online_softmax_numpy(np.array([1.0, 2.0, 3.0]), block_size=2)
    >>> bool(np.allclose(weights, np.exp([1.0, 2.0, 3.0]) / np.exp([1.0, 2.0, 3.0]).sum()))
    True
    >>> len(states)
    2
    """
    scores = np.asarray(scores, dtype=float)
    if scores.ndim != 1:
        raise ValueError(
            f"online_softmax_numpy: scores must be 1-D with shape (S,), got shape {scores.shape}"
        )
    block_size = check_positive_int("online_softmax_numpy", "block_size", block_size)
    m, l = -math.inf, 0.0
    states = []
    for start in range(0, scores.size, block_size):
        block = scores[start : start + block_size]
        m, l = online_softmax_update(m, l, block)
        states.append(OnlineSoftmaxState(m=m, l=l, seen=start + block.size))
    if l == 0.0:
        return np.zeros_like(scores), states
    return np.exp(scores - m) / l, states


def online_attention_row_numpy(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    block_size: int,
    scale: float | None = None,
    mask: np.ndarray | None = None,
) -> tuple[np.ndarray, list[OnlineSoftmaxState]]:
    """Attention output of one query row, reading keys and values block by block.

    Parameters
    ----------
    q : array_like
        ``(E,)``, the query.
    k : array_like
        ``(S, E)``, the keys.
    v : array_like
        ``(S, Ev)``, the values.
    block_size : int
        How many keys are read at a time.
    scale : float, optional
        Default ``1 / sqrt(E)``.
    mask : array_like of bool, optional
        ``(S,)``, True = may attend.

    Returns
    -------
    out : numpy.ndarray
        ``(Ev,)``, ``softmax(scale * k @ q) @ v`` (zeros when every key is masked).
    states : list of OnlineSoftmaxState
        ``(m, l, acc, seen)`` after each block.

    Examples
    --------
    >>> out, states = online_attention_row_numpy(np.zeros(2), np.zeros((3, 2)), np.eye(3), 2)
    >>> out.round(4).tolist(), len(states)
    ([0.3333, 0.3333, 0.3333], 2)
    """
    fn = "online_attention_row_numpy"
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    if q.ndim != 1 or k.ndim != 2 or v.ndim != 2 or k.shape[1] != q.shape[0]:
        raise ValueError(
            f"{fn}: expected q (E,), k (S, E), v (S, Ev); got q {q.shape}, k {k.shape}, v {v.shape}"
        )
    if v.shape[0] != k.shape[0]:
        raise ValueError(f"{fn}: k {k.shape} and v {v.shape} must have the same length S")
    if mask is not None:
        mask = np.asarray(mask, dtype=bool)
        if mask.shape != (k.shape[0],):
            raise ValueError(f"{fn}: mask must have shape (S,) = ({k.shape[0]},), got {mask.shape}")
    block_size = check_positive_int(fn, "block_size", block_size)
    scale = scale_or_default(fn, scale, q.shape[0])

    m, l = -math.inf, 0.0
    acc = np.zeros(v.shape[1])
    states = []
    for start in range(0, k.shape[0], block_size):
        s = scale * (k[start : start + block_size] @ q)  # the block's scores
        if mask is not None:
            s = np.where(mask[start : start + block_size], s, -np.inf)
        m_new = float(np.maximum(m, s.max()))  # a NaN score makes the row NaN, as torch
        if not m_new == -math.inf:
            correction = math.exp(m - m_new)  # exp(-inf) = 0 on the first block
            p = np.exp(s - m_new)
            l = correction * l + p.sum()
            acc = correction * acc + p @ v[start : start + block_size]
            m = m_new
        states.append(OnlineSoftmaxState(m=m, l=l, seen=start + s.size, acc=acc.copy()))
    out = acc / l if l != 0 else np.zeros(v.shape[1])  # NaN stays NaN
    return out, states


# ---------------------------------------------------------------------------
# The same update on PyTorch tensors, a whole tile of query rows at a time
# ---------------------------------------------------------------------------


def online_rescale_(
    m: torch.Tensor,
    l: torch.Tensor,
    acc: torch.Tensor,
    p: torch.Tensor,
    exp_=torch.Tensor.exp_,
) -> None:
    """The online softmax's rescaling, in place: move ``m`` to the tile's maximum.

    ``p`` holds the tile's scores (``-inf`` where masked) and becomes
    ``exp(scores - m_new)``; ``l`` and ``acc`` are rescaled by
    ``exp(m - m_new)`` and ``l`` gains the row sums of ``p``. What is left is
    ``acc += p @ v``, which the callers do their own way. ``exp_`` is
    ``torch.Tensor.exp_``, or ``exp2_`` for scores in base-2 units (natural
    scores times ``log2(e)``, as the tiled loop computes them).

    A NaN score makes ``m`` NaN, and ``torch.maximum`` keeps it NaN in every
    later tile, whatever their order: NaN propagates as in torch's softmax.

    Parameters
    ----------
    m, l, acc : torch.Tensor
        The running state ``(..., Bq, 1)``, ``(..., Bq, 1)``, ``(..., Bq, Ev)``
        of :func:`online_update_`, moved to the new maximum in place.
    p : torch.Tensor
        ``(..., Bq, Bk)``, the tile's scores; overwritten with ``exp(p - m_new)``.
    exp_ : callable, optional
        The in-place exponential: ``torch.Tensor.exp_`` (the default), or
        ``torch.Tensor.exp2_`` for base-2 scores.

    Returns
    -------
    None
        ``m``, ``l``, ``acc`` and ``p`` hold the new values.

    Examples
    --------
    >>> m, l, acc = torch.zeros(1, 1), torch.ones(1, 1), torch.ones(1, 1)
    >>> p = torch.tensor([[math.log(3.0)]])  # a score above the running maximum 0
    >>> online_rescale_(m, l, acc, p)
    >>> m, l, acc  # the past is rescaled by exp(0 - log 3) = 1/3; l gains p = 1
    (tensor([[1.0986]]), tensor([[1.3333]]), tensor([[0.3333]]))
    """
    m_new = torch.maximum(m, p.amax(dim=-1, keepdim=True))  # (..., b_q, 1)
    # Rows that have seen only masked keys keep m = -inf: shift them by 0
    # instead, so that exp(-inf - (-inf)) = NaN never happens.
    shift = m_new.masked_fill(m_new == -math.inf, 0.0)
    correction = exp_(m - shift)  # exp(m - m_new) <= 1 rescales the past
    exp_(p.sub_(shift))  # p = exp(s - m_new), in place
    l.mul_(correction).add_(p.sum(dim=-1, keepdim=True))
    acc.mul_(correction)
    m.copy_(m_new)


def online_update_(m, l, acc, scores, value) -> None:
    """The online-softmax update, in place: fold one tile of scores into ``(m, l, acc)``.

    For every query row: ``m_new = max(m, max_j s_j)``, ``c = exp(m - m_new)``,
    ``p_j = exp(s_j - m_new)``, ``l = c l + sum_j p_j``,
    ``acc = c acc + sum_j p_j v_j``. Start from ``m = -inf``, ``l = 0``,
    ``acc = 0``; after the last tile the output is ``acc / l`` (0 for a row
    that saw no allowed key).

    Parameters
    ----------
    m, l : torch.Tensor
        ``(..., Bq, 1)``, the running maximum and sum; updated in place.
    acc : torch.Tensor
        ``(..., Bq, Ev)``, the running weighted sum of values; updated in place.
    scores : torch.Tensor
        ``(..., Bq, Bk)``, the tile's scores, ``-inf`` where masked; overwritten
        with ``exp(scores - m_new)``.
    value : torch.Tensor
        ``(..., Bk, Ev)``, the tile's values.

    Returns
    -------
    None
        ``m``, ``l`` and ``acc`` hold the new state.

    Examples
    --------
    >>> m, l, acc = torch.full((1, 1), -math.inf), torch.zeros(1, 1), torch.zeros(1, 2)
    >>> online_update_(m, l, acc, torch.tensor([[0.0, 0.0]]), torch.tensor([[1.0, 0.0], [0.0, 1.0]]))
    >>> online_update_(m, l, acc, torch.tensor([[math.log(2.0)]]), torch.tensor([[4.0, 4.0]]))
    >>> acc / l  # softmax([0, 0, log 2]) = [1/4, 1/4, 1/2] times the values
    tensor([[2.2500, 2.2500]])
    """
    online_rescale_(m, l, acc, scores)
    acc.add_(scores @ value)  # scores now holds p = exp(s - m_new)


def tile_step(
    m: torch.Tensor,
    l: torch.Tensor,
    acc: torch.Tensor,
    q_tile: torch.Tensor,
    k_tile: torch.Tensor,
    v_tile: torch.Tensor,
    scale: float | None = None,
    allowed: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One tile of tiled attention: fold a block of keys/values into the running state.

    The scores ``scale * q_tile @ k_tile^T`` (``-inf`` where not allowed) go
    through :func:`online_update_`. The inputs are not modified.

    Parameters
    ----------
    m, l : torch.Tensor
        ``(..., Bq, 1)``; start from ``m = -inf``, ``l = 0``.
    acc : torch.Tensor
        ``(..., Bq, Ev)``; start from 0.
    q_tile : torch.Tensor
        ``(..., Bq, E)``.
    k_tile : torch.Tensor
        ``(..., Bk, E)``.
    v_tile : torch.Tensor
        ``(..., Bk, Ev)``.
    scale : float, optional
        Default ``1 / sqrt(E)``.
    allowed : torch.Tensor, optional
        bool, True = may attend, broadcastable to ``(..., Bq, Bk)``.

    Returns
    -------
    tuple of torch.Tensor
        The new ``(m, l, acc)``; after the last tile the output is ``acc / l``.

    Examples
    --------
    >>> q, k, v = torch.zeros(1, 2, 4), torch.zeros(1, 3, 4), torch.arange(3.0).reshape(1, 3, 1)
    >>> m, l, acc = torch.full((1, 2, 1), -math.inf), torch.zeros(1, 2, 1), torch.zeros(1, 2, 1)
    >>> m, l, acc = tile_step(m, l, acc, q, k, v)
    >>> acc / l  # equal weights: the mean of the values 0, 1, 2
    tensor([[[1.],
             [1.]]])
    """
    fn = "tile_step"
    check_tensors(fn, m=m, l=l, acc=acc, q_tile=q_tile, k_tile=k_tile, v_tile=v_tile)
    scale = scale_or_default(fn, scale, q_tile.shape[-1])
    s = scale * q_tile @ k_tile.transpose(-2, -1)  # (..., Bq, Bk)
    if allowed is not None:
        s = s.masked_fill(~allowed, -math.inf)
    shape = torch.broadcast_shapes(m.shape, s.shape[:-1] + (1,))
    m, l = m.expand(shape).clone(), l.expand(shape).clone()
    acc = acc.expand(*shape[:-1], acc.shape[-1]).clone()
    online_update_(m, l, acc, s, v_tile)
    return m, l, acc
