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

A case reaches the answer as ``check()`` built it (issue 43.4). Plain pickling loses
state the answer depends on: a tensor's ``.grad`` (the stale gradients of a training
step's case), a NumPy array's strides and its read-only flag, and which inputs share
memory (a view and its base become two copies). So tensors and arrays travel through
reducers of this module that keep all of that (:func:`_rebuild_tensor`,
:func:`_rebuild_array`: one buffer per storage, shared by every view of it), and
:func:`dumps` loads every case back at once and compares it with the original
(:func:`fingerprint`: values, dtypes, shapes, strides, offsets, gradients,
``requires_grad``, leaf or not, memory shared between inputs, every module's
``training`` flag, parameters, buffers and hooks, an optimiser's state and which
parameters it updates): a case that would arrive otherwise is refused with
:class:`TypeError` (``tests/grader/records/test_case_fidelity.py`` checks every registered case).
"""

from __future__ import annotations

import base64
import hashlib
import importlib
import io
import pickle
import sys
import types
import weakref
from typing import Any

CHECK_MODULES = "attnlib.checks"
_PROTOCOL = 5
_CODE = (type, types.FunctionType, types.BuiltinFunctionType)  # what a check module must not ship


def _is_check_module(name: object) -> bool:
    return isinstance(name, str) and (name == CHECK_MODULES or name.startswith(CHECK_MODULES + "."))


class _Pickler(pickle.Pickler):
    """A pickler that refuses everything of a check module (its functions, classes and the
    module) and ships tensors and arrays whole: gradients, strides, flags and shared memory."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._buffers: dict[tuple, _Buffer] = {}  # one per storage or array base: views share it

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
        torch = sys.modules.get("torch")
        if torch is not None and type(obj) in (torch.Tensor, torch.nn.Parameter):
            return self._tensor(torch, obj)
        np = sys.modules.get("numpy")
        if np is not None and type(obj) is np.ndarray:
            return self._array(np, obj)
        return NotImplemented

    def _buffer(self, key: tuple, raw) -> _Buffer:
        found = self._buffers.get(key)
        if found is None:
            found = self._buffers[key] = _Buffer(raw(), key[0])
        return found

    def _tensor(self, torch, t):
        plain = (
            t.layout == torch.strided
            and t.device.type == "cpu"
            and not t.is_quantized
            and not t.is_conj()
            and not t.is_neg()
            and t.is_leaf
            and not t._backward_hooks
            and not t.__dict__
        )
        if not plain:
            return NotImplemented  # torch's own way; dumps refuses what does not come back the same
        storage = t.untyped_storage()
        key = ("storage" if storage.resizable() else "fixed storage", storage.data_ptr(), storage.nbytes())
        return _rebuild_tensor, (
            self._buffer(key, lambda: _storage_bytes(torch, storage)),
            str(t.dtype).removeprefix("torch."),
            t.storage_offset(),
            tuple(t.shape),
            t.stride(),
            t.requires_grad,
            t.grad,
            type(t) is torch.nn.Parameter,
        )

    def _array(self, np, arr):
        if arr.dtype.hasobject:
            return NotImplemented
        owner = arr
        while isinstance(owner.base, np.ndarray):
            owner = owner.base
        if not (owner.flags.c_contiguous or owner.flags.f_contiguous):
            return NotImplemented
        start = owner.__array_interface__["data"][0]
        key = ("array", start, owner.nbytes)
        return _rebuild_array, (
            self._buffer(key, lambda: owner.tobytes(order="A")),
            arr.dtype,
            arr.shape,
            arr.strides,
            arr.__array_interface__["data"][0] - start,
            bool(arr.flags.writeable),
        )


def _storage_bytes(torch, storage) -> bytes:
    """The bytes of a CPU storage (``bytes(storage)`` reads them one by one in Python), read from
    a copy: a NumPy view of the storage itself would make it fixed-size for good."""
    return torch.empty(0, dtype=torch.uint8).set_(storage).clone().numpy().tobytes()


class _Buffer:
    """The bytes of one storage (or array base), pickled once however many views use it."""

    __slots__ = ("raw", "kind")

    def __init__(self, raw: bytes, kind: str):
        self.raw = raw
        self.kind = kind  # "array", "storage" (resizable, torch's own) or "fixed storage"

    def __reduce__(self):
        if self.kind == "array":
            return _rebuild_buffer, (self.raw,)
        return _rebuild_storage, (self.raw, self.kind == "storage")


def _rebuild_buffer(raw: bytes):
    """Fresh, aligned, writable memory holding ``raw`` (a NumPy array of bytes) that every array
    rebuilt from it views."""
    import numpy as np

    return np.frombuffer(raw, dtype=np.uint8).copy()


