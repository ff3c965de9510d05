"""The torch side of attnlib's rules: which tensors it takes, and the dtype it computes in.

:mod:`attnlib._validate` holds the rules both backends share and works on plain
shapes and flags; what only a ``torch.Tensor`` can be asked is asked here, so that
every public torch function refuses a non-tensor in the same words, from one place.
The dtype policy lives here too: float16 and bfloat16 are computed in float32 (an
exponential or a sum of squares overflows half precision long before the result
does) and cast back; every other floating dtype is computed as it is.
"""

from __future__ import annotations

import torch

from attnlib._validate import check_floating

LOW_PRECISION = (torch.float16, torch.bfloat16)


def work_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype attnlib computes in: float32 for float16 and bfloat16, any other float as it is.

    Parameters
    ----------
    dtype : torch.dtype
        The inputs' dtype.

    Returns
    -------
    torch.dtype

    Examples
    --------
    >>> work_dtype(torch.bfloat16), work_dtype(torch.float64)
    (torch.float32, torch.float64)
    """
    return torch.float32 if dtype in LOW_PRECISION else dtype


def upcast(x: torch.Tensor) -> torch.Tensor:
    """``x`` in :func:`work_dtype` of its dtype (the same tensor when that is its own).

    Parameters
    ----------
    x : torch.Tensor
        Floating, any shape.

    Returns
    -------
    torch.Tensor
        ``x``'s shape.

    Examples
    --------
    >>> upcast(torch.ones(2, dtype=torch.float16)).dtype
    torch.float32
    """
    return x.to(work_dtype(x.dtype))


def check_tensors(fn: str, **tensors: object) -> None:
    """Raise ``TypeError`` naming ``fn`` and the argument unless every value is a ``torch.Tensor``.

    Parameters
    ----------
    fn : str
        The public function whose arguments these are, for the message.
    **tensors : object
        The arguments, by name, in the order they are checked.

    Returns
    -------
    None

    Examples
    --------
    >>> check_tensors("f", x=torch.zeros(1))
    >>> check_tensors("f", x=torch.zeros(1), y=[1.0])
    Traceback (most recent call last):
        ...
    TypeError: f: y must be a torch.Tensor, got list
    """
    for name, value in tensors.items():
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"{fn}: {name} must be a torch.Tensor, got {type(value).__name__}")


def check_floating_tensors(fn: str, **tensors: object) -> None:
    """:func:`check_tensors`, then one floating dtype for all (``_validate.check_floating``'s ``TypeError``).

    Parameters
    ----------
    fn : str
        The public function whose arguments these are, for the message.
    **tensors : object
        The arguments, by name.

    Returns
    -------
    None

    Examples
    --------
    >>> check_floating_tensors("f", q=torch.zeros(1), k=torch.zeros(1, dtype=torch.float64))
    Traceback (most recent call last):
        ...
    TypeError: f: inputs must share one dtype, got q torch.float32, k torch.float64
    """
    check_tensors(fn, **tensors)
    check_floating(fn, [(name, str(t.dtype), t.is_floating_point()) for name, t in tensors.items()])
