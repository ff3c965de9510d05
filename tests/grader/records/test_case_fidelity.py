"""Issue 43, item 4: every case reaches the answer as ``check()`` built it.

The grader makes the cases' inputs and ships them into the sandbox
(:mod:`coursetools.grade.records.inputs`). Plain pickling dropped ``Parameter.grad``, so the
stale-gradient cases of ex-01-4 and ex-10-2 never reached the answer: ``zero_grad`` after
``step`` got full marks. These tests compare, for every case of every registered exercise,
the inputs as ``check()`` builds them (``case.make_inputs()``) with the inputs the sandbox
unpickles, with a comparison written here (not the module's own ``fingerprint``): values
bit for bit, dtype, shape, strides, storage offset, contiguity, ``requires_grad``,
``.grad``, leaf or not, the memory inputs share, every module's ``training`` flag,
``state_dict``, parameters (and their gradients), buffers, an optimiser's state and
parameters (the model's own), NumPy flags. Then the training exercises' known mistakes
are judged on the shipped inputs as the grader judges them.
"""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from attnlib.checks import all_exercises
from attnlib.checks.core import NotAttempted, evaluate, run_case
from coursetools.grade.grading import verdict
from coursetools.grade.grading.runner import Settings
from coursetools.grade.records import inputs
from coursetools.grade.records.events import CaseEvent, CaseKind
from coursetools.grade.records.wire import encode

pytestmark = pytest.mark.grader
HERE = Path(__file__).resolve().parent
EXERCISES = dict(sorted(all_exercises().items()))


def _shipped(exercise):
    """The exercise's cases as the sandbox has them (``ShippedCase``: unpickled afresh per call)."""
    function, cases = inputs.unship(inputs.ship({exercise.id: exercise}))[exercise.id]
    assert function == exercise.function
    assert [c.name for c in cases] == [c.name for c in exercise.cases]
    return cases


