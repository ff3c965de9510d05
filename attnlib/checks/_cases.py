"""Building blocks shared by several chapters' checks (not a chapter: not discovered as one)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from attnlib.checks.core import Case

# the three 5-dimensional embeddings of "This is book", the worked example of chapters 03 and 04
THIS_IS_BOOK = np.array(
    [[0.1, -0.3, 0.5, -0.2, 0.7], [-0.6, 0.2, 0.9, -0.1, 0.3], [0.8, -0.5, -0.4, 0.6, -0.9]]
)


def optimiser_step(optimizer: Any, loss: Any, *, zero_grad: bool = True, step: bool = True) -> Any:
    """One training step on ``loss``; returns the loss detached, as the training exercises record it.

    ``zero_grad=False`` and ``step=False`` make the two classic mistakes of a training
    loop (gradients that pile up across batches, an optimiser that never steps), so the
    wrong answers of ex-01-4 and ex-10-2 are written with the same step as the right one.
    """
    if zero_grad:
        optimizer.zero_grad()
    loss.backward()
    if step:
        optimizer.step()
    return loss.detach()


def cases(
    make_inputs: Callable[..., tuple] | None, table: Mapping[str, tuple | Callable[[], tuple]]
) -> list[Case]:
    """The cases of an exercise, from a table ``{name: arguments}``, in the table's order.

    Parameters
    ----------
    make_inputs : callable or None
        Makes one case's inputs from a row's arguments; ``None`` when the
        arguments are the inputs themselves (plain numbers such as sizes).
    table : mapping
        Case name -> a tuple of arguments for ``make_inputs``, or a callable
        that makes the case's inputs by itself (a row that needs its own maker).

    Returns
    -------
    list of Case
        ``make_inputs(*arguments)`` is called afresh for every call of the
        case, as :class:`Case` requires. A name that starts with ``"hidden:"``
        makes a hidden case: every exercise names its hidden cases so, and
        deriving the flag from the name keeps the two from disagreeing.
    """
    out = []
    for name, row in table.items():
        if callable(row):
            make = row
        elif make_inputs is None:
            make = functools.partial(tuple, row)  # immutable arguments: the same tuple every call
        else:
            make = functools.partial(make_inputs, *row)
        out.append(Case(name, make, hidden=name.startswith("hidden:")))
    return out


def inverted(mask_fn: Callable[..., Any]) -> Callable[..., Any]:
    """``mask_fn`` with its boolean answer flipped: the wrong answer of a mask exercise whose True
    means *blocked* (in this course True means *may attend*)."""

    def wrong(*args):
        return ~mask_fn(*args)

    return wrong


def x_wq_wk(shape_x: tuple, d_k: int, seed: int, scale: float = 1.0) -> tuple:
    """Embeddings x ``shape_x`` (times ``scale``) and W_Q, W_K (d_model, d_k), drawn in that order.

    The inputs of the score exercises of chapters 03 and 04 (``(x, w_q, w_k)``).
    """
    rng = np.random.default_rng(seed)
    d_model = shape_x[-1]
    x = rng.normal(size=shape_x) * scale
    return x, rng.normal(size=(d_model, d_k)), rng.normal(size=(d_model, d_k))


def this_is_book(scale: float = 1.0) -> tuple:
    """The embeddings of "This is book" (3, 5), times ``scale``, with W_Q and W_K (5, 3) from seed 1."""
    rng = np.random.default_rng(1)
    return THIS_IS_BOOK * scale, rng.normal(size=(5, 3)), rng.normal(size=(5, 3))
