# ruff: noqa: E501 - the bank's payloads are notebook cells, one source line per string
"""The forbidden-call rule is sound by construction (issue 34, item 1): an attack bank by kind.

The rule (attnlib/checks/rules/allowed.py, attnlib.checks.rules.audit_notebook on the grader's
side, audit_function in check()) lets an answer reference only what its exercise's allow-list
names. Each kind of evasion the unseen hostile class used is a family of payloads here,
written afresh (not only the ones the issue quotes); every payload must come out forbidden
(0 marks) or held for review, never clean, on the grader's side, or be left out of what
runs for the exercise by the grader's isolation (issue 43: only the handed-out cells and the
statements the answer needs run, so a patch in another cell never reaches it) (the notebook as the
grader's reader sees it, attnlib not imported there) and, where the payload is a function,
on check()'s side with the same verdict. The other direction: every solution, and every right
answer of both answer banks, comes out clean on both sides (no review for legitimate work).
The table of attnlib's public paths that resolves identities is tested to be current.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import importlib
import itertools
import linecache
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat
import numpy as np
import pytest

from attnlib.checks import get_exercise
from attnlib.checks.judge import allow_list, forbidden_calls
from attnlib.checks.rules import Audit, audit_function
from attnlib.checks.rules.allowed import EXTRA, policy
from attnlib.checks.rules.audit import _Forbid
from attnlib.checks.rules.finder import _lookup
from attnlib.checks.rules.public_paths import PUBLIC_PATHS, build
from coursetools.grade import batch
from coursetools.grade.grading import submission

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

PRELUDE = "import math\nimport numpy as np\nimport torch\nimport torch.nn.functional as F\n"
CHAPTER = {
    "01": "01-bottleneck",
    "03": "03-queries-keys-values",
    "04": "04-scaling-softmax",
    "05": "05-masks",
}


@dataclass(frozen=True)
class Payload:
    """One evasion: the answer cell's source, cells before it (after the prelude) and after it.
    ``function``: the payload is one function that check() can be given too."""

    kind: str
    exercise: str
    answer: str
    before: tuple[str, ...] = ()
    after: tuple[str, ...] = ()
    function: bool = True
    expect: str = "any"  # "forbidden", "review" or "any" (either, never clean)


SM = "ex-04-1"  # stable_softmax(x), x a NumPy array: the softmax and log-sum-exp families
LSE = "ex-04-2"  # log_sum_exp(x)
MASK = "ex-05-2"  # build_causal_mask(q_len, k_len): attnlib's causal_mask
EXACT = "ex-01-2"  # exact_sequence_accuracy(pred, tgt): attnlib.chapters.seq2seq.exact_match
ATT = "ex-03-4"  # attention_output(q, k, v): the attention family


def sm(body: str, *, before=(), after=(), function=True, expect="any", kind="") -> Payload:
    return Payload(kind, SM, "def stable_softmax(x):\n" + body, tuple(before), tuple(after), function, expect)


BANK: list[Payload] = []


def kind(name: str, *payloads: Payload) -> None:
    BANK.extend(dataclasses.replace(p, kind=name) for p in payloads)


# 1. Identity: a forbidden object under another of its public paths (the table resolves it)
kind(
    "identity",
    Payload(
        "",
        MASK,
        "import attnlib.attention\ndef build_causal_mask(q_len, k_len):\n"
        "    return attnlib.attention.causal_mask(q_len, k_len)\n",
        expect="forbidden",
    ),
    Payload(
        "",
        MASK,
        "from attnlib.chapters.cross_attention import causal_mask as cm\n"
        "def build_causal_mask(q_len, k_len):\n    return cm(q_len, k_len)\n",
        expect="forbidden",
    ),
    Payload(
        "",
        MASK,
        "import attnlib.chapters.positional_model as pm\n"
        "def build_causal_mask(q_len, k_len):\n    return pm.causal_mask(q_len, k_len)\n",
    ),
    Payload(
        "",
        EXACT,
        "from attnlib.chapters import vocab\ndef exact_sequence_accuracy(pred, tgt):\n"
        "    return vocab.exact_match(pred, tgt)\n",
        expect="forbidden",
    ),
    Payload(
        "",
        EXACT,
        "from attnlib.chapters.vocab import exact_match as em\n"
        "def exact_sequence_accuracy(pred, tgt):\n    return em(pred, tgt)\n",
        expect="forbidden",
    ),
    Payload(
        "",
        ATT,
        "from attnlib.chapters.positional_model import scaled_dot_product_attention as a\n"
        "def attention_output(q, k, v):\n    return a(q, k, v)\n",
        expect="forbidden",
    ),
    Payload(
        "",
        ATT,
        "import attnlib.chapters.cross_attention as ca\ndef attention_output(q, k, v):\n"
        "    return ca.scaled_dot_product_attention(q, k, v)\n",
        expect="forbidden",
    ),
)

# 2. Dynamic lookups: any name reached by a string, a lookup function, or the interpreter
kind(
    "dynamic lookup",
    sm(
        "    import inspect\n    f = dict(inspect.getmembers(torch))['soft' + 'max']\n"
        "    return f(torch.as_tensor(x), -1).numpy()\n"
    ),
    sm(
        "    import functools\n    f = functools.reduce(getattr, ['nn', 'functional', 'soft' 'max'], torch)\n"
        "    return f(torch.as_tensor(x), -1).numpy()\n"
    ),
    sm(
        "    g = __builtins__.getattr if hasattr(__builtins__, 'getattr') else __builtins__['getattr']\n"
        "    return g(torch, 'softmax')(torch.as_tensor(x), -1).numpy()\n"
    ),
    sm("    look = getattr\n    return look(torch, 'soft' + 'max')(torch.as_tensor(x), -1).numpy()\n"),
    sm("    import pydoc\n    return pydoc.locate('scipy.special.' + 'softmax')(x, axis=-1)\n"),
    sm("    import pkgutil\n    return pkgutil.resolve_name('scipy.special:soft' + 'max')(x, axis=-1)\n"),
    sm(
        "    name = bytes([115, 111, 102, 116, 109, 97, 120]).decode()\n"
        "    return vars(torch)[name](torch.as_tensor(x), -1).numpy()\n"
    ),
    sm(
        "    import operator\n    return operator.attrgetter('special.' + 'soft' + 'max')(torch)(torch.as_tensor(x), -1).numpy()\n"
    ),
    sm("    import sys\n    return sys.modules['scipy.special'].__dict__['soft' 'max'](x, axis=-1)\n"),
    sm("    t = torch.as_tensor(x)\n    return type(t).__dict__['soft' 'max'](t, -1).numpy()\n"),
    sm("    return eval('__import__(\"scipy.special\").special.soft' + 'max')(x, axis=-1)\n"),
    sm("    return torch.ops.aten._softmax(torch.as_tensor(x), -1, False).numpy()\n", expect="forbidden"),
    sm(
        "    import codecs\n    n = codecs.decode('fbsgznk', 'rot13')\n    return torch.__getattribute__(n)(torch.as_tensor(x), -1).numpy()\n"
    ),
    sm(
        "    import importlib\n    return importlib.import_module('scipy.special').__getattribute__('soft' 'max')(x, axis=-1)\n"
    ),
)

# 3. Deserialisers: anything that rebuilds an object (a function) from bytes
kind(
    "deserialiser",
    sm(
        "    import io\n    blob = io.BytesIO(bytes(200))\n    f = np.load(blob, allow_pickle=True)[()]\n    return f(x)\n"
    ),
    sm("    import io\n    f = torch.load(io.BytesIO(bytes(64)), weights_only=False)\n    return f(x)\n"),
    sm("    import pickle\n    return pickle.loads(bytes.fromhex('80'))(x)\n"),
    sm("    import marshal, types\n    return types.FunctionType(marshal.loads(b''), {})(x)\n"),
    sm("    import shelve\n    with shelve.open('s') as db:\n        return db['f'](x)\n"),
    sm("    import joblib\n    return joblib.load('f.pkl')(x)\n"),
    sm("    import copyreg, pickle\n    return pickle.Unpickler(None).load()(x)\n"),
)

# 4. Aliases carried by other forms (the alias's source is judged where it is written)
ROW = "    return f(torch.as_tensor(x), -1).numpy()\n"
kind(
    "alias form",
    sm(ROW, before=["(f := torch.softmax)"], function=False),
    sm(
        "    return OPS['norm'](torch.as_tensor(x), -1).numpy()\n",
        before=["OPS = {'norm': torch.softmax}"],
        function=False,
    ),
    sm(
        "    return Ops.norm(torch.as_tensor(x), -1).numpy()\n",
        before=["class Ops:\n    norm = torch.softmax\n"],
        function=False,
    ),
    sm(
        "    return np.stable(x)\n",
        before=["import scipy.special\nnp.stable = scipy.special.softmax"],
        function=False,
    ),
    sm(
        "    return np.exp(x)\n",
        before=["import scipy.special\nnp.exp = scipy.special.softmax"],
        function=False,
    ),
    sm(
        "    return f(x)\n",
        before=["f = lambda x: torch.softmax(torch.as_tensor(x), -1).numpy()"],
        function=False,
    ),
    sm(ROW, before=["if True:\n    def f(t, d):\n        return t.softmax(d)\n"], function=False),
    sm(ROW, before=["f, g = torch.softmax, torch.exp"], function=False),
    sm(ROW, before=["for f in [torch.softmax]:\n    pass\n"], function=False),
    sm(ROW, before=["with torch.no_grad() as _:\n    f = torch.special.softmax\n"], function=False),
    sm(ROW, before=["globals()['f'] = torch.softmax"], function=False),
    sm(
        "    return OPS[0](torch.as_tensor(x), -1).numpy()\n",
        before=["OPS = []", "OPS.append(torch.softmax)"],
        function=False,
    ),
    sm(ROW, before=["import builtins\nbuiltins.f = torch.softmax"], function=False),
    sm(
        "    return np.exp(x)\n",
        before=["import scipy.special\nnp.__setattr__('exp', scipy.special.softmax)"],
        function=False,
    ),
    sm(
        "    return np.exp(x)\n",
        before=["import scipy.special\nvars(np).update(exp=scipy.special.softmax)"],
        function=False,
    ),
    sm(
        "    return np.exp(x)\n",
        before=[
            "import scipy.special, functools\nfunctools.partial(setattr, np)('exp', scipy.special.softmax)"
        ],
        function=False,
    ),
    sm(
        "    return np.exp(x)\n",
        before=["exec('import scipy.special; np.exp = scipy.special.softmax')"],
        function=False,
    ),
    sm(
        "    return np.exp(x)\n",
        before=["import scipy.special\nsetattr(np, 'exp', scipy.special.softmax)"],
        function=False,
    ),
    sm(ROW, before=["def setup():\n    global f\n    f = torch.softmax\nsetup()\n"], function=False),
    sm(
        ROW,
        before=[
            "try:\n    raise ValueError\nexcept ValueError as f:\n    pass\nf = torch.softmax if 0 else f\n"
        ],
        function=False,
    ),
    sm("    f = torch.softmax\n" + ROW, expect="forbidden"),
    sm("    (f := torch.nn.functional.softmax)\n" + ROW, expect="forbidden"),
    sm(
        "    d = {'a': torch.special.softmax}\n    return d['a'](torch.as_tensor(x), -1).numpy()\n",
        expect="forbidden",
    ),
    sm("    a, f = 1, torch.softmax\n" + ROW, expect="forbidden"),
    sm("    for f in (torch.softmax,):\n        pass\n" + ROW, expect="forbidden"),
    sm(
        "    class K:\n        f = staticmethod(torch.softmax)\n    return K.f(torch.as_tensor(x), -1).numpy()\n",
        expect="forbidden",
    ),
    sm("    g = lambda t: t.softmax(-1)\n    return g(torch.as_tensor(x)).numpy()\n", expect="forbidden"),
)

# 5. Code after the answer cell, and callables that are not a plain def
STUB = "    raise NotImplementedError\n"
kind(
    "after the answer",
    sm(
        STUB,
        after=[
            "def make():\n    s = torch.softmax\n    def stable_softmax(x):\n"
            "        return s(torch.as_tensor(x), -1).numpy()\n    return stable_softmax\n"
            "stable_softmax = make()\n"
        ],
        function=False,
    ),
    sm(
        STUB,
        after=[
            "class C:\n    __code__ = (lambda: 0).__code__\n    def __call__(self, x):\n"
            "        import scipy.special\n        return scipy.special.softmax(x, -1)\n"
            "stable_softmax = C()\n"
        ],
        function=False,
    ),
    sm(
        STUB,
        after=[
            "import scipy.special\ndef stable_softmax(x):\n    return scipy.special.softmax(x, axis=-1)\n"
        ],
        function=False,
        expect="forbidden",
    ),
    sm(
        STUB,
        after=[
            "def other(x):\n    return torch.softmax(torch.as_tensor(x), -1).numpy()\n"
            "stable_softmax.__code__ = other.__code__\n"
        ],
        function=False,
    ),
    sm(
        STUB,
        after=["import functools\nstable_softmax = functools.partial(torch.softmax, dim=-1)\n"],
        function=False,
    ),
    sm(
        STUB,
        after=["from scipy.special import softmax as stable_softmax\n"],
        function=False,
        expect="forbidden",
    ),
    sm(
        STUB,
        after=["if True:\n    def stable_softmax(x):\n        return scipy.special.softmax(x, -1)\n"],
        function=False,
    ),
    sm(
        "    return helper(x)\n",
        after=["def helper(x):\n    return torch.softmax(torch.as_tensor(x), -1).numpy()\n"],
        function=False,
        expect="forbidden",
    ),
    sm(
        "    return helper(x)\n",
        after=["helper = lambda x: torch.softmax(torch.as_tensor(x), -1).numpy()\n"],
        function=False,
    ),
)

# 6. One-liners outside the families: not on the allow-list, so never marks
kind(
    "outside the families",
    sm("    return torch.distributions.Categorical(logits=torch.as_tensor(x)).probs.numpy()\n"),
    sm(
        "    from torch.distributions.utils import logits_to_probs\n    return logits_to_probs(torch.as_tensor(x)).numpy()\n"
    ),
    sm("    t = torch.as_tensor(x)\n    return torch.exp(t - torch.logcumsumexp(t, -1)[..., -1:]).numpy()\n"),
    sm(
        "    t = torch.as_tensor(x)\n    n = t.shape[-1]\n    rows = t.reshape(-1, n)\n"
        "    out = [torch.exp(-F.cross_entropy(rows, torch.full((rows.shape[0],), j), reduction='none'))"
        " for j in range(n)]\n    return torch.stack(out, -1).reshape(t.shape).numpy()\n"
    ),
    sm("    return torch.distributions.OneHotCategorical(logits=torch.as_tensor(x)).probs.numpy()\n"),
    sm(
        "    t = torch.as_tensor(x)\n    return F.normalize(torch.exp(t - t.amax(-1, keepdim=True)), p=1, dim=-1).numpy()\n"
    ),
    sm(
        "    return np.exp(x - np.frompyfunc(np.logaddexp, 2, 1).reduce(x, axis=-1)[..., None].astype(float))\n",
        expect="forbidden",
    ),
    Payload(
        "",
        LSE,
        "def log_sum_exp(x):\n    t = torch.as_tensor(x)\n    return torch.logcumsumexp(t, -1)[..., -1].numpy()\n",
    ),
    Payload(
        "",
        LSE,
        "def log_sum_exp(x):\n    t = torch.as_tensor(x)\n    z = torch.zeros(t.shape[:-1], dtype=torch.long)\n"
        "    return (F.cross_entropy(t.reshape(-1, t.shape[-1]), z.reshape(-1), reduction='none').reshape(z.shape)"
        " + t[..., 0]).numpy()\n",
    ),
    Payload("", LSE, "def log_sum_exp(x):\n    return torch.special.logit(torch.as_tensor(x)).numpy()\n"),
)

# 7. Issue 43, item 2: routes that change what an allowed name does, written in the answer's
# own code (what the grader runs for the exercise), each a capability the rule refuses
kind(
    "patch the runtime",
    sm(
        "    from unittest import mock\n    with mock.patch.object(np, 'exp', lambda t: t):\n"
        "        e = np.exp(x - x.max(-1, keepdims=True))\n    return e / e.sum(-1, keepdims=True)\n"
    ),
    sm(
        "    import functools, types\n    ns = types.SimpleNamespace(exp=np.log)\n"
        "    functools.update_wrapper(np, ns, assigned=('exp',), updated=())\n"
        "    e = np.exp(x - x.max(-1, keepdims=True))\n    return e / e.sum(-1, keepdims=True)\n"
    ),
    sm(
        "    b = print.__self__\n    b.setattr(np, 'exp', np.log)\n"
        "    e = np.exp(x - x.max(-1, keepdims=True))\n    return e / e.sum(-1, keepdims=True)\n"
    ),
    sm(
        "    import sys\n    def tracer(frame, event, arg):\n        frame.f_locals['x'] = x * 0\n        return tracer\n"
        "    sys.settrace(tracer)\n    e = np.exp(x - x.max(-1, keepdims=True))\n    return e / e.sum(-1, keepdims=True)\n"
    ),
    sm(
        "    from torch.overrides import TorchFunctionMode\n    class M(TorchFunctionMode):\n"
        "        def __torch_function__(self, func, types, args=(), kwargs=None):\n"
        "            return func(*args, **(kwargs or {}))\n    with M():\n"
        "        t = torch.as_tensor(x)\n        e = torch.exp(t - t.amax(-1, keepdim=True))\n"
        "        return (e / e.sum(-1, keepdim=True)).numpy()\n"
    ),
    sm(
        "    lib = torch.library.Library('aten', 'IMPL')\n    lib.impl('exp', lambda t: t, 'CPU')\n"
        "    t = torch.as_tensor(x)\n    e = torch.exp(t - t.amax(-1, keepdim=True))\n"
        "    return (e / e.sum(-1, keepdim=True)).numpy()\n"
    ),
    sm(
        "    get_ipython()._ns['np'] = torch\n"
        "    e = np.exp(x - x.max(-1, keepdims=True))\n    return e / e.sum(-1, keepdims=True)\n"
    ),
    sm(
        "    def honest(t):\n        return t\n    honest.__code__ = (lambda t: torch.softmax(torch.as_tensor(t), -1).numpy()).__code__\n"
        "    return honest(x)\n"
    ),
    sm(
        "    import os\n    if os.environ.get('GRADER'):\n        np.exp = np.log\n"
        "    e = np.exp(x - x.max(-1, keepdims=True))\n    return e / e.sum(-1, keepdims=True)\n"
    ),
    sm(
        "    m = np\n    m.exp = np.log\n"
        "    e = np.exp(x - x.max(-1, keepdims=True))\n    return e / e.sum(-1, keepdims=True)\n"
    ),
    sm(
        "    t = torch.as_tensor(x)\n    type(t).exp = lambda self: self\n"
        "    e = (t - t.amax(-1, keepdim=True)).exp()\n    return (e / e.sum(-1, keepdim=True)).numpy()\n"
    ),
    sm(
        "    from torch.utils._python_dispatch import TorchDispatchMode\n    with TorchDispatchMode():\n"
        "        e = np.exp(x - x.max(-1, keepdims=True))\n    return e / e.sum(-1, keepdims=True)\n"
    ),
    sm(
        "    import gc\n    for o in gc.get_objects():\n        pass\n"
        "    e = np.exp(x - x.max(-1, keepdims=True))\n    return e / e.sum(-1, keepdims=True)\n"
    ),
    sm(
        "    import pickle\n    f = pickle.loads(pickle.dumps(np.exp))\n"
        "    e = f(x - x.max(-1, keepdims=True))\n    return e / e.sum(-1, keepdims=True)\n"
    ),
    sm(
        "    e = np.exp(x - x.max(-1, keepdims=True))\n    return e / e.sum(-1, keepdims=True)\n",
        before=["np.exp = np.log"],
        function=False,
    ),
    sm(
        "    return STEP(x)\n",
        before=[
            "TABLE = {}",
            "TABLE['f'] = lambda x: torch.softmax(torch.as_tensor(x), -1).numpy()",
            "STEP = TABLE['f']",
        ],
        function=False,
        expect="forbidden",
    ),
)


def _notebook(assignment, payload: Payload):
    nb = nbformat.read(assignment.path, as_version=4)
    index = next(
        i for i, c in enumerate(nb.cells) if c.metadata.get("attnlib", {}).get("exercise") == payload.exercise
    )
    nb.cells[index].source = payload.answer
    for extra in reversed(payload.after):
        nb.cells.insert(index + 1, nbformat.v4.new_code_cell(extra))
    for extra in reversed((PRELUDE, *payload.before)):
        nb.cells.insert(index, nbformat.v4.new_code_cell(extra))
    return nb


_ASSIGNMENTS: dict[str, object] = {}


def _assignment(exercise: str):
    stem = CHAPTER[exercise[3:5]]
    if stem not in _ASSIGNMENTS:
        _ASSIGNMENTS[stem] = batch.load_assignment(stem)
    return _ASSIGNMENTS[stem]


def _statements(source: str) -> list[str]:
    try:
        return [ast.unparse(stmt) for stmt in ast.parse(source).body]
    except SyntaxError:
        return [source]


def _cut(plan: dict, payload: Payload) -> bool:
    """Whether the grader's isolation (issue 43: each exercise runs the handed-out cells and only
    the learner's statements its answer needs, ``plan["selected"]``) leaves out a statement of
    the payload's other cells: the patch or alias it carries then never runs for the answer."""
    selected = plan.get("selected", {}).get(payload.exercise)
    if selected is None:
        return False
    ran = {stmt for _index, source in selected["learner"] for stmt in _statements(source)}
    extra = [stmt for source in (*payload.before, *payload.after) for stmt in _statements(source)]
    return any(stmt not in ran for stmt in extra)


