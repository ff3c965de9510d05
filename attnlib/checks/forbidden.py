"""Find calls to existing implementations in an answer, by its syntax tree.

An exercise that asks the learner to implement X lists the calls that already
implement X (``Exercise.forbidden``). :func:`find_forbidden` reads the answer's
source as a syntax tree (never with a regular expression) and resolves what
each name refers to:

* imports and their aliases: ``import torch.nn.functional as F``,
  ``from attnlib import scaled_dot_product_attention as s``, ``from m import *``;
* simple assignments of such names: ``f = torch.softmax``;
* attribute chains: ``torch.nn.functional.softmax``;
* ``getattr(obj, "name")``, ``vars(obj)["name"]`` and ``obj.__dict__["name"]``
  with strings built from constants (``"soft" + "max"``, f-strings of
  constants, ``"".join([...])``);
* ``__import__("...")`` and ``importlib.import_module("...")`` with such
  strings (``'attnlib.che' + 'cks'``).

A forbidden entry is a dotted name (``"torch.softmax"``); the name of a
module forbids everything in it (``"attnlib.checks"``); an entry starting with
a dot (``".softmax"``) forbids that attribute on any object, e.g. the tensor
method ``x.softmax(-1)``; an entry ending in ``()`` (``"module()"``) forbids
calling that name while still allowing its attributes (``module.w_query``).
Names that are already imported are also compared by identity, so
``attnlib.attention.scaled_dot_product_attention`` is caught when
``attnlib.scaled_dot_product_attention`` is forbidden, and an attnlib module's
entry (``"attnlib.efficient"``) catches its public objects under the names
``attnlib`` re-exports them by (``attnlib.tiled_attention``).

A notebook defines its imports in earlier cells, so a few conventional
aliases are assumed when the source does not bind them itself: ``F`` is
``torch.nn.functional``, ``nn`` is ``torch.nn``, ``np`` is ``numpy``, ``anp``
is ``attnlib.numpy``.
"""

from __future__ import annotations

import ast
import inspect
import numbers
import sys
import textwrap
import types
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

__all__ = [
    "ATTENTION_IMPLEMENTATIONS",
    "FAMILY_NAMES",
    "LOGSUMEXP_IMPLEMENTATIONS",
    "SCALED_SCORE_IMPLEMENTATIONS",
    "SOFTMAX_IMPLEMENTATIONS",
    "FamilyName",
    "find_dynamic",
    "find_forbidden",
    "family_covers",
    "find_forbidden_in_cells",
    "forbidden_in_function",
    "function_source",
]

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
# few examples, other entries by name); tests/chapters/test_forbidden_stated.py reads it back.
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


def _fold(node: ast.AST) -> str | None:
    """The value of a string built only from constants, or None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _fold(node.left), _fold(node.right)
        return None if left is None or right is None else left + right
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.FormattedValue):
                inner = _fold(value.value)
                if inner is None:
                    return None
                parts.append(inner)
            else:
                folded = _fold(value)
                if folded is None:
                    return None
                parts.append(folded)
        return "".join(parts)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "join"
        and len(node.args) == 1
        and isinstance(node.args[0], ast.List | ast.Tuple)
    ):
        sep = _fold(node.func.value)
        items = [_fold(e) for e in node.args[0].elts]
        if sep is None or any(i is None for i in items):
            return None
        return sep.join(items)  # type: ignore[arg-type]
    return None


def _lookup(path: str):
    """The object a dotted path names, among modules already imported (nothing is imported here)."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        module = sys.modules.get(".".join(parts[:cut]))
        if module is None:
            continue
        obj = module
        for part in parts[cut:]:
            if not isinstance(obj, types.ModuleType | type):
                return None
            try:
                obj = inspect.getattr_static(obj, part)
            except AttributeError:
                return None
        return obj
    return None


class _Finder(ast.NodeVisitor):
    def __init__(self, forbidden: Iterable[str]):
        entries = [f.strip() for f in forbidden if f and f.strip()]
        self.families = _family_words(entries)
        self.family_words = tuple(word for words in self.families.values() for word in words)
        entries = [f for f in entries if not f.startswith("~")]
        entries += [t for f in entries for t in _twins(f) if t not in entries]
        self.calls = {f[:-2] for f in entries if f.endswith("()")}
        self.paths = [f for f in entries if not f.startswith(".") and not f.endswith("()")]
        self.attributes = {f[1:] for f in entries if f.startswith(".")}
        self.objects = {}
        for path in self.paths:
            obj = _lookup(path)
            if obj is not None and not isinstance(obj, int | float | str | bool):
                self.objects[id(obj)] = (obj, path)
            if isinstance(obj, types.ModuleType) and path.split(".")[0] == "attnlib":
                # attnlib re-exports its modules' functions at the top (attnlib.tiled_attention
                # is attnlib.efficient.tiled_attention): a forbidden attnlib module forbids its
                # public objects under any name. Only attnlib's: torch.autograd's __all__ holds
                # torch.no_grad, which forbidding torch.autograd must not forbid.
                for name in getattr(obj, "__all__", ()):
                    member = getattr(obj, name, None)
                    if member is not None and id(member) not in self.objects:
                        self.objects[id(member)] = (member, path)
        self.aliases: dict[str, str] = {}
        self.star_modules: list[str] = []
        self.found: set[str] = set()

    # ------------------------------------------------------------------ resolution

    def _family(self, name: str) -> bool:
        """True when ``name`` (one part of a path, or an attribute) spells a forbidden family."""
        return _holds_word(name, self.family_words)

    def _star_family(self, module: str, name: str) -> bool:
        """True when ``name``, after ``from module import *``, is a forbidden family's member of a
        library (``from numpy import *`` then ``logaddexp``): a name the module has, or any such
        name when the module is not imported here to ask (failing closed)."""
        if not (self.families and module.split(".")[0] in LIBRARY_ROOTS and self._family(name)):
            return False
        return module not in sys.modules or _lookup(f"{module}.{name}") is not None

    def _match(self, path: str | None) -> None:
        if not path:
            return
        if self.families and family_covers(path, self.family_words):
            self.found.add(path)
            return
        for f in self.paths:
            if path == f or path.startswith(f + "."):
                self.found.add(f)
                return
        obj = _lookup(path)
        if obj is not None and id(obj) in self.objects and self.objects[id(obj)][0] is obj:
            self.found.add(self.objects[id(obj)][1])

    def _resolve(self, node: ast.AST) -> str | None:
        """The dotted path an expression names, if it can be read from the source."""
        if isinstance(node, ast.Name):
            if node.id in self.aliases:
                return self.aliases[node.id]
            for module in self.star_modules:
                candidate = f"{module}.{node.id}"
                if any(candidate == f or candidate.startswith(f + ".") for f in self.paths):
                    return candidate
                if self._star_family(module, node.id):
                    return candidate
            return DEFAULT_ALIASES.get(node.id, node.id)
        if isinstance(node, ast.Attribute):
            base = self._resolve(node.value)
            return f"{base}.{node.attr}" if base else None
        if isinstance(node, ast.Call):
            func = self._resolve(node.func)
            if func in ("getattr", "builtins.getattr") and len(node.args) >= 2:
                base, name = self._resolve(node.args[0]), _fold(node.args[1])
                return f"{base}.{name}" if base and name else None
            if func in ("__import__", "builtins.__import__", "importlib.import_module") and node.args:
                return _fold(node.args[0])
            if func in ("vars", "builtins.vars") and len(node.args) == 1:
                return self._resolve(node.args[0])
            return None
        if isinstance(node, ast.Subscript):
            key = _fold(node.slice)
            if key is None:
                return None
            value = node.value
            if isinstance(value, ast.Attribute) and value.attr == "__dict__":
                base = self._resolve(value.value)
            elif isinstance(value, ast.Call) and self._resolve(value.func) in ("vars", "builtins.vars"):
                base = self._resolve(value.args[0]) if value.args else None
            else:
                return None
            return f"{base}.{key}" if base else None
        return None

    # ------------------------------------------------------------------ bindings

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._match(alias.name)
            if alias.asname:
                self.aliases[alias.asname] = alias.name
            else:
                top = alias.name.split(".")[0]
                self.aliases[top] = top

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level or not node.module:
            return
        for alias in node.names:
            if alias.name == "*":
                self.star_modules.append(node.module)
                continue
            path = f"{node.module}.{alias.name}"
            self._match(path)
            self.aliases[alias.asname or alias.name] = path

    def visit_Assign(self, node: ast.Assign) -> None:
        self.generic_visit(node)
        path = self._resolve(node.value)
        for target in node.targets:
            if isinstance(target, ast.Name):
                if path and isinstance(node.value, ast.Name | ast.Attribute | ast.Call | ast.Subscript):
                    self.aliases[target.id] = path
                else:
                    self.aliases.pop(target.id, None)

    # ------------------------------------------------------------------ uses

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in self.attributes or (self.families and self._family(node.attr)):
            self.found.add("." + node.attr)
        self._match(self._resolve(node))
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load):
            self._match(self._resolve(node))

    def visit_Call(self, node: ast.Call) -> None:
        func = self._resolve(node.func)
        if func in _DYNAMIC and node.args:
            code = _fold(node.args[0])
            if code is None:
                self.found.add(f"{func}() of a computed string")
            else:
                try:
                    inner = _Finder(
                        self.paths + ["." + a for a in self.attributes] + [c + "()" for c in self.calls]
                    )
                    inner.aliases = dict(self.aliases)
                    inner.visit(ast.parse(code))
                    self.found |= inner.found
                except SyntaxError:
                    pass
        if func is not None and func in self.calls:
            self.found.add(func + "()")
        if func in ("getattr", "builtins.getattr") and len(node.args) >= 2:
            name = _fold(node.args[1])
            if name is not None and (name in self.attributes or (self.families and self._family(name))):
                self.found.add("." + name)
        # IPython's magics, as its transformer writes them: the code is a string argument
        magic = node.func.attr if isinstance(node.func, ast.Attribute) else None
        if magic in ("run_cell_magic", "run_line_magic") and len(node.args) >= 2:
            code = _fold(node.args[-1])
            if code is None:
                self.found.add(f"{magic}() of a computed string")
            else:
                self._visit_code(code, magic == "run_line_magic")
        self._match(self._resolve(node))
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        self._match(self._resolve(node))
        self.generic_visit(node)

    def _visit_code(self, code: str, line: bool) -> None:
        """Read the code inside a magic with this finder's names. A line magic's options come
        first (``-n 3 -o f(x)``): every tail of its words that parses is read."""
        words = code.split() if line else []
        candidates = [code] + [" ".join(words[i:]) for i in range(1, len(words))]
        for text in candidates[:64]:
            try:
                tree = ast.parse(textwrap.dedent(text))
            except (SyntaxError, ValueError):
                continue
            self.visit(tree)


