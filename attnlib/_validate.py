"""Shape and dtype checks shared by the PyTorch and the NumPy backends.

Everything here works on plain Python tuples and flags, never on tensors, so
that `attnlib.attention` and `attnlib.numpy` raise the very same errors with the
very same messages without either backend importing the other.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Sequence

import numpy as np

Shape = tuple[int, ...]

# A bool is Python's bool or NumPy's (np.bool_, named "bool" since NumPy 2, which is
# why a test of the type's name cannot find it): neither is a numbers.Number.
BOOLS = (bool, np.bool_)


def as_shape(shape: Iterable[int]) -> Shape:
    """Turn a `torch.Size`, a NumPy shape or any iterable of ints into a plain tuple.

    A plain tuple prints as `(2, 3)`, which is what every error message shows.
    """
    return tuple(int(n) for n in shape)


def broadcast_shapes(*shapes: Sequence[int], what: str = "shapes") -> Shape:
    """NumPy/PyTorch broadcasting of `shapes`; raises ValueError naming them if impossible."""
    shapes = tuple(as_shape(s) for s in shapes)
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for axis in range(-ndim, 0):
        sizes = {s[axis] for s in shapes if len(s) >= -axis and s[axis] != 1}
        if len(sizes) > 1:
            listed = ", ".join(str(s) for s in shapes)
            raise ValueError(f"{what} {listed} do not broadcast (axis {axis} has sizes {sorted(sizes)})")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def check_floating(fn: str, named: Sequence[tuple[str, str, bool]]) -> None:
    """Inputs must all be floating point and share one dtype (TypeError otherwise).

    `named` holds `(name, dtype_name, is_floating)` for each input; the backend
    decides what "floating" means for its own dtypes.
    """
    for name, dtype, is_float in named:
        if not is_float:
            raise TypeError(f"{fn}: {name} must be a floating point array, got dtype {dtype}")
    dtypes = {dtype for _, dtype, _ in named}
    if len(dtypes) > 1:
        # a dtype mismatch is a type problem: TypeError, as in attnlib.efficient
        listed = ", ".join(f"{name} {dtype}" for name, dtype, _ in named)
        raise TypeError(f"{fn}: inputs must share one dtype, got {listed}")


def check_min_rank(fn: str, name: str, shape: Sequence[int], rank: int = 2) -> None:
    """`name` must have at least `rank` dimensions, e.g. (..., L, E)."""
    shape = as_shape(shape)
    if len(shape) < rank:
        raise ValueError(
            f"{fn}: {name} must have at least {rank} dimensions (..., seq, dim), got shape {shape}"
        )


def _check_same_e(fn: str, q_shape: Shape, k_shape: Shape) -> None:
    """Raise ValueError unless query and key share the last (feature) dimension E."""
    if q_shape[-1] != k_shape[-1]:
        raise ValueError(
            f"{fn}: query {q_shape} and key {k_shape} must have the same last dimension E "
            f"({q_shape[-1]} != {k_shape[-1]})"
        )


def check_query_key(fn: str, q_shape: Sequence[int], k_shape: Sequence[int]) -> Shape:
    """Check query (..., L, E) against key (..., S, E); return the broadcast batch shape."""
    q_shape, k_shape = as_shape(q_shape), as_shape(k_shape)
    check_min_rank(fn, "query", q_shape)
    check_min_rank(fn, "key", k_shape)
    _check_same_e(fn, q_shape, k_shape)
    return broadcast_batch(fn, query=q_shape, key=k_shape)


def broadcast_batch(fn: str, **shapes: Sequence[int]) -> Shape:
    """Broadcast the leading (batch) dimensions of several (..., seq, dim) shapes."""
    shapes = {name: as_shape(s) for name, s in shapes.items()}
    try:
        return broadcast_shapes(*(s[:-2] for s in shapes.values()))
    except ValueError:
        listed = ", ".join(f"{name} {s}" for name, s in shapes.items())
        raise ValueError(f"{fn}: leading (batch) dimensions do not broadcast: {listed}") from None


def _check_query_key_rank(fn: str, q_shape: Shape, k_shape: Shape) -> None:
    """query (..., L, E_q) and key (..., S, E_k) need two dimensions each (their E may differ)."""
    if len(q_shape) < 2 or len(k_shape) < 2:
        raise ValueError(f"{fn}: query {q_shape} and key {k_shape} need at least 2 dimensions")


def _check_weight(fn: str, name: str, shape: Sequence[int], axes: str, expected: Shape, inputs: str) -> None:
    """A weight matrix must have the shape `expected` (its `axes`, e.g. "(H, E)") that `inputs` fix."""
    shape = as_shape(shape)
    if shape != expected:
        raise ValueError(f"{fn}: {name} must have shape {axes} = {expected} for {inputs}, got {shape}")


def check_general(fn: str, q_shape: Sequence[int], k_shape: Sequence[int], w_shape: Sequence[int]) -> None:
    """Check bilinear-score shapes: query (..., L, E_q), key (..., S, E_k), weight (E_q, E_k),
    with batch dimensions that broadcast."""
    q_shape, k_shape, w_shape = as_shape(q_shape), as_shape(k_shape), as_shape(w_shape)
    _check_query_key_rank(fn, q_shape, k_shape)
    expected = (q_shape[-1], k_shape[-1])
    _check_weight(fn, "weight", w_shape, "(E_q, E_k)", expected, f"query {q_shape} and key {k_shape}")
    broadcast_batch(fn, query=q_shape, key=k_shape)


def check_additive(
    fn: str,
    q_shape: Sequence[int],
    k_shape: Sequence[int],
    wq_shape: Sequence[int],
    wk_shape: Sequence[int],
    v_shape: Sequence[int],
) -> None:
    """Check additive-score shapes: query (..., L, E_q), key (..., S, E_k), w_query (H, E_q),
    w_key (H, E_k), v (H,), with batch dimensions that broadcast."""
    q_shape, k_shape, v_shape = as_shape(q_shape), as_shape(k_shape), as_shape(v_shape)
    _check_query_key_rank(fn, q_shape, k_shape)
    if len(v_shape) != 1:
        raise ValueError(f"{fn}: v must have shape (H,), got {v_shape}")
    H = v_shape[0]
    inputs = f"query {q_shape}, key {k_shape} and v {v_shape}"
    _check_weight(fn, "w_query", wq_shape, "(H, E)", (H, q_shape[-1]), inputs)
    _check_weight(fn, "w_key", wk_shape, "(H, E)", (H, k_shape[-1]), inputs)
    broadcast_batch(fn, query=q_shape, key=k_shape)


def check_attention(
    fn: str,
    q_shape: Sequence[int],
    k_shape: Sequence[int],
    v_shape: Sequence[int],
    mask_shape: Sequence[int] | None = None,
) -> tuple[Shape, int, int]:
    """Validate scaled dot-product attention shapes.

    query (..., L, E), key (..., S, E), value (..., S, Ev), mask broadcastable to
    (..., L, S). Returns `(batch_shape, L, S)`.
    """
    q_shape, k_shape, v_shape = as_shape(q_shape), as_shape(k_shape), as_shape(v_shape)
    check_min_rank(fn, "query", q_shape)
    check_min_rank(fn, "key", k_shape)
    check_min_rank(fn, "value", v_shape)
    _check_same_e(fn, q_shape, k_shape)
    if k_shape[-2] != v_shape[-2]:
        raise ValueError(
            f"{fn}: key {k_shape} and value {v_shape} must have the same sequence length S "
            f"({k_shape[-2]} != {v_shape[-2]})"
        )
    batch = broadcast_batch(fn, query=q_shape, key=k_shape, value=v_shape)
    L, S = q_shape[-2], k_shape[-2]
    if mask_shape is not None:
        check_mask(fn, "attn_mask", mask_shape, batch + (L, S))
    return batch, L, S


def check_mask(fn: str, name: str, mask_shape: Sequence[int], target: Sequence[int]) -> None:
    """`mask_shape` must broadcast *to* `target` (it may not enlarge the result)."""
    mask_shape, target = as_shape(mask_shape), as_shape(target)
    ok = len(mask_shape) <= len(target) and all(
        m in (1, t) for m, t in zip(mask_shape[::-1], target[::-1], strict=False)
    )
    if not ok:
        raise ValueError(f"{fn}: {name} of shape {mask_shape} does not broadcast to {target}")


def _check_number(fn: str, name: str, value: object, what: str = "an integer") -> None:
    """Anything that is not a real number (a string, None, a tensor, a list) is a TypeError.

    A real number that is not an allowed value (2.5 or -1 as a length) is a ValueError;
    that split is the rule across attnlib.
    """
    if isinstance(value, BOOLS):
        return  # a bool is a number here: it is refused by the value check, as before
    if not isinstance(value, numbers.Real):
        raise TypeError(f"{fn}: {name} must be {what}, got {type(value).__name__} {value!r}")


def check_length(fn: str, name: str, value: object) -> int:
    """A sequence length must be a non-negative Python/NumPy integer (bool is not one).

    TypeError for a non-number, ValueError for a number that is not a non-negative integer.
    """
    _check_number(fn, name, value)
    if isinstance(value, BOOLS) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{fn}: {name} must be a non-negative integer, got {value!r}")
    if value < 0:
        raise ValueError(f"{fn}: {name} must be a non-negative integer, got {value!r}")
    return int(value)


def lengths_list(fn: str, lengths: object, array_type: type, array_name: str) -> list:
    """The (B,) lengths of `padding_mask` as a list, before their values are checked.

    `lengths` is a 1-D array of the backend (`array_type`, a tensor or an ndarray,
    called `array_name` in the message) or any sequence of numbers; a bare number or
    a string is a TypeError, an array of another rank a ValueError.
    """
    if isinstance(lengths, array_type):
        if len(lengths.shape) != 1:
            raise ValueError(f"{fn}: lengths must be 1-D (B,), got shape {as_shape(lengths.shape)}")
        return lengths.tolist()
    if isinstance(lengths, (str, bytes)) or not hasattr(lengths, "__iter__"):
        got = type(lengths).__name__
        raise TypeError(f"{fn}: lengths must be a 1-D {array_name} or a sequence of ints (B,), got {got}")
    return list(lengths)


def check_lengths(fn: str, lengths: Sequence[object], max_len: object = None) -> tuple[list[int], int]:
    """Validate per-sequence lengths; return `(lengths as ints, max_len)`.

    Raises ValueError naming the offending values: non-integers, negatives, or
    lengths larger than `max_len`.
    """
    for v in lengths:
        _check_number(fn, "lengths", v, what="integers")
    bad = [v for v in lengths if isinstance(v, BOOLS) or not isinstance(v, numbers.Integral)]
    if bad:
        raise ValueError(f"{fn}: lengths must be integers, got non-integer values {bad}")
    ints = [int(v) for v in lengths]
    negative = [v for v in ints if v < 0]
    if negative:
        raise ValueError(f"{fn}: lengths must be non-negative, got {negative}")
    if max_len is None:
        max_len = max(ints, default=0)
    max_len = check_length(fn, "max_len", max_len)
    too_long = [v for v in ints if v > max_len]
    if too_long:
        raise ValueError(f"{fn}: lengths {too_long} exceed max_len={max_len}")
    return ints, max_len


def check_integer(fn: str, name: str, value: object) -> int:
    """Any Python or NumPy integer, negative ones included (an offset such as `diagonal`).

    TypeError for a non-number, ValueError for a number that is not an integer (2.5, True).
    """
    _check_number(fn, name, value)
    if isinstance(value, BOOLS) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{fn}: {name} must be an integer, got {value!r}")
    return int(value)


def check_causal(fn: str, q_len: object, k_len: object, diagonal: object) -> tuple[int, int, int]:
    """Check the arguments of `causal_mask`; return `(q_len, k_len, diagonal)` as ints.

    Lengths are non-negative integers and `k_len` None means `q_len`; `diagonal` is
    any integer, Python or NumPy. A non-number is a TypeError, a number of another
    kind (2.5, True) a ValueError.
    """
    q_len = check_length(fn, "q_len", q_len)
    k_len = q_len if k_len is None else check_length(fn, "k_len", k_len)
    return q_len, k_len, check_integer(fn, "diagonal", diagonal)


def check_flag(fn: str, name: str, value: object) -> bool:
    """A switch such as `is_causal` must be a bool (Python or NumPy); TypeError otherwise.

    A truthy string like "yes" or a tensor is refused instead of silently read as True.
    """
    if isinstance(value, BOOLS):
        return bool(value)
    raise TypeError(f"{fn}: {name} must be a bool, got {type(value).__name__} {value!r}")


def check_keepdim(fn: str, keepdim: object) -> None:
    """``keepdim`` of a reduction must be a bool, Python or NumPy (TypeError otherwise)."""
    if not isinstance(keepdim, BOOLS):
        raise TypeError(f"{fn}: keepdim must be a bool, got {type(keepdim).__name__}")


def kept_shape(shape: Sequence[int], dim: int) -> list[int]:
    """The shape of a reduction along ``dim`` that keeps it: ``shape`` with size 1 there."""
    shape = list(shape)
    shape[dim] = 1
    return shape


def check_positive_int(fn: str, name: str, value: object) -> int:
    """A count such as `num_heads` must be an integer >= 1 (bool is not one).

    TypeError for a non-number, ValueError for a number that is not a positive integer.
    """
    _check_number(fn, name, value)
    if isinstance(value, BOOLS) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{fn}: {name} must be a positive integer, got {value!r}")
    return int(value)


def check_probability(fn: str, name: str, value: object) -> float:
    """A dropout probability must be a real number in [0, 1) (bool is not one).

    TypeError for a non-number, ValueError for a number outside [0, 1) or NaN.
    """
    _check_number(fn, name, value, "a probability in [0, 1)")
    if isinstance(value, BOOLS) or not 0.0 <= value < 1.0:
        raise ValueError(f"{fn}: {name} must be a probability in [0, 1), got {value!r}")
    return float(value)


def check_dim(fn: str, dim: object, ndim: int) -> int:
    """`dim` must be an int in [-ndim, ndim) (a 0-d input counts as 1-d, as in torch); return it >= 0."""
    if isinstance(dim, BOOLS) or not isinstance(dim, numbers.Integral):
        raise TypeError(f"{fn}: dim must be an int, got {type(dim).__name__} {dim!r}")
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise ValueError(f"{fn}: dim={dim} is out of range for an input with {ndim} dimensions")
    return int(dim) % n


def check_scale(fn: str, scale: object) -> float | None:
    """``scale`` is None or a real number, Python or NumPy (TypeError otherwise); returned as a float."""
    if scale is None:
        return None
    if isinstance(scale, BOOLS) or not isinstance(scale, numbers.Real):
        raise TypeError(f"{fn}: scale must be a real number or None, got {type(scale).__name__}")
    return float(scale)


def default_scale(head_dim: int) -> float:
    """The softmax scale when none is given, as torch's: ``1/sqrt(E)``; 1.0 for E = 0 (scores all 0)."""
    return 1.0 / math.sqrt(head_dim) if head_dim > 0 else 1.0


