"""NumPy scalars are accepted wherever Python ones are (issue 28).

Every public function and method of attnlib's core (``attnlib.__all__``, the
``attnlib.numpy`` mirrors and the modules' ``forward``) is called once with
Python scalars, then again with each bool, int and float argument replaced by
its NumPy twins (``np.bool_``; ``np.int64``, ``np.int32``; ``np.float64``,
``np.float32``): the call must succeed and give the same result. The values
are exact in float32 (0.5, 2**-16, ...), so "the same" means equal.

``test_every_scalar_parameter_is_exercised`` keeps the table complete: a new
public function, or a new parameter annotated bool, int or float, fails it
until it has a row here.
"""

from __future__ import annotations

import dataclasses
import inspect
import re

import numpy as np
import pytest
import torch
from helpers_calls import CALLS, t

import attnlib
import attnlib.numpy as anp

NUMPY_TWINS = {
    bool: (np.bool_,),
    int: (np.int64, np.int32),
    float: (np.float64, np.float32),
}


METHODS = {
    "MultiHeadAttention.forward": attnlib.MultiHeadAttention.forward,
    "TransformerBlock.forward": attnlib.TransformerBlock.forward,
    "TransformerBlock.new_cache": attnlib.TransformerBlock.new_cache,
    "LearnedPositions.forward": attnlib.LearnedPositions.forward,
    "PatchEmbedding.forward": attnlib.PatchEmbedding.forward,
    "AdditiveAttention.forward": attnlib.AdditiveAttention.forward,
}


def public_callables():
    for name in attnlib.__all__:
        yield name, getattr(attnlib, name)
    for name in anp.__all__:
        yield f"numpy.{name}", getattr(anp, name)
    yield from METHODS.items()


def _python_kind(value):
    for kind in (bool, int, float):  # bool before int: True is an int too
        if type(value) is kind:
            return kind
    return None


def _call(name, replace=None):
    """Run the row ``name`` (fresh inputs, same random draws), one keyword replaced."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)  # modules draw their initial weights from here
        fn, args, kwargs = CALLS[name]()
        result = fn(*args, **{**kwargs, **(replace or {})})
    if result is None:  # an in-place update: its result is what it wrote
        return args
    return result


def assert_same(got, expected, where):
    if isinstance(expected, torch.nn.Module):
        assert type(got) is type(expected), where
        assert repr(got) == repr(expected), where
        for (k, x), (k2, y) in zip(got.state_dict().items(), expected.state_dict().items(), strict=True):
            assert k == k2 and torch.equal(x, y), f"{where}: parameter {k}"
    elif isinstance(expected, torch.Tensor):
        assert isinstance(got, torch.Tensor) and got.dtype == expected.dtype, where
        assert torch.equal(got, expected), f"{where}: {got} != {expected}"
    elif isinstance(expected, np.ndarray):
        assert isinstance(got, np.ndarray) and got.dtype == expected.dtype, where
        assert np.array_equal(got, expected), f"{where}: {got} != {expected}"
    elif isinstance(expected, (tuple, list)):
        assert type(got) is type(expected) and len(got) == len(expected), where
        for i, (x, y) in enumerate(zip(got, expected, strict=True)):
            assert_same(x, y, f"{where}[{i}]")
    elif dataclasses.is_dataclass(expected):
        assert_same(dataclasses.astuple(got), dataclasses.astuple(expected), where)
    elif isinstance(expected, attnlib.KVCache):
        assert (got.shape, got.dtype, got.nbytes, len(got)) == (
            expected.shape,
            expected.dtype,
            expected.nbytes,
            len(expected),
        ), where
    elif expected is None:
        assert got is None, where
    elif isinstance(expected, (bool, int, float)):
        assert got == expected and type(got) is type(expected), f"{where}: {got!r} != {expected!r}"
    else:
        raise AssertionError(f"{where}: no comparison for {type(expected).__name__}")


SUBSTITUTIONS = [
    (name, key, twin)
    for name in CALLS
    for key, value in CALLS[name]()[2].items()
    if _python_kind(value) is not None
    for twin in NUMPY_TWINS[_python_kind(value)]
]


@pytest.mark.parametrize(
    ("name", "key", "twin"), SUBSTITUTIONS, ids=[f"{n}-{k}-{t.__name__}" for n, k, t in SUBSTITUTIONS]
)
def test_a_numpy_scalar_gives_what_the_python_scalar_gives(name, key, twin):
    expected = _call(name)
    value = CALLS[name]()[2][key]
    assert twin(value) == value, f"the row's value {value!r} is not exact as {twin.__name__}"
    got = _call(name, {key: twin(value)})
    assert_same(got, expected, f"{name}({key}={twin.__name__}({value!r}))")


def _scalar_parameters(fn):
    """Parameters whose annotation names bool, int or float."""
    found = []
    for p in inspect.signature(fn).parameters.values():
        annotation = p.annotation if isinstance(p.annotation, str) else getattr(p.annotation, "__name__", "")
        if p.name != "self" and re.search(r"\b(bool|int|float)\b", annotation):
            found.append(p.name)
    return found


def test_every_scalar_parameter_is_exercised():
    missing = []
    for name, fn in public_callables():
        scalars = _scalar_parameters(fn)
        if name not in CALLS:
            if scalars:
                missing.append(f"{name}: no row (scalar parameters {scalars})")
            continue
        given = CALLS[name]()[2]
        for p in scalars:
            if _python_kind(given.get(p)) is None:
                missing.append(f"{name}: {p} is not passed as a Python scalar")
    assert not missing, "\n".join(missing)
    assert len(SUBSTITUTIONS) > 100, f"only {len(SUBSTITUTIONS)} substitutions"


def test_a_numpy_bool_is_a_bool_for_scaled_dot_product_attention():
    """The live bug of issue 28: NumPy 2 renamed np.bool_'s type to 'bool', and check_flag missed it."""
    q = t(1, 3, 4)
    out = attnlib.scaled_dot_product_attention(q, q, q, is_causal=np.bool_(True))
    torch.testing.assert_close(out, attnlib.scaled_dot_product_attention(q, q, q, is_causal=True))
    with pytest.raises(TypeError, match="scaled_dot_product_attention: is_causal must be a bool, got str"):
        attnlib.scaled_dot_product_attention(q, q, q, is_causal="yes")
