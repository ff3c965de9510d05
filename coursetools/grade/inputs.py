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

An input's class is pickled by reference, so it must be importable in the
sandbox: the classes chapter 10 hands out (a ``TransformerBlock`` whose
``forward`` is switched off) live in :mod:`attnlib.chapters.handouts`, not in
a check module. Anything of a check module (a function, a class, the module)
is refused with :class:`TypeError`: it could be part of the answer key.
"""

from __future__ import annotations

import base64
import importlib
import io
import pickle
import types
from typing import Any

CHECK_MODULES = "attnlib.checks"
_PROTOCOL = 5
_CODE = (type, types.FunctionType, types.BuiltinFunctionType)  # what a check module must not ship


def _is_check_module(name: object) -> bool:
    return isinstance(name, str) and (name == CHECK_MODULES or name.startswith(CHECK_MODULES + "."))


class _Pickler(pickle.Pickler):
    """A pickler that refuses everything of a check module: its functions, classes and the module."""

    def reducer_override(self, obj: Any):
        if isinstance(obj, types.ModuleType):
            if _is_check_module(obj.__name__):
                raise TypeError(f"a case's inputs refer to the check module {obj.__name__}")
            return importlib.import_module, (obj.__name__,)
        module = getattr(obj, "__module__", None)
        if isinstance(obj, _CODE) and _is_check_module(module):
            raise TypeError(
                f"a case's inputs refer to {module}.{obj.__qualname__}: the sandbox must not receive "
                "code of a check module (it may be the answer; an input's class belongs in "
                "attnlib.chapters, see attnlib.chapters.handouts)"
            )
        return NotImplemented


def dumps(value: Any) -> bytes:
    """``value`` pickled for the sandbox (anything of a check module refused)."""
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