@functools.cache
def _plan(payload: Payload) -> dict:
    assignment = _assignment(payload.exercise)
    return submission.build_plan(_notebook(assignment, payload), assignment)[0]


def grader_verdict(payload: Payload) -> str:
    """``forbidden``, ``review``, ``isolated`` (the payload's patch is not among the statements
    that run for the exercise) or ``clean``: the exercise's verdict in the grader's plan."""
    plan = _plan(payload)
    if plan.get("forbidden", {}).get(payload.exercise):
        return "forbidden"
    if plan.get("held", {}).get(payload.exercise):
        return "review"
    return "isolated" if _cut(plan, payload) else "clean"


def _category(audit: Audit) -> str:
    return "forbidden" if audit.forbidden else "review" if audit.review else "clean"


def learner_audit(payload: Payload) -> Audit:
    """check()'s side: run the prelude, the cells before and the answer as a notebook would
    (each cell's source registered as its file), and audit the function."""
    from IPython.display import display  # a notebook's namespace has it

    namespace: dict = {"__name__": "__main__", "display": display}
    for number, source in enumerate((PRELUDE, *payload.before, payload.answer)):
        filename = f"<payload cell {number}>"
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        exec(compile(source, filename, "exec"), namespace)  # noqa: S102 - the bank's own payloads
    exercise = get_exercise(payload.exercise)
    func = namespace[exercise.function]
    audit = allow_list(exercise, func)  # what check() does: evaluate() reads both
    return Audit(tuple(sorted(set(audit.forbidden) | set(forbidden_calls(exercise.id, func)))), audit.review)


