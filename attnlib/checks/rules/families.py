"""The policy data of the forbidden-call rule: the implementations and the families.

What an exercise may not call is data, shared by both readings of the rule (the name finder,
:mod:`attnlib.checks.rules.finder`, and the allow-list audit, :mod:`attnlib.checks.rules.audit`):
the tuples of existing implementations the chapters' checks list in ``Exercise.forbidden``,
the families (``"~softmax"``: every spelling of it in a numerical library), the learner's words
for each family (``coursetools.assign`` writes them into the exercise), the conventional aliases
a notebook assumes (``F``, ``nn``, ``np``, ``anp``) and the dynamic lookups no reading resolves.

Standard library only: the grader's notebook reader imports it without attnlib's core (torch).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

# Calls that already implement what an exercise asks for, shared by the chapters' checks.
SOFTMAX_IMPLEMENTATIONS = (
    "attnlib.numpy.softmax",
    "attnlib.functional.softmax",
    "attnlib.softmax",
    "attnlib.functional.masked_softmax",
    "attnlib.masked_softmax",
    "scipy.special.softmax",
    "torch.softmax",
    "torch.nn.functional.softmax",
    "torch.special.softmax",
    ".softmax",
    "~softmax",
    "~logsumexp",
)
LOGSUMEXP_IMPLEMENTATIONS = (
    "attnlib.numpy.logsumexp",
    "attnlib.functional.logsumexp",
    "attnlib.logsumexp",
    "scipy.special.logsumexp",
    "torch.logsumexp",
    "torch.special.logsumexp",
    ".logsumexp",
    "~logsumexp",
    "~softmax",  # logsumexp(x) = x[0] - log_softmax(x)[0]: a softmax computes it in one line
)
SCALED_SCORE_IMPLEMENTATIONS = (
    "attnlib.numpy.scaled_dot_scores",
    "attnlib.scores.scaled_dot_scores",
    "attnlib.scaled_dot_scores",
)
ATTENTION_IMPLEMENTATIONS = (
    "torch.nn.functional.scaled_dot_product_attention",
    "torch.nn.functional.multi_head_attention_forward",
    "torch.nn.MultiheadAttention",
    "attnlib.scaled_dot_product_attention",
    "attnlib.attention.scaled_dot_product_attention",
    "attnlib.numpy.scaled_dot_product_attention",
    "attnlib.modules.MultiHeadAttention",
    "attnlib.MultiHeadAttention",
    "attnlib.efficient.tiled_attention",
    "attnlib.efficient.grouped_query_attention",
    "~attention",
)

DEFAULT_ALIASES = {
    "F": "torch.nn.functional",
    "nn": "torch.nn",
    "np": "numpy",
    "anp": "attnlib.numpy",
}

_DYNAMIC = {"eval", "exec", "compile"}

# Families (issue 24): an entry ``"~softmax"`` forbids every spelling of the family, not one
# name: any name of a numerical library (a path rooted in :data:`LIBRARY_ROOTS`) with a part
# that contains one of the family's words (``torch.special.log_softmax``, ``torch.nn.Softmin``,
# ``scipy.special.softmax``, ``torch.special.logsumexp``), any method or attribute of that name
# (``x.log_softmax(-1)``), and ``getattr`` with such a constant name.
FAMILIES = {
    "softmax": ("softmax", "softmin"),
    # logaddexp (logaddexp2 too): np.logaddexp.reduce(x, axis=-1) is a row's log-sum-exp in one call
    "logsumexp": ("logsumexp", "log_sum_exp", "reduce_logsumexp", "logaddexp"),
    "attention": (
        "scaled_dot_product",
        "multihead",
        "multi_head_attention",
        "flash_attention",
        "efficient_attention",
        "tiled_attention",
        "grouped_query_attention",
        "flex_attention",
        "transformerencoder",
        "transformerdecoder",
    ),
}
LIBRARY_ROOTS = frozenset(
    "torch numpy scipy attnlib jax jaxlib tensorflow keras sklearn mlx einops functorch "
    "cupy numba paddle theano xarray pandas".split()
)


class FamilyName(NamedTuple):
    """How an exercise notebook names a family (:data:`FAMILIES`) to the learner.

    ``label`` is the learner's word for it ("any library softmax"),
    ``implementations`` the constant that lists the family's calls (the family
    leads the notebook's line when an exercise forbids that whole constant),
    ``examples`` calls the family's rule catches, spelled as a learner writes them,
    the least expected first (a line that names several families shows two of each).
    """

    label: str
    implementations: tuple[str, ...]
    examples: tuple[str, ...]


# The learner's words for each family: coursetools/assign.py writes, in every exercise that has
# a forbidden list, one line naming what the answer may not call (a family by its label and a
# few examples, other entries by name); tests/checks/test_forbidden_stated.py reads it back.
FAMILY_NAMES = {
    "softmax": FamilyName(
        "softmax",
        SOFTMAX_IMPLEMENTATIONS,
        ("torch.softmax", "x.softmax()", "scipy.special.softmax", "attnlib.softmax"),
    ),
    "logsumexp": FamilyName(
        "log-sum-exp",
        LOGSUMEXP_IMPLEMENTATIONS,
        ("torch.logsumexp", "np.logaddexp", "scipy.special.logsumexp"),
    ),
    "attention": FamilyName(
        "attention",
        ATTENTION_IMPLEMENTATIONS,
        (
            "torch.nn.functional.scaled_dot_product_attention",
            "torch.nn.MultiheadAttention",
            "attnlib.scaled_dot_product_attention",
        ),
    ),
}

# What the check cannot resolve, and so never reads as "nothing found" (issue 24): names built
# at run time, objects rebuilt from bytes, code made or run at run time, the interpreter's
# objects and other processes. A cell that uses one of them before an exercise is evaluated
# is flagged for review (:func:`find_dynamic`).
DYNAMIC_LOOKUPS = (
    "exec",
    "eval",
    "compile",
    "__import__",
    "breakpoint",
    "vars()",
    "globals()",
    "locals()",
    "importlib",
    "builtins",
    "pickle",
    "_pickle",
    "marshal",
    "dill",
    "cloudpickle",
    "copyreg",
    "shelve",
    "joblib",
    "ctypes",
    "cffi",
    "gc",
    "types.FunctionType",
    "types.CodeType",
    "types.LambdaType",
    "types.MethodType",
    "types.ModuleType",
    "sys.modules",
    "sys._getframe",
    "runpy",
    "code.interact",
    "code.InteractiveInterpreter",
    "code.InteractiveConsole",
    "codeop",
    "subprocess",
    "multiprocessing",
    "os.system",
    "os.popen",
    "os.execv",
    "os.execve",
    "os.execvp",
    "os.execl",
    "os.execlp",
    "os.spawnv",
    "os.posix_spawn",
    "os.fork",
    "pty",
    "operator.attrgetter",
    "operator.methodcaller",
    "inspect.getattr_static",
    "object.__getattribute__",
    ".__dict__",
    ".__globals__",
    ".__code__",
    ".__builtins__",
    ".__subclasses__",
    ".__getattribute__",
    ".__closure__",
    ".__reduce__",
    ".__reduce_ex__",
    ".__setstate__",
    ".__loader__",
    ".__spec__",
)


def _family_words(entries) -> dict[str, tuple[str, ...]]:
    return {e[1:]: FAMILIES[e[1:]] for e in entries if e.startswith("~") and e[1:] in FAMILIES}


def _holds_word(name: str, words: Iterable[str]) -> bool:
    low = name.lower()
    return any(word in low for word in words)


def family_covers(entry: str, words: Iterable[str]) -> bool:
    """True when a family of ``words`` covers the dotted ``entry`` the way the check reads code: a
    method name (``.softmax``; any attribute that holds a word is flagged) or a library path (its
    root in :data:`LIBRARY_ROOTS`) with a part after the root that holds a word
    (``attnlib.functional.masked_softmax``)."""
    words = tuple(words)
    if entry.startswith("."):
        return _holds_word(entry[1:], words)
    parts = entry.split(".")
    return parts[0] in LIBRARY_ROOTS and any(_holds_word(part, words) for part in parts[1:])


def _twins(path: str) -> list[str]:
    """attnlib's other spellings of one of its functions: its NumPy twin, its top-level export."""
    parts = path.split(".")
    if parts[0] != "attnlib" or len(parts) < 2 or parts[1] in ("checks", "numpy"):
        return []
    name = parts[-1]
    return [f"attnlib.numpy.{name}", f"attnlib.{name}", f"attnlib.functional.{name}"]
