"""What an exercise's answer may reference: the allow-list of the forbidden-call rule (issue 34).

The rule is sound by construction, not by a list of what is forbidden: the code that
defines what is evaluated (the answer cells, every cell that rebinds the function, and the
learner's functions they call) may reference only

* the operations of :data:`BASE_PATHS` (dotted paths of torch, NumPy and ``math``), the
  built-ins of :data:`BASE_BUILTINS` and the attributes of values of
  :data:`BASE_ATTRIBUTES` (tensor and array methods, ``shape``, ``dtype``, ...);
* what the exercise adds (:data:`EXTRA`, keyed by exercise id: a chapter's model class, a
  loss for a training step, the attributes of the module an exercise hands over);
* functions the learner defines with ``def`` in the notebook, read by the same rule;

minus the exercise's forbidden entries (``Exercise.forbidden``: a family such as
``~softmax`` removes every name that spells it). A reference to a forbidden object under
any of its public paths (:mod:`attnlib.checks.public_paths`) scores 0; any other
reference that is not on the list (a dynamic lookup, a deserialiser, a name bound by a
form the check cannot read) sends the submission to review: never marks, never a silent 0.

This module is data and :func:`policy`: it imports nothing but the standard library, so
the grader's notebook reader uses it without torch.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "BASE_ATTRIBUTES",
    "BASE_BUILTINS",
    "BASE_PATHS",
    "DECORATORS",
    "EXTRA",
    "Extra",
    "Policy",
    "policy",
]


def _paths(root: str, names: str) -> frozenset[str]:
    return frozenset(f"{root}.{name}" for name in names.split())


# --------------------------------------------------------------------------- the base list

# torch: building, reshaping, elementwise arithmetic, reductions, products, comparisons,
# dtypes, and the softmax, log-sum-exp and attention of the library (an exercise that asks
# for one forbids its family, which removes every spelling of it). Nothing that loads,
# compiles, reaches the interpreter, or computes a cross-entropy or a distribution.
_TORCH = _paths(
    "torch",
    """
    tensor as_tensor from_numpy zeros ones full empty arange linspace eye zeros_like ones_like
    full_like empty_like rand randn randint rand_like randn_like manual_seed Generator
    cat concat stack hstack vstack split chunk unbind where masked_select narrow
    exp exp2 log log2 log10 log1p expm1 sqrt rsqrt square pow abs neg sign reciprocal
    sin cos tan tanh sigmoid relu erf floor ceil round trunc softmax log_softmax logsumexp
    complex polar view_as_complex view_as_real real imag diag diag_embed diagonal
    max min amax amin maximum minimum argmax argmin sum mean prod cumsum cumprod var std
    matmul bmm mm mv einsum outer dot tensordot baddbmm addmm
    transpose permute reshape flatten unflatten unsqueeze squeeze broadcast_to broadcast_tensors
    expand_copy movedim swapaxes flip roll repeat_interleave tile
    clamp clip clamp_min clamp_max isinf isnan isfinite isneginf isposinf nan_to_num
    allclose equal eq ne lt le gt ge logical_and logical_or logical_not any all
    tril triu gather scatter index_select take_along_dim topk sort argsort linalg.norm
    finfo iinfo is_tensor is_floating_point no_grad inference_mode enable_grad
    float32 float64 float16 bfloat16 float double half int64 int32 int16 int8 uint8 long int bool
    Tensor Size dtype device inf nan pi e
    """,
)
_TORCH_NN = _paths(
    "torch.nn", "Module Linear Parameter Embedding ModuleList Identity Dropout LayerNorm ReLU GELU"
)
_TORCH_F = _paths(
    "torch.nn.functional",
    "relu gelu linear pad one_hot dropout layer_norm embedding softmax log_softmax "
    "scaled_dot_product_attention",
)
_TORCH_INIT = _paths("torch.nn.init", "xavier_uniform_ normal_ zeros_ ones_ uniform_")
_NUMPY = _paths(
    "numpy",
    """
    array asarray zeros ones full empty arange linspace eye zeros_like ones_like full_like empty_like
    concatenate stack hstack vstack split where
    exp exp2 log log2 log10 log1p expm1 sqrt square power abs absolute negative sign reciprocal
    sin cos tan tanh floor ceil round trunc logaddexp
    max min amax amin maximum minimum argmax argmin sum mean prod cumsum cumprod var std
    matmul dot einsum outer tensordot
    transpose swapaxes moveaxis reshape expand_dims squeeze broadcast_to broadcast_arrays
    flip roll repeat tile diag tri
    clip isinf isnan isfinite isneginf isposinf nan_to_num
    allclose array_equal equal not_equal less less_equal greater greater_equal
    logical_and logical_or logical_not any all
    tril triu take_along_axis sort argsort errstate linalg.norm
    finfo iinfo ndarray newaxis inf nan pi e
    float16 float32 float64 int8 int16 int32 int64 uint8 bool_ intp
    """,
)
_MATH = _paths(
    "math",
    "sqrt exp log log2 log10 log1p expm1 sin cos tan inf nan pi e isinf isnan isfinite floor ceil pow prod",
)
# A module the answer names only as the base of a chain of these (``F.relu``), never on its own.
BASE_PATHS = _TORCH | _TORCH_NN | _TORCH_F | _TORCH_INIT | _NUMPY | _MATH

# Built-ins: values, containers, iteration, exceptions. Not getattr, vars, globals, eval,
# exec, compile, open, __import__, type, object, setattr, dir, id, breakpoint, input.
BASE_BUILTINS = frozenset(
    """
    abs all any bool dict divmod enumerate float int isinstance len list max min range reversed
    round slice sorted sum tuple zip set frozenset str print map filter iter next pow super
    ValueError TypeError NotImplementedError IndexError KeyError RuntimeError AssertionError
    ArithmeticError ZeroDivisionError Exception StopIteration OSError OverflowError FloatingPointError
    LookupError AttributeError
    """.split()
)

# Attributes of values (tensors, arrays, lists, numbers, modules handed over): the methods an
# answer computes with. No dunder, nothing that loads, formats, or reaches an object's insides.
BASE_ATTRIBUTES = frozenset(
    """
    shape ndim dtype device size numel dim T mT data requires_grad is_floating_point
    max min amax amin sum mean prod cumsum cumprod var std argmax argmin
    exp exp2 log log2 log1p expm1 sqrt rsqrt square pow abs neg sign reciprocal tanh sigmoid relu
    softmax log_softmax logsumexp sin cos floor ceil round clamp clamp_min clamp_max clip
    transpose permute reshape view view_as flatten unflatten unsqueeze squeeze expand expand_as
    contiguous movedim swapaxes flip roll repeat repeat_interleave tile narrow unfold
    float double half long int bool to type_as astype new_zeros new_ones new_full new_empty new_tensor
    masked_fill masked_fill_ where matmul bmm mm dot outer
    tril triu gather scatter index_select topk sort argsort unbind split chunk
    any all eq ne lt le gt ge isinf isnan isfinite nan_to_num logical_not logical_and logical_or
    detach clone copy item tolist numpy cpu zero_ fill_ add sub mul div add_ sub_ mul_ div_ copy_
    append extend pop insert items keys values index count join get __init__
    weight bias real imag tiny eps
    """.split()
)


# --------------------------------------------------------------------------- per exercise


@dataclass(frozen=True)
class Extra:
    """What one exercise adds to the base list: dotted ``paths``, value ``attributes``, ``builtins``."""

    paths: frozenset[str] = frozenset()
    attributes: frozenset[str] = frozenset()
    builtins: frozenset[str] = frozenset()


def _extra(paths: str = "", attributes: str = "", builtins: str = "") -> Extra:
    return Extra(frozenset(paths.split()), frozenset(attributes.split()), frozenset(builtins.split()))


_SEQ2SEQ = "attnlib.chapters.seq2seq.PAD attnlib.chapters.seq2seq.BOS attnlib.chapters.seq2seq.EOS"
_VOCAB = "attnlib.chapters.vocab.PAD attnlib.chapters.vocab.BOS attnlib.chapters.vocab.EOS"
_TINY_LM = "attnlib.chapters.tiny_lm.COPY_PAD attnlib.chapters.tiny_lm.COPY_SEP"
# a training step: a loss, gradients, an update
_TRAIN_PATHS = (
    "torch.nn.functional.cross_entropy torch.nn.functional.nll_loss torch.nn.CrossEntropyLoss "
    "torch.nn.NLLLoss torch.optim.Adam torch.optim.AdamW torch.optim.SGD"
)
_TRAIN_ATTRIBUTES = "zero_grad backward step parameters named_parameters train eval grad"
_DECODER_LAYER = "self_attn cross_attn norm1 norm2 norm3 ffn"
_BLOCK = "self_attention feed_forward norm1 norm2 attn linear1 linear2"

EXTRA: dict[str, Extra] = {
    "ex-01-1": _extra(
        "torch.nn.utils.rnn.pack_padded_sequence torch.nn.utils.rnn.pad_packed_sequence",
        "encoder embed embedding gru rnn hidden_size num_layers batch_first",
    ),
    "ex-01-2": _extra(_SEQ2SEQ),
    "ex-01-3": _extra(_SEQ2SEQ, "encoder decoder encode decode step embed embedding gru out output"),
    "ex-01-4": _extra(
        f"{_SEQ2SEQ} {_TRAIN_PATHS} attnlib.chapters.seq2seq.shift_right",
        f"{_TRAIN_ATTRIBUTES} encoder decoder",
    ),
    "ex-02-4": _extra("", "w_query w_key v"),
    # the earlier exercises' split and merge, as the library has them
    "ex-06-3": _extra("attnlib.split_heads attnlib.merge_heads"),
    "ex-07-3": _extra(_VOCAB),
    "ex-07-5": _extra("", _DECODER_LAYER),
    "ex-10-1": _extra("", _BLOCK),
    "ex-10-2": _extra(f"{_TRAIN_PATHS} {_TINY_LM}", _TRAIN_ATTRIBUTES),
    "ex-10-3": _extra(_TINY_LM, "blocks new_cache forward_cached"),
    "ex-10-4": _extra(_TINY_LM),
}

# Decorators an answer may wear: they run the function in a context and return it otherwise
# unchanged. Any other decorator can replace the function: review.
DECORATORS = frozenset({"torch.no_grad", "torch.inference_mode", "torch.enable_grad"})


@dataclass(frozen=True)
class Policy:
    """What one exercise's answer may reference (see the module's docstring)."""

    exercise: str
    function: str
    forbidden: tuple[str, ...]
    paths: frozenset[str]
    attributes: frozenset[str]
    builtins: frozenset[str]


def policy(exercise: str, function: str = "", forbidden=()) -> Policy:
    """The allow-list of ``exercise`` whose answer defines ``function`` and may not use ``forbidden``.

    The forbidden entries win over the list: the check (attnlib.checks.forbidden.audit_*)
    asks them first, so an entry that the base list also names (``.forward``) is forbidden.
    """
    extra = EXTRA.get(exercise, Extra())
    return Policy(
        exercise,
        function,
        tuple(forbidden),
        BASE_PATHS | extra.paths,
        BASE_ATTRIBUTES | extra.attributes,
        BASE_BUILTINS | extra.builtins,
    )
