"""The allow-list audit: the capability reading of the forbidden-call rule (issues 34 and 43).

An answer may use NumPy, torch, Python's pure standard modules and the learner's own code
(:mod:`attnlib.checks.rules.allowed`). The audit refuses capabilities, not operations:
reflection and mutation of modules or of the runtime send the answer to review, and the
exercise's forbidden entries and families score 0 under any of their public paths
(:mod:`attnlib.checks.rules.public_paths`). This module reads the notebook's cells, as the
grader has them (:func:`audit_notebook`); :mod:`attnlib.checks.rules.runtime` reads a function
object, as ``check()`` has it (:func:`~attnlib.checks.rules.runtime.audit_function`).

Why the name finder (:mod:`attnlib.checks.rules.finder`) still runs beside it: the finder names
the forbidden calls the feedback shows; the audit is what makes the rule sound (what it cannot
read is never marked by itself). The two agree on every bank (tests/checks/rules).

Standard library only: the grader's notebook reader imports it without attnlib's core (torch).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from typing import Any, NamedTuple

from attnlib.checks.rules.families import (
    DEFAULT_ALIASES,
    LIBRARY_ROOTS,
    _family_words,
    _holds_word,
    _twins,
    family_covers,
)
from attnlib.checks.rules.finder import _fold, _parse

# ============================================================================ the capability rule
#
# Issue 43: the allow-list of issue 34 was sound but unfair (an honest np.subtract, a
# @dataclass, itertools.product went to review). The rule below refuses capabilities instead
# of naming operations (attnlib.checks.rules.allowed): reflection and mutation of modules or the
# runtime go to review, the exercise's forbidden entries and families score 0 under any of
# their public paths (attnlib.checks.rules.public_paths), and the rest of NumPy, torch, Python's
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
        from attnlib.checks.rules.allowed import NEIGHBOURS
        from attnlib.checks.rules.public_paths import PUBLIC_PATHS

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


def _unchain(node: ast.AST) -> tuple[ast.AST, list[str]]:
    """The base of an attribute chain ``base.a.b`` and its attributes, ``["a", "b"]`` (none for a
    node that is not an attribute)."""
    attrs: list[str] = []
    while isinstance(node, ast.Attribute):
        attrs.insert(0, node.attr)
        node = node.value
    return node, attrs


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
    """Reads code under one exercise's :class:`~attnlib.checks.rules.allowed.Policy`."""

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
        from attnlib.checks.rules.allowed import admitted_path, refused_path

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
        from attnlib.checks.rules.allowed import refused_attribute

        hit = self.forbid.attribute(name)
        if hit:
            self.forbidden.add(hit)
            return
        why = refused_attribute(name)
        if why:
            self.flag(f"{where}: uses the attribute .{name} ({why})")

    def check_builtin(self, name: str, where: str) -> None:
        from attnlib.checks.rules.allowed import ADMITTED_BUILTINS, REFUSED_BUILTINS

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
        node, attrs = _unchain(node)
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
        from attnlib.checks.rules.allowed import REFUSED_DEFINITIONS

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
            base, attrs = _unchain(obj)
            self.name(base.id, scopes, names, where, (*attrs, name))
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
            base, attrs = _unchain(node)
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
            base, parts = _unchain(node)
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
        from attnlib.checks.rules.allowed import PURE_MODULES

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
    ``policy``: its :func:`attnlib.checks.rules.allowed.policy`; ``handed_out``: cells that are the
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
