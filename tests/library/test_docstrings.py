"""The API reference is generated from the docstrings: every public function and class of
attnlib's core has a NumPy-style docstring with its shapes, what it returns and an example,
and every example runs here as a doctest (so the reference never shows a stale output)."""

from __future__ import annotations

import doctest
import importlib
import inspect

import pytest

CORE = [
    "attnlib",
    "attnlib.functional",
    "attnlib.attention",
    "attnlib.masks",
    "attnlib.scores",
    "attnlib.modules",
    "attnlib.efficient",
    "attnlib.efficient.online",
    "attnlib.efficient.tiled",
    "attnlib.efficient.kv_cache",
    "attnlib.variants",
    "attnlib.variants.patterns",
    "attnlib.variants.sliding",
    "attnlib.variants.linear",
    "attnlib.variants.latent",
    "attnlib.positions",
    "attnlib.transformer",
    "attnlib.vision",
    "attnlib.numpy",
    "attnlib.utils",
]
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def public_objects():
    for name in CORE[1:]:
        module = importlib.import_module(name)
        names = getattr(module, "__all__", None) or [
            n
            for n, o in vars(module).items()
            if inspect.isfunction(o) and o.__module__ == name and n[0] != "_"
        ]
        for n in names:
            yield f"{name}.{n}", getattr(module, n)


@pytest.mark.parametrize("name", CORE)
def test_examples_run(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=FLAGS, verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"


def test_every_public_object_is_documented_with_an_example():
    missing = []
    for qualname, obj in public_objects():
        doc = inspect.getdoc(obj) or ""
        for section in (
            ("Returns\n-------", "Examples\n--------")
            if inspect.isfunction(obj)
            else ("Parameters\n----------", "Examples\n--------")
        ):
            if section not in doc:
                missing.append(f"{qualname}: no '{section.splitlines()[0]}' section")
        if ">>>" not in doc:
            missing.append(f"{qualname}: no example")
    assert not missing, "\n".join(missing)
    names = [q for q, _ in public_objects()]
    assert "attnlib.modules.MultiHeadAttention" in names and "attnlib.numpy.softmax" in names


def test_one_docstring_style():
    """NumPy style only: no Google-style 'Args:' / 'Returns:' headers in the core modules."""
    google = []
    for name in CORE:
        module = importlib.import_module(name)
        for obj_name, obj in vars(module).items():
            doc = inspect.getdoc(obj) if (inspect.isfunction(obj) or inspect.isclass(obj)) else None
            if (
                doc
                and getattr(obj, "__module__", None) == name
                and ("\nArgs:" in "\n" + doc or "\nReturns:" in "\n" + doc)
            ):
                google.append(f"{name}.{obj_name}")
            if inspect.isclass(obj) and getattr(obj, "__module__", None) == name:
                for meth in vars(obj).values():
                    d = inspect.getdoc(meth) if inspect.isfunction(meth) else None
                    if d and ("\nArgs:" in "\n" + d or "\nReturns:" in "\n" + d):
                        google.append(f"{name}.{obj_name}.{meth.__name__}")
    assert not google, google


def test_api_page_documents_every_public_object(repo_root):
    page = (repo_root / "book" / "api.md").read_text(encoding="utf-8")
    import attnlib

    missing = [f"attnlib.{n}" for n in attnlib.__all__ if f"attnlib.{n}\n" not in page]
    # a package that re-exports its modules' objects (attnlib.variants) is documented by the
    # package's path, the one a reader imports: attnlib.variants.sliding_window_mask
    by_package: dict[int, list[str]] = {}
    for name in CORE[1:]:
        module = importlib.import_module(name)
        if hasattr(module, "__path__"):
            for n in getattr(module, "__all__", []):
                by_package.setdefault(id(getattr(module, n)), []).append(f"{name}.{n}")
    for qualname, obj in public_objects():
        module, name = qualname.rsplit(".", 1)
        paths = [qualname, *by_package.get(id(obj), [])]
        if name not in attnlib.__all__ and not any(f"{p}\n" in page for p in paths):
            missing.append(qualname)
    assert not missing, f"not on book/api.md: {missing}"
