"""What an exercise's answer may use: the capability rule of the forbidden-call check (issue 43).

The code that defines an answer (the answer cells, the learner's functions, classes and
constants they use, and what changes those values) is read by
:mod:`attnlib.checks.rules.audit` (and :mod:`~attnlib.checks.rules.runtime`) under this rule:

**Refused** (the exercise is held for a person to read; never marks): reflection and
mutation of modules or of the interpreter, which could change what an answer's names do:

* dunder attributes and names (``__dict__``, ``__code__``, ``__globals__``, ``__self__``,
  ``__class__``, ``__builtins__``...), except :data:`ORDINARY_DUNDERS` (``super().__init__()``,
  ``nn.Module.__init__(self)``, ``f.__name__``); a learner's class may *define* any dunder
  method except the hooks of :data:`REFUSED_DEFINITIONS` (``__torch_function__``,
  ``__getattribute__``...);
* the modules and paths of :data:`REFUSED_PATHS` (``sys``, ``inspect``, ``gc``, ``ctypes``,
  ``importlib``, ``builtins``, ``pickle``, ``marshal``, ``copyreg``, ``shelve``,
  ``unittest.mock``, ``os``, ``subprocess``, ``socket``, ``torch.library``, ``torch.overrides``,
  function and dispatch modes, ``torch.ops``, ``torch.jit``, loading and saving files...), any
  private part of a library path (``torch._C``, ``np.core._multiarray_umath``), and a
  library's global settings (``torch.set_default_dtype``, ``np.seterr``);
* the built-ins of :data:`REFUSED_BUILTINS` (``eval``, ``exec``, ``compile``, ``__import__``,
  ``globals``, ``vars``, ``locals``, ``setattr``, ``delattr``, ``open``, ``type``...);
  ``getattr``/``hasattr`` only with a constant name that is not a dunder, and never as a
  value; ``setattr``/``delattr`` never;
* attributes of :data:`REFUSED_ATTRIBUTES` (a frame's ``f_locals``, ``tofile``...);
* an assignment to an attribute or item of a module, a library object or an alias of
  one (``np.exp = ...``, ``torch.Tensor.softmax = ...``, ``m = np; m.exp = ...``), and a
  module used as a value;
* anything else outside what is admitted (``scipy``, ``pydoc``, ``get_ipython()``...).

**Admitted**: every public path of NumPy and torch (:data:`LIBRARY_ROOTS_ADMITTED`) not refused
above; the standard library's pure modules (:data:`PURE_MODULES`); the built-ins not refused;
every attribute of a value that is not refused (a tensor's ``.diagonal()``, an optimizer's
``.param_groups``, the fields of the learner's own ``@dataclass``); the learner's own
functions, classes, constants and lambdas, read by the same rule; what an exercise adds
(:data:`EXTRA`: the course library's constants it hands over).

**Forbidden** (the exercise scores 0): the exercise's own forbidden entries and families
(``Exercise.forbidden``; a family such as ``~softmax`` covers every library name that spells
it), under any of their public paths (:mod:`attnlib.checks.rules.public_paths`); they win over the
admitted set. Where a family is forbidden, its neighbours (:data:`NEIGHBOURS`: a library
call that computes the family in another form, ``torch.distributions``, ``F.cross_entropy``)
go to review.

This module is data and functions of strings: it imports nothing but the standard library,
so the grader's notebook reader uses it without torch or NumPy (paths are judged by prefix,
never by importing them).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "EXTRA",
    "LIBRARY_ROOTS_ADMITTED",
    "NEIGHBOURS",
    "ORDINARY_DUNDERS",
    "PURE_MODULES",
    "REFUSED_ATTRIBUTES",
    "REFUSED_BUILTINS",
    "REFUSED_DEFINITIONS",
    "REFUSED_PATHS",
    "RULE_SENTENCE",
    "ADMITTED_BUILTINS",
    "Extra",
    "Policy",
    "admitted_path",
    "policy",
    "refused_attribute",
    "refused_path",
]

# The sentence every exercise text and check() say (tests/checks/test_forbidden_stated.py).
RULE_SENTENCE = (
    "Your answer may use NumPy, torch, Python's pure standard modules (math, itertools, "
    "functools, dataclasses, typing...) and your own functions, classes and constants; "
    "code that inspects or changes modules or the interpreter (sys, inspect, pickle, "
    "`__dict__`-style attributes, setattr, assigning to `np.exp`...) is held for your "
    "instructor to read."
)

# --------------------------------------------------------------------------- admitted

# The numerical libraries whose public paths are admitted (minus the refused ones below).
LIBRARY_ROOTS_ADMITTED = frozenset({"numpy", "torch"})

# The standard library's pure modules: computation on values, no I/O, no reflection.
PURE_MODULES = frozenset(
    """
    math cmath itertools functools operator collections dataclasses typing enum numbers
    fractions decimal statistics heapq bisect string re copy contextlib abc random array
    typing_extensions __future__.annotations
    """.split()
)

# Paths admitted although a refused module holds them.
ADMITTED_EXCEPTIONS = frozenset({"types.SimpleNamespace"})

# --------------------------------------------------------------------------- refused

_WHY_REFLECTION = "reflection or mutation of modules or the interpreter"
_WHY_FILES = "files, processes or the network"
_WHY_SETTINGS = "a library's global settings"
_WHY_KERNELS = "torch's dispatcher, kernels or compiler"


def _group(why: str, paths: str) -> dict[str, str]:
    return {path: why for path in paths.split()}


# A path equal to one of these, or under one, is refused (with the reason shown to the learner).
REFUSED_PATHS: dict[str, str] = {
    **_group(
        _WHY_REFLECTION,
        """
        sys inspect gc ctypes cffi importlib builtins pickle cPickle marshal copyreg shelve dill
        cloudpickle joblib unittest types code codeop runpy pydoc pkgutil weakref atexit
        traceback linecache dis tracemalloc faulthandler sysconfig site
        functools.update_wrapper functools.wraps operator.attrgetter operator.methodcaller
        typing.get_type_hints typing.ForwardRef dataclasses.make_dataclass
        numpy.ctypeslib numpy.f2py numpy.distutils numpy.add_newdoc numpy.add_docstring
        numpy.lib.add_newdoc numpy.lib.add_docstring numpy.testing.overrides
        torch.overrides torch.utils.cpp_extension torch.classes torch.package
        torch.nn.modules.module.register_module_forward_hook
        torch.nn.modules.module.register_module_forward_pre_hook
        torch.nn.modules.module.register_module_full_backward_hook
        torch.nn.modules.module.register_module_full_backward_pre_hook
        torch.nn.modules.module.register_module_backward_hook
        torch.nn.modules.module.register_module_buffer_registration_hook
        torch.nn.modules.module.register_module_module_registration_hook
        torch.nn.modules.module.register_module_parameter_registration_hook
        """,
    ),
    **_group(
        _WHY_KERNELS,
        "torch.library torch.ops torch.jit torch.compile torch.compiler torch.fx torch.export "
        "torch.utils.benchmark torch.cuda.jiterator",
    ),
    **_group(
        _WHY_FILES,
        """
        os subprocess socket shutil pathlib io tempfile glob signal threading multiprocessing
        concurrent asyncio select selectors pty urllib http ftplib smtplib ssl webbrowser
        sqlite3 zipfile tarfile gzip bz2 lzma mmap fcntl resource
        numpy.load numpy.save numpy.savez numpy.savez_compressed numpy.savetxt numpy.loadtxt
        numpy.genfromtxt numpy.fromfile numpy.fromregex numpy.memmap numpy.DataSource
        numpy.lib.npyio numpy.lib.format numpy.lib.DataSource
        torch.load torch.save torch.serialization torch.hub torch.from_file torch.multiprocessing
        torch.distributed torch.utils.tensorboard torch.profiler
        """,
    ),
}

# In NumPy and torch, a part that names one of these changes the library for everyone.
SETTINGS_PREFIXES = ("set_", "register_module_")
SETTINGS_NAMES = frozenset(
    "seterr seterrcall setbufsize use_deterministic_algorithms set_default_dtype "
    "set_default_device set_printoptions set_num_threads set_num_interop_threads".split()
)

# Dunder attributes an answer may use: initialising a class it defines, and reading names.
ORDINARY_DUNDERS = frozenset({"__init__", "__name__", "__qualname__", "__doc__"})

# Dunder methods a learner's class may not define: hooks into the libraries' and the
# interpreter's protocols, which act where the class is not called.
REFUSED_DEFINITIONS = frozenset(
    """
    __torch_function__ __torch_dispatch__ __array_function__ __array_ufunc__ __array_wrap__
    __array_finalize__ __array_prepare__ __getattribute__ __getattr__ __setattr__ __delattr__
    __init_subclass__ __set_name__ __class_getitem__ __instancecheck__ __subclasscheck__ __del__
    __reduce__ __reduce_ex__ __getstate__ __setstate__ __set__ __delete__ __get__ __prepare__
    __mro_entries__ __subclasshook__ __enter__ __exit__ __index__ __fspath__ __import__
    __getnewargs__ __getnewargs_ex__ __copy__ __deepcopy__
    """.split()
)

# Built-ins an answer may not use (reflection, dynamic code, the namespace, I/O).
REFUSED_BUILTINS: dict[str, str] = {
    **_group(
        _WHY_REFLECTION,
        "eval exec compile __import__ globals vars locals setattr delattr type dir id breakpoint "
        "memoryview __build_class__ __loader__ __spec__ __builtins__",
    ),
    **_group(_WHY_FILES, "open input help exit quit copyright credits license"),
}

# Built-ins an answer may use.
ADMITTED_BUILTINS = frozenset(
    """
    abs all any ascii bin bool bytearray bytes callable chr classmethod complex dict divmod
    enumerate filter float format frozenset getattr hasattr hash hex int isinstance issubclass
    iter len list map max min next object oct ord pow print property range repr reversed round
    set slice sorted staticmethod str sum super tuple zip NotImplemented Ellipsis __name__
    __debug__
    BaseException Exception ArithmeticError AssertionError AttributeError BufferError EOFError
    FloatingPointError GeneratorExit ImportError IndexError KeyError KeyboardInterrupt
    LookupError MemoryError ModuleNotFoundError NameError NotImplementedError OSError
    OverflowError RecursionError ReferenceError RuntimeError StopAsyncIteration StopIteration
    SyntaxError SystemError TypeError UnboundLocalError UnicodeError ValueError
    ZeroDivisionError Warning UserWarning DeprecationWarning RuntimeWarning FutureWarning
    display
    """.split()
    # display: the name every notebook has (IPython's); the grader's stand-in prints each
    # object's repr and holds nothing. get_ipython stays out: a magic's code is a string
    # (%time np.exp = f) that no audit of the cell reads.
)

# Attributes of values an answer may not use: an interpreter object's insides, file output.
REFUSED_ATTRIBUTES: dict[str, str] = {
    **_group(
        _WHY_REFLECTION,
        """
        f_locals f_globals f_back f_builtins f_code f_trace f_lasti gi_frame gi_code
        gi_yieldfrom cr_frame cr_code cr_await ag_frame ag_code tb_frame tb_next co_code
        co_consts co_names func_globals func_code im_func im_self with_traceback
        """,
    ),
    **_group(_WHY_FILES, "tofile dump"),
}

# Where a family is forbidden, the library calls that compute it in another form: review.
NEIGHBOURS: dict[str, tuple[str, ...]] = {
    "softmax": (
        "distributions",
        "cross_entropy",
        "crossentropy",
        "nll_loss",
        "nllloss",
        "kl_div",
        "normalize",
        "gumbel",
        "torch.special",
        "sparsemax",
    ),
    "logsumexp": (
        "distributions",
        "cross_entropy",
        "crossentropy",
        "logcumsumexp",
        "torch.special",
        "nll_loss",
    ),
    "attention": ("transformer",),
}


def _under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix + ".")


def refused_path(path: str) -> str:
    """Why the dotted ``path`` is refused (see the module's docstring), or ``""``."""
    parts = path.split(".")
    if path in ADMITTED_EXCEPTIONS:
        return ""
    for prefix, why in REFUSED_PATHS.items():
        if _under(path, prefix):
            return why
    for part in parts:
        if part.startswith("_") and part not in ORDINARY_DUNDERS and path != "__future__.annotations":
            return _WHY_REFLECTION if part.startswith("__") else "a private part of a library"
    if parts[0] in LIBRARY_ROOTS_ADMITTED:
        for part in parts[1:]:
            if part in SETTINGS_NAMES or part.startswith(SETTINGS_PREFIXES):
                return _WHY_SETTINGS
    return ""


def admitted_path(path: str) -> bool:
    """Whether ``path`` is in the admitted set (its refusal is asked first: :func:`refused_path`)."""
    root = path.split(".")[0]
    if root in LIBRARY_ROOTS_ADMITTED or path in ADMITTED_EXCEPTIONS:
        return True
    return any(_under(path, module) for module in PURE_MODULES)


def refused_attribute(name: str) -> str:
    """Why reading (or calling) the attribute ``name`` of a value is refused, or ``""``."""
    if name.startswith("__") and name.endswith("__") and name not in ORDINARY_DUNDERS:
        return _WHY_REFLECTION
    return REFUSED_ATTRIBUTES.get(name, "")


# --------------------------------------------------------------------------- per exercise


@dataclass(frozen=True)
class Extra:
    """What one exercise adds to the admitted set: dotted ``paths`` of the course library."""

    paths: frozenset[str] = frozenset()


def _extra(paths: str = "") -> Extra:
    return Extra(frozenset(paths.split()))


_SEQ2SEQ = "attnlib.chapters.seq2seq.PAD attnlib.chapters.seq2seq.BOS attnlib.chapters.seq2seq.EOS"
_VOCAB = "attnlib.chapters.vocab.PAD attnlib.chapters.vocab.BOS attnlib.chapters.vocab.EOS"
_TINY_LM = "attnlib.chapters.tiny_lm.COPY_PAD attnlib.chapters.tiny_lm.COPY_SEP"

# The course library (attnlib) is not admitted as a whole: it holds a reference for every
# exercise. An exercise admits the constants and earlier answers it hands over.
EXTRA: dict[str, Extra] = {
    "ex-01-2": _extra(_SEQ2SEQ),
    "ex-01-3": _extra(_SEQ2SEQ),
    "ex-01-4": _extra(f"{_SEQ2SEQ} attnlib.chapters.seq2seq.shift_right"),
    # the earlier exercises' split and merge, as the library has them
    "ex-06-3": _extra("attnlib.split_heads attnlib.merge_heads"),
    "ex-07-3": _extra(_VOCAB),
    "ex-10-2": _extra(_TINY_LM),
    "ex-10-3": _extra(_TINY_LM),
    "ex-10-4": _extra(_TINY_LM),
    # the feature map the exercise gives
    "ex-13-2": _extra("attnlib.variants.elu_feature_map attnlib.variants.linear.elu_feature_map"),
}


@dataclass(frozen=True)
class Policy:
    """What one exercise's answer may use (see the module's docstring): ``paths`` are the
    course library's paths it adds to the admitted set."""

    exercise: str
    function: str
    forbidden: tuple[str, ...]
    paths: frozenset[str]


def policy(exercise: str, function: str = "", forbidden=()) -> Policy:
    """The rule for ``exercise`` whose answer defines ``function`` and may not use ``forbidden``.

    The forbidden entries win over the admitted set: the check (attnlib.checks.rules.audit_*)
    asks them first, so an entry the admitted set also holds (``.forward``) is forbidden.
    """
    return Policy(exercise, function, tuple(forbidden), EXTRA.get(exercise, Extra()).paths)
