"""find_forbidden reads the syntax tree: aliases, attribute chains, getattr and dynamic imports."""

from __future__ import annotations

import pytest

from attnlib.checks.forbidden import find_forbidden, find_forbidden_in_cells, forbidden_in_function

SDPA = "torch.nn.functional.scaled_dot_product_attention"
OWN = "attnlib.scaled_dot_product_attention"
LIST = (SDPA, OWN, "torch.softmax", "torch.nn.MultiheadAttention", "attnlib.checks", ".softmax")


@pytest.mark.parametrize(
    "source, found",
    [
        ("import torch.nn.functional as F\ny = F.scaled_dot_product_attention(q, k, v)", SDPA),
        ("y = F.scaled_dot_product_attention(q, k, v)", SDPA),  # F from an earlier cell
        ("import torch\ny = torch.nn.functional.scaled_dot_product_attention(q, k, v)", SDPA),
        ("from torch.nn import functional as G\ny = G.scaled_dot_product_attention(q, k, v)", SDPA),
        ("from torch.nn.functional import scaled_dot_product_attention as s\ny = s(q, k, v)", SDPA),
        ("from attnlib import scaled_dot_product_attention as s\ny = s(q, k, v)", OWN),
        ("import attnlib as a\ny = a.scaled_dot_product_attention(q, k, v)", OWN),
        ("from attnlib import *\ny = scaled_dot_product_attention(q, k, v)", OWN),
        ("import torch\nf = getattr(torch, 'soft' + 'max')\ny = f(x, -1)", "torch.softmax"),
        ("import torch\ny = getattr(torch, f'{\"soft\"}max')(x, -1)", "torch.softmax"),
        ("import torch\ny = vars(torch)['softmax'](x, -1)", "torch.softmax"),
        ("import torch\ny = torch.__dict__['softmax'](x, -1)", "torch.softmax"),
        ("import torch\nsm = torch.softmax\ny = sm(x, -1)", "torch.softmax"),
        ("c = __import__('attnlib.che' + 'cks')", "attnlib.checks"),
        ("import importlib\nc = importlib.import_module(''.join(['attnlib', '.checks']))", "attnlib.checks"),
        ("from attnlib.checks import core", "attnlib.checks"),
        ("import attnlib.checks.core", "attnlib.checks"),
        ("m = torch.nn.MultiheadAttention(4, 2)", "torch.nn.MultiheadAttention"),
        ("m = nn.MultiheadAttention(4, 2)", "torch.nn.MultiheadAttention"),
        ("y = x.softmax(-1)", ".softmax"),
        ("y = getattr(x, 'softmax')(-1)", ".softmax"),
        ("def f(x):\n    return x.softmax(dim=-1)", ".softmax"),
        ("code = 'to' + 'rch.softmax(x)'\ny = eval(code)", "eval() of a computed string"),
        ("y = eval('torch.softmax(x, -1)')", "torch.softmax"),
        ("import attnlib.attention as at\ny = at.scaled_dot_product_attention(q, k, v)", OWN),
    ],
)
def test_forbidden_call_is_found(source, found):
    assert found in find_forbidden(source, LIST)


@pytest.mark.parametrize(
    "source",
    [
        "import torch\ny = torch.exp(x - x.amax(-1, keepdim=True))",
        "import torch.nn.functional as F\ny = F.relu(x)",
        "softmax = lambda x: x\ny = softmax(x)",  # the learner's own function of that name
        "import numpy as np\ny = np.exp(x) / np.exp(x).sum(-1, keepdims=True)",
        "from attnlib import causal_mask\nm = causal_mask(3)",
        "def broken(:\n",  # does not parse: nothing to find (the answer fails on its own error)
    ],
)
def test_allowed_code_is_not_flagged(source):
    assert find_forbidden(source, LIST) == []


def test_a_forbidden_call_leaves_attributes_free():
    forbidden = ["module()", ".forward"]
    assert find_forbidden("def f(module, q):\n    return module(q)", forbidden) == ["module()"]
    assert find_forbidden("def f(module, q):\n    return module.forward(q)", forbidden) == [".forward"]
    assert find_forbidden("def f(module, q):\n    return q @ module.w_query.weight.T", forbidden) == []


def test_nothing_forbidden_finds_nothing():
    assert find_forbidden("import torch\ntorch.softmax(x, -1)", []) == []


def _helper(x):
    import torch

    return torch.softmax(x, dim=-1)


def _answer_with_helper(x):
    return _helper(x) * 1.0


def test_function_and_its_helpers_are_read():
    assert forbidden_in_function(_answer_with_helper, ["torch.softmax"]) == ["torch.softmax"]
    assert forbidden_in_function(lambda x: x + 1, ["torch.softmax"]) == []


def test_identity_catches_a_reexport():
    import attnlib  # noqa: F401  (imported, so that the object can be compared)

    src = "from attnlib.attention import scaled_dot_product_attention as f\ny = f(q, k, v)"
    assert find_forbidden(src, [OWN]) == [OWN]


def test_a_notebook_is_read_for_the_answer_cells_names():
    cells = [
        "import torch\nfrom attnlib import scaled_dot_product_attention as s",
        "out = s(q, k, v)  # a demonstration cell may use attnlib",
        "def helper(x):\n    return torch.softmax(x, -1)",
        "def answer(q, k, v):\n    return s(q, k, v)",
        "def answer2(x):\n    return helper(x) * 2",
        "def answer3(x):\n    return torch.exp(x) / torch.exp(x).sum(-1, keepdim=True)",
        "import torch.nn.functional as G",
        "def answer4(q, k, v):\n    return G.scaled_dot_product_attention(q, k, v)",
    ]
    assert find_forbidden_in_cells(cells, 3, LIST) == [OWN]
    assert find_forbidden_in_cells(cells, 4, LIST) == [".softmax", "torch.softmax"]
    assert find_forbidden_in_cells(cells, 5, LIST) == []
    assert find_forbidden_in_cells(cells, 7, LIST) == [SDPA]
    assert find_forbidden_in_cells(cells, 1, []) == []
