"""Building blocks shared by several chapters' checks (not a chapter: not discovered as one)."""

from __future__ import annotations

from typing import Any


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