def _rebuild_storage(raw: bytes, resizable: bool):
    """A fresh storage holding ``raw``, as a byte tensor: every tensor rebuilt from it uses its
    storage. Resizable (torch's own memory) where the case's was, else fixed (a parameter's)."""
    import numpy as np
    import torch

    if resizable:
        return (
            torch.frombuffer(bytearray(raw), dtype=torch.uint8).clone()
            if raw
            else torch.empty(0, dtype=torch.uint8)
        )
    return torch.from_numpy(np.frombuffer(raw, dtype=np.uint8).copy())


def _rebuild_tensor(buffer, dtype, offset, shape, stride, requires_grad, grad, parameter):
    """A tensor as it was shipped: its storage (the memory of the other views of it), offset,
    shape, strides, ``requires_grad``, ``.grad``, and whether it is a ``Parameter``."""
    import torch

    storage = buffer.untyped_storage()
    t = torch.empty(0, dtype=getattr(torch, dtype)).set_(storage, offset, shape, stride)
    if parameter:
        t = torch.nn.Parameter(t, requires_grad=requires_grad)
    elif requires_grad:
        t.requires_grad_(True)
    if grad is not None:
        t.grad = grad
    return t


def _rebuild_array(buffer, dtype, shape, strides, offset, writeable):
    """An array as it was shipped: a view of its base's bytes (shared with the other views of it)."""
    import numpy as np

    arr = np.ndarray(shape, dtype, buffer=buffer, offset=offset, strides=strides)
    if not writeable:
        arr.flags.writeable = False
    return arr


def dumps(value: Any) -> bytes:
    """``value`` pickled for the sandbox (anything of a check module refused, and anything that
    would not arrive as it is: :func:`fingerprint` of the loaded copy must be the original's)."""
    buffer = io.BytesIO()
    _Pickler(buffer, protocol=_PROTOCOL).dump(value)
    blob = buffer.getvalue()
    before, after = fingerprint(value), fingerprint(pickle.loads(blob))
    if before != after:
        where = next((f"{a[0]}" for a, b in zip(before, after, strict=False) if a != b), "its length")
        raise TypeError(
            f"a case's inputs would not reach the sandbox as they were built (first difference at {where}): "
            "give the case inputs that travel (leaf tensors on the CPU, arrays of numbers, modules)"
        )
    return blob


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


# --------------------------------------------------------------------------- fidelity (issue 43.4)

_PLAIN = (type(None), bool, int, float, complex, str, bytes)


def fingerprint(value: Any) -> list[tuple]:
    """What an answer can observe of ``value``, as a list of ``(path, description)`` rows: equal
    for a case and its shipped copy exactly when the copy arrives as the case was built.

    Tensors: type, dtype, shape, strides, storage offset and size, ``requires_grad``, leaf or
    not, backward hooks, the values' bytes and ``.grad`` (the same, recursively); arrays: dtype,
    shape, strides, flags, the values' bytes; both: which inputs share memory (their storage,
    or array base, numbered in order of appearance). Modules: every attribute, the
    ``training`` flag, parameters, buffers and submodules by name, and how many hooks of each
    kind; an optimiser: its hyperparameters, groups, state and hooks; other objects: their
    attributes; an object met twice: where it
    was met first (an optimiser's parameters are the model's)."""
    rows: list[tuple] = []
    _Walk(rows).walk(value, "inputs")
    return rows


