"""attnlib follows its inputs' device, as torch's functions do.

A learner in Colab may move tensors to a GPU. Every public function of attnlib's
core that takes a tensor must then compute there: a tensor made on the CPU
inside a function (``torch.arange(n)`` without ``device=``) fails on a GPU with
"Expected all tensors to be on the same device". Functions that take no tensor
(``causal_mask``, ``sinusoidal_encoding``, ``alibi_bias``, ...) take
``device=``, like torch's factory functions.

Two devices are tried:

- ``meta`` always (CI has no GPU): a meta tensor has a shape and a dtype but no
  data, and mixing it with a CPU tensor raises just as a GPU tensor does; so
  on any machine this finds every tensor made on the wrong device. A result's
  shape and dtype are compared with the CPU result; values cannot be.
- ``cuda`` where one is present (the course's device check ran it on an
  NVIDIA H200 with that machine's torch 2.11.0+cu130 on 2026-11-26: 64 passed): the values are
  compared with the CPU result in float64, atol = rtol = 1e-10 (same
  algorithm, other kernels' order of summation).

The calls are the rows of ``test_numpy_scalars.CALLS`` (every public function
and method with scalar options), so a new public function is covered here as
soon as it has its row there.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from helpers_calls import CALLS

import attnlib

DEVICES = ["meta"] + (["cuda"] if torch.cuda.is_available() else [])

# Rows that take no tensor and make none: nothing to follow.
NO_TENSORS = {"kv_cache_bytes", "parameter_count", "OnlineSoftmaxState", "alibi_slopes"}
# Factory functions: no tensor in, a tensor out; they take ``device=``.
FACTORIES = {"causal_mask", "sinusoidal_encoding", "alibi_bias", "alibi_slopes", "padding_mask"}
# Rows whose work reads their tensors' values (a meta tensor has none): GPU only.
_NO_DATA = {("padding_mask", "meta")}
# Module constructors: the module is moved with ``.to(device)`` (their forward rows test that).
CONSTRUCTORS = {
    "AdditiveAttention",
    "KVCache",
    "LearnedPositions",
    "MultiHeadAttention",
    "PatchEmbedding",
    "TransformerBlock",
}

TORCH_ROWS = sorted(
    name
    for name in CALLS
    if not name.startswith("numpy.")
    and name not in NO_TENSORS | CONSTRUCTORS
    and "_numpy" not in name
    and name != "online_softmax_update"  # NumPy in, NumPy out (chapter 08's scalar walk)
)


def _move(value, device, dtype):
    """``value`` on ``device``: float tensors as ``dtype``, modules and caches too."""
    if isinstance(value, torch.Tensor):
        return value.to(device=device, dtype=dtype if value.is_floating_point() else value.dtype)
    if isinstance(value, torch.nn.Module):
        return value.to(device=device, dtype=dtype)
    if isinstance(value, attnlib.KVCache):
        batch, heads, capacity, head_dim = value.shape
        return attnlib.KVCache(batch, heads, capacity, head_dim, dtype=dtype, device=device)
    if isinstance(value, (tuple, list)):
        return type(value)(_move(v, device, dtype) for v in value)
    return value


def _run(name, device, dtype=torch.float64):
    """Row ``name`` with its tensors (and module) on ``device``; in-place rows give their arguments."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        fn, args, kwargs = CALLS[name]()
    if isinstance(fn, torch.nn.Module):  # a forward row calls the module
        fn.to(device=device, dtype=dtype)
    elif name == "TransformerBlock.new_cache":
        fn.__self__.to(device=device, dtype=dtype)
    args = _move(args, device, dtype)
    if name in FACTORIES and name != "padding_mask":
        kwargs = {**kwargs, "device": device}
    elif name == "padding_mask":
        args = (torch.tensor(args[0], device=device),)
    result = fn(*args, **kwargs)
    return args if result is None else result


def _tensors(value, where="result"):
    """Every tensor in a result, with where it sits in it."""
    if isinstance(value, torch.Tensor):
        yield where, value
    elif isinstance(value, attnlib.KVCache):
        yield f"{where}.keys", value.keys
        yield f"{where}.values", value.values
    elif isinstance(value, (tuple, list)):
        for i, v in enumerate(value):
            yield from _tensors(v, f"{where}[{i}]")
    elif dataclasses.is_dataclass(value):
        yield from _tensors(dataclasses.astuple(value), where)


CASES = [(name, device) for name in TORCH_ROWS for device in DEVICES if (name, device) not in _NO_DATA]


@pytest.mark.parametrize(("name", "device"), CASES, ids=[f"{n}-{d}" for n, d in CASES])
def test_a_result_lives_on_the_inputs_device(name, device):
    got = dict(_tensors(_run(name, device)))
    expected = dict(_tensors(_run(name, "cpu")))
    assert got.keys() == expected.keys(), f"{name}: the result's parts {sorted(got)} != {sorted(expected)}"
    assert got, f"{name}: no tensor in the result"
    for where, tensor in got.items():
        reference = expected[where]
        assert tensor.device.type == device, f"{name}: {where} is on {tensor.device}, expected {device}"
        assert (tensor.shape, tensor.dtype) == (reference.shape, reference.dtype), (
            f"{name}: {where} is {tuple(tensor.shape)} {tensor.dtype} on {device}, "
            f"{tuple(reference.shape)} {reference.dtype} on the CPU"
        )
        if device != "meta":
            torch.testing.assert_close(tensor.cpu(), reference, atol=1e-10, rtol=1e-10, equal_nan=True)


def test_the_rows_cover_every_function_that_takes_or_makes_a_tensor():
    """A public function is left out here only for a stated reason (NumPy in and out, no tensor at all)."""
    numpy_only = {name for name in attnlib.__all__ if name.endswith("_numpy")} | {"online_softmax_update"}
    accounted = set(TORCH_ROWS) | NO_TENSORS | CONSTRUCTORS | numpy_only
    missing = sorted(set(attnlib.__all__) - accounted)
    assert not missing, f"public functions without a device row: {missing}"


def test_a_factory_without_device_makes_its_tensor_on_the_cpu():
    """torch's convention: no ``device=`` means torch's default device (the CPU here)."""
    for make in (
        lambda: attnlib.causal_mask(3),
        lambda: attnlib.sinusoidal_encoding(3, 4),
        lambda: attnlib.alibi_bias(2, 3, 3),
        lambda: attnlib.alibi_slopes(2),
    ):
        assert make().device.type == "cpu"


def test_meta_finds_a_tensor_made_on_the_cpu():
    """The meta device fails the way a GPU does (so the meta rows can fail)."""

    def careless_rope(x):  # the bug this file guards against: arange without device=
        return x * torch.arange(x.shape[-1], dtype=x.dtype)

    with pytest.raises(RuntimeError, match="device"):
        careless_rope(torch.ones(2, 3, device="meta"))
    assert np.isfinite(careless_rope(torch.ones(2, 3)).numpy()).all()
