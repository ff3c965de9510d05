"""The wire format between the sandboxed harness and the grader.

The harness sends one JSON object per line on a pipe. A learner's output (what
:func:`attnlib.checks.run_case` returns: arrays, tuples, dicts, None) travels
as a JSON *structure* whose arrays are raw little buffers in base64, with the
dtype restricted to booleans and numbers. Decoding never unpickles anything
and never builds an object array, so data forged by the learner's code can at
worst be wrong, never dangerous.
"""

from __future__ import annotations

import base64
import re
from typing import Any

import numpy as np

# dtype kinds that may cross the wire: bool, signed, unsigned, float, complex
_KINDS = set("biufc")
MAX_ARRAY_BYTES = 64 << 20
MAX_DEPTH = 16


class WireError(ValueError):
    """A message from the harness that does not follow the format."""


MAX_VALUES = 10_000  # values (None, arrays, tuples, dicts) in one output: far below MAX_LINE_CONTAINERS


def encode(value: Any, depth: int = 0, _count: list | None = None) -> Any:
    """Turn the output of ``to_arrays`` into JSON-ready data (``TypeError`` for anything else,
    for an output nested deeper than :data:`MAX_DEPTH` or holding more than :data:`MAX_VALUES`
    values: a tuple of a million ``None`` is a wrong answer, never a 13 MB message)."""
    if _count is None:
        _count = [0]
    _count[0] += 1
    if _count[0] > MAX_VALUES:
        raise TypeError(f"the output holds more than {MAX_VALUES} values")
    if depth > MAX_DEPTH:
        raise TypeError("the output is nested too deeply")
    if value is None:
        return {"k": "none"}
    if isinstance(value, np.ndarray):
        arr = np.asarray(value)  # not ascontiguousarray: it turns a 0-d array into shape (1,)
        if not arr.flags.c_contiguous:
            arr = arr.copy(order="C")
        if arr.dtype.kind not in _KINDS:
            raise TypeError(f"cannot compare an array of dtype {arr.dtype}")
        if arr.nbytes > MAX_ARRAY_BYTES:
            raise TypeError(f"the output array is too large ({arr.nbytes} bytes)")
        arr = arr.astype(arr.dtype.newbyteorder("<"), copy=False)
        return {
            "k": "array",
            "dtype": arr.dtype.str,
            "shape": list(arr.shape),
            "data": base64.b64encode(arr.tobytes()).decode("ascii"),
        }
    if isinstance(value, tuple | list):
        if len(value) > MAX_VALUES:
            raise TypeError(f"the output holds more than {MAX_VALUES} values")
        return {"k": "tuple", "items": [encode(v, depth + 1, _count) for v in value]}
    if isinstance(value, dict):
        if len(value) > MAX_VALUES:
            raise TypeError(f"the output holds more than {MAX_VALUES} values")
        return {"k": "dict", "items": {str(k): encode(v, depth + 1, _count) for k, v in value.items()}}
    raise TypeError(f"cannot compare a value of type {type(value).__name__}")


def decode(data: Any, depth: int = 0) -> Any:
    """The inverse of :func:`encode`; raises :class:`WireError` on anything unexpected."""
    if depth > MAX_DEPTH or not isinstance(data, dict):
        raise WireError("malformed output")
    kind = data.get("k")
    if kind == "none":
        return None
    if kind == "tuple":
        items = data.get("items")
        if not isinstance(items, list):
            raise WireError("malformed tuple")
        return tuple(decode(v, depth + 1) for v in items)
    if kind == "dict":
        items = data.get("items")
        if not isinstance(items, dict):
            raise WireError("malformed dict")
        return {str(k): decode(v, depth + 1) for k, v in items.items()}
    if kind == "array":
        try:
            dtype = np.dtype(str(data["dtype"]))
            shape = tuple(int(n) for n in data["shape"])
            raw = base64.b64decode(str(data["data"]), validate=True)
        except (KeyError, TypeError, ValueError) as exc:
            raise WireError(f"malformed array: {exc}") from None
        if dtype.kind not in _KINDS or dtype.hasobject or any(n < 0 for n in shape):
            raise WireError(f"array of dtype {dtype} is not allowed")
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if count * dtype.itemsize != len(raw) or len(raw) > MAX_ARRAY_BYTES:
            raise WireError("array size does not match its shape")
        return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()
    raise WireError(f"unknown output kind {kind!r}")


MAX_LINE_DEPTH = 2 * MAX_DEPTH + 8  # an event's JSON nesting: its own levels and an output's
# JSON objects and arrays in one line: a parsed container costs the grader ~60-100 bytes
# whatever its text (``{}`` is 2 bytes), so a line is bounded by what it holds, not by its
# length (issue 34: 12 MB of ``{}`` per reply took the grader to 4.7 GB). An output of the
# course (arrays, tuples, dicts of a few dozen values) holds a few hundred.
MAX_LINE_CONTAINERS = 50_000
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')


def containers(line: bytes) -> int:
    """How many JSON objects and arrays ``line`` opens (brackets inside strings not counted)."""
    bare = _STRING.sub(b"", line)
    return bare.count(b"{") + bare.count(b"[")


def check_line(
    line: bytes, prefix: bytes, max_depth: int = MAX_LINE_DEPTH, max_containers: int = MAX_LINE_CONTAINERS
) -> bool:
    """True when ``line`` begins with ``prefix`` (the run's secret, written first), its JSON
    nesting stays within ``max_depth`` and it opens at most ``max_containers`` objects and
    arrays: checked before the line is parsed, so a forged line of nested brackets costs a
    scan, never a deep parse (issue 24), and a line of empty objects never a huge one (issue 34)."""
    if not line.startswith(prefix):
        return False
    brackets = _STRING.sub(b"", line).translate(None, _NOT_BRACKETS)
    if brackets.count(b"{") + brackets.count(b"[") > max_containers:
        return False
    if len(brackets) <= max_depth:
        return True
    depth = 0
    for start in range(0, len(brackets), _CHUNK):  # a nested line fails in its first chunk
        codes = np.frombuffer(
            brackets, dtype=np.uint8, count=min(_CHUNK, len(brackets) - start), offset=start
        )
        steps = np.where((codes == 0x5B) | (codes == 0x7B), 1, -1).astype(np.int32)
        levels = np.cumsum(steps) + depth
        if int(levels.max()) > max_depth:
            return False
        depth = int(levels[-1])
    return True


_CHUNK = 1 << 16


_NOT_BRACKETS = bytes(c for c in range(256) if c not in b"[]{}")