class _Dynamic(_Finder):
    """What :func:`find_dynamic` flags: :data:`DYNAMIC_LOOKUPS`, and ``getattr`` with a computed name."""

    def __init__(self):
        super().__init__(DYNAMIC_LOOKUPS)

    def _match(self, path: str | None) -> None:
        # every part of a path, so that "sys.modules" is found in sys.modules["x"].y
        if path:
            parts = path.split(".")
            for cut in range(1, len(parts) + 1):
                super()._match(".".join(parts[:cut]))

    def visit_Call(self, node: ast.Call) -> None:
        func = self._resolve(node.func)
        if func in ("getattr", "builtins.getattr", "setattr", "delattr", "hasattr") and len(node.args) >= 2:
            if _fold(node.args[1]) is None:
                self.found.add(f"{func}() with a computed name")
        super().visit_Call(node)


def find_forbidden(source: str, forbidden: Iterable[str]) -> list[str]:
    """The entries of ``forbidden`` that ``source`` uses, sorted; ``[]`` when none (or nothing forbidden).

    Parameters
    ----------
    source : str
        Python source: an answer cell, or a function's source.
    forbidden : iterable of str
        Dotted names (``"torch.nn.functional.scaled_dot_product_attention"``),
        module names (``"attnlib.checks"``) or attribute names starting with a
        dot (``".softmax"``).

    Returns
    -------
    list of str
        The forbidden entries found (an ``eval``/``exec`` of a string that
        cannot be read is reported as ``"eval() of a computed string"``).
        Source that does not parse is read after dedenting; if it still does
        not parse, nothing can be found and ``[]`` is returned (the answer
        then fails on its own syntax error).

    Raises
    ------
    RecursionError, MemoryError
        When the source is too deep or too large to read: a caller must treat
        that as "needs review", never as "nothing found" (issue 24).
    """
    entries = list(forbidden)
    if not entries:
        return []
    try:
        tree = ast.parse(textwrap.dedent(source))
    except (SyntaxError, ValueError):
        return []
    finder = _Finder(entries)
    finder.visit(tree)
    return sorted(finder.found)


def _parse(source: str) -> ast.Module | None:
    """The syntax tree of ``source``; None when it does not parse (it then fails when run).
    A source too deep to parse raises RecursionError or MemoryError: see :func:`find_forbidden`."""
    try:
        return ast.parse(textwrap.dedent(source))
    except (SyntaxError, ValueError):
        return None


def find_dynamic(source: str) -> list[str]:
    """What ``source`` uses that the forbidden-call check cannot see through, sorted.

    Dynamic lookups (:data:`DYNAMIC_LOOKUPS`: ``getattr`` or ``__import__`` with a
    computed name, ``vars()``, ``__dict__``, ``sys.modules``, ``importlib``,
    ``pickle``, ``marshal``, ``types.FunctionType``, ``ctypes``, ``gc``,
    ``exec``/``eval``/``compile``, other processes). A cell that uses one of them
    may call a forbidden function under a name no reading can find: it is
    flagged for review. Raises RecursionError or MemoryError like
    :func:`find_forbidden`.
    """
    tree = _parse(source)
    if tree is None:
        return []
    finder = _Dynamic()
    finder.visit(tree)
    return sorted(finder.found)


def find_forbidden_in_cells(sources: list[str], answer: int, forbidden: Iterable[str]) -> list[str]:
    """The forbidden entries that the answer cell ``sources[answer]`` uses, reading the whole notebook.

    Other cells are read for what the answer cell's names mean, not for their
    own calls (a demonstration cell may use attnlib): imports and aliases made
    in any cell up to the answer cell (``from attnlib import
    scaled_dot_product_attention as s`` in one cell, ``s(q, k, v)`` in the
    answer), and functions defined in other cells that the answer calls, read
    in turn (a helper cell that calls ``F.softmax``).
    """
    entries = list(forbidden)
    if not entries or not 0 <= answer < len(sources):
        return []
    context = _Finder(entries)
    helpers: dict[str, ast.AST] = {}
    for index, source in enumerate(sources[: answer + 1]):
        tree = _parse(source)
        if tree is None:
            continue
        if index < answer:
            context.visit(tree)
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                helpers[node.name] = node
    tree = _parse(sources[answer])
    if tree is None:
        return []
    finder = _Finder(entries)
    finder.aliases = dict(context.aliases)
    finder.star_modules = list(context.star_modules)
    finder.visit(tree)
    own = {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)}
    todo = [tree]
    seen: set[str] = set(own)
    while todo:
        node = todo.pop()
        for name in {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}:
            if name in helpers and name not in seen:
                seen.add(name)
                finder.visit(helpers[name])
                todo.append(helpers[name])
    return sorted(finder.found)


def function_source(func: Callable, _seen: set | None = None) -> str:
    """The source of ``func`` and of the functions defined by the learner that it calls, joined.

    Functions are followed through the global names their code uses (helpers
    defined in the same notebook or module). Library functions (under
    ``site-packages`` or in attnlib itself) are not followed.
    """
    seen = _seen if _seen is not None else set()
    func = inspect.unwrap(func) if callable(func) else func
    if id(func) in seen:
        return ""
    seen.add(id(func))
    code = getattr(func, "__code__", None)
    if code is None:
        return ""
    try:
        source = textwrap.dedent(inspect.getsource(func))
    except (OSError, TypeError):
        source = ""
    try:
        ast.parse(source)
    except SyntaxError:  # a lambda inside a larger expression: keep the lambda only
        source = _lambda_source(source)
    parts = [source]
    module = getattr(func, "__module__", "") or ""
    names = set()
    stack = [code]
    while stack:
        c = stack.pop()
        names |= set(c.co_names)
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    globs = getattr(func, "__globals__", {})
    for name in sorted(names):
        value = globs.get(name)
        if isinstance(value, types.FunctionType) and _is_learner_code(value, module):
            parts.append(function_source(value, seen))
    return "\n\n".join(p for p in parts if p)


def _lambda_source(source: str) -> str:
    start = source.find("lambda")
    while start != -1:
        text = source[start:]
        for end in range(len(text), 0, -1):
            try:
                ast.parse(text[:end], mode="eval")
            except SyntaxError:
                continue
            return "_ = " + text[:end]
        start = source.find("lambda", start + 1)
    return ""


def _is_learner_code(func: types.FunctionType, module: str) -> bool:
    filename = func.__code__.co_filename
    if "site-packages" in filename or "dist-packages" in filename:
        return False
    own = (func.__module__ or "") == module
    return own and not (func.__module__ or "").startswith(("attnlib.", "torch", "numpy"))