def _id(payload: Payload) -> str:
    return f"{payload.kind}-{payload.exercise}-{BANK.index(payload)}"


def test_the_bank_has_several_payloads_of_every_kind():
    counts = {k: sum(p.kind == k for p in BANK) for k in dict.fromkeys(p.kind for p in BANK)}
    assert len(counts) == 7 and min(counts.values()) >= 7, counts


@pytest.mark.parametrize("payload", BANK, ids=_id)
def test_no_evasion_is_marked_by_the_grader(payload):
    verdict = grader_verdict(payload)
    assert verdict != "clean", payload.answer
    if payload.expect != "any" and not _cut(_plan(payload), payload):
        assert verdict == payload.expect, (verdict, payload.answer)


@pytest.mark.parametrize("payload", [p for p in BANK if p.function], ids=_id)
def test_check_agrees_with_the_grader(payload):
    try:
        audit = learner_audit(payload)
    except Exception as exc:  # noqa: BLE001 - a payload that cannot even be defined here
        pytest.skip(f"the payload does not define its function outside a notebook: {exc}")
    assert _category(audit) == grader_verdict(payload), (audit, payload.answer)


def test_check_does_not_follow_a_forged_wrapped():
    """``__wrapped__`` set by hand would make check() read another function's source."""
    import scipy.special

    def honest(x):
        e = np.exp(x - x.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    def stable_softmax(x):
        return scipy.special.softmax(x, axis=-1)

    stable_softmax.__wrapped__ = honest
    exercise = get_exercise(SM)
    assert not audit_function(stable_softmax, policy(SM, exercise.function, exercise.forbidden)).clean


# --------------------------------------------------------------------------- legitimate work

LEGITIMATE = [
    sm(
        "    return helper(x)\n",
        before=[
            "def helper(x):\n    e = np.exp(x - x.max(-1, keepdims=True))\n"
            "    return e / e.sum(-1, keepdims=True)\n"
        ],
    ),
    sm(
        "    e = np.exp(SCALE * (x - x.max(-1, keepdims=True)))\n    return e / e.sum(-1, keepdims=True)\n",
        before=["SCALE = 2 / math.sqrt(4)"],
    ),
    sm(
        "    e = np.exp(x - x.max(-1, keepdims=True))\n    return e / np.maximum(e.sum(-1, keepdims=True), EPS)\n",
        before=["EPS = np.float64(1e-300)"],
    ),
    sm(
        "    t = torch.as_tensor(x)\n    e = torch.exp(t - t.amax(-1, keepdim=True))\n"
        "    return (e / e.sum(-1, keepdim=True)).numpy()\n",
        before=["import torch as th"],
    ),
    Payload(
        "",
        SM,
        "@torch.no_grad()\ndef stable_softmax(x):\n    t = torch.as_tensor(x)\n"
        "    e = (t - t.max(-1, keepdim=True).values).exp()\n    return (e / e.sum(-1, keepdim=True)).numpy()\n",
    ),
    Payload(
        "",
        LSE,
        "def log_sum_exp(x):\n    m = np.max(x, axis=-1, keepdims=True)\n"
        "    return (m + np.log(np.sum(np.exp(x - m), axis=-1, keepdims=True)))[..., 0]\n",
    ),
    Payload(
        "",
        MASK,
        "def build_causal_mask(q_len, k_len):\n"
        "    return torch.arange(k_len)[None, :] <= torch.arange(q_len)[:, None]\n",
    ),
    Payload(  # display() in the answer cell itself, as a notebook user shows a result
        "",
        SM,
        "def stable_softmax(x):\n    e = np.exp(x - x.max(-1, keepdims=True))\n"
        "    return e / e.sum(-1, keepdims=True)\n\n\ndisplay(stable_softmax(np.zeros(3)))\n",
    ),
    sm(  # a figure setting in the learner's own cell: an answer cannot reach matplotlib
        "    e = np.exp(x - x.max(-1, keepdims=True))\n    return e / e.sum(-1, keepdims=True)\n",
        before=["import matplotlib.pyplot as plt\nplt.rcParams['figure.figsize'] = (4, 3)"],
    ),
]


@pytest.mark.parametrize("payload", LEGITIMATE, ids=lambda p: p.answer.splitlines()[1][:40])
def test_legitimate_notebook_patterns_are_clean_on_both_sides(payload):
    assert grader_verdict(payload) in ("clean", "isolated"), payload  # isolated: its cell does not run
    assert _category(learner_audit(payload)) == "clean", learner_audit(payload)


def _rights():
    for package in ("banks", "banks_independent"):
        for path in sorted((HERE / package).glob("ch*.py")):
            module = importlib.import_module(f"{package}.{path.stem}")
            for entry in getattr(module, "RIGHT", []):
                yield pytest.param(entry, id=f"{package}-{entry.exercise}-{entry.fn.__name__}")


@pytest.mark.parametrize("entry", list(_rights()))
def test_every_right_answer_of_the_banks_is_clean_in_check(entry):
    exercise = get_exercise(entry.exercise)
    audit = audit_function(entry.fn, policy(exercise.id, exercise.function, exercise.forbidden))
    assert audit.clean, audit


SOLUTIONS = sorted((ROOT / "solutions").glob("*.ipynb"))


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.stem)
def test_every_solution_is_clean_in_the_grader(path):
    assignment = batch.load_assignment(path.stem)
    plan, _notes, review = submission.build_plan(submission.read_notebook(path), assignment)
    assert not plan.get("forbidden") and not plan.get("held") and review == [], (plan.get("held"), review)