class _Compare:
    """The differences between an input and its shipped copy, as readable lines."""

    def __init__(self):
        self.problems: list[str] = []
        self.pairs: dict[int, int] = {}  # id(original) -> id(copy): an object met twice is the same twice
        self.memory: dict[int, int] = {}  # data pointer of an original storage -> the copy's
        self.keep: list = []

    def fail(self, path: str, what: str) -> None:
        self.problems.append(f"{path}: {what}")

    def same_memory(self, path: str, a_ptr: int, b_ptr: int, nbytes: int) -> None:
        if nbytes == 0:
            return
        known = self.memory.setdefault(a_ptr, b_ptr)
        if known != b_ptr:
            self.fail(path, "shares memory with another input in the case, not in the copy")
        elif list(self.memory.values()).count(b_ptr) > 1:
            self.fail(path, "shares memory with another input in the copy only")

    def compare(self, a, b, path: str = "inputs") -> None:
        if type(a) is not type(b):
            self.fail(path, f"type {type(a).__name__} became {type(b).__name__}")
            return
        if isinstance(a, int | float | str | bool | type(None) | complex | bytes):
            if not (a == b or (a != a and b != b)):
                self.fail(path, f"{a!r} became {b!r}")
            return
        if id(a) in self.pairs:
            if self.pairs[id(a)] != id(b):
                self.fail(path, "the same object twice in the case, two objects in the copy")
            return
        self.pairs[id(a)] = id(b)
        self.keep += [a, b]
        if isinstance(a, torch.Tensor):
            self.tensor(a, b, path)
        elif isinstance(a, np.ndarray):
            self.array(a, b, path)
        elif isinstance(a, torch.nn.Module):
            self.module(a, b, path)
        elif isinstance(a, torch.optim.Optimizer):
            self.optimizer(a, b, path)
        elif isinstance(a, tuple | list):
            if len(a) != len(b):
                self.fail(path, f"length {len(a)} became {len(b)}")
            for i, (x, y) in enumerate(zip(a, b, strict=False)):
                self.compare(x, y, f"{path}[{i}]")
        elif isinstance(a, dict):
            if len(a) != len(b):
                self.fail(path, f"{len(a)} keys became {len(b)}")
            for i, ((ka, va), (kb, vb)) in enumerate(zip(a.items(), b.items(), strict=False)):
                self.compare(ka, kb, f"{path}.key{i}")
                self.compare(va, vb, f"{path}[{ka!r}]")
        elif hasattr(a, "__self__") and hasattr(a, "__func__"):  # a bound method
            if a.__func__ is not b.__func__:
                self.fail(path, "another method")
            self.compare(a.__self__, b.__self__, f"{path}.__self__")
        elif hasattr(a, "__dict__"):
            self.compare(dict(sorted(vars(a).items())), dict(sorted(vars(b).items())), f"{path}.__dict__")
        elif a != b:
            self.fail(path, f"{a!r} became {b!r}")

    def tensor(self, a: torch.Tensor, b: torch.Tensor, path: str) -> None:
        for what in ("dtype", "shape", "device", "layout", "requires_grad", "is_leaf"):
            if getattr(a, what) != getattr(b, what):
                self.fail(path, f"{what} {getattr(a, what)} became {getattr(b, what)}")
        if a.stride() != b.stride() or a.storage_offset() != b.storage_offset():
            self.fail(
                path, f"strides {a.stride()}+{a.storage_offset()} became {b.stride()}+{b.storage_offset()}"
            )
        if a.is_contiguous() != b.is_contiguous():
            self.fail(path, f"is_contiguous {a.is_contiguous()} became {b.is_contiguous()}")
        if a.untyped_storage().nbytes() != b.untyped_storage().nbytes():
            self.fail(path, "its storage changed size")
        if a.untyped_storage().resizable() != b.untyped_storage().resizable():
            self.fail(path, "its storage is resizable in one and not the other")
        self.same_memory(
            path, a.untyped_storage().data_ptr(), b.untyped_storage().data_ptr(), a.untyped_storage().nbytes()
        )
        if a.shape == b.shape and a.dtype == b.dtype:
            bits_a = (
                a.detach().contiguous().view(torch.uint8)
                if a.dim()
                else a.detach().reshape(1).view(torch.uint8)
            )
            bits_b = (
                b.detach().contiguous().view(torch.uint8)
                if b.dim()
                else b.detach().reshape(1).view(torch.uint8)
            )
            if not torch.equal(bits_a, bits_b):
                self.fail(path, "values differ")
        if a.is_leaf and (a.grad is None) != (b.grad is None):
            self.fail(path, f"grad {'lost' if b.grad is None else 'appeared'}")
        elif a.is_leaf and a.grad is not None:
            self.compare(a.grad, b.grad, f"{path}.grad")

    def array(self, a: np.ndarray, b: np.ndarray, path: str) -> None:
        for what in ("dtype", "shape", "strides"):
            if getattr(a, what) != getattr(b, what):
                self.fail(path, f"{what} {getattr(a, what)} became {getattr(b, what)}")
        for flag in ("writeable", "c_contiguous", "f_contiguous", "aligned"):
            if getattr(a.flags, flag) != getattr(b.flags, flag):
                self.fail(path, f"flag {flag} {getattr(a.flags, flag)} became {getattr(b.flags, flag)}")
        if a.tobytes() != b.tobytes():
            self.fail(path, "values differ")
        for i, (x, y) in enumerate(zip(self.arrays, self.arrays_copy, strict=True)):
            if np.shares_memory(a, x) != np.shares_memory(b, y):
                self.fail(path, f"shares memory with array {i} in one and not the other")
        self.arrays.append(a)
        self.arrays_copy.append(b)

    arrays: list
    arrays_copy: list

    def module(self, a: torch.nn.Module, b: torch.nn.Module, path: str) -> None:
        mods_a, mods_b = dict(a.named_modules()), dict(b.named_modules())
        if list(mods_a) != list(mods_b):
            self.fail(path, f"submodules {list(mods_a)} became {list(mods_b)}")
        for name, m in mods_a.items():
            other = mods_b.get(name)
            if other is not None and m.training != other.training:
                self.fail(f"{path}.{name or '(module)'}", f"training {m.training} became {other.training}")
            if other is not None and type(m) is not type(other):
                self.fail(f"{path}.{name}", "another class")
        state_a, state_b = a.state_dict(), b.state_dict()
        if list(state_a) != list(state_b):
            self.fail(path, f"state_dict keys {list(state_a)} became {list(state_b)}")
        params_b = dict(b.named_parameters())
        for name, p in a.named_parameters():
            if name in params_b:
                self.compare(p, params_b[name], f"{path}.{name}")
        buffers_b = dict(b.named_buffers())
        for name, buf in a.named_buffers():
            if name in buffers_b:
                self.compare(buf, buffers_b[name], f"{path}.{name}")
        for name, value in state_a.items():
            if name in state_b and not torch.equal(value, state_b[name]):
                self.fail(f"{path}.{name}", "state_dict value differs")
        for name in sorted(vars(a)):
            if not name.startswith("_") and name != "training":
                self.compare(vars(a)[name], vars(b).get(name), f"{path}.{name}")

    def optimizer(self, a, b, path: str) -> None:
        if a.defaults != b.defaults:
            self.fail(path, f"defaults {a.defaults} became {b.defaults}")
        for g, (ga, gb) in enumerate(zip(a.param_groups, b.param_groups, strict=True)):
            for k, (pa, pb) in enumerate(zip(ga["params"], gb["params"], strict=True)):
                self.compare(pa, pb, f"{path}.param_groups[{g}].params[{k}]")  # the model's, by identity
            rest_a = {k: v for k, v in ga.items() if k != "params"}
            rest_b = {k: v for k, v in gb.items() if k != "params"}
            if rest_a != rest_b:
                self.fail(f"{path}.param_groups[{g}]", f"{rest_a} became {rest_b}")
        self.compare(dict(a.state), dict(b.state), f"{path}.state")