def forbidden_in_function(func: Callable, forbidden: Iterable[str]) -> list[str]:
    """The forbidden entries that ``func`` (and the learner's helpers it calls) use.

    Reads the source (:func:`function_source`) with :func:`find_forbidden`,
    and also compares the objects that the function's global names are bound
    to with the forbidden objects, which finds them when no source can be read.
    """
    entries = list(forbidden)
    if not entries:
        return []
    found = set(find_forbidden(function_source(func), entries))
    finder = _Finder(entries)
    code = getattr(func, "__code__", None)
    globs = getattr(func, "__globals__", {})
    if code is not None:
        stack, names = [code], set()
        while stack:
            c = stack.pop()
            names |= set(c.co_names)
            stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
        for name in names:
            value = globs.get(name)
            if value is not None and id(value) in finder.objects and finder.objects[id(value)][0] is value:
                found.add(finder.objects[id(value)][1])
    return sorted(found)


# ============================================================================ the capability rule
#
# Issue 43: the allow-list of issue 34 was sound but unfair (an honest np.subtract, a
# @dataclass, itertools.product went to review). The rule below refuses capabilities instead
# of naming operations (attnlib.checks.allowed): reflection and mutation of modules or the
# runtime go to review, the exercise's forbidden entries and families score 0 under any of
# their public paths (attnlib.checks.public_paths), and the rest of NumPy, torch, Python's
# pure modules and the learner's own code is admitted. Each reference is judged where it is
# written, so an alias made by any form (walrus, dict item, class attribute, lambda, tuple
# unpacking, a for target) is judged at the expression it aliases; a global name is judged by
# every binding it has in the cells read, and a mutable global value by every statement of
# those cells that names it.


class Audit(NamedTuple):
    """What the rule found in an answer: ``forbidden`` entries (the answer scores 0)
    and ``review`` reasons (a person must read it: the answer is never marked automatically)."""

    forbidden: tuple[str, ...] = ()
    review: tuple[str, ...] = ()

    @property
    def clean(self) -> bool:
        return not self.forbidden and not self.review


class _Forbid:
    """An exercise's forbidden entries, asked of a dotted path, a value's attribute or a local call."""

    def __init__(self, entries: Iterable[str]):
        from attnlib.checks.allowed import NEIGHBOURS
        from attnlib.checks.public_paths import PUBLIC_PATHS

        entries = [e.strip() for e in entries if e and e.strip()]
        families = _family_words(entries)
        self.family_words = tuple(w for words in families.values() for w in words)
        self.neighbours = {n: family for family in families for n in NEIGHBOURS.get(family, ())}
        entries = [e for e in entries if not e.startswith("~")]
        entries += [t for e in entries for t in _twins(e) if t not in entries]
        self.calls = {e[:-2] for e in entries if e.endswith("()")}
        self.attributes = {e[1:] for e in entries if e.startswith(".")}
        self.paths = [e for e in entries if not e.startswith(".") and not e.endswith("()")]
        # every public path of a forbidden attnlib object (or of one inside a forbidden module)
        self._public = PUBLIC_PATHS
        self.canonical = [(self._canonical(e), e) for e in self.paths]

    def _canonical(self, path: str) -> str:
        """``path`` with its longest prefix that attnlib publishes replaced by the object's home
        (``attnlib.attention.causal_mask`` -> ``attnlib.masks.causal_mask``)."""
        parts = path.split(".")
        for cut in range(len(parts), 0, -1):
            home = self._public.get(".".join(parts[:cut]))
            if home is not None:
                return ".".join([home, *parts[cut:]])
        return path

    def path(self, path: str) -> str | None:
        """The forbidden entry that the dotted ``path`` names, under any of its public paths."""
        for candidate in dict.fromkeys((path, self._canonical(path))):
            if self.family_words and family_covers(candidate, self.family_words):
                return candidate
            for home, entry in self.canonical:
                if candidate == home or candidate.startswith(home + "."):
                    return entry
        return None

    def neighbour(self, path: str) -> str | None:
        """The forbidden family whose neighbour (allowed.NEIGHBOURS) ``path`` names, if any."""
        parts = path.split(".")
        if parts[0] not in LIBRARY_ROOTS:
            return None
        for word, family in self.neighbours.items():
            if "." in word:
                if path == word or path.startswith(word + "."):
                    return family
            elif any(_holds_word(part, (word,)) for part in parts[1:]):
                return family
        return None

    def attribute(self, name: str) -> str | None:
        if name in self.attributes or (self.family_words and _holds_word(name, self.family_words)):
            return "." + name
        return None


class _Binding(NamedTuple):
    """One binding of a global name: ``kind`` is ``module`` (``import m``), ``path`` (``from m
    import n``), ``alias`` (``n = a.b``), ``def``, ``class``, ``const``, ``scalar``, ``value``
    (any other expression, judged where it is written; ``node`` is that expression),
    ``values`` (check()'s side: a container's items, ``node`` a list of bindings) or
    ``unreadable`` (``why`` says by what form)."""

    kind: str
    where: str
    path: str = ""
    node: Any = None
    names: Any = None  # the resolver of a def's or an alias's own globals
    why: str = ""


_CONST_TYPES = (int, float, complex, str, bytes, bool, type(None))
_LEARNER_KINDS = frozenset({"const", "scalar", "value", "values", "def", "class"})


def _is_constant(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        return _is_constant(node.operand)
    if isinstance(node, ast.Tuple):  # not a list: a later cell could append a function to it
        return all(_is_constant(e) for e in node.elts)
    return False


def _is_chain(node: ast.AST) -> bool:
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name)


def _text(node: ast.AST, limit: int = 60) -> str:
    try:
        text = ast.unparse(node)
    except Exception:  # noqa: BLE001 - a description only
        text = type(node).__name__
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _is_dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__") and len(name) > 4


class _NotebookNames:
    """Every binding of every global name in a notebook's cells, read from their syntax trees,
    and, per name, the top-level statements that mention it (:func:`audit_notebook` judges them
    when the answer reaches a mutable value bound to the name).

    An import, a ``def`` or ``class`` (wherever it is, decorated or not), a constant, an alias
    ``n = a.b`` and any other expression bound by ``=``, ``:=``, ``for``, ``with`` or ``except``
    are read (the expression is judged where it is written); ``global n`` in a function, ``del``,
    a match pattern and a relative import are ``unreadable``.
    """

    def __init__(self, cells: Iterable[tuple[int, str]]):
        self.table: dict[str, list[_Binding]] = {}
        self.stars: list[str] = []
        self.trees: dict[int, ast.Module] = {}
        self.mentions: dict[str, list[tuple[int, ast.stmt]]] = {}
        self.mutations: dict[frozenset, list[str]] = {}  # per set of skipped cells
        for index, source in cells:
            tree = _parse(source)
            if tree is None:
                continue
            self.trees[index] = tree
            self._read(tree.body, f"cell {index}", top=True)
            self._expressions(tree, f"cell {index}")
            for stmt in tree.body:
                for name in {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name)}:
                    self.mentions.setdefault(name, []).append((index, stmt))

    def bindings(self, name: str) -> list[_Binding] | None:
        return self.table.get(name)

    def _add(self, name: str, binding: _Binding) -> None:
        self.table.setdefault(name, []).append(binding)

    def _unreadable(self, target: ast.AST, where: str, why: str) -> None:
        for node in ast.walk(target):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
                self._add(node.id, _Binding("unreadable", where, why=why))

    def _values(self, target: ast.AST, value: ast.AST, where: str) -> None:
        """Every name ``target`` binds gets the value ``value`` (judged whole)."""
        for node in ast.walk(target):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                self._add(node.id, _Binding("value", where, node=value, names=self))

    def _read(self, body: list[ast.stmt], where: str, top: bool) -> None:
        for stmt in body:
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                kind = "class" if isinstance(stmt, ast.ClassDef) else "def"
                self._add(stmt.name, _Binding(kind, where, node=stmt, names=self))
                for inner in ast.walk(stmt):
                    if isinstance(inner, ast.Global):
                        for name in inner.names:
                            self._add(name, _Binding("unreadable", where, why="'global' in a function"))
            elif isinstance(stmt, ast.Import):
                for alias in stmt.names:
                    if alias.asname:
                        self._add(alias.asname, _Binding("module", where, path=alias.name))
                    else:
                        top_name = alias.name.split(".")[0]
                        self._add(top_name, _Binding("module", where, path=top_name))
            elif isinstance(stmt, ast.ImportFrom):
                for alias in stmt.names:
                    if alias.name == "*":
                        self.stars.append(f"{where} (from {stmt.module} import *)")
                    elif stmt.level or not stmt.module:
                        binding = _Binding("unreadable", where, why="a relative import")
                        self._add(alias.asname or alias.name, binding)
                    else:
                        path = f"{stmt.module}.{alias.name}"
                        self._add(alias.asname or alias.name, _Binding("path", where, path=path))
            elif isinstance(stmt, ast.Assign | ast.AnnAssign):
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                value = stmt.value
                for target in targets:
                    if value is None:
                        continue
                    if not isinstance(target, ast.Name):
                        self._values(target, value, where)  # an item or attribute store binds no name
                    elif _is_constant(value):
                        self._add(target.id, _Binding("const", where))
                    elif _is_chain(value):
                        self._add(target.id, _Binding("alias", where, node=value, names=self))
                    else:
                        self._add(target.id, _Binding("value", where, node=value, names=self))
            elif isinstance(stmt, ast.AugAssign):
                self._values(stmt.target, stmt.value, where)
            elif isinstance(stmt, ast.For | ast.AsyncFor):
                self._values(stmt.target, stmt.iter, where)
                self._read(stmt.body + stmt.orelse, where, top=False)
            elif isinstance(stmt, ast.While | ast.If):
                self._read(stmt.body + stmt.orelse, where, top=False)
            elif isinstance(stmt, ast.With | ast.AsyncWith):
                for item in stmt.items:
                    if item.optional_vars is not None:
                        self._values(item.optional_vars, item.context_expr, where)
                self._read(stmt.body, where, top=False)
            elif isinstance(stmt, ast.Try | getattr(ast, "TryStar", ast.Try)):
                for handler in stmt.handlers:
                    if handler.name:
                        value = handler.type if handler.type is not None else ast.Constant(None)
                        self._add(handler.name, _Binding("value", where, node=value, names=self))
                    self._read(handler.body, where, top=False)
                self._read(stmt.body + stmt.orelse + stmt.finalbody, where, top=False)
            elif isinstance(stmt, ast.Match):
                for case in stmt.cases:
                    self._unreadable(case.pattern, where, "a match pattern")
                    for node in ast.walk(case.pattern):
                        for attr in ("name", "rest"):
                            name = getattr(node, attr, None)
                            if isinstance(name, str):
                                self._add(name, _Binding("unreadable", where, why="a match pattern"))
                    self._read(case.body, where, top=False)
            elif isinstance(stmt, ast.Delete):
                for target in stmt.targets:
                    self._unreadable(target, where, "del")

    def _expressions(self, tree: ast.AST, where: str) -> None:
        """``:=`` at module level (comprehensions included) binds a global."""
        stack = [tree]
        while stack:
            node = stack.pop()
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
                continue
            if isinstance(node, ast.NamedExpr):
                self._add(node.target.id, _Binding("value", where, node=node.value, names=self))
            stack.extend(ast.iter_child_nodes(node))


