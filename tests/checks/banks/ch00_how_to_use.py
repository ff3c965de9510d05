"""Answer bank of chapter 00 (ex-00-1: every pairwise dot product)."""

import numpy as np
from bank import Right, Wrong


def dot_with_plain_T(a, b):
    return a @ b.T  # .T reverses every axis of a batched array


def dot_b_on_the_left(a, b):
    return b @ np.swapaxes(a, -1, -2)


def dot_elementwise(a, b):
    return (a * b).sum(axis=-1)  # only pairs (i, i)


def dot_einsum_wrong_output_order(a, b):
    return np.einsum("...id,...jd->...ji", a, b)


def dot_einsum(a, b):
    return np.einsum("...nd,...md->...nm", a, b)


def dot_broadcast_sum(a, b):
    return (a[..., :, None, :] * b[..., None, :, :]).sum(axis=-1)  # (..., n, m, d) -> (..., n, m)


WRONG = [
    Wrong("ex-00-1", dot_with_plain_T, "batch axes"),
    Wrong("ex-00-1", dot_b_on_the_left, "transposed"),
    Wrong("ex-00-1", dot_elementwise, "elementwise"),
    Wrong("ex-00-1", dot_einsum_wrong_output_order, "transposed"),
]
RIGHT = [Right("ex-00-1", dot_einsum), Right("ex-00-1", dot_broadcast_sum)]

# --------------------------------------------------------------------------- issue 33 item 14


def dot_with_np_dot(a, b):  # np.dot pairs every batch of a with every batch of b
    return np.dot(a, np.swapaxes(b, -1, -2))


WRONG += [Wrong("ex-00-1", dot_with_np_dot, "np.dot instead of a batched matrix product")]