class _Walk:
    def __init__(self, rows: list[tuple]):
        self.rows = rows
        self.seen: dict[int, str] = {}
        self.memory: dict[tuple, int] = {}
        self.keep: list[Any] = []  # the objects met, alive while walking (ids stay theirs)

    def add(self, path: str, *description: Any) -> None:
        self.rows.append((path, *description))

    def walk(self, value: Any, path: str) -> None:
        if isinstance(value, _PLAIN):
            self.add(path, type(value).__name__, repr(value))
            return
        first = self.seen.get(id(value))
        if first is not None:
            self.add(path, "the object of", first)
            return
        self.seen[id(value)] = path
        self.keep.append(value)
        torch = sys.modules.get("torch")
        np = sys.modules.get("numpy")
        if torch is not None and isinstance(value, torch.Tensor):
            self.tensor(torch, value, path)
        elif np is not None and isinstance(value, np.ndarray):
            self.array(np, value, path)
        elif torch is not None and isinstance(value, torch.nn.Module):
            self.module(torch, value, path)
        elif torch is not None and isinstance(value, torch.optim.Optimizer):
            self.optimizer(value, path)
        elif isinstance(value, tuple | list | set | frozenset):
            self.add(path, type(value).__qualname__, len(value))
            items = sorted(value, key=repr) if isinstance(value, set | frozenset) else value
            for i, item in enumerate(items):
                self.walk(item, f"{path}[{i}]")
        elif isinstance(value, dict):
            factory = getattr(value, "default_factory", None)
            self.add(path, type(value).__qualname__, len(value), getattr(factory, "__qualname__", None))
            for i, (key, item) in enumerate(value.items()):
                self.walk(key, f"{path}.key{i}")
                self.walk(item, f"{path}.value{i}")
        elif isinstance(value, weakref.ReferenceType):
            self.add(path, "weakref")
            self.walk(value(), f"{path}()")
        elif isinstance(value, types.MethodType):
            self.add(path, "method", value.__func__.__qualname__)
            self.walk(value.__self__, f"{path}.__self__")
        elif isinstance(value, type | types.FunctionType | types.BuiltinFunctionType):
            self.add(path, "callable", type(value).__qualname__, getattr(value, "__qualname__", repr(value)))
        elif torch is not None and isinstance(value, torch.Generator):
            self.add(path, "generator", hashlib.sha256(value.get_state().numpy().tobytes()).hexdigest())
        elif hasattr(value, "__dict__") or hasattr(type(value), "__slots__"):
            self.add(path, "object", f"{type(value).__module__}.{type(value).__qualname__}")
            self.attributes(value, path)
        else:
            self.add(path, type(value).__qualname__, repr(value))

    def attributes(self, value: Any, path: str, skip: frozenset = frozenset()) -> None:
        names = dict(getattr(value, "__dict__", {}))
        for cls in type(value).__mro__:
            for slot in getattr(cls, "__slots__", ()):
                if isinstance(slot, str) and hasattr(value, slot) and slot not in names:
                    names[slot] = getattr(value, slot)
        for name in sorted(names):
            if name not in skip:
                self.walk(names[name], f"{path}.{name}")

    def shared(self, key: tuple, nbytes: int) -> int | None:
        """The number of the memory an input uses (inputs that share memory share the number)."""
        if nbytes == 0:
            return None
        return self.memory.setdefault(key, len(self.memory))

    def tensor(self, torch, t, path: str) -> None:
        storage = t.untyped_storage()
        dense = t.detach().clone(memory_format=torch.contiguous_format)
        values = hashlib.sha256(_storage_bytes(torch, dense.untyped_storage())).hexdigest()
        self.add(
            path,
            f"{type(t).__module__}.{type(t).__qualname__}",
            str(t.dtype),
            str(t.device),
            str(t.layout),
            tuple(t.shape),
            t.stride(),
            t.storage_offset(),
            storage.nbytes(),
            storage.resizable(),
            self.shared(("storage", storage.data_ptr(), storage.nbytes()), storage.nbytes()),
            t.requires_grad,
            t.is_leaf,
            len(t._backward_hooks or {}),
            values,
        )
        if t.__dict__:
            self.attributes(t, path)
        if t.is_leaf:
            self.walk(t.grad, f"{path}.grad")

    def array(self, np, arr, path: str) -> None:
        owner = arr
        while isinstance(owner.base, np.ndarray):
            owner = owner.base
        start = owner.__array_interface__["data"][0]
        flags = arr.flags
        self.add(
            path,
            type(arr).__qualname__,
            arr.dtype.descr if arr.dtype.fields else arr.dtype.str,
            arr.shape,
            arr.strides,
            arr.__array_interface__["data"][0] - start,
            self.shared(("array", start, owner.nbytes), owner.nbytes),
            (bool(flags.writeable), bool(flags.c_contiguous), bool(flags.f_contiguous), bool(flags.aligned)),
            hashlib.sha256(
                arr.tobytes() if not arr.dtype.hasobject else repr(arr.tolist()).encode()
            ).hexdigest(),
        )

    def module(self, torch, m, path: str) -> None:
        self.add(path, "module", f"{type(m).__module__}.{type(m).__qualname__}", m.training)
        internal = _module_internals(torch)
        for name in sorted(internal & set(vars(m))):
            item = vars(m)[name]
            if name in ("_parameters", "_buffers", "_modules"):
                self.walk(item, f"{path}.{name}")
            elif isinstance(item, dict | set):
                self.add(f"{path}.{name}", len(item))  # hooks and the names of non-persistent buffers
        self.attributes(m, path, skip=internal)

    def optimizer(self, opt, path: str) -> None:
        """An optimiser as its step sees it: hyperparameters, parameter groups (their parameters
        by identity), state, and how many hooks of each kind (torch's private flags aside)."""
        self.add(path, "optimizer", f"{type(opt).__module__}.{type(opt).__qualname__}")
        for name in ("defaults", "param_groups", "state"):
            self.walk(getattr(opt, name), f"{path}.{name}")
        for name, item in sorted(vars(opt).items()):
            if name.endswith("_hooks") and isinstance(item, dict):
                self.add(f"{path}.{name}", len(item))


_INTERNALS: frozenset | None = None


def _module_internals(torch) -> frozenset:
    """The attributes every ``nn.Module`` has (parameters, buffers, submodules, hooks, ``training``)."""
    global _INTERNALS
    if _INTERNALS is None:
        _INTERNALS = frozenset(vars(torch.nn.Module()))
    return _INTERNALS