def differences(original, copy) -> list[str]:
    compare = _Compare()
    compare.arrays, compare.arrays_copy = [], []
    compare.compare(original, copy)
    return compare.problems


CASES = [
    pytest.param(ex_id, k, id=f"{ex_id}:{k}")
    for ex_id, exercise in EXERCISES.items()
    for k in range(len(exercise.cases))
]


@pytest.fixture(scope="module")
def shipped():
    return {ex_id: _shipped(exercise) for ex_id, exercise in EXERCISES.items()}


@pytest.mark.slow  # builds every case of every chapter twice (the models included): ~45 s
@pytest.mark.parametrize("ex_id, k", CASES)
def test_every_case_reaches_the_sandbox_as_check_builds_it(shipped, ex_id, k):
    case = EXERCISES[ex_id].cases[k]
    arrived = shipped[ex_id][k]
    assert arrived.name == case.name
    problems = differences(case.make_inputs(), arrived.make_inputs())
    assert problems == [], f"{ex_id} {case.name!r}:\n" + "\n".join(problems[:20])


def test_the_comparison_sees_what_plain_pickling_loses():
    """The comparison above is not blind: plain pickling of a stale-gradient case, a view, a
    read-only or strided array, a module in eval mode ... differs, and the grader's shipping does not."""
    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Dropout(0.5)).eval()
    for p in model.parameters():
        p.grad = torch.full_like(p, 0.5)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    base = torch.arange(12.0).reshape(3, 4)
    leaf = torch.zeros(3, requires_grad=True)
    leaf.grad = torch.ones(3)
    array = np.arange(24.0).reshape(4, 6)
    frozen = np.arange(5)
    frozen.flags.writeable = False
    value = (model, optimizer, base, base[1:], base.t(), leaf, array, array[:, ::2], array[::-1], frozen)
    plain = differences(value, pickle.loads(pickle.dumps(value)))
    assert any(p.endswith("0.weight: grad lost") for p in plain), plain
    assert "inputs[5]: grad lost" in plain, plain
    assert any("shares memory" in p for p in plain), plain
    assert any("strides" in p for p in plain), plain
    assert any("writeable" in p for p in plain), plain
    assert differences(value, pickle.loads(inputs.dumps(value))) == []
    copy = pickle.loads(inputs.dumps(value))
    copy[3][0, 0] = 100.0  # a view still writes through to its base, as in the case
    assert copy[2][1, 0] == 100.0
    assert copy[1].param_groups[0]["params"][0] is copy[0][0].weight
    assert not copy[0].training and not copy[0][1].training


