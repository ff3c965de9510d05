"""Chapter 00 warm-up: every pairwise dot product between two sets of vectors."""

import numpy as np

from attnlib.checks._cases import cases
from attnlib.checks.core import Exercise, Misconception, register


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
        cases=cases(
            _inputs,
            {
                "3 vectors against 4 vectors of size 2": ((3, 2), (4, 2), 0),
                "square: 3 against 3 of size 5": ((3, 5), (3, 5), 1),
                "a batch of 2: (2, 3, 4) against (2, 6, 4)": ((2, 3, 4), (2, 6, 4), 2),
                "one vector against 5": ((1, 3), (5, 3), 4),
                "hidden: square batch (2, 4, 4) against (2, 4, 4)": ((2, 4, 4), (2, 4, 4), 5),
                "hidden: batch and heads (2, 3, 5, 4) against (2, 3, 7, 4)": ((2, 3, 5, 4), (2, 3, 7, 4), 3),
            },
        ),
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
                "for batched arrays .T reverses every axis, the batch axes too: b must be turned on "
                "its last two axes only.",
            ),
            Misconception(
                "an elementwise product instead of all pairs (only a[i] . b[i])",
                lambda a, b: (a * b).sum(axis=-1),
                "a * b pairs row i of a with row i of b only; the answer pairs every row of a with "
                "every row of b: a matrix product.",
            ),
            Misconception(
                "np.dot instead of a batched matrix product (np.dot pairs every batch with every batch)",
                lambda a, b: np.dot(a, np.swapaxes(b, -1, -2)),
                "on arrays with leading axes np.dot sums over the last axis of a and the second-to-last "
                "of b for every combination of their batches: the result gets an extra axis. The "
                "operator @ (np.matmul) treats the leading axes as a batch.",
            ),
        ],
        hints=(
            "every entry (i, j) is one dot product, a[i] . b[j]: all of them at once is one matrix product.",
            "a has shape (..., n, d) and b (..., m, d); the answer has shape (..., n, m), so b must be "
            "turned to (..., d, m) first.",
            "a stays on the left; b is turned on its last two axes only, so that its batch axes stay "
            "where they are (NumPy has a function that swaps two chosen axes; .T reverses all of "
            "them).",
        ),
    )
)