class _Scope:
    """The names a function (or class body, or comprehension) binds: locals, those bound only
    by an import (a path; ``modules``: by ``import m``), and ``aliases``: locals bound to a
    chain of another scope's names or to an iteration over such chains (``m = np``,
    ``for m in (np,)``), whose attributes the function may not set."""

    def __init__(self, names: set[str], paths: dict[str, str], is_class: bool = False):
        self.names = names
        self.paths = paths
        self.is_class = is_class
        self.modules: set[str] = set()
        self.aliases: set[str] = set()


def _foreign_chain(node: ast.AST, own: set[str]) -> bool:
    """A chain ``a.b.c`` whose root is not one of the names ``own`` binds from its parameters
    or calls: it names another scope's object (a module, a class, a global)."""
    if not _is_chain(node):
        return False
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id not in own


def _local_names(body: list[ast.AST], params: Iterable[str] = ()) -> _Scope:
    """The locals of a function body (not of nested functions), and the import-only ones."""
    names = set(params)
    imported: dict[str, list[str]] = {}
    modules: set[str] = set()
    other: set[str] = set(params)
    chains: list[tuple[ast.AST, ast.AST]] = []  # (target, value) of assignments and loops
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
            other.add(node.name)
            stack.extend(node.decorator_list)
            if not isinstance(node, ast.ClassDef):
                stack.extend(node.args.defaults + [d for d in node.args.kw_defaults if d is not None])
            continue
        if isinstance(node, ast.Lambda):
            stack.extend(node.args.defaults)
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                if alias.name == "*":
                    continue
                if isinstance(node, ast.Import):
                    name = alias.asname or alias.name.split(".")[0]
                    path = alias.name if alias.asname else name
                    modules.add(name)
                else:
                    name = alias.asname or alias.name
                    path = f"{node.module}.{alias.name}" if node.module and not node.level else ""
                names.add(name)
                imported.setdefault(name, []).append(path)
            continue
        if isinstance(node, ast.Assign):
            chains += [(t, node.value) for t in node.targets]
        elif isinstance(node, ast.AnnAssign | ast.NamedExpr) and node.value is not None:
            chains.append((node.target, node.value))
        elif isinstance(node, ast.For | ast.AsyncFor | ast.comprehension):
            chains.append((node.target, node.iter))
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            chains.append((node.optional_vars, node.context_expr))
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            names.add(node.id)
            other.add(node.id)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
            other.add(node.name)
        elif isinstance(node, ast.Global):
            names.difference_update(node.names)
            continue
        stack.extend(ast.iter_child_nodes(node))
    paths = {n: p[0] for n, p in imported.items() if n not in other and len(set(p)) == 1 and p[0]}
    scope = _Scope(names, paths)
    scope.modules = {m for m in modules if m in paths}
    changed = True
    while changed:  # a local is another scope's object when a chain of one (or of such a local) binds it
        changed = False
        own = (names - set(paths)) - scope.aliases
        for target, value in chains:
            items = value.elts if isinstance(value, ast.Tuple | ast.List | ast.Set) else [value]
            if any(_foreign_chain(item, own) for item in items):
                bound = {
                    n.id for n in ast.walk(target) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
                }
                new = bound - scope.aliases
                if new:
                    scope.aliases |= new
                    changed = True
    return scope


def _params(args: ast.arguments) -> list[str]:
    every = args.posonlyargs + args.args + args.kwonlyargs
    every += [a for a in (args.vararg, args.kwarg) if a is not None]
    return [a.arg for a in every]


# What the learner reads in every reason: the rule, in short.
_OUTSIDE = "outside what an answer may use (NumPy, torch, Python's pure standard modules, your own code)"
_NAME_CALLS = frozenset({"getattr", "hasattr"})


