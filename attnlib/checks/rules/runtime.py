"""The allow-list audit on ``check()``'s side: a function object, not a notebook.

``check()`` has the learner's function, not the cells: the bindings of its global and closure
names are read from their values (a module, a library object, the learner's own function or
class, data), and each definition's syntax tree is judged by the same auditor as the grader's
(:mod:`attnlib.checks.rules.audit`), so both sides reach the same verdict on the same answer.
It imports the objects it meets (it runs in the learner's process, where attnlib is loaded).
"""

from __future__ import annotations

import ast
import inspect
import numbers
import sys
import textwrap
import types
from collections.abc import Callable
from typing import Any

from attnlib.checks.rules.audit import _CONST_TYPES, Audit, _Auditor, _Binding, _Forbid
from attnlib.checks.rules.families import LIBRARY_ROOTS
from attnlib.checks.rules.finder import _lambda_source, _lookup, _parse

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
