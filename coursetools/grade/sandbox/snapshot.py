"""What an answer's process must leave as it found it: a snapshot taken before learner code.

In each exercise's process (see :mod:`coursetools.grade.sandbox.harness`) the trusted code runs the
handed-out cells, then :func:`take` records, before any learner statement runs:

- the identity of every entry of the namespaces an answer can reach: the modules of
  :data:`MODULES` (and every loaded submodule of :data:`PACKAGES`), their module type and
  their ``sys.modules`` entry, the ``__dict__`` of their classes (``torch.Tensor``,
  ``torch.nn.Module``, every layer ...), and the code, defaults and keyword defaults of
  every Python function among them;
- ``sys.gettrace()``, ``sys.getprofile()``, ``threading``'s trace and profile hooks and
  ``sys.meta_path``;
- torch's function-mode and dispatch-mode stacks, and the kernels registered from Python
  (``torch.library._impls``).

The returned function, called just before each case and after the last one, lists what
changed: an entry rebound or removed, a new entry in a class (it shadows what the class
inherits), a function whose code was swapped, a hook set, a mode entered, a kernel
registered. Any change holds the exercise for review: the answer may not have computed
what it returned. A new module entry whose value is a module is a lazy import (torch
loads some submodules on first use) and is not a change.

Every function and type the comparison uses is bound here, before learner code runs, so
that rebinding ``builtins.id`` or ``sys.gettrace`` later changes nothing in the check.
"""

from __future__ import annotations

import gc
import sys
import threading
import types
from collections.abc import Callable
from itertools import repeat
from operator import attrgetter, is_not
from typing import Any

MODULES = (
    "builtins",
    "math",
    "cmath",
    "numpy",
    "numpy.linalg",
    "numpy.random",
    "numpy.fft",
    "torch",
    "torch.nn",
    "torch.nn.functional",
    "torch.nn.init",
    "torch.linalg",
    "torch.special",
    "torch.fft",
    "torch.autograd",
    "torch.optim",
    "torch.library",
    "torch.overrides",
    "functools",
    "itertools",
    "operator",
    "collections",
    "typing",
    "dataclasses",
    "copy",
    "random",
    "statistics",
    "heapq",
    "bisect",
    "numbers",
    "fractions",
)
PACKAGES = ("attnlib", "coursetools")  # every loaded submodule too
CLASS_MODULES = ("torch", "torch.nn", "torch.optim")  # the classes defined in these namespaces
MAX_REASONS = 5
IGNORED_KEYS = frozenset({"__warningregistry__"})  # written by the warnings module, in any namespace
KERNEL_NAMESPACES = ("aten/", "prims/")  # the operators an answer's torch calls reach


def _modules() -> list[tuple[str, types.ModuleType]]:
    loaded = sys.modules
    names = [name for name in MODULES if name in loaded]
    names += sorted(
        name
        for name in list(loaded)
        if name.split(".")[0] in PACKAGES and isinstance(loaded[name], types.ModuleType)
    )
    return [(name, loaded[name]) for name in dict.fromkeys(names)]


