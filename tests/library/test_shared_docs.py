"""The helpers that issue 17 shares between the backends: the docstring pieces of
`attnlib._doc` and the argument checks of `attnlib._validate` used by both
`attnlib` and `attnlib.numpy` (same errors, same messages)."""

from __future__ import annotations

import importlib
import inspect
import re

import numpy as np
import pytest
import torch

import attnlib
import attnlib.numpy as anp
from attnlib._doc import NUMPY, TORCH, _filler

CORE = ["attnlib.functional", "attnlib.attention", "attnlib.masks", "attnlib.scores", "attnlib.numpy"]
SCORES = ["dot_scores", "scaled_dot_scores", "general_scores", "cosine_scores", "additive_scores"]
PLACEHOLDER = re.compile(r"^\s*\{[a-z_]+\}\s*$", re.MULTILINE)


def test_a_piece_takes_the_indentation_of_its_line_and_nothing_else_changes():
    fill = _filler({"two": "a : int\n    first.\n\nb : str"})

    def f():
        """Summary {not_a_piece}.

        Parameters
        ----------
        {two}

        >>> {"a": 1}
        """

    fill(f)
    assert "        a : int\n            first.\n\n        b : str\n" in f.__doc__
    assert "{not_a_piece}" in f.__doc__ and '>>> {"a": 1}' in f.__doc__  # only whole lines are pieces


def test_an_unknown_piece_fails_at_import_and_no_docstring_is_fine():
    def g():
        """{missing}"""

    with pytest.raises(KeyError, match="missing"):
        _filler({})(g)

    def h():
        pass

    assert _filler({})(h).__doc__ is None


@pytest.mark.parametrize("name", CORE)
def test_no_placeholder_is_left_in_the_rendered_docstrings(name):
    module = importlib.import_module(name)
    left = [
        n
        for n, obj in vars(module).items()
        if inspect.isfunction(obj) and obj.__module__ == name and PLACEHOLDER.search(obj.__doc__ or "")
    ]
    assert not left, left


@pytest.mark.parametrize("name", SCORES)
def test_both_backends_document_every_parameter_with_their_own_types(name):
    for fn, array, result in (
        (getattr(attnlib, name), "torch.Tensor", "torch.Tensor"),
        (getattr(anp, name), "array_like", "numpy.ndarray"),
    ):
        doc = inspect.getdoc(fn)
        for param in inspect.signature(fn).parameters:
            assert re.search(rf"^{param} : ", doc, re.MULTILINE), (fn, param)
        assert f"query : {array}" in doc and f"Returns\n-------\n{result}" in doc
    assert TORCH is not NUMPY


def test_causal_mask_diagonal_kinds_are_the_same_in_both_backends():
    # both take Python and NumPy integers (issue 28: NumPy scalars wherever Python ones are)
    assert anp.causal_mask(2, diagonal=np.int64(1)).all()
    assert attnlib.causal_mask(2, diagonal=np.int64(1)).all()
    for causal_mask in (attnlib.causal_mask, anp.causal_mask):
        with pytest.raises(TypeError, match="causal_mask: diagonal must be an integer, got str"):
            causal_mask(2, diagonal="1")
        with pytest.raises(ValueError, match="causal_mask: diagonal must be an integer, got 2.5"):
            causal_mask(2, diagonal=2.5)
        with pytest.raises(ValueError, match="causal_mask: k_len must be a non-negative integer, got -1"):
            causal_mask(2, -1)


@pytest.mark.parametrize(
    ("padding_mask", "array", "kind"),
    [(attnlib.padding_mask, torch.tensor, "tensor"), (anp.padding_mask, np.array, "array")],
)
def test_padding_mask_lengths_errors_name_the_backend(padding_mask, array, kind):
    with pytest.raises(
        TypeError, match=rf"padding_mask: lengths must be a 1-D {kind} or a sequence of ints \(B,\), got int"
    ):
        padding_mask(3)
    with pytest.raises(TypeError, match="got str"):
        padding_mask("12")
    with pytest.raises(ValueError, match=r"padding_mask: lengths must be 1-D \(B,\), got shape \(1, 2\)"):
        padding_mask(array([[1, 2]]))
    assert padding_mask(array([1, 2])).tolist() == [[True, False], [True, True]]
    assert padding_mask((2, 0), max_len=3).tolist() == [[True, True, False], [False, False, False]]


def test_torch_lengths_of_a_float_dtype_are_refused_after_the_rank_check():
    with pytest.raises(ValueError, match=r"lengths must be integers, got dtype torch.float32: \[1.0, 2.0\]"):
        attnlib.padding_mask(torch.tensor([1.0, 2.0]))
    with pytest.raises(ValueError, match="must be 1-D"):
        attnlib.padding_mask(torch.ones(2, 2))


@pytest.mark.parametrize("backend", [attnlib, anp])
def test_weight_shape_errors_name_the_expected_layout(backend):
    make = torch.ones if backend is attnlib else np.ones
    q, k = make((2, 3)), make((4, 5))
    weight = "general_scores: weight must have shape (E_q, E_k) = (3, 5) for query (2, 3) and key (4, 5)"
    with pytest.raises(ValueError, match=re.escape(f"{weight}, got (5, 3)")):
        backend.general_scores(q, k, make((5, 3)))
    w_key = "additive_scores: w_key must have shape (H, E) = (6, 5) for query (2, 3), key (4, 5) and v (6,)"
    with pytest.raises(ValueError, match=re.escape(f"{w_key}, got (6, 3)")):
        backend.additive_scores(q, k, make((6, 3)), make((6, 3)), make((6,)))
    with pytest.raises(ValueError, match=re.escape("query (3,) and key (4, 5) need at least 2 dimensions")):
        backend.general_scores(make((3,)), k, make((3, 5)))
