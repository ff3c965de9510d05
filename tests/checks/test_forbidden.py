"""find_forbidden reads the syntax tree: aliases, attribute chains, getattr and dynamic imports."""

from __future__ import annotations

import pytest

from attnlib.checks.rules import find_forbidden, find_forbidden_in_cells, forbidden_in_function

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


# --------------------------------------------------------------------------- issue 24: fail closed

from attnlib.checks import all_exercises, get_exercise  # noqa: E402
from attnlib.checks.rules import (  # noqa: E402
    ATTENTION_IMPLEMENTATIONS,
    LOGSUMEXP_IMPLEMENTATIONS,
    SOFTMAX_IMPLEMENTATIONS,
    find_dynamic,
)

# Known one-line equivalents, by family: other spellings than the listed names, each of which
# computes what an exercise of that family asks for (or its hard part).
SOFTMAX_BANK = [
    "y = torch.softmax(x, -1)",
    "y = F.softmax(x, dim=-1)",
    "y = torch.special.softmax(x, -1)",
    "y = x.softmax(-1)",
    "y = torch.nn.Softmax(dim=-1)(x)",
    "y = nn.Softmax(-1)(x)",
    "y = F.log_softmax(x, -1).exp()",
    "y = torch.log_softmax(x, -1).exp()",
    "y = x.log_softmax(-1).exp()",
    "y = torch.nn.LogSoftmax(-1)(x).exp()",
    "y = torch.nn.Softmin(-1)(-x)",
    "y = F.softmin(-x, -1)",
    "import scipy.special\ny = scipy.special.softmax(x, axis=-1)",
    "from scipy.special import log_softmax\ny = np.exp(log_softmax(x, axis=-1))",
    "from scipy import special as sp\ny = sp.softmax(x, -1)",
    "import scipy.special\ny = np.exp(x - scipy.special.logsumexp(x, -1, keepdims=True))",
    "y = torch.exp(x - torch.logsumexp(x, -1, keepdim=True))",
    "y = (x - x.logsumexp(-1, keepdim=True)).exp()",
    "y = np.exp(x - np.logaddexp.reduce(x, axis=-1, keepdims=True))",
    "from torch.nn.functional import *\ny = log_softmax(x, -1).exp()",
    "import attnlib.numpy as a\ny = a.softmax(x)",
    "y = anp.log_softmax(x)",
    "from attnlib import functional\ny = functional.softmax(x)",
    "from attnlib.numpy import softmax as s\ny = s(x)",
    "import torch\ny = getattr(torch, 'log_' + 'softmax')(x, -1).exp()",
    "y = torch._softmax(x, -1, False)",
    "y = torch.ops.aten._softmax(x, -1, False)",
    "get_ipython().run_cell_magic('time', '', 'y = torch.softmax(x, -1)\\n')",
    "get_ipython().run_line_magic('timeit', '-n 3 -o F.softmax(x, -1)')",
    "stable_softmax = F.softmax",
    "stable_softmax = lambda x: x.softmax(-1)",
]
LOGSUMEXP_BANK = [
    "y = torch.logsumexp(x, -1)",
    "y = x.logsumexp(-1)",
    "y = torch.special.logsumexp(x, -1)",
    "import scipy.special\ny = scipy.special.logsumexp(x, axis=-1)",
    "y = anp.logsumexp(x)",
    "import attnlib\ny = attnlib.functional.logsumexp(x)",
    "y = x[..., 0] - torch.log_softmax(x, -1)[..., 0]",
    "import scipy.special\ny = x[..., 0] - np.log(scipy.special.softmax(x, -1)[..., 0])",
    "log_sum_exp = torch.logsumexp",
    # the logaddexp ufuncs fold a row into its log-sum-exp (ex-04-2's bank held the first as right)
    "y = np.logaddexp.reduce(x, axis=-1)",
    "from numpy import logaddexp as lae\ny = lae.reduce(x, axis=-1)",
    "from numpy import *\ny = logaddexp.reduce(x, axis=-1)",
    "y = np.logaddexp.accumulate(x, axis=-1)[..., -1]",
    "y = np.log(2) * np.logaddexp2.reduce(x / np.log(2), axis=-1)",
    "import functools\ny = functools.reduce(np.logaddexp, np.moveaxis(x, -1, 0))",
    "import functools, torch\ny = functools.reduce(torch.logaddexp, t.unbind(-1))",
    "y = t[..., 0].logaddexp(t[..., 1])",
    "y = getattr(np, 'logadd' + 'exp').reduce(x, axis=-1)",
    "log_sum_exp = np.logaddexp.reduce",
]
ATTENTION_BANK = [
    "y = F.scaled_dot_product_attention(q, k, v)",
    "y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)",
    "y = torch._C._nn.scaled_dot_product_attention(q, k, v)",
    "y = torch.ops.aten._scaled_dot_product_efficient_attention(q, k, v, None, False)",
    "y = torch.ops.aten._scaled_dot_product_flash_attention(q, k, v)",
    "m = nn.MultiheadAttention(4, 2)",
    "y = F.multi_head_attention_forward(q, k, v, 4, 2, *params)",
    "import attnlib\ny = attnlib.scaled_dot_product_attention(q, k, v)",
    "y = anp.scaled_dot_product_attention(q, k, v)",
    "from attnlib.efficient import tiled_attention\ny = tiled_attention(q, k, v)",
    "from torch.nn.attention.flex_attention import flex_attention\ny = flex_attention(q, k, v)",
]
FAMILY_BANKS = {"~softmax": SOFTMAX_BANK, "~logsumexp": LOGSUMEXP_BANK, "~attention": ATTENTION_BANK}