def scale_or_default(fn: str, scale: object, head_dim: int) -> float:
    """``scale`` checked by :func:`check_scale`, or :func:`default_scale` of ``head_dim`` when it is None."""
    scale = check_scale(fn, scale)
    return default_scale(head_dim) if scale is None else scale


def check_real(fn: str, name: str, value: object) -> float:
    """Any real number, Python or NumPy (``-inf`` and NaN included), as a Python float.

    TypeError for a non-number or a bool.
    """
    if isinstance(value, BOOLS) or not isinstance(value, numbers.Real):
        raise TypeError(f"{fn}: {name} must be a real number, got {type(value).__name__} {value!r}")
    return float(value)


def check_greater(fn: str, name: str, value: object, bound: float) -> float:
    """A real number (Python or NumPy) above `bound`, such as RoPE's `base` or an epsilon.

    TypeError for a non-number (a bool included), ValueError for a number <= `bound` or NaN.
    """
    if isinstance(value, BOOLS) or not isinstance(value, numbers.Real):
        raise TypeError(f"{fn}: {name} must be a real number, got {type(value).__name__} {value!r}")
    if not value > bound:
        raise ValueError(f"{fn}: {name} must be > {bound:g}, got {value!r}")
    return float(value)


def check_choice(fn: str, name: str, value: object, choices: Sequence[str]) -> str:
    """One of a few names, such as an activation: ValueError naming the choices otherwise."""
    if not isinstance(value, str) or value not in choices:
        listed = " or ".join(repr(c) for c in choices)
        raise ValueError(f"{fn}: {name} must be {listed}, got {value!r}")
    return value
