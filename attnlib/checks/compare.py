"""Comparing an answer's output with the reference's: conversion to arrays, kinds, tolerances.

:func:`to_arrays` turns what a function returns into plain NumPy data (keeping
its dtype); :func:`compare_outputs` compares two such values and says, in a
sentence, what differs: a shape (guessing the cause, such as swapped axes), a
dtype kind (a float mask where a bool mask is expected), or values beyond the
tolerance that fits the answer's precision.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

__all__ = ["compare_outputs", "to_arrays"]


def to_arrays(value: Any) -> Any:
    """Turn a function's return value into plain data: NumPy arrays, tuples of them, or scalars.

    Tensors are detached and moved to the CPU. The dtype is kept (a float32
    answer stays float32, a boolean mask stays boolean), so that the judge can
    compare dtype kinds strictly and choose tolerances that fit the precision;
    bfloat16, which NumPy lacks, becomes float32. Python numbers become 0-d
    arrays (``True`` stays boolean); tuples and lists become tuples; dicts keep
    their keys. Anything else raises ``TypeError``.
    """
    try:  # torch is optional for the NumPy chapters
        import torch
    except ImportError:  # pragma: no cover - torch is in requirements.txt
        torch = None
    if torch is not None and isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        if value.dtype == torch.bfloat16:
            value = value.float()
        return value.resolve_conj().resolve_neg().numpy().copy()
    if isinstance(value, np.ndarray | np.generic):
        arr = np.array(value)
        if arr.dtype.kind not in "biufc":
            raise TypeError(f"cannot compare an array of dtype {arr.dtype}")
        return arr
    if isinstance(value, bool | int | float | complex):
        return np.asarray(value)
    if isinstance(value, tuple | list):
        return tuple(to_arrays(v) for v in value)
    if isinstance(value, dict):
        return {str(k): to_arrays(v) for k, v in value.items()}
    if value is None:
        return None
    raise TypeError(f"cannot compare a value of type {type(value).__name__}")


def _describe(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"array of shape {value.shape}"
    if isinstance(value, tuple):
        return f"tuple of {len(value)}"
    if isinstance(value, dict):
        return f"dict with keys {sorted(value)}"
    return type(value).__name__


_KIND_NAMES = {
    "b": "booleans",
    "i": "integers",
    "u": "integers",
    "f": "floating-point numbers",
    "c": "complex numbers",
}


def _kind_message(expected: np.ndarray, got: np.ndarray, where: str) -> str | None:
    """A message when ``got`` holds another kind of value than ``expected`` (None when it fits).

    A boolean answer fits only a boolean expectation, an integer answer an
    integer or floating-point one, a floating-point answer only a
    floating-point one; complex numbers fit only complex ones.
    """
    e, g = expected.dtype.kind, got.dtype.kind
    e = "i" if e == "u" else e
    g = "i" if g == "u" else g
    if e == g or (e == "f" and g == "i") or (e == "c" and g in "if"):
        return None
    msg = (
        f"{where}expected {_KIND_NAMES[e]} (dtype {expected.dtype}), got {_KIND_NAMES[g]} (dtype {got.dtype})"
    )
    if e == "b":
        msg += (
            ": a mask holds True/False (a comparison such as positions < lengths gives one); keep it boolean"
        )
    elif g == "b":
        msg += ": return the computed numbers, not the result of a comparison"
    elif e == "i" and g == "f":
        msg += ": token ids and counts are integers (use a long tensor, or .long())"
    elif g == "c":
        msg += ": the answer is real; a complex result means a sqrt or log of a negative number?"
    return msg


def _fmt(x) -> str:
    if isinstance(x, np.bool_ | bool):
        return str(bool(x))
    if isinstance(x, np.integer | int):
        return str(int(x))
    if isinstance(x, np.complexfloating | complex):
        return f"{complex(x):.6g}"
    return f"{float(x):.6g}"


def _precision(arr: np.ndarray) -> np.dtype | None:
    """The floating dtype of an array when it is less precise than float64, else None."""
    if arr.dtype.kind in "fc" and np.finfo(arr.dtype).eps > np.finfo(np.float64).eps:
        return np.dtype(np.float32) if arr.dtype.kind == "c" else arr.dtype
    return None


def _compare_arrays(expected, got, rtol: float, atol: float, where: str, slack=None, precision=None):
    if got.shape != expected.shape:
        msg = f"{where}expected shape {expected.shape}, got {got.shape}"
        if got.ndim >= 2 and got.swapaxes(-1, -2).shape == expected.shape:
            msg += " (the last two axes look swapped: a missing or extra transpose?)"
        elif got.size == expected.size:
            msg += " (same number of elements: a reshape in the wrong order?)"
        elif got.ndim < expected.ndim:
            msg += " (an axis is missing: did you sum or index one away, or forget keepdims?)"
        elif got.ndim > expected.ndim:
            msg += " (an extra axis: a missing squeeze, or a reduction without keepdims=False?)"
        return False, msg
    kind = _kind_message(expected, got, where)
    if kind:
        return False, kind
    if expected.dtype.kind == "b" or expected.dtype.kind in "iu" and got.dtype.kind in "iu":
        differ = expected != got
        if differ.any() and expected.ndim == 0:  # a scalar (np.argwhere finds nothing in 0-d)
            return False, f"{where}expected {expected.item()!r}, got {got.item()!r}"
        bad = np.argwhere(differ)
        if bad.size:
            idx = tuple(int(i) for i in bad[0])
            return False, (
                f"{where}{len(bad)} of {expected.size} values differ; the first at index {idx}: "
                f"expected {_fmt(expected[idx])}, got {_fmt(got[idx])}"
            )
        return True, ""
    # numbers: tolerances fit the question's precision (the expected output's dtype, or the
    # case's inputs' when given), never the answer's: an answer cast to float16 is judged
    # at the float32 question's precision, not float16's (issue 25)
    # One allowance: an answer in float32 (torch's default) or below is judged at float32 at
    # least, never at float16's width: a correct float32 answer passes a float64 question.
    answer = np.dtype(np.float32) if _precision(got) is not None else None
    low = [d for d in (_precision(expected), precision, answer) if d is not None]
    if low:
        eps = max(float(np.finfo(d).eps) for d in low)
        rtol = max(rtol, 16 * eps)
        atol = max(atol, 16 * eps)
    exp_f = expected.astype(np.complex128 if expected.dtype.kind == "c" else np.float64)
    got_f = got.astype(exp_f.dtype)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(got_f - exp_f)
        allowed = atol + rtol * np.abs(exp_f)
        if slack is not None and np.shape(slack) == exp_f.shape:
            allowed = allowed + np.nan_to_num(np.asarray(slack, dtype=np.float64), nan=0.0, posinf=0.0)
        # an infinite expected value (a -inf mask entry) must come back exactly: rtol * inf allows anything
        allowed = np.where(np.isfinite(exp_f), allowed, 0.0)
        same = (exp_f == got_f) | (np.isnan(exp_f) & np.isnan(got_f))
        ok = same | (diff <= allowed)
    if ok.all():
        return True, ""
    bad = np.argwhere(~ok)
    idx = tuple(int(i) for i in bad[0])
    finite = np.isfinite(exp_f)
    if not np.all(np.isfinite(got_f)[finite]):
        kind_word = "NaN" if np.isnan(got_f[finite]).any() else "inf"
        first = tuple(int(i) for i in np.argwhere(finite & ~np.isfinite(got_f))[0])
        return False, (
            f"{where}your output contains {kind_word} where the expected one is finite, first at index "
            f"{first}: expected {_fmt(exp_f[first])}, got {_fmt(got_f[first])} "
            "(an overflow in exp, or 0/0 in a normalisation?)"
        )
    worst = np.where(np.isnan(diff), np.inf, diff)
    worst = np.where(ok, 0.0, worst)
    big = tuple(int(i) for i in np.unravel_index(np.argmax(worst), worst.shape))
    return False, (
        f"{where}{len(bad)} of {expected.size} values differ; the first at index {idx}: "
        f"expected {_fmt(exp_f[idx])}, got {_fmt(got_f[idx])} "
        f"(largest difference {float(worst[big]):.3g} at index {big})"
    )


def compare_outputs(
    expected: Any, got: Any, rtol: float = 1e-5, atol: float = 1e-6, where="", slack=None, precision=None
):
    """Compare two outputs made by :func:`to_arrays`; return ``(ok, message)``.

    Dtype kinds are compared strictly (booleans, integers, floating-point
    numbers, complex numbers: see :func:`_kind_message`). Tolerances are at
    least 16 machine epsilons of the *question's* precision: the expected
    output's dtype, or ``precision`` (the case's inputs', see
    :func:`question_precision`) when that is lower. The answer's own dtype
    loosens them down to float32 at most (torch's default precision): a
    float32 answer passes a float64 question, but a float32 question answered
    in float16 is judged at float32's tolerance. ``slack`` (same structure as ``expected``, or None)
    adds an allowed absolute difference per element.

    The message names the first difference: the structure, the shape (with a
    guess at the cause when the shape is a transposition or a reshape of the
    expected one), the kind of values, NaN or inf, or the first differing
    element (index, expected, got).
    """
    if isinstance(expected, tuple):
        if not isinstance(got, tuple) or len(got) != len(expected):
            return False, f"{where}expected a tuple of {len(expected)}, got {_describe(got)}"
        for i, (e, g) in enumerate(zip(expected, got, strict=True)):
            s = slack[i] if isinstance(slack, tuple) and len(slack) == len(expected) else None
            ok, msg = compare_outputs(
                e, g, rtol, atol, where=f"{where}item {i}: ", slack=s, precision=precision
            )
            if not ok:
                return ok, msg
        return True, ""
    if isinstance(expected, dict):
        if not isinstance(got, dict) or sorted(got) != sorted(expected):
            return False, f"{where}expected a dict with keys {sorted(expected)}, got {_describe(got)}"
        for key in sorted(expected):
            s = slack.get(key) if isinstance(slack, dict) else None
            ok, msg = compare_outputs(
                expected[key], got[key], rtol, atol, where=f"{where}[{key!r}]: ", slack=s, precision=precision
            )
            if not ok:
                return ok, msg
        return True, ""
    if expected is None:
        return (got is None), ("" if got is None else f"{where}expected None, got {_describe(got)}")
    if not isinstance(got, np.ndarray):
        return False, f"{where}expected {_describe(expected)}, got {_describe(got)}"
    return _compare_arrays(np.asarray(expected), got, rtol, atol, where, slack, precision)


def question_precision(inputs: tuple, expected: Any = None) -> np.dtype | None:
    """The precision a case asks for: the least precise floating dtype (below float64) among
    the case's inputs (arrays, tensors, a module's parameters) and the reference's output.

    None when they are float64; float32 (torch's default) when the inputs hold no
    floating value at all. The judge takes its tolerances from this, never from
    the answer.
    """
    torch = sys.modules.get("torch")  # inputs can hold tensors only where torch is imported
    found: list[np.dtype] = []  # the dtypes of every floating value

    def visit(x: Any) -> None:
        if isinstance(x, np.ndarray) and x.dtype.kind in "fc":
            found.append(x.dtype)
        elif isinstance(x, (tuple, list)):
            for item in x:
                visit(item)
        elif isinstance(x, dict):
            for item in x.values():
                visit(item)
        elif torch is not None and isinstance(x, torch.Tensor) and x.is_floating_point():
            visit(to_arrays(x.detach().flatten()[:0]))  # the dtype, no copy (bfloat16 -> float32)
        elif torch is not None and isinstance(x, torch.nn.Module):
            for p in x.parameters():
                visit(p)

    visit(inputs)
    floating_inputs = bool(found)
    visit(expected)
    if not floating_inputs:
        # inputs without a float (token ids, lengths) fix no precision: torch's default,
        # float32, is what an answer computes in, so float32 it is (float16 is not)
        found.append(np.dtype(np.float32))
    return lowest_precision(_precision(np.empty(0, d)) for d in found)


def output_precision(value: Any) -> np.dtype | None:
    """The least precise floating dtype below float64 in an output of :func:`to_arrays`, or None."""
    if isinstance(value, np.ndarray):
        return _precision(value)
    items = value.values() if isinstance(value, dict) else value if isinstance(value, tuple) else ()
    return lowest_precision(output_precision(v) for v in items)


def lowest_precision(dtypes) -> np.dtype | None:
    """The least precise of some floating dtypes (None entries ignored); None when none is left."""
    found = [np.dtype(d) for d in dtypes if d is not None]
    return max(found, key=lambda d: np.finfo(d).eps) if found else None


def _cast_inputs(inputs: tuple, dtype: np.dtype) -> tuple:
    """The case's inputs with every floating array, tensor and module in ``dtype``."""
    import torch

    tdtype = {np.dtype(np.float16): torch.float16, np.dtype(np.float32): torch.float32}.get(np.dtype(dtype))
    out = []
    for x in inputs:
        if isinstance(x, np.ndarray) and x.dtype.kind == "f":
            x = x.astype(dtype)
        elif isinstance(x, torch.Tensor) and x.is_floating_point() and tdtype is not None:
            x = x.to(tdtype)
        elif isinstance(x, torch.nn.Module) and tdtype is not None:
            x = x.to(tdtype)
        out.append(x)
    return tuple(out)


def _abs_difference(a: Any, b: Any) -> Any:
    """Elementwise |a - b| over matching structures of floating arrays (None where they do not match)."""
    if isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b):
        return tuple(_abs_difference(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return {k: _abs_difference(a[k], b.get(k)) for k in a}
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.shape == b.shape:
        if a.dtype.kind in "fc" and b.dtype.kind in "fc":
            with np.errstate(invalid="ignore", over="ignore"):
                return np.abs(a.astype(np.complex128) - b.astype(np.complex128)).real
    return None
