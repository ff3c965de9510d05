"""Chapter 00 warm-up: every pairwise dot product between two sets of vectors."""

import numpy as np

from attnlib.checks.core import Case, Exercise, Misconception, register


def pairwise_dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """All dot products ``a[..., i, :] . b[..., j, :]``: (..., n, d), (..., m, d) -> (..., n, m)."""
    return a @ np.swapaxes(b, -1, -2)


def _inputs(shape_a, shape_b, seed):
    rng = np.random.default_rng(seed)
    return rng.normal(size=shape_a), rng.normal(size=shape_b)


register(
    Exercise(
        id="ex-00-1",
        function="pairwise_dot",
        reference=pairwise_dot,
        cases=[
            Case("3 vectors against 4 vectors of size 2", lambda: _inputs((3, 2), (4, 2), 0)),
            Case("square: 3 against 3 of size 5", lambda: _inputs((3, 5), (3, 5), 1)),
            Case("a batch of 2: (2, 3, 4) against (2, 6, 4)", lambda: _inputs((2, 3, 4), (2, 6, 4), 2)),
            Case(
                "hidden: batch and heads (2, 3, 5, 4) against (2, 3, 7, 4)",
                lambda: _inputs((2, 3, 5, 4), (2, 3, 7, 4), 3),
                hidden=True,
            ),
        ],
        misconceptions=[
            Misconception(
                "the result is transposed (b a^T instead of a b^T)",
                lambda a, b: b @ np.swapaxes(a, -1, -2),
                "row i of the result belongs to a[i]: put a on the left.",
            ),
            Misconception(
                "b.T swaps the batch axes too",
                # On batched inputs NumPy refuses a @ b.T; the checker names this variant
                # when the learner's code raises the same error.
                lambda a, b: a @ b.T,
                "for batched arrays transpose only the last two axes: np.swapaxes(b, -1, -2).",
            ),
        ],
        hint="a has shape (..., n, d) and b (..., m, d); the answer has shape (..., n, m).",
    )
)