def _spellings(entry: str) -> list[str]:
    """One-line uses of a listed name, spelt as a learner might: imported, aliased, by attribute,
    through getattr with a built string, and attnlib's NumPy twin."""
    if entry.endswith("()"):
        name = entry[:-2]
        return [f"def answer({name}, x):\n    return {name}(x)"]
    if entry.startswith("."):
        return [f"y = obj{entry}(x)", f"y = getattr(obj, '{entry[1:2]}' + '{entry[2:]}')(x)"]
    if entry.startswith("~"):
        return []
    module, _, name = entry.rpartition(".")
    uses = [f"import {module}\ny = {entry}(x)", f"import {module} as m\ny = m.{name}(x)"]
    uses.append(f"from {module} import {name} as f\ny = f(x)")
    uses.append(f"import {module} as m\ny = getattr(m, '{name[:1]}' + '{name[1:]}')(x)")
    if entry.startswith("attnlib.") and not entry.startswith(("attnlib.numpy.", "attnlib.checks")):
        uses.append(f"import attnlib.numpy as anp2\ny = anp2.{name}(x)")
    return uses


@pytest.mark.parametrize("ex_id", [e for e in all_exercises() if get_exercise(e).forbidden])
def test_every_exercise_finds_its_bank_of_one_line_equivalents(ex_id):
    """Each exercise's forbidden list, run on every spelling of every entry and on the bank of
    one-line equivalents of each family it forbids: none reads as "nothing found"."""
    forbidden = get_exercise(ex_id).forbidden
    function = get_exercise(ex_id).function
    bank = [use for entry in forbidden for use in _spellings(entry)]
    for entry in forbidden:
        bank += [line.replace("stable_softmax", function) for line in FAMILY_BANKS.get(entry, [])]
    assert bank, ex_id
    missed = [source for source in bank if not find_forbidden(source, forbidden)]
    assert missed == [], f"{ex_id}: {len(missed)} of {len(bank)} equivalents not found: {missed[:5]}"


@pytest.mark.parametrize(
    "forbidden, source",
    [
        (
            SOFTMAX_IMPLEMENTATIONS,
            "e = np.exp(x - x.max(-1, keepdims=True))\ny = e / e.sum(-1, keepdims=True)",
        ),
        (SOFTMAX_IMPLEMENTATIONS, "def my_softmax(x):\n    return x\ny = my_softmax(x)"),
        (
            SOFTMAX_IMPLEMENTATIONS,
            "m = x.max(-1, keepdims=True)\ny = np.exp(x - m - np.log(np.exp(x - m).sum(-1)))",
        ),
        (LOGSUMEXP_IMPLEMENTATIONS, "m = x.max(-1)\ny = m + np.log(np.exp(x - m[..., None]).sum(-1))"),
        (
            LOGSUMEXP_IMPLEMENTATIONS,
            "m = np.maximum.reduce(x, axis=-1)\n"
            "y = m + np.log(np.add.reduce(np.exp(x - m[..., None]), axis=-1))",
        ),
        (
            LOGSUMEXP_IMPLEMENTATIONS,
            "from numpy import *\nm = amax(x, -1)\ny = m + log(sum(exp(x - m[..., None]), -1))",
        ),
        (ATTENTION_IMPLEMENTATIONS, "w = torch.softmax(q @ k.transpose(-2, -1) / d ** 0.5, -1)\ny = w @ v"),
        (
            ATTENTION_IMPLEMENTATIONS,
            "import attnlib.attention as at\nmask = at.causal_mask(3) if False else None",
        ),
    ],
)
def test_honest_answers_are_not_caught_by_a_family(forbidden, source):
    assert find_forbidden(source, forbidden) == []