# --------------------------------------------------------------------------- the identity table


def test_the_public_path_table_is_current():
    """Every name of attnlib bound to one of its functions, classes or modules (walked again
    here, attnlib imported for real) is in the table with its home: regenerate with
    ``python -m attnlib.checks.rules.public_paths --write``."""
    table = build()
    changed = sorted(set(table.items()) ^ set(PUBLIC_PATHS.items()))
    assert not changed, f"regenerate: python -m attnlib.checks.rules.public_paths --write ({changed[:5]})"


def test_every_public_path_of_a_forbidden_object_is_forbidden():
    """For every exercise, every path that names (by identity, attnlib imported) an object its
    forbidden entries name is forbidden by the rule, which does not import attnlib."""
    import attnlib.chapters  # noqa: F401 - the chapters' modules, for _lookup

    for module in {home.rsplit(".", 1)[0] for home in PUBLIC_PATHS.values()} | set(PUBLIC_PATHS):
        if module.startswith("attnlib."):
            try:
                importlib.import_module(module)
            except ImportError:
                pass
    from attnlib.checks import all_exercises

    for ex_id in all_exercises():
        exercise = get_exercise(ex_id)
        forbid = _Forbid(exercise.forbidden)
        targets = {
            id(_lookup(p))
            for p in forbid.paths
            if _lookup(p) is not None and not isinstance(_lookup(p), int | str)
        }
        for path in PUBLIC_PATHS:
            obj = _lookup(path)
            if obj is not None and id(obj) in targets:
                assert forbid.path(path), (ex_id, path)


def test_no_allowed_path_is_a_forbidden_object():
    """The allow-list never names a forbidden object under another path (checked by identity)."""
    from attnlib.checks import all_exercises

    for ex_id in all_exercises():
        exercise = get_exercise(ex_id)
        rule = policy(ex_id, exercise.function, exercise.forbidden)
        forbid = _Forbid(exercise.forbidden)
        banned = {id(o) for o in map(_lookup, forbid.paths) if o is not None and not isinstance(o, int | str)}
        for path in rule.paths:
            obj = _lookup(path)
            if obj is not None and id(obj) in banned:
                assert forbid.path(path), (ex_id, path)


def test_every_added_path_exists():
    """A course-library path an exercise adds (EXTRA) that attnlib does not have is a typo."""
    import attnlib.chapters.seq2seq  # noqa: F401
    import attnlib.chapters.tiny_lm  # noqa: F401
    import attnlib.chapters.vocab  # noqa: F401

    paths = set(itertools.chain.from_iterable(e.paths for e in EXTRA.values()))
    missing = sorted(p for p in paths if not _exists(p))
    assert missing == [], missing


def _exists(path: str) -> bool:
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            if not hasattr(obj, part):
                return False
            obj = getattr(obj, part)
        return True
    return False
