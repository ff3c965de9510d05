"""The layering CONTRIBUTING describes, read from the syntax tree of every module (issue 28).

From the bottom up: attnlib's core (the modules at the top of ``attnlib/`` and
the ``attnlib.efficient`` package) < ``attnlib.chapters`` (models and toy tasks)
< ``attnlib.checks`` (exercise checks) < ``coursetools`` (instructor tooling).
A room imports only rooms below it. The learner's package never imports
``coursetools``, apart from the two aliases that keep old instructor commands
working in a checkout (``attnlib.grade``, ``attnlib.assign``).

Imports are read with ``ast``: ``import x``, ``from x import y``, relative
imports, and ``importlib.import_module("x")`` / ``__import__("x")`` with a
constant name, wherever they stand (a function body, a ``try``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# room -> the rooms it must not import
FORBIDDEN = {
    "core": ("attnlib.chapters", "attnlib.checks", "coursetools"),
    "chapters": ("attnlib.checks", "coursetools"),
    "checks": ("coursetools",),
}
# the learner's package reaches coursetools only here: aliases of moved commands
ALIASES = {"attnlib.grade", "attnlib.grade.__main__", "attnlib.assign"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def room(module: str) -> str | None:
    if module in ALIASES:
        return None
    if module.startswith("attnlib.chapters"):
        return "chapters"
    if module.startswith("attnlib.checks"):
        return "checks"
    if module.startswith("attnlib"):
        return "core"
    return None


def imported_names(path: Path) -> set[str]:
    """Every module name ``path`` imports (absolute, relative imports resolved)."""
    module = module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            names.add(prefix)
            names |= {f"{prefix}.{alias.name}" for alias in node.names}
        elif (
            isinstance(node, ast.Call)
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
            and (
                (isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
                or (isinstance(node.func, ast.Name) and node.func.id in ("__import__", "import_module"))
            )
        ):
            names.add(node.args[0].value)
    return names


def violations() -> list[str]:
    found = []
    for path in sorted((ROOT / "attnlib").rglob("*.py")):
        module = module_name(path)
        kind = room(module)
        if kind is None:
            continue
        for name in sorted(imported_names(path)):
            for above in FORBIDDEN[kind]:
                if name == above or name.startswith(above + "."):
                    found.append(f"{module} ({kind}) imports {name}")
    return found


def test_no_room_imports_a_room_above_it():
    found = violations()
    assert not found, "imports against the layering (CONTRIBUTING.md, Layout):\n" + "\n".join(found)


def test_the_aliases_are_the_only_way_from_attnlib_to_coursetools():
    reaching = sorted(
        module_name(path)
        for path in (ROOT / "attnlib").rglob("*.py")
        if any(n == "coursetools" or n.startswith("coursetools.") for n in imported_names(path))
    )
    assert set(reaching) <= ALIASES, reaching
    assert reaching, "the aliases no longer import coursetools: drop them from ALIASES"


@pytest.mark.parametrize(
    ("source", "module", "expected"),
    [
        ("from attnlib.checks import check", "attnlib.masks", "attnlib.checks.check"),
        ("from ..checks import core", "attnlib.chapters.vocab", "attnlib.checks.core"),
        ("from . import online", "attnlib.efficient.__init__", "attnlib.efficient.online"),
        (
            "import importlib\nimportlib.import_module('coursetools.grade')",
            "attnlib.utils",
            "coursetools.grade",
        ),
        ("def f():\n    import coursetools", "attnlib.plotting", "coursetools"),
    ],
)
def test_the_reader_finds_every_kind_of_import(tmp_path, monkeypatch, source, module, expected):
    """The test itself: each spelling of an import is seen (else the layering test could not fail)."""
    parts = module.split(".")
    path = tmp_path.joinpath(*parts).with_suffix(".py")
    path.parent.mkdir(parents=True)
    path.write_text(source, encoding="utf-8")
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    assert expected in imported_names(path)
