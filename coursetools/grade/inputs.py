"""The cases' inputs, made in the grader and shipped to the sandbox as data (issue 12).

The sandboxed process must call the learner's function on every case, hidden
ones included, but it must not hold the answer key: the check modules
(``attnlib/checks/chNN_*.py``) define the reference implementations and the
known wrong answers, and whatever a process imports, code in that process can
find (``gc.get_objects()``, ``sys.modules``, frames) and call. So the grader
calls each case's ``make_inputs()`` itself and ships the result, pickled, in
the run's plan; the sandbox never imports a check module (the grader also
hides ``attnlib/checks`` from its file system, see :mod:`.batch`).

Pickle travels one way only, from the grader to the sandbox, which trusts its
grader; what comes back is plain data (:mod:`.wire`), never unpickled.

An input may be an instance of a class that a check module defines (chapter
10 hands out a ``TransformerBlock`` whose ``forward`` is switched off). Such a
class cannot be pickled by reference (its module is not importable in the
sandbox), so :class:`_Pickler` ships it by value: its name, its bases and its
methods' code objects (``marshal``), with the globals those methods read
(builtins, modules by name, objects importable from outside the check
modules). A function of a check module that would have to travel with it is
refused with :class:`TypeError`: that would be part of the answer key.
"""

from __future__ import annotations

import base64
import builtins
import hashlib
import importlib
import io
import marshal
import pickle
import types
from typing import Any

CHECK_MODULES = "attnlib.checks"
_PROTOCOL = 5


def _is_check_module(name: object) -> bool:
    return isinstance(name, str) and (name == CHECK_MODULES or name.startswith(CHECK_MODULES + "."))


def _code_names(code: types.CodeType) -> set[str]:
    """Every global or attribute name the code object (and the code nested in it) reads."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _code_names(const)
    return names


class _Pickler(pickle.Pickler):
    """A pickler that ships the check modules' classes by value and refuses their functions."""

    def reducer_override(self, obj: Any):
        module = getattr(obj, "__module__", None)
        if isinstance(obj, type) and _is_check_module(module):
            return _rebuild_class, _class_spec(obj)
        if isinstance(obj, types.FunctionType | types.BuiltinFunctionType) and _is_check_module(module):
            raise TypeError(
                f"a case's inputs refer to {module}.{obj.__qualname__}: the sandbox must not receive "
                "code of a check module (it may be the answer)"
            )
        if isinstance(obj, types.ModuleType):
            if _is_check_module(obj.__name__):
                raise TypeError(f"a case's inputs refer to the check module {obj.__name__}")
            return importlib.import_module, (obj.__name__,)
        return NotImplemented


def _function_spec(func: types.FunctionType, owner: type) -> tuple:
    """What rebuilds ``func`` in the sandbox: its code, defaults and the globals it reads."""
    code = func.__code__
    if code.co_freevars not in ((), ("__class__",)):
        raise TypeError(f"{owner.__qualname__}.{func.__name__} is a closure: it cannot be shipped by value")
    needed = {}
    for name in sorted(_code_names(code)):
        if name in func.__globals__:
            needed[name] = func.__globals__[name]
    return (
        func.__name__,
        func.__qualname__,
        marshal.dumps(code),
        func.__defaults__,
        func.__kwdefaults__,
        func.__doc__,
        needed,
        bool(code.co_freevars),
    )


def _class_spec(cls: type) -> tuple:
    body: dict[str, tuple] = {}
    for name, value in vars(cls).items():
        if name in ("__dict__", "__weakref__", "__module__", "__qualname__"):
            continue
        if isinstance(value, types.FunctionType):
            body[name] = ("function", _function_spec(value, cls))
        elif isinstance(value, staticmethod | classmethod) and isinstance(value.__func__, types.FunctionType):
            kind = "staticmethod" if isinstance(value, staticmethod) else "classmethod"
            body[name] = (kind, _function_spec(value.__func__, cls))
        elif isinstance(value, property | types.MemberDescriptorType | types.GetSetDescriptorType):
            raise TypeError(f"{cls.__qualname__}.{name}: a descriptor cannot be shipped by value")
        else:
            body[name] = ("value", value)
    digest = hashlib.sha256(repr((cls.__module__, cls.__qualname__, sorted(body))).encode()).hexdigest()
    return (f"{cls.__module__}:{cls.__qualname__}:{digest[:16]}", cls.__name__, cls.__qualname__,
            cls.__module__, cls.__bases__, body)  # fmt: skip