DYNAMIC_BANK = [
    ("f = getattr(torch, name)", "getattr() with a computed name"),
    ("f = getattr(torch, ''.join(reversed('xamtfos')))", "getattr() with a computed name"),
    ("import operator\nf = operator.attrgetter(n)(torch)", "operator.attrgetter"),
    ("f = vars(torch)[name]", "vars()"),
    ("f = globals()['tor' + 'ch']", "globals()"),
    ("f = torch.__dict__[name]", ".__dict__"),
    ("import sys\nf = sys.modules['torch'].softmax", "sys.modules"),
    ("import importlib\nm = importlib.import_module(name)", "importlib"),
    ("m = __import__(name)", "__import__"),
    ("import pickle\nf = pickle.loads(blob)", "pickle"),
    ("import marshal, types\nf = types.FunctionType(marshal.loads(b), globals())", "marshal"),
    ("import types\nf = types.FunctionType(code, {})", "types.FunctionType"),
    ("f.__code__ = g.__code__", ".__code__"),
    ("import ctypes\nctypes.pythonapi.PyObject_GetAttr", "ctypes"),
    ("import gc\nobjs = gc.get_objects()", "gc"),
    ("exec(source)", "exec"),
    ("y = eval('1 + 1')", "eval"),
    ("c = compile(s, 'x', 'exec')", "compile"),
    ("import subprocess\nsubprocess.run(['python', '-c', s])", "subprocess"),
    ("import os\nos.system('python -c 1')", "os.system"),
    ("import builtins\nf = builtins.getattr", "builtins"),
    ("import dill\nf = dill.loads(b)", "dill"),
    ("f = (1).__class__.__base__.__subclasses__()", ".__subclasses__"),
]


@pytest.mark.parametrize("source, reason", DYNAMIC_BANK)
def test_dynamic_lookups_are_flagged_never_read_as_nothing_found(source, reason):
    assert reason in find_dynamic(source)


@pytest.mark.parametrize(
    "source",
    [
        "import numpy as np\nimport torch\ny = torch.softmax(x, -1)",
        "model.eval()\np = re.compile('x')\ncode = 3",
        "y = getattr(model, 'weight')",
        "torch.manual_seed(0)\ng = torch.Generator().manual_seed(1)",
        "def f(x):\n    return x.sum(-1)",
    ],
)
def test_ordinary_code_is_not_dynamic(source):
    assert find_dynamic(source) == []


def test_a_source_too_deep_to_read_raises_instead_of_finding_nothing():
    """RecursionError (or MemoryError) is the caller's "needs review", never "nothing found"."""
    deep = "y = " + "(" * 50 + "torch.softmax(x, -1)" + ")" * 50 + " + 1" * 200_000
    with pytest.raises((RecursionError, MemoryError)):
        find_forbidden(deep, SOFTMAX_IMPLEMENTATIONS)
    with pytest.raises((RecursionError, MemoryError)):
        find_forbidden_in_cells(["import torch", deep], 1, SOFTMAX_IMPLEMENTATIONS)


def test_the_handed_out_notebooks_have_no_dynamic_lookup_outside_their_setup_cell():
    """The grader skips the handed-out cells; every other cell of the exercise notebooks (which
    the solutions extend) must read clean, or every honest submission would be flagged."""
    import glob

    import nbformat

    flagged = []
    for path in sorted(glob.glob("exercises/*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        for i, cell in enumerate(nb.cells):
            if cell.cell_type == "code" and "Course setup" not in cell.source and find_dynamic(cell.source):
                flagged.append((path, i, find_dynamic(cell.source)))
    assert flagged == []
