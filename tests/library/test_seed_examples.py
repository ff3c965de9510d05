"""The course's seed worked examples, reproduced exactly.

Tolerances: the NumPy example is asserted to 1e-8 (its values are printed with
8 decimals); the PyTorch example to 1e-4, the precision torch prints.
"""

import math

import numpy as np
import torch

import attnlib.numpy as anp
from attnlib.attention import scaled_dot_product_attention

NUMPY_ATOL = 1e-8
TORCH_ATOL = 1e-4

NUMPY_EXPECTED = np.array(
    [
        [0.98522025, 1.74174051, 0.75652026],
        [0.90965265, 1.40965265, 0.5],
        [0.99851226, 1.75849334, 0.75998108],
        [0.99560386, 1.90407309, 0.90846923],
    ]
)
TORCH_EXPECTED = torch.tensor(
    [
        [1.1634, 0.7909, 1.5817],
        [1.0000, 0.8424, 1.5616],
        [1.1799, 0.8707, 1.6405],
        [1.1634, 0.7909, 1.5817],
    ]
)


def numpy_example_inputs():
    words = np.array([[1, 0, 0], [0, 1, 0], [1, 1, 0], [0, 0, 1]])
    # the legacy global generator on purpose: the worked example uses exactly these calls
    saved = np.random.get_state()  # noqa: NPY002
    np.random.seed(42)  # noqa: NPY002
    W_Q = np.random.randint(3, size=(3, 3))  # noqa: NPY002
    W_K = np.random.randint(3, size=(3, 3))  # noqa: NPY002
    W_V = np.random.randint(3, size=(3, 3))  # noqa: NPY002
    np.random.set_state(saved)  # noqa: NPY002
    Q, K, V = words @ W_Q, words @ W_K, words @ W_V  # integer (4, 3) each
    return Q.astype(np.float64), K.astype(np.float64), V.astype(np.float64)


def test_numpy_worked_example_step_by_step():
    Q, K, V = numpy_example_inputs()
    scores = anp.scaled_dot_scores(Q, K)  # (4, 4), scaled by 1/sqrt(3)
    np.testing.assert_allclose(scores, Q @ K.T / math.sqrt(3), atol=1e-12)
    weights = anp.softmax(scores, dim=-1)
    np.testing.assert_allclose(weights @ V, NUMPY_EXPECTED, atol=NUMPY_ATOL, rtol=0)


def test_numpy_worked_example_in_one_call():
    Q, K, V = numpy_example_inputs()
    out, w = anp.scaled_dot_product_attention(Q, K, V, return_weights=True)
    np.testing.assert_allclose(out, NUMPY_EXPECTED, atol=NUMPY_ATOL, rtol=0)
    np.testing.assert_allclose(w.sum(-1), np.ones(4), atol=1e-12)


def test_pytorch_worked_example():
    words = torch.tensor([[1, 0, 0], [0, 1, 0], [1, 1, 0], [1, 0, 1]], dtype=torch.float32)
    # the global generator on purpose, as the worked example does; forked, so no other test sees it
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(42)
        W_Q = torch.randint(0, 2, (3, 3)).float()
        W_K = torch.randint(0, 2, (3, 3)).float()
        W_V = torch.randint(0, 2, (3, 3)).float()
    Q, K, V = words @ W_Q, words @ W_K, words @ W_V  # (4, 3) each
    out = scaled_dot_product_attention(Q, K, V)
    assert out.shape == (4, 3)
    torch.testing.assert_close(out, TORCH_EXPECTED, atol=TORCH_ATOL, rtol=0)


def test_three_word_example_shapes():
    words = torch.eye(3)  # three one-hot words, E = 3
    g = torch.Generator().manual_seed(0)
    W_Q, W_K, W_V = (torch.randn(3, 2, generator=g) for _ in range(3))  # project to d_k = d_v = 2
    out, w = scaled_dot_product_attention(words @ W_Q, words @ W_K, words @ W_V, return_weights=True)
    assert out.shape == (3, 2) and w.shape == (3, 3)
    torch.testing.assert_close(w.sum(-1), torch.ones(3))
