"""Docstring text that several functions share, written once (NumPy style).

The score functions take the same ``query`` and ``key``, return the same
(..., L, S) scores and raise the same errors, in the PyTorch backend and in its
NumPy twin. Their docstrings write the name of a shared piece in braces on a
line of its own, e.g. ``{query_key}``, and the decorator ``TORCH`` (or
``NUMPY``) replaces that line with the piece, indented like it, when the module
is imported. ``help()``, ``inspect.getdoc``, doctest and the API page all read
the full text; only the source shows the names.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable, Mapping
from typing import TypeVar

F = TypeVar("F", bound=Callable)

_PLACE = re.compile(r"^(?P<indent>[ \t]*)\{(?P<name>[a-z_]+)\}[ \t]*$", re.MULTILINE)


def _sections(parameters: list[str], returns: str, raises: list[str]) -> str:
    """The Parameters, Returns and Raises sections of a docstring, from their entries."""
    sections = {"Parameters": parameters, "Returns": [returns], "Raises": raises}
    return "\n\n".join(
        f"{title}\n{'-' * len(title)}\n" + "\n".join(textwrap.dedent(e).strip() for e in entries)
        for title, entries in sections.items()
    )


def _pieces(array: str, result: str, refused: str, x_kind: str) -> dict[str, str]:
    """The pieces for one backend: `array` is its input type, `result` its output type,
    `refused` the inputs it refuses, `x_kind` what ``x`` must be."""
    query_key = f"""
        query : {array}
            (..., L, E), floating.
        key : {array}
            (..., S, E), the dtype of ``query``.
        """
    query_key_e = f"""
        query : {array}
            (..., L, E_q), floating.
        key : {array}
            (..., S, E_k), the dtype of ``query``.
        """
    scores = f"""
        {result}
            (..., L, S) scores, dtype of ``query``.
        """
    input_errors = f"""
        TypeError
            {refused}, or different dtypes.
        """
    shape_errors = """
        ValueError
            Rank < 2, different E, or batch dimensions that do not broadcast.
        """
    return {
        "query_key": query_key,
        # the score functions: one contract, written once for both backends
        "dot_scores": _sections([query_key], scores, [input_errors, shape_errors]),
        "scaled_dot_scores": _sections(
            [
                query_key,
                """
                scale : float, optional
                    Multiplier of the dot products; None means ``1/sqrt(E)`` (1 when E = 0).
                """,
            ],
            scores,
            [f"TypeError\n    {refused}, different dtypes, a non-number ``scale``.", shape_errors],
        ),
        "general_scores": _sections(
            [query_key_e, f"weight : {array}\n    (E_q, E_k), the dtype of ``query``."],
            scores,
            [
                input_errors,
                """
                ValueError
                    Rank < 2, ``weight`` not (E_q, E_k), or batch dimensions that do not broadcast.
                """,
            ],
        ),
        "cosine_scores": _sections(
            [query_key, "eps : float\n    Lower bound of the norms."],
            f"{result}\n    (..., L, S) scores in [-1, 1], dtype of ``query``.",
            [input_errors, shape_errors],
        ),
        "additive_scores": _sections(
            [
                query_key_e,
                f"""
                w_query : {array}
                    (H, E_q), the layout of ``nn.Linear(E_q, H).weight``.
                w_key : {array}
                    (H, E_k).
                v : {array}
                    (H,). All five share one floating dtype.
                """,
            ],
            scores,
            [
                input_errors,
                """
                ValueError
                    Rank < 2, weights whose shapes do not fit, or batch dimensions that do not broadcast.
                """,
            ],
        ),
        "x_dim_errors": f"""
            TypeError
                ``x`` is not {x_kind}, or ``dim`` is not an int.
            ValueError
                ``dim`` is out of range.
            """,
        "causal_errors": """
            TypeError
                A length or ``diagonal`` that is not a number (e.g. a string).
            ValueError
                A negative or non-integer length or ``diagonal`` (e.g. 2.5).
            """,
        "key_mask_target": """
            batch : tuple of int
                The leading (batch) dimensions of the attention, e.g. ``(B, h)``.
            S : int
                Number of keys.
            fn : str
                Name of the caller, for the error messages.
            """,
    }


def _filler(pieces: Mapping[str, str]) -> Callable[[F], F]:
    """A decorator that puts `pieces` into the docstring of what it decorates."""

    def fill(obj: F) -> F:
        def piece(match: re.Match) -> str:
            lines = textwrap.dedent(pieces[match["name"]]).strip().splitlines()  # unknown name: KeyError
            return "\n".join(match["indent"] + line if line else "" for line in lines)

        if obj.__doc__:  # None under python -OO
            obj.__doc__ = _PLACE.sub(piece, obj.__doc__)
        return obj

    return fill


TORCH = _filler(
    _pieces("torch.Tensor", "torch.Tensor", "Non-tensor or non-floating inputs", "a floating tensor")
)
NUMPY = _filler(_pieces("array_like", "numpy.ndarray", "Non-floating inputs", "floating"))