_BUILT: dict[str, type] = {}


def _rebuild_function(spec: tuple, cell: types.CellType | None) -> types.FunctionType:
    name, qualname, code, defaults, kwdefaults, doc, needed, uses_class = spec
    scope = {"__builtins__": builtins, "__name__": "coursetools.grade.inputs.shipped"}
    scope.update(needed)
    closure = (cell,) if uses_class else None
    func = types.FunctionType(marshal.loads(code), scope, name, defaults, closure)
    func.__qualname__ = qualname
    func.__kwdefaults__ = kwdefaults
    func.__doc__ = doc
    return func


def _rebuild_class(key: str, name: str, qualname: str, module: str, bases: tuple, body: dict) -> type:
    """In the sandbox: the class a check module defines, rebuilt from :func:`_class_spec`."""
    if key in _BUILT:
        return _BUILT[key]
    cell = types.CellType()
    namespace: dict[str, Any] = {"__module__": module, "__qualname__": qualname}
    for attr, (kind, spec) in body.items():
        if kind == "value":
            namespace[attr] = spec
            continue
        func = _rebuild_function(spec, cell)
        namespace[attr] = {"staticmethod": staticmethod, "classmethod": classmethod}.get(kind, lambda f: f)(
            func
        )
    cls = type(name, bases, namespace)
    cell.cell_contents = cls
    _BUILT[key] = cls
    return cls


def dumps(value: Any) -> bytes:
    """``value`` pickled for the sandbox (check-module classes by value, their functions refused)."""
    buffer = io.BytesIO()
    _Pickler(buffer, protocol=_PROTOCOL).dump(value)
    return buffer.getvalue()


_CACHE: dict[str, tuple[object, dict]] = {}


def ship(exercises: dict) -> str:
    """The inputs of every case of ``exercises`` (``{id: Exercise}``), for the plan: base64 text.

    ``{exercise id: {"function": name, "cases": [[case name, pickled inputs], ...]}}``,
    pickled as a whole. Each exercise's part is made once per grader (a case's
    ``make_inputs`` is deterministic by contract: the judge calls it again).
    """
    parts = {}
    for ex_id, exercise in exercises.items():
        cached = _CACHE.get(ex_id)
        if cached is None or cached[0] is not exercise:
            cases = [[case.name, dumps(case.make_inputs())] for case in exercise.cases]
            cached = (exercise, {"function": exercise.function, "cases": cases})
            _CACHE[ex_id] = cached
        parts[ex_id] = cached[1]
    return base64.b64encode(pickle.dumps(parts, protocol=_PROTOCOL)).decode("ascii")


class ShippedCase:
    """A case in the sandbox: its name and inputs unpickled afresh for every call."""

    __slots__ = ("name", "_blob", "_loads")

    def __init__(self, name: str, blob: bytes):
        self.name = name
        self._blob = blob
        self._loads = pickle.loads  # bound before learner code runs

    def make_inputs(self) -> tuple:
        return self._loads(self._blob)


def unship(text: str) -> dict[str, tuple[str, tuple[ShippedCase, ...]]]:
    """In the sandbox: ``{exercise id: (function name, cases)}`` from :func:`ship`'s text."""
    parts = pickle.loads(base64.b64decode(text))
    return {
        ex_id: (str(part["function"]), tuple(ShippedCase(str(n), blob) for n, blob in part["cases"]))
        for ex_id, part in parts.items()
    }
