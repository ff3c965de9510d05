"""attnlib._tensors: the one place a torch function asks "is this a tensor, of a floating dtype"."""

import doctest

import pytest
import torch

import attnlib
from attnlib import _tensors
from attnlib._tensors import check_floating_tensors, check_tensors


def test_examples_run():
    result = doctest.testmod(_tensors, optionflags=doctest.ELLIPSIS, verbose=False)
    assert result.attempted >= 3 and result.failed == 0, result


def test_the_first_non_tensor_is_named_with_its_type():
    check_tensors("f", a=torch.zeros(1), b=torch.zeros(2, dtype=torch.int64))  # any dtype
    with pytest.raises(TypeError, match=r"^f: b must be a torch.Tensor, got ndarray$"):
        check_tensors("f", a=torch.zeros(1), b=torch.zeros(1).numpy(), c=None)


@pytest.mark.parametrize(
    "tensors, message",
    [
        (
            {"q": torch.zeros(1, dtype=torch.int64)},
            "f: q must be a floating point array, got dtype torch.int64",  # _validate's words, both backends
        ),
        (
            {"q": torch.zeros(1), "k": torch.zeros(1, dtype=torch.float64)},
            "f: inputs must share one dtype, got q torch.float32, k torch.float64",
        ),
        ({"q": torch.zeros(1), "k": 1.0}, "f: k must be a torch.Tensor, got float"),
    ],
)
def test_floating_tensors_share_one_floating_dtype(tensors, message):
    with pytest.raises(TypeError) as error:
        check_floating_tensors("f", **tensors)
    assert str(error.value) == message


@pytest.mark.parametrize(
    "call",
    [
        lambda: attnlib.scaled_dot_product_attention([1.0], torch.zeros(1, 2), torch.zeros(1, 2)),
        lambda: attnlib.dot_scores(torch.zeros(1, 2), [1.0]),
        lambda: attnlib.softmax([1.0]),
        lambda: attnlib.split_heads([1.0], 2),
        lambda: attnlib.apply_rope([1.0]),
        lambda: attnlib.repeat_kv([1.0], 2),
        lambda: attnlib.tiled_attention(torch.zeros(1, 2), [1.0], torch.zeros(1, 2)),
    ],
    ids=["sdpa", "dot_scores", "softmax", "split_heads", "apply_rope", "repeat_kv", "tiled_attention"],
)
def test_public_functions_refuse_a_list_in_the_shared_words(call):
    with pytest.raises(TypeError, match=r"^\w+: \w+ must be a torch.Tensor, got list$"):
        call()