class _Auditor:
    """Reads code under one exercise's :class:`~attnlib.checks.allowed.Policy`."""

    def __init__(self, policy):
        self.policy = policy
        self.forbid = _Forbid(policy.forbidden)
        # an admitted attnlib object is admitted under every public path of it
        self.allowed = {self.forbid._canonical(p) for p in policy.paths}
        self.forbidden: set[str] = set()
        self.review: dict[str, None] = {}
        self._done: set[int] = set()
        self._active: set[tuple[int, str]] = set()
        self.values: dict[str, None] = {}  # global names bound to a mutable value the answer reaches
        self.trusted: set[str] = set()  # "cell N" of the handed-out cells: their own code
        self._quiet = 0

    # ------------------------------------------------------------------ verdicts

    def flag(self, why: str) -> None:
        if not self._quiet:
            self.review.setdefault(why)

    def result(self) -> Audit:
        return Audit(tuple(sorted(self.forbidden)), tuple(self.review))

    def check_path(self, path: str, where: str, value: bool = False) -> None:
        from attnlib.checks.allowed import admitted_path, refused_path

        hit = self.forbid.path(path)
        if hit:
            self.forbidden.add(hit)
            return
        if path in self.policy.paths or self.forbid._canonical(path) in self.allowed:
            return
        why = refused_path(path)
        if why:
            self.flag(f"{where}: uses {path} ({why})")
            return
        family = self.forbid.neighbour(path)
        if family:
            self.flag(f"{where}: uses {path}, which computes the forbidden {family} family in another form")
        elif not admitted_path(path):
            self.flag(f"{where}: uses {path}, which is {_OUTSIDE}")
        elif value:
            self.flag(f"{where}: uses the module {path} as a value (only its attributes may be used)")

    def check_attribute(self, name: str, where: str) -> None:
        from attnlib.checks.allowed import refused_attribute

        hit = self.forbid.attribute(name)
        if hit:
            self.forbidden.add(hit)
            return
        why = refused_attribute(name)
        if why:
            self.flag(f"{where}: uses the attribute .{name} ({why})")

    def check_builtin(self, name: str, where: str) -> None:
        from attnlib.checks.allowed import ADMITTED_BUILTINS, REFUSED_BUILTINS

        if name in ADMITTED_BUILTINS:
            return
        if name in REFUSED_BUILTINS:
            self.flag(f"{where}: uses {name} ({REFUSED_BUILTINS[name]})")
        elif name in _NAME_CALLS:
            self.flag(f"{where}: uses {name} other than called with a constant attribute name")
        elif _is_dunder(name):
            self.flag(f"{where}: uses {name} (reflection or mutation of modules or the interpreter)")
        else:
            self.flag(f"{where}: uses the name {name}, which no cell read defines and is not a built-in")

    # ------------------------------------------------------------------ names

    def _lookup_local(self, name: str, scopes: list[_Scope]):
        """``("local", scope)``, ``("path", path)``, ``("module", path)`` or None (a global)."""
        for depth, scope in enumerate(reversed(scopes)):
            if scope.is_class and depth > 0:
                continue  # a class body's names are not visible in its methods
            if name in scope.names:
                if name in scope.paths:
                    return ("module" if name in scope.modules else "path", scope.paths[name])
                return ("local", scope)
        return None

    def name(self, name: str, scopes, names, where: str, attrs: tuple[str, ...] = ()) -> None:
        """Judge a read of ``name`` followed by the attributes ``attrs`` (``np.linalg.norm``)."""
        local = self._lookup_local(name, scopes)
        if local is not None:
            kind, path = local
            if kind in ("path", "module"):
                self.check_path(".".join((path, *attrs)), where, value=kind == "module" and not attrs)
            else:
                for attr in attrs:
                    self.check_attribute(attr, where)
            return
        self.global_name(name, names, where, attrs)

    def global_name(self, name: str, names, where: str, attrs: tuple[str, ...] = ()) -> None:
        bindings = names.bindings(name) if names is not None else None
        if not bindings:
            self.check_builtin(name, where)
            for attr in attrs:
                self.check_attribute(attr, where)
            return
        key = (id(names), name)
        if key in self._active:
            return  # an alias that refers to itself: judged where it started
        self._active.add(key)
        try:
            for binding in bindings:
                quiet = binding.where in self.trusted
                self._quiet += quiet
                try:
                    self._binding(name, binding, attrs, where)
                finally:
                    self._quiet -= quiet
        finally:
            self._active.discard(key)

    def _binding(self, name: str, binding: _Binding, attrs: tuple[str, ...], where: str) -> None:
        if binding.kind in ("path", "module"):
            value = binding.kind == "module" and not attrs
            self.check_path(".".join((binding.path, *attrs)), where, value=value)
            return
        if binding.kind == "unreadable":
            self.flag(
                f"{where}: uses {name}, bound in {binding.where} by {binding.why}: the check cannot read it"
            )
            return
        if binding.kind == "alias":
            paths = self._chain_paths(binding.node, binding.names)
            if paths is None:
                self.expr(binding.node, [], binding.names, binding.where)
                for attr in attrs:
                    self.check_attribute(attr, where)
            else:
                for path in paths:
                    self.check_path(".".join((path, *attrs)), where)
            return
        if binding.kind in ("scalar", "value"):
            if binding.kind == "value":  # a handed-out value too: a learner's cell may change it
                self.values.setdefault(name)
            self.expr(binding.node, [], binding.names, binding.where)
        elif binding.kind == "values":
            for inner in binding.node:
                self._binding(name, inner, (), where)
        elif binding.kind == "def":
            self.function(binding.node, [], binding.names, binding.where)
        elif binding.kind == "class":
            self.class_def(binding.node, [], binding.names, binding.where)
        for attr in attrs:
            self.check_attribute(attr, where)

    def _chain_paths(self, node: ast.AST, names) -> list[str] | None:
        """The dotted paths a global chain ``a.b.c`` names (each binding of ``a``), or None when
        ``a`` is bound to anything but an import or an alias."""
        attrs: list[str] = []
        while isinstance(node, ast.Attribute):
            attrs.insert(0, node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        bindings = names.bindings(node.id) if names is not None else None
        if not bindings:
            return None
        out = []
        key = (id(names), node.id)
        if key in self._active:
            return None
        self._active.add(key)
        try:
            for b in bindings:
                if b.kind in ("path", "module"):
                    out.append(".".join((b.path, *attrs)))
                elif b.kind == "alias":
                    inner = self._chain_paths(b.node, b.names)
                    if inner is None:
                        return None
                    out += [".".join((p, *attrs)) for p in inner]
                else:
                    return None
        finally:
            self._active.discard(key)
        return out

    def _owned_global(self, name: str, names) -> bool:
        """Whether every binding of the global ``name`` is the learner's own value, function or
        class (so that setting its attributes or items changes nothing a library holds)."""
        bindings = names.bindings(name) if names is not None else None
        return bool(bindings) and all(b.kind in _LEARNER_KINDS for b in bindings)

    # ------------------------------------------------------------------ code

    def function(self, node: ast.AST, scopes: list[_Scope], names, where: str) -> None:
        """A ``def`` (or ``lambda``): its decorators, defaults and annotations where it is
        defined, its body in its own scope."""
        if id(node) in self._done:
            return
        self._done.add(id(node))
        args = node.args
        for default in args.defaults + [d for d in args.kw_defaults if d is not None]:
            self.expr(default, scopes, names, where)
        if isinstance(node, ast.Lambda):
            scope = _local_names([node.body], _params(args))
            self.expr(node.body, [*scopes, scope], names, where)
            return
        for decorator in node.decorator_list:
            self.expr(decorator, scopes, names, where)
        for arg in args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg]:
            if arg is not None and arg.annotation is not None:
                self.expr(arg.annotation, scopes, names, where)
        if node.returns is not None:
            self.expr(node.returns, scopes, names, where)
        scope = _local_names(node.body, _params(args))
        self.stmts(node.body, [*scopes, scope], names, where)

    def class_def(self, node: ast.ClassDef, scopes: list[_Scope], names, where: str) -> None:
        from attnlib.checks.allowed import REFUSED_DEFINITIONS

        if id(node) in self._done:
            return
        self._done.add(id(node))
        for decorator in node.decorator_list:
            self.expr(decorator, scopes, names, where)
        for base in node.bases:
            self.expr(base, scopes, names, where)
        for keyword in node.keywords:
            self.flag(
                f"{where}: class {node.name} is made with {keyword.arg}=... (a metaclass can change it)"
            )
        for stmt in node.body:
            bound = []
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                bound = [stmt.name]
            elif isinstance(stmt, ast.Assign | ast.AnnAssign):
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                bound = [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
            for name in bound:
                if name in REFUSED_DEFINITIONS:
                    self.flag(f"{where}: class {node.name} defines {name}, a hook into the interpreter")
        scope = _local_names(node.body)
        scope.is_class = True
        self.stmts(node.body, [*scopes, scope], names, where)

    def stmts(self, body: list[ast.stmt], scopes: list[_Scope], names, where: str) -> None:
        for stmt in body:
            self.stmt(stmt, scopes, names, where)

    def top(self, stmt: ast.stmt, names, where: str) -> None:
        """A top-level statement of a cell, judged whole (a def or class too)."""
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            self.function(stmt, [], names, where)
        elif isinstance(stmt, ast.ClassDef):
            self.class_def(stmt, [], names, where)
        elif isinstance(stmt, ast.Import | ast.ImportFrom):
            for alias in stmt.names:
                if isinstance(stmt, ast.ImportFrom) and (alias.name == "*" or stmt.level or not stmt.module):
                    continue
                path = alias.name if isinstance(stmt, ast.Import) else f"{stmt.module}.{alias.name}"
                self.check_path(path, where)
        else:
            self.stmt(stmt, [], names, where)

    def stmt(self, stmt: ast.stmt, scopes: list[_Scope], names, where: str) -> None:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            if scopes:
                self.function(stmt, scopes, names, where)
            # a top-level def of a cell is read when its name is used (or it is the answer)
            return
        if isinstance(stmt, ast.ClassDef):
            if scopes:
                self.class_def(stmt, scopes, names, where)
            return
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                if scopes:
                    self.check_path(alias.name, where)
                else:
                    hit = self.forbid.path(alias.name)
                    if hit:
                        self.forbidden.add(hit)
            return
        if isinstance(stmt, ast.ImportFrom):
            for alias in stmt.names:
                if alias.name == "*" or stmt.level or not stmt.module:
                    self.flag(f"{where}: '{_text(stmt)}' makes names the check cannot resolve")
                    continue
                path = f"{stmt.module}.{alias.name}"
                if scopes:
                    self.check_path(path, where)
                else:
                    hit = self.forbid.path(path)
                    if hit:
                        self.forbidden.add(hit)
            return
        if isinstance(stmt, ast.Global | ast.Nonlocal):
            word = "global" if isinstance(stmt, ast.Global) else "nonlocal"
            if isinstance(stmt, ast.Global):
                self.flag(f"{where}: '{word} {', '.join(stmt.names)}' rebinds the notebook's names")
            return
        if isinstance(stmt, ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Delete):
            targets = stmt.targets if isinstance(stmt, ast.Assign | ast.Delete) else [stmt.target]
            for target in targets:
                self.target(target, scopes, names, where)
            if isinstance(stmt, ast.AnnAssign) and scopes:
                self.expr(stmt.annotation, scopes, names, where)
            value = getattr(stmt, "value", None)
            if value is not None:
                self.expr(value, scopes, names, where)
            return
        if isinstance(stmt, ast.For | ast.AsyncFor):
            self.target(stmt.target, scopes, names, where)
            self.expr(stmt.iter, scopes, names, where)
            self.stmts(stmt.body + stmt.orelse, scopes, names, where)
            return
        if isinstance(stmt, ast.With | ast.AsyncWith):
            for item in stmt.items:
                self.expr(item.context_expr, scopes, names, where)
                if item.optional_vars is not None:
                    self.target(item.optional_vars, scopes, names, where)
            self.stmts(stmt.body, scopes, names, where)
            return
        for child in ast.iter_child_nodes(stmt):
            if isinstance(child, ast.stmt):
                self.stmt(child, scopes, names, where)
            elif isinstance(child, ast.expr):
                self.expr(child, scopes, names, where)
            elif isinstance(child, ast.ExceptHandler):
                if child.type is not None:
                    self.expr(child.type, scopes, names, where)
                self.stmts(child.body, scopes, names, where)
            elif isinstance(child, ast.match_case):
                if child.guard is not None:
                    self.expr(child.guard, scopes, names, where)
                for node in ast.walk(child.pattern):
                    if isinstance(node, ast.expr):
                        self.expr(node, scopes, names, where)
                self.stmts(child.body, scopes, names, where)

    def target(self, target: ast.AST, scopes: list[_Scope], names, where: str) -> None:
        """An assignment's target: a name, or an attribute or item of the answer's own values
        (a local that is not an alias of another scope's object, or a global the learner binds
        to a value, function or class); never of a module, a library object or a computed one."""
        if isinstance(target, ast.Name):
            if _is_dunder(target.id) and target.id not in ("__name__",):
                self.flag(
                    f"{where}: binds {target.id} (reflection or mutation of modules or the interpreter)"
                )
            return
        if isinstance(target, ast.Tuple | ast.List):
            for elt in target.elts:
                self.target(elt, scopes, names, where)
            return
        if isinstance(target, ast.Starred):
            self.target(target.value, scopes, names, where)
            return
        root = target
        while isinstance(root, ast.Attribute | ast.Subscript):
            if isinstance(root, ast.Subscript):
                self.expr(root.slice, scopes, names, where)
            else:
                self.check_attribute(root.attr, where)
            root = root.value
        if not isinstance(root, ast.Name):
            self.expr(root, scopes, names, where)
            self.flag(f"{where}: sets {_text(target)}, an attribute or item of a computed object")
            return
        local = self._lookup_local(root.id, scopes)
        if local is not None:
            if local[0] == "local" and root.id not in local[1].aliases:
                return
            self.flag(f"{where}: sets {_text(target)}: {root.id} is a module or an alias of another object")
            return
        self.global_name(root.id, names, where)
        if not self._owned_global(root.id, names):
            self.flag(f"{where}: sets {_text(target)}, which is not the answer's own value")

    def _name_call(self, node: ast.Call, scopes, names, where: str) -> bool:
        """``getattr(obj, "name")`` / ``hasattr``: judged as ``obj.name``; True when handled."""
        func = node.func
        if not (isinstance(func, ast.Name) and func.id in _NAME_CALLS):
            return False
        if self._lookup_local(func.id, scopes) is not None or (names is not None and names.bindings(func.id)):
            return False  # the learner's own function of that name
        name = _fold(node.args[1]) if len(node.args) >= 2 else None
        if name is None or node.keywords:
            self.flag(f"{where}: {func.id}() with a computed name ({_text(node)})")
            for child in [*node.args, *[k.value for k in node.keywords]]:
                self.expr(child, scopes, names, where)
            return True
        obj = node.args[0]
        if _is_chain(obj):
            attrs: list[str] = [name]
            base = obj
            while isinstance(base, ast.Attribute):
                attrs.insert(0, base.attr)
                base = base.value
            self.name(base.id, scopes, names, where, tuple(attrs))
        else:
            self.expr(obj, scopes, names, where)
            self.check_attribute(name, where)
        for child in node.args[2:]:
            self.expr(child, scopes, names, where)
        return True

    def expr(self, node: ast.AST, scopes: list[_Scope], names, where: str) -> None:
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load):
                self.name(node.id, scopes, names, where)
            return
        if isinstance(node, ast.Attribute):
            attrs: list[str] = []
            base = node
            while isinstance(base, ast.Attribute):
                attrs.insert(0, base.attr)
                base = base.value
            if isinstance(base, ast.Name):
                self.name(base.id, scopes, names, where, tuple(attrs))
            else:
                self.expr(base, scopes, names, where)
                for attr in attrs:
                    self.check_attribute(attr, where)
            return
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in self.forbid.calls:
                local = self._lookup_local(func.id, scopes)
                if local is not None and local[0] == "local":
                    self.forbidden.add(func.id + "()")
            if self._name_call(node, scopes, names, where):
                return
        if isinstance(node, ast.Lambda):
            self.function(node, scopes, names, where)
            return
        if isinstance(node, ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp):
            bound = {n.id for g in node.generators for n in ast.walk(g.target) if isinstance(n, ast.Name)}
            scope = _Scope(bound, {})
            inner = [*scopes, scope]
            for generator in node.generators:
                self.expr(generator.iter, inner, names, where)
                for cond in generator.ifs:
                    self.expr(cond, inner, names, where)
            for child in ("elt", "key", "value"):
                if hasattr(node, child):
                    self.expr(getattr(node, child), inner, names, where)
            return
        if isinstance(node, ast.NamedExpr):
            self.expr(node.value, scopes, names, where)
            return
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.expr(child, scopes, names, where)
            elif isinstance(child, ast.keyword | ast.comprehension | ast.arguments):
                for grand in ast.iter_child_nodes(child):
                    if isinstance(grand, ast.expr):
                        self.expr(grand, scopes, names, where)


