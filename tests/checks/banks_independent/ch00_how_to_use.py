"""Independent bank for chapter 00, written from the exercise text only (#25)."""

import numpy as np
from bank import Right, Wrong


def dot_transposed_result(a, b):
    return b @ np.swapaxes(a, -1, -2)  # (m, n) instead of (n, m)


def dot_with_T(a, b):
    return a @ b.T  # .T reverses every axis: wrong with batch axes


def dot_np_dot(a, b):
    return np.dot(a, np.swapaxes(b, -1, -2))  # np.dot does not batch


def dot_elementwise(a, b):
    return (a * b).sum(-1)  # pairs row i with row i only


def dot_einsum(a, b):
    return np.einsum("...id,...jd->...ij", a, b)


def dot_broadcast_sum(a, b):
    return (a[..., :, None, :] * b[..., None, :, :]).sum(-1)


WRONG = [
    Wrong("ex-00-1", dot_transposed_result, "result transposed (m, n)"),
    Wrong("ex-00-1", dot_with_T, ".T on batched input"),
    Wrong("ex-00-1", dot_np_dot, "np.dot instead of matmul with batch axes"),
    Wrong("ex-00-1", dot_elementwise, "elementwise product row i with row i"),
]
RIGHT = [Right("ex-00-1", dot_einsum), Right("ex-00-1", dot_broadcast_sum)]

# What the feedback must say for the mistake to count as named (the check's
# vocabulary, read off the feedback); None: a known gap, the answer loses marks
# but nothing names its mistake (see tests/checks/independent_banks.py).
NAMED = {
    "dot_transposed_result": "the result is transposed",
    "dot_with_T": "b.T swaps the batch axes",
    "dot_np_dot": "np.dot instead of a batched matrix product",
    "dot_elementwise": "an elementwise product instead of all pairs",
}