def take(namespace: dict | None = None) -> Callable[[], list[str]]:
    """Record the snapshot now; return the function that lists what changed since (``[]``:
    nothing). ``namespace``: the learner's globals, whose module values must be the
    recorded modules themselves when they carry a recorded module's name.

    The garbage collector is paused meanwhile: a full collection of a process that holds
    torch costs more than the snapshot itself."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _take(namespace)
    finally:
        if enabled:
            gc.enable()


def _take(namespace: dict | None) -> Callable[[], list[str]]:
    _id, _type, _len, _isinstance, _getattr = id, type, len, isinstance, getattr
    _gettrace, _getprofile = sys.gettrace, sys.getprofile
    module_type, function_type = types.ModuleType, types.FunctionType
    sys_modules, meta_path = sys.modules, sys.meta_path
    _tuple, _frozenset, _sorted, _str, _list, _zip = tuple, frozenset, sorted, str, list, zip
    _module_dict = vars(types.ModuleType)["__dict__"].__get__
    missing = object()
    torch_dir = ""
    torch_file = getattr(sys.modules.get("torch"), "__file__", None)
    if isinstance(torch_file, str):
        torch_dir = torch_file.rsplit("/", 1)[0] + "/"

    def wrapped_by_torch(old, new) -> bool:
        """torch's own lazy wrappers: ``torch.manual_seed`` wrapped when torch._dynamo loads, an
        optimizer's ``step`` hooked by its first instance; a function of torch's files whose
        ``__wrapped__`` is the recorded value."""
        if not torch_dir or _type(new) is not function_type:
            return False
        filename = new.__code__.co_filename
        return (
            _isinstance(filename, _str)
            and filename.startswith(torch_dir)
            and _getattr(new, "__wrapped__", None) is old
        )

    modules = _modules()
    watched: list[tuple[str, dict, dict, bool]] = []  # (name, live dict, copy, is a class)
    functions: list[tuple[str, Any, Any, Any, Any]] = []
    seen_classes: set[int] = set()

    def watch(name: str, live, is_class: bool) -> None:
        copy = dict(live)
        watched.append((name, live, copy, is_class))
        for key, value in copy.items():
            if _type(value) is function_type:
                functions.append(
                    (f"{name}.{key}", value, value.__code__, value.__defaults__, value.__kwdefaults__)
                )

    for name, module in modules:
        watch(name, module.__dict__, False)
    classes: list[tuple[str, type]] = []
    for name, module in modules:
        if name in CLASS_MODULES or name.split(".")[0] in PACKAGES:
            for key, value in list(module.__dict__.items()):
                if _isinstance(value, type) and _id(value) not in seen_classes:
                    seen_classes.add(_id(value))
                    classes.append((f"{name}.{key}", value))
    torch = sys_modules.get("torch")
    if torch is not None:
        for cls_name, cls in (("torch.Tensor", torch.Tensor), ("torch.nn.Module", torch.nn.Module)):
            if _id(cls) not in seen_classes:
                seen_classes.add(_id(cls))
                classes.append((cls_name, cls))
        base = _getattr(torch._C, "TensorBase", None)
        if base is not None and _id(base) not in seen_classes:
            classes.append(("torch._C.TensorBase", base))
    class_types = []
    for cls_name, cls in classes:
        try:
            live = vars(_type)["__dict__"].__get__(cls)  # the mappingproxy, not a forged __dict__
        except (TypeError, KeyError):
            continue
        watch(cls_name, live, True)
        class_types.append((cls_name, cls, _type(cls)))
    module_types = [(name, module, _type(module), sys_modules.get(name)) for name, module in modules]
    by_name = {name: module for name, module in modules}
    hooks = (
        _gettrace(),
        _getprofile(),
        _getattr(threading, "_trace_hook", None),
        _getattr(threading, "_profile_hook", None),
    )
    path_hooks = _tuple(meta_path)
    torch_c = _getattr(torch, "_C", None) if torch is not None else None
    function_stack = _getattr(torch_c, "_len_torch_function_stack", None)
    dispatch_stack = _getattr(torch_c, "_len_torch_dispatch_stack", None)
    stacks = (function_stack() if function_stack else 0, dispatch_stack() if dispatch_stack else 0)
    library = sys_modules.get("torch.library")
    impls_set = _getattr(library, "_impls", None)
    impls = _frozenset(impls_set) if impls_set is not None else _frozenset()

    # the fast path, in C: every recorded value and code object still in place
    frozen = [(live, _tuple(copy), _tuple(copy.values()), _len(copy)) for _, live, copy, _ in watched]
    funcs = _tuple(f[1] for f in functions)
    recorded = (
        _tuple(f[2] for f in functions),
        _tuple(f[3] for f in functions),
        _tuple(f[4] for f in functions),
    )
    getters = (attrgetter("__code__"), attrgetter("__defaults__"), attrgetter("__kwdefaults__"))
    _any, _map, _repeat = any, map, repeat

    def unchanged() -> bool:
        for live, keys, values, size in frozen:
            if _len(live) != size or _any(_map(is_not, values, _map(live.get, keys, _repeat(missing)))):
                return False
        for get, before in _zip(getters, recorded):
            if _any(_map(is_not, before, _map(get, funcs))):
                return False
        return True

    def changes() -> list[str]:
        found = [] if unchanged() else slow()
        found += hooks_and_modes()
        return found[:MAX_REASONS]

    def slow() -> list[str]:
        found: list[str] = []
        for name, live, copy, is_class in watched:
            if _len(live) != _len(copy):
                for key in live:
                    if key not in copy and key not in IGNORED_KEYS:
                        if is_class or not _isinstance(live[key], module_type):
                            found.append(f"added an attribute to {name}")
                            break
            for key, value in copy.items():
                now = live.get(key, missing)
                if now is not value and key not in IGNORED_KEYS and not wrapped_by_torch(value, now):
                    found.append(f"changed {name}.{key}" if now is not missing else f"removed {name}.{key}")
            if _len(found) >= MAX_REASONS:
                return found
        for where, func, code, defaults, kwdefaults in functions:
            if (
                func.__code__ is not code
                or func.__defaults__ is not defaults
                or func.__kwdefaults__ is not kwdefaults
            ):
                found.append(f"changed the code of {where}")
        return found

    def hooks_and_modes() -> list[str]:
        found: list[str] = []
        for cls_name, cls, meta in class_types:
            if _type(cls) is not meta:
                found.append(f"changed the type of {cls_name}")
        for name, module, kind, entry in module_types:
            if _type(module) is not kind:
                found.append(f"changed the type of module {name}")
            if sys_modules.get(name) is not entry:
                found.append(f"replaced sys.modules[{name!r}]")
        now = (
            _gettrace(),
            _getprofile(),
            _getattr(threading, "_trace_hook", None),
            _getattr(threading, "_profile_hook", None),
        )
        for what, before, after in _zip(
            ("sys.settrace", "sys.setprofile", "threading.settrace", "threading.setprofile"), hooks, now
        ):
            if before is not after:
                found.append(f"set a hook ({what})")
        if _len(meta_path) != _len(path_hooks) or [a for a, b in _zip(meta_path, path_hooks) if a is not b]:
            found.append("changed sys.meta_path")
        current = (function_stack() if function_stack else 0, dispatch_stack() if dispatch_stack else 0)
        if current[0] != stacks[0]:
            found.append("entered a torch function mode")
        if current[1] != stacks[1]:
            found.append("entered a torch dispatch mode")
        if impls_set is not None:
            now_impls = _frozenset(impls_set)
            if now_impls != impls:
                added = [
                    k
                    for k in now_impls - impls
                    if _str(k).startswith(KERNEL_NAMESPACES) and not _str(k).endswith("/Meta")
                ]
                removed = _sorted(impls - now_impls)
                if added or removed:
                    found.append(f"registered a torch kernel ({_sorted([*added, *removed])[0]})")
        if namespace is not None:
            for key, value in _list(namespace.items()):
                if _isinstance(value, module_type):
                    label = _module_dict(value).get("__name__")
                    if _isinstance(label, _str) and label in by_name and by_name[label] is not value:
                        found.append(f"bound {key} to a stand-in for module {label}")
        return found[:MAX_REASONS] if found else found

    return changes


def describe(reasons: list[str], ex_id: str, case: str, when: str = "before") -> str:
    """The review reason for ``reasons`` found around case ``case`` of ``ex_id``."""
    text = "; ".join(str(r) for r in reasons[:MAX_REASONS])
    return f"{ex_id}: the answer's process {text} {when} case {case!r}: not scored, read the answer"
