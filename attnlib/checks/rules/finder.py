"""The name finder: the blocklist reading of the forbidden-call rule (issue 24).

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

Why it still runs beside the allow-list audit (:mod:`attnlib.checks.rules.audit`): it is the
reading that *names* what scores 0. ``check()`` and the grader report its findings as the
answer's forbidden calls (``forbidden_calls``, ``forbidden_at``), and the stated-list test
reads the same entries back. The audit is the sound one: whatever it cannot read goes to
review, so an answer the finder misses is never marked by itself. The finder is cheap, exact
on the spellings above, and never sends an honest answer to review; the audit covers the rest.

Standard library only: the grader's notebook reader imports it without attnlib's core (torch).
"""

from __future__ import annotations

import ast
import inspect
import sys
import textwrap
import types
from collections.abc import Callable, Iterable

from attnlib.checks.rules.families import (
    _DYNAMIC,
    DEFAULT_ALIASES,
    DYNAMIC_LOOKUPS,
    LIBRARY_ROOTS,
    _family_words,
    _holds_word,
    _twins,
    family_covers,
)


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