def test_an_input_that_cannot_arrive_as_built_is_refused():
    """A non-leaf tensor (its graph cannot travel) is refused when the grader ships it, not
    turned silently into a leaf."""
    graph = torch.ones(2, requires_grad=True) * 2
    assert not graph.is_leaf
    with pytest.raises(TypeError, match="would not reach the sandbox as they were built"):
        inputs.dumps((graph,))


# --------------------------------------------------------------------------- the grader's verdicts


def _grader_verdicts(exercise, func):
    """``func`` judged as the grader judges it: called on the shipped cases, its output sent
    through the wire format, each case judged by :func:`coursetools.grade.grading.verdict.judge`, the
    mistakes named across cases."""
    settings = Settings(out=Path("unused"))
    raw = []
    for case, arrived in zip(exercise.cases, _shipped(exercise), strict=True):
        try:
            event = CaseEvent(CaseKind.VALUE, encode(run_case(func, arrived)))
        except NotAttempted:
            event = CaseEvent(CaseKind.NOT_ATTEMPTED)
        except Exception as exc:  # noqa: BLE001 - as the harness reports it
            event = CaseEvent(CaseKind.ERROR, etype=type(exc).__name__, text=str(exc).strip().split("\n")[0])
        raw.append(verdict.judge(exercise, case, event, settings))
    return verdict._named_across_cases(exercise, raw)


def _bank(folder: str, module: str) -> dict:
    sys.path[:0] = [str(HERE.parents[1] / "checks"), str(HERE.parents[1] / "checks" / folder)]
    try:
        mod = __import__(module)
        return {f.__name__: f for f in vars(mod).values() if callable(f) and hasattr(f, "__code__")}
    finally:
        del sys.path[:2]
        sys.modules.pop(module, None)


STALE = [  # (exercise, bank folder, module, answer, what the feedback must say, what it must not)
    ("ex-01-4", "banks_independent", "ch01_bottleneck", "tss_zero_grad_after_step", "after the step", None),
    ("ex-10-2", "banks_independent", "ch10_transformer", "ts_zero_grad_after", None, None),
    ("ex-01-4", "banks", "ch01_bottleneck", "steps_no_zero_grad", "never zeroed", "zeroed once"),
]


@pytest.mark.slow  # trains the chapter's models (every case and every known mistake)
@pytest.mark.parametrize("ex_id, folder, module, name, named, not_named", STALE, ids=[s[3] for s in STALE])
def test_stale_gradients_reach_the_answer_in_the_grader(ex_id, folder, module, name, named, not_named):
    """zero_grad after step loses marks through the grader as it does in check(), and a loop that
    never zeroes is told so (not "zeroed once"): the visible and hidden cases with stale gradients
    arrive with them."""
    exercise = EXERCISES[ex_id]
    answer = _bank(folder, module)[name]
    got = _grader_verdicts(exercise, answer)
    assert not all(v.passed for v in got), f"{name} gets full marks through the grader"
    in_check = evaluate(ex_id, answer, include_hidden=True, apply_forbidden=False)
    assert [v.status for v in got] == [c.status for c in in_check.cases]
    assert [v.misconception for v in got] == [c.misconception for c in in_check.cases]
    names = " ".join(v.misconception or "" for v in got)
    if named:
        assert named in names, names
    if not_named:
        assert not_named not in names, names
