"""The torch side of the argument checks: is an argument a tensor, of a floating dtype.

:mod:`attnlib._validate` holds the rules both backends share and works on plain
shapes and flags; what only a ``torch.Tensor`` can be asked is asked here, so that
every public torch function refuses a non-tensor in the same words, from one place.
"""

from __future__ import annotations

import torch

from attnlib._validate import check_floating


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