# ---------------------------------------------------------------------------- other cells
#
# A cell the answer does not reach is not judged by the rule (a playground may print, time,
# pickle a result). It is read only for what could change, in place, what an answer's names
# do: setattr and the dunder setters, dynamic code, the namespace, the interpreter's objects
# and hooks, a deserialiser (it runs code), a patch of torch's dispatcher; and an attribute or
# item store on a module, a library object or a learner's function or class.

_MUTATORS = (
    "sys",
    "ctypes",
    "cffi",
    "gc",
    "importlib",
    "builtins",
    "__builtins__",
    "unittest.mock",
    "mock",
    "torch.library",
    "torch.overrides",
    "torch._C",
    "torch.ops",
    "torch.utils._python_dispatch",
    "torch._dynamo",
    "torch.jit",
    "torch.compile",
    "inspect",
    "types.FunctionType",
    "types.CodeType",
    "types.ModuleType",
    "copyreg",
    "marshal.loads",
    "marshal.load",
    "pickle.loads",
    "pickle.load",
    "pickle.Unpickler",
    "_pickle",
    "dill",
    "cloudpickle",
    "joblib.load",
    "shelve",
    "functools.update_wrapper",
    "functools.wraps",
    "numpy.load",
    "torch.load",
    "get_ipython",
    "exec",
    "eval",
    "compile",
    "__import__",
)
_REBINDING_NAMES = frozenset({"setattr", "delattr", "settrace", "setprofile"})
_READ_ONLY_NAMESPACE = frozenset(
    {"sorted", "list", "len", "print", "set", "tuple", "repr", "str", "dict", "iter"}
)


def _rebinders(tree: ast.AST, where: str) -> list[str]:
    """What a cell uses that can change, in place, what an answer's names do (see above)."""
    aliases = dict(DEFAULT_ALIASES)
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                aliases[alias.asname or alias.name.split(".")[0]] = (
                    alias.name if alias.asname else alias.name.split(".")[0]
                )
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    parents: dict[int, ast.AST] = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute | ast.Name) and not isinstance(
            parents.get(id(node)), ast.Attribute
        ):
            parts: list[str] = []
            base = node
            while isinstance(base, ast.Attribute):
                parts.insert(0, base.attr)
                base = base.value
            if isinstance(base, ast.Name):
                parts.insert(0, aliases.get(base.id, base.id))
            path = ".".join(parts)
            for mutator in _MUTATORS:
                if path == mutator or path.startswith(mutator + "."):
                    found.append(mutator)
            if any(
                p in _REBINDING_NAMES or (_is_dunder(p) and p not in ("__init__", "__name__", "__doc__"))
                for p in parts
            ):
                found.append(next(p for p in parts if p in _REBINDING_NAMES or _is_dunder(p)))
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("globals", "vars", "locals")
        ):
            parent = parents.get(id(node))
            reader = (
                isinstance(parent, ast.Call)
                and isinstance(parent.func, ast.Name)
                and parent.func.id in _READ_ONLY_NAMESPACE
            )
            method = isinstance(parent, ast.Attribute) and parent.attr in ("keys", "items", "values", "get")
            if not (reader or method) or node.args:
                found.append(f"{node.func.id}()")
        if isinstance(node, ast.Attribute) and node.attr in ("settrace", "setprofile", "_ns", "user_ns"):
            found.append(node.attr)
        if isinstance(node, ast.Name) and node.id.endswith(("FunctionMode", "DispatchMode")):
            found.append(node.id)
        if isinstance(node, ast.Attribute) and node.attr.endswith(("FunctionMode", "DispatchMode")):
            found.append(node.attr)
    return (
        [f"{where}: uses {', '.join(dict.fromkeys(found))}, which can change what an answer uses"]
        if found
        else []
    )


def _reachable(binding: _Binding) -> bool:
    """Whether an answer may reach what ``binding`` names, so that changing it in place changes
    the answer: the learner's functions and classes, aliases, and the modules of the numerical
    libraries and of Python (``plt.rcParams[...] = ...`` is not: matplotlib is not admitted)."""
    if binding.kind in ("def", "class", "alias"):
        return True
    if binding.kind in ("path", "module"):
        from attnlib.checks.allowed import PURE_MODULES

        root = binding.path.split(".")[0]
        return root in LIBRARY_ROOTS | {"math", "builtins"} | {m.split(".")[0] for m in PURE_MODULES}
    return False


def _mutations(tree: ast.AST, names: _NotebookNames, where: str) -> list[str]:
    """What a cell changes outside its own values: an attribute or item of an imported module,
    of a function or class, or of a name it never binds (``__builtins__``); in a function's body,
    the same of a name that is not the function's own."""
    found: list[str] = []

    def visit(node: ast.AST, scopes: list[_Scope]) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            body = node.body if isinstance(node.body, list) else [node.body]
            scope = _local_names(body, _params(node.args))
            for child in body:
                visit(child, [*scopes, scope])
            return
        if isinstance(node, ast.Attribute | ast.Subscript) and isinstance(node.ctx, ast.Store | ast.Del):
            root = node
            while isinstance(root, ast.Attribute | ast.Subscript):
                root = root.value
            if isinstance(root, ast.Name):
                local = [s for s in scopes if root.id in s.names]
                if local and not any(root.id in s.paths or root.id in s.aliases for s in local):
                    pass
                else:
                    bindings = names.bindings(root.id) or []
                    if local or not bindings or any(_reachable(b) for b in bindings):
                        found.append(f"{where}: sets {_text(node)} (an attribute or item of {root.id})")
            elif isinstance(node, ast.Attribute):
                found.append(f"{where}: sets {_text(node)} (an attribute of a computed object)")
        for child in ast.iter_child_nodes(node):
            visit(child, scopes)

    visit(tree, [])
    return found


def notebook_names(cells) -> _NotebookNames:
    """The bindings of a notebook's global names (``[(index, source)]``), read once for every
    exercise of the notebook (:func:`audit_notebook`'s ``names``). Raises RecursionError or
    MemoryError on a cell too deep to read."""
    return _NotebookNames([(int(i), str(src)) for i, src in cells])


def audit_notebook(
    cells, answers: Iterable[int], policy, handed_out: Iterable[int] = (), names: _NotebookNames | None = None
) -> Audit:
    """The capability rule on a notebook's cells, as the grader reads them (no import of the
    learner's code). ``cells``: ``[(notebook index, source)]`` in the order they run (the cells
    the grader runs for this exercise); ``answers``: the indices of the exercise's answer cells;
    ``policy``: its :func:`attnlib.checks.allowed.policy`; ``handed_out``: cells that are the
    handed-out notebook's own code, unchanged (trusted: only forbidden entries are looked for
    in what the answer takes from them).

    Judged by the rule: every statement of the answer cells; every binding of the exercise's
    function in any cell (a ``def`` is read; any other binding is judged as the expression it
    is); every learner function, class, constant and value they use, wherever it is bound; and
    every top-level statement, in a cell that is not handed out, that names a mutable value the
    answer reaches (``OPS.append(...)``). Every other cell is read for what could change an
    answer's names in place (``np.exp = ...``, ``setattr``, ``sys.settrace``...). A star import,
    a form the reading cannot follow, or a cell too deep to read goes to review.
    """
    auditor = _Auditor(policy)
    try:
        names = names if names is not None else notebook_names(cells)
    except (RecursionError, MemoryError) as exc:
        return Audit(
            (), (f"the notebook could not be read by the forbidden-call check ({type(exc).__name__})",)
        )
    skip = frozenset(int(i) for i in handed_out)
    auditor.trusted = {f"cell {i}" for i in skip}
    answers = [int(i) for i in answers]
    try:
        for binding in names.bindings(policy.function) or []:
            if binding.where in auditor.trusted:
                continue  # the handed-out stub
            if binding.kind == "def":
                auditor.function(binding.node, [], names, binding.where)
            elif binding.kind in ("value", "alias", "scalar", "class", "path", "module"):
                auditor._binding(policy.function, binding, (), binding.where)
            else:
                why = binding.why or f"an {binding.kind}" if binding.kind != "const" else "a constant"
                auditor.flag(
                    f"{binding.where}: {policy.function} is bound by {why}, not by a def the check can read"
                )
        for index in answers:
            tree = names.trees.get(index)
            if tree is not None:
                auditor.stmts(tree.body, [], names, f"cell {index}")
        seen_values: set[str] = set()
        judged: set[int] = set()
        while len(seen_values) < len(auditor.values):
            for value in [v for v in auditor.values if v not in seen_values]:
                seen_values.add(value)
                for index, stmt in names.mentions.get(value, []):
                    if index in skip or index in answers or id(stmt) in judged:
                        continue
                    judged.add(id(stmt))
                    auditor.top(stmt, names, f"cell {index}")
        for star in names.stars:
            auditor.flag(f"{star}: a star import makes names the check cannot resolve")
        if names.mutations.get(skip) is None:
            names.mutations[skip] = [
                why
                for index, tree in names.trees.items()
                if index not in skip
                for why in _mutations(tree, names, f"cell {index}") + _rebinders(tree, f"cell {index}")
            ]
        for why in names.mutations[skip]:
            auditor.flag(why)
    except (RecursionError, MemoryError) as exc:
        auditor.flag(f"the answer could not be read by the forbidden-call check ({type(exc).__name__})")
    except Exception as exc:  # noqa: BLE001 - a construct the reading does not know: review, never marks
        auditor.flag(f"the forbidden-call check could not read the answer ({type(exc).__name__})")
    return auditor.result()


# ---------------------------------------------------------------------------- check()'s side


class _RuntimeNames:
    """The bindings of a function's global (and closure) names, from their values (the learner's
    side: ``check()`` has the function, not the notebook)."""

    def __init__(self, func: types.FunctionType, policy, index: dict[int, str]):
        self.globals = getattr(func, "__globals__", {})
        self.closure: dict[str, Any] = {}
        code = func.__code__
        for name, cell in zip(code.co_freevars, func.__closure__ or (), strict=False):
            try:
                self.closure[name] = cell.cell_contents
            except ValueError:
                self.closure[name] = None
        self.policy = policy
        self.index = index
        self.where = getattr(func, "__qualname__", "the function")

    def bindings(self, name: str) -> list[_Binding] | None:
        if name in self.closure:
            value = self.closure[name]
        elif name in self.globals:
            value = self.globals[name]
        else:
            return None
        return [_value_binding(value, self.where, self.policy, self.index, globs=self.globals)]


def _module_names(module: str, policy, index) -> _RuntimeNames:
    names = _RuntimeNames.__new__(_RuntimeNames)
    names.globals = vars(sys.modules.get(module, types.ModuleType("?")))
    names.closure, names.policy, names.index, names.where = {}, policy, index, module
    return names


_LIBRARY_MODULES = LIBRARY_ROOTS | {"math", "builtins", "functools", "operator", "collections", "itertools"}


def _library_object(value: Any) -> bool:
    module = getattr(value, "__module__", "") or ""
    if not isinstance(module, str):
        return False
    if module.split(".")[0] in _LIBRARY_MODULES:
        return True
    filename = getattr(getattr(value, "__code__", None), "co_filename", "") or ""
    return "site-packages" in filename or "dist-packages" in filename


def _is_cell_code(func: types.FunctionType) -> bool:
    name = func.__code__.co_filename
    return not name.startswith(("<string>", sys.prefix, sys.base_prefix)) and "site-packages" not in name


def _value_binding(
    value: Any, where: str, policy, index: dict[int, str], depth: int = 0, globs: dict | None = None
) -> _Binding:
    if isinstance(value, types.ModuleType):
        return _Binding("module", where, path=value.__name__)
    if id(value) in index:
        return _Binding("path", where, path=index[id(value)])
    if isinstance(value, (*_CONST_TYPES, numbers.Number)) or _is_data(value):
        return _Binding("const", where)
    if isinstance(value, tuple | list | set | frozenset | dict) and depth < 4:
        items = list(value.items()) if isinstance(value, dict) else list(value)
        if len(items) > 1000:
            return _Binding("unreadable", where, why=f"a {type(value).__name__} too large to read")
        flat = [x for item in items for x in (item if isinstance(value, dict) else (item,))]
        inner = [_value_binding(v, where, policy, index, depth + 1, globs) for v in flat]
        return _Binding("values", where, node=inner)
    if type(value).__name__ == "_lru_cache_wrapper" and isinstance(
        getattr(value, "__wrapped__", None), types.FunctionType
    ):
        value = value.__wrapped__
    if isinstance(value, types.FunctionType | type):
        if _library_object(value):
            module = getattr(value, "__module__", "") or ""
            return _Binding("path", where, path=f"{module}.{getattr(value, '__qualname__', '?')}")
        node = _definition(value)
        if (
            node is None
            and isinstance(value, type)
            and issubclass(value, tuple)
            and hasattr(value, "_fields")
        ):
            return _Binding("const", where)  # a namedtuple's class: made by collections, no code of its own
        if node is None:
            return _Binding("unreadable", where, why=f"{getattr(value, '__name__', '?')} (no source to read)")
        if isinstance(value, type):
            names = _module_names(value.__module__, policy, index)
            methods = [getattr(m, "__func__", m) for m in vars(value).values()]
            own = [m.__globals__ for m in methods if isinstance(m, types.FunctionType) and _is_cell_code(m)]
            if own or globs is not None:
                names.globals = own[0] if own else globs
            return _Binding("class", where, node=node, names=names)
        inner = _unwrap(value)
        if inner is None:
            return _Binding("unreadable", where, why=f"{getattr(value, '__name__', '?')} (a wrapper)")
        return _Binding("def", where, node=node, names=_RuntimeNames(inner, policy, index))
    if type(value).__name__ == "partial" and depth < 4:
        parts = [value.func, *value.args, *value.keywords.values()]
        return _Binding(
            "values", where, node=[_value_binding(v, where, policy, index, depth + 1, globs) for v in parts]
        )
    cls = type(value)
    if _library_object(cls):
        return _Binding("const", where)  # an instance of a library class: its attributes are judged
    fields = getattr(value, "__dict__", None)
    if isinstance(fields, dict) and depth < 4:
        inner = [_value_binding(cls, where, policy, index, depth + 1, globs)]
        inner += [_value_binding(v, where, policy, index, depth + 1, globs) for v in fields.values()]
        return _Binding("values", where, node=inner)
    return _Binding("unreadable", where, why=f"a {type(value).__name__} object")


def _is_data(value: Any) -> bool:
    """An array, a tensor, a dtype or a device: data, whatever it holds."""
    module = type(value).__module__ or ""
    return (
        module.split(".")[0] in ("numpy", "torch")
        and type(value).__name__
        in (
            "ndarray",
            "Tensor",
            "Parameter",
            "dtype",
            "device",
            "finfo",
            "iinfo",
            "Size",
            "Generator",
        )
        or isinstance(value, numbers.Number)
    )


def _unwrap(func: types.FunctionType) -> types.FunctionType | None:
    """The function a decorator wrapped (``__wrapped__``, as functools.wraps sets it), or ``func``.
    The decorator itself is judged from the source (:meth:`_Auditor.function`)."""
    if not hasattr(func, "__wrapped__"):
        return func
    # only torch's context decorators (@torch.no_grad()): any other __wrapped__ may point anywhere
    if not func.__code__.co_filename.replace("\\", "/").endswith("torch/utils/_contextlib.py"):
        return None
    try:
        inner = inspect.unwrap(func)
    except ValueError:
        return None
    return inner if isinstance(inner, types.FunctionType) else None


def _class_source(cls: type) -> ast.AST | None:
    """A learner's class from the cells Python keeps (a class defined in a notebook has no file):
    the last ``class Name`` among the files of its methods, or else among every cell cached."""
    import linecache

    files = []
    for member in vars(cls).values():
        code = getattr(getattr(member, "__func__", member), "__code__", None)
        name = code.co_filename if code is not None else "<string>"
        library = name.startswith((sys.prefix, sys.base_prefix)) or "site-packages" in name
        if not name.startswith("<string>") and not library:
            files.append(name)
    files = list(dict.fromkeys(files)) or [
        f for f in list(linecache.cache) if f.startswith("<") or "ipykernel" in f
    ]
    found = None
    for filename in files:
        lines = linecache.getlines(filename)
        tree = _parse("".join(lines)) if lines else None
        if tree is None:
            continue
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name == cls.__name__:
                found = node
    return found


def _definition(obj: Any) -> ast.AST | None:
    """The syntax tree of a learner's function (its ``def`` or ``lambda``) or class, from its source."""
    try:
        source = textwrap.dedent(inspect.getsource(obj))
    except (OSError, TypeError):
        return _class_source(obj) if isinstance(obj, type) else None
    try:
        tree = ast.parse(source)
    except SyntaxError:
        tree = _parse(_lambda_source(source))
        if tree is None:
            return None
    for node in ast.walk(tree):
        if isinstance(obj, type) and not isinstance(node, ast.ClassDef):
            continue
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            return node
        if isinstance(node, ast.Lambda):
            return node
    return None


_PUBLIC_INDEX: dict[int, str] = {}
_INDEXED = (
    "numpy numpy.linalg numpy.random numpy.fft torch torch.nn torch.nn.functional torch.nn.init "
    "torch.linalg torch.fft torch.special torch.optim torch.distributions math cmath itertools "
    "functools operator collections dataclasses typing heapq bisect statistics copy random".split()
)


def _public_index() -> dict[int, str]:
    """``{id(object): path}`` of the public names of the admitted modules imported here (check()'s
    side resolves a global's value to the path the grader would read, ``exp`` -> ``numpy.exp``)."""
    if not _PUBLIC_INDEX:
        for module_name in _INDEXED:
            module = sys.modules.get(module_name)
            if module is None:
                continue
            for name, member in list(vars(module).items()):
                if name.startswith("_") or isinstance(member, _CONST_TYPES):
                    continue
                _PUBLIC_INDEX.setdefault(id(member), f"{module_name}.{name}")
    return _PUBLIC_INDEX


def _object_index(policy) -> dict[int, str]:
    """``{id(object): path}`` of the forbidden and added paths imported here, then the public
    names of the admitted modules."""
    index: dict[int, str] = {}
    forbid = _Forbid(policy.forbidden)
    for path in forbid.paths + sorted(policy.paths):
        obj = _lookup(path)
        if obj is not None and not isinstance(obj, _CONST_TYPES):
            index.setdefault(id(obj), path)
    for key, path in _public_index().items():
        index.setdefault(key, path)
    return index


def audit_function(func: Callable, policy) -> Audit:
    """The capability rule on a function object (``check()``'s side): the function must be a plain
    function (or an ``lru_cache`` of one) whose source can be read; its global and closure
    names are judged by their values."""
    if type(func).__name__ == "_lru_cache_wrapper" and isinstance(
        getattr(func, "__wrapped__", None), types.FunctionType
    ):
        func = func.__wrapped__
    if not isinstance(func, types.FunctionType):
        return Audit((), (f"the answer is a {type(func).__name__}, not a function written with def",))
    func = _unwrap(func)
    if func is None:
        return Audit((), ("the answer wraps something that is not a function written with def",))
    node = _definition(func)
    if node is None:
        return Audit((), ("the answer's source cannot be read",))
    auditor = _Auditor(policy)
    names = _RuntimeNames(func, policy, _object_index(policy))
    try:
        auditor.function(node, [], names, getattr(func, "__qualname__", "the answer"))
    except (RecursionError, MemoryError) as exc:
        auditor.flag(f"the answer could not be read by the forbidden-call check ({type(exc).__name__})")
    except Exception as exc:  # noqa: BLE001 - as audit_notebook
        auditor.flag(f"the forbidden-call check could not read the answer ({type(exc).__name__})")
    return auditor.result()
