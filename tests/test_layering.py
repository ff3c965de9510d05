"""The layering CONTRIBUTING describes, read from the syntax tree of every module (issue 28).

From the bottom up: attnlib's core (the modules at the top of ``attnlib/`` and
the ``attnlib.efficient`` package) < ``attnlib.figures`` (the course's pictures) and
``attnlib.chapters`` (models and toy tasks) < ``attnlib.checks`` (exercise checks)
< ``coursetools`` (instructor tooling). A room imports only rooms below it; the
figures and the chapters stand side by side and never import each other. The
learner's package never imports ``coursetools``.

Inside ``coursetools`` the grader has floors of its own (issue 38), from the
bottom: records and paths < isolation < grading a submission < outputs <
publishing < commands (:data:`GRADE_FLOORS`). A module imports only its own floor
and the floors below it, and no two modules import each other, even through an
import inside a function: so a function-level import can only be a lazy start
(a worker before its sandbox closes, a command that needs torch), never a way
around a circle.

Imports are read with ``ast``: ``import x``, ``from x import y``, relative
imports, and ``importlib.import_module("x")`` / ``__import__("x")`` with a
constant name, wherever they stand (a function body, a ``try``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# room -> the rooms it must not import
FORBIDDEN = {
    "core": ("attnlib.figures", "attnlib.chapters", "attnlib.checks", "coursetools"),
    "figures": ("attnlib.chapters", "attnlib.checks", "coursetools"),
    "chapters": ("attnlib.figures", "attnlib.checks", "coursetools"),
    "checks": ("attnlib.figures", "coursetools"),
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def room(module: str) -> str | None:
    if module.startswith("attnlib.figures"):
        return "figures"
    if module.startswith("attnlib.chapters"):
        return "chapters"
    if module.startswith("attnlib.checks"):
        return "checks"
    if module.startswith("attnlib"):
        return "core"
    return None


def import_targets(path: Path) -> Iterator[tuple[str, list[str]]]:
    """Every import in ``path``, wherever it stands, as ``(module, names)``: ``import a.b`` gives
    ``("a.b", [])``; ``from P import x, y`` gives ``(P, ["x", "y"])`` with a relative ``P``
    resolved; ``importlib.import_module("m")`` and ``__import__("m")`` give ``("m", [])``."""
    module = module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, []
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            yield prefix, [alias.name for alias in node.names]
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
            yield node.args[0].value, []


def imported_names(path: Path) -> set[str]:
    """Every module name ``path`` imports (absolute, relative imports resolved); for
    ``from P import x`` both ``P`` and ``P.x``."""
    names = set()
    for base, members in import_targets(path):
        names.add(base)
        names |= {f"{base}.{member}" for member in members}
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


def test_a_planted_import_of_the_figures_from_the_core_is_caught(tmp_path, monkeypatch):
    """The rooms' rule on a synthetic tree: the core drawing with the figures is named."""
    (tmp_path / "attnlib" / "figures").mkdir(parents=True)
    (tmp_path / "attnlib" / "figures" / "plotting.py").write_text("import numpy\n", encoding="utf-8")
    (tmp_path / "attnlib" / "masks.py").write_text("import numpy\n", encoding="utf-8")
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    assert violations() == []
    (tmp_path / "attnlib" / "masks.py").write_text("from .figures import plotting\n", encoding="utf-8")
    assert violations() == [
        "attnlib.masks (core) imports attnlib.figures",
        "attnlib.masks (core) imports attnlib.figures.plotting",
    ]


def test_nothing_in_attnlib_reaches_coursetools():
    reaching = sorted(
        module_name(path)
        for path in (ROOT / "attnlib").rglob("*.py")
        if any(n == "coursetools" or n.startswith("coursetools.") for n in imported_names(path))
    )
    assert reaching == [], reaching


# --------------------------------------------------------------------------- coursetools' floors

# ``coursetools`` itself and ``coursetools.assign`` (the authoring tool) import attnlib only
TOOLS_FLOOR = ("tools", ("coursetools", "coursetools.assign"))
# coursetools/grade, from the bottom: (floor, its modules); "" is the package itself
GRADE_FLOORS = (
    ("records and paths", ("record", "events", "wire", "inputs", "paths", "escape", "written", "store")),
    (
        "isolation",
        (
            "sandbox_shared",
            "sandbox_host",
            "sandbox_parent",
            "sandbox_child",
            "sandbox",
            "snapshot",
            "harness",
            "zygote",
        ),
    ),
    ("grading", ("selection", "submission", "similarity", "parse_worker", "process", "verdict", "runner")),
    ("outputs", ("intake", "late", "overrides", "manual", "scores", "report", "results", "class_report")),
    ("publishing", ("publish", "export", "shard", "batch")),
    ("commands", ("commands", "gradescope", "classroom", "__main__", "")),
)


def coursetools_floors() -> dict[str, int]:
    """``{module: floor number}`` for every module ``coursetools`` must hold (0 at the bottom)."""
    floors = dict.fromkeys(TOOLS_FLOOR[1], 0)
    for number, (_, modules) in enumerate(GRADE_FLOORS, start=1):
        floors |= {("coursetools.grade." + m).rstrip("."): number for m in modules}
    return floors


def imported_modules(path: Path, modules: set[str]) -> set[str]:
    """The modules of ``modules`` that ``path`` imports, wherever the import stands.

    ``from P import x`` imports the module ``P.x`` when there is one, else a name of ``P``
    (its ``__init__`` for a package); ``import P.Q`` imports ``P.Q``; a parent package that
    Python imports on the way is not counted (it is checked as a module of its own)."""
    found = set()
    for base, members in import_targets(path):
        if not members:
            found.add(base)
        for member in members:
            found.add(f"{base}.{member}" if f"{base}.{member}" in modules else base)
    module = module_name(path)
    return {name for name in found if name in modules and name != module}


def coursetools_imports() -> dict[str, set[str]]:
    """``{module: the coursetools modules it imports}`` (:func:`imported_modules`)."""
    paths = {module_name(path): path for path in sorted((ROOT / "coursetools").rglob("*.py"))}
    return {module: imported_modules(path, set(paths)) for module, path in paths.items()}


def coursetools_violations() -> list[str]:
    """Imports against the floors, modules on no floor, and every circle of imports."""
    floors = coursetools_floors()
    names = {number: name for number, (name, _) in enumerate(GRADE_FLOORS, start=1)} | {0: TOOLS_FLOOR[0]}
    graph = coursetools_imports()
    found = [f"{m} is on no floor: add it to GRADE_FLOORS" for m in sorted(set(graph) - set(floors))]
    for module in sorted(graph):
        for target in sorted(graph[module]):
            if module in floors and target in floors and floors[target] > floors[module]:
                below, above = names[floors[module]], names[floors[target]]
                found.append(f"{module} ({below}) imports {target}, a floor above ({above})")
    found += [" -> ".join(cycle) for cycle in cycles(graph)]
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One circle through each strongly connected group of modules (Tarjan), as a path."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [_circle(graph, group) for group in groups]


def _circle(graph: dict[str, set[str]], group: list[str]) -> list[str]:
    """The shortest circle inside ``group`` (strongly connected) from its first member back to it."""
    start = group[0]
    paths = {start: [start]}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for nxt in sorted(graph[node]):
            if nxt == start:
                return [*paths[node], start]
            if nxt in group and nxt not in paths:
                paths[nxt] = [*paths[node], nxt]
                queue.append(nxt)
    return group  # unreachable for a strongly connected group


def test_coursetools_floors_hold_and_no_module_imports_in_a_circle():
    found = coursetools_violations()
    assert not found, "imports against coursetools' floors (CONTRIBUTING.md, Layout):\n" + "\n".join(found)


def test_every_floor_names_modules_that_exist():
    """A floor that names a module no longer there is a stale rule (and could hide a move)."""
    present = set(coursetools_imports())
    assert set(coursetools_floors()) <= present, sorted(set(coursetools_floors()) - present)


def _plant(root: Path, files: dict[str, str]) -> None:
    """A synthetic coursetools tree: every module of the floors, empty, then ``files``."""
    for module in coursetools_floors():
        parts = module.split(".")
        package = module in ("coursetools", "coursetools.grade")
        path = root.joinpath(*parts, "__init__.py") if package else root.joinpath(*parts).with_suffix(".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
    for rel, source in files.items():
        (root / rel).write_text(source, encoding="utf-8")


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        # an output that publishes (the old overrides.apply), inside a function
        (
            {"coursetools/grade/overrides.py": "def apply(out):\n    from .publish import publish\n"},
            "coursetools.grade.overrides (outputs) imports coursetools.grade.publish, a floor above",
        ),
        # the vocabulary reaching the grading floor, relative and at the top
        (
            {"coursetools/grade/record.py": "from . import runner\n"},
            "coursetools.grade.record (records and paths) imports coursetools.grade.runner",
        ),
        # the authoring tool reaching the grader
        (
            {"coursetools/assign.py": "import coursetools.grade.batch\n"},
            "coursetools.assign (tools) imports coursetools.grade.batch",
        ),
        # two outputs that import each other: a circle on one floor
        (
            {
                "coursetools/grade/scores.py": "from coursetools.grade import report\n",
                "coursetools/grade/report.py": "def f():\n    from coursetools.grade import scores\n",
            },
            "coursetools.grade.report -> coursetools.grade.scores -> coursetools.grade.report",
        ),
        # a new module nobody placed
        ({"coursetools/grade/helpers.py": ""}, "coursetools.grade.helpers is on no floor"),
        # the package's own name (its lazy grade()) from the grading floor
        (
            {"coursetools/grade/runner.py": "from coursetools.grade import grade\n"},
            "coursetools.grade.runner (grading) imports coursetools.grade, a floor above",
        ),
    ],
)
def test_a_planted_upward_import_or_circle_is_caught(tmp_path, monkeypatch, files, expected):
    """The checker itself, on a synthetic tree: a clean one passes, each planted defect is named."""
    found = _found_when_planted(tmp_path, monkeypatch, files, coursetools_violations)
    assert any(line.startswith(expected) for line in found), found


def _found_when_planted(root: Path, monkeypatch, files: dict[str, str], check) -> list[str]:
    """What ``check()`` finds in a synthetic tree at ``root`` with ``files`` planted (and nothing
    before they are: asserted)."""
    monkeypatch.setattr(f"{__name__}.ROOT", root)
    _plant(root, {})
    assert check() == []
    _plant(root, files)
    return check()


# --------------------------------------------------------------------------- the sandbox's sides

# The sandbox in one module per process its code runs in (issue 38): code that runs inside the
# sandbox never depends on the grader's side, the learner's process not on the trusted parent's,
# and the module below them on none of them. {module: the modules it must not reach, through
# any chain of imports}; ``sandbox`` is the grader's façade over all four.
SANDBOX = "coursetools.grade.sandbox"
SIDES = {
    f"{SANDBOX}_child": (f"{SANDBOX}_host", f"{SANDBOX}_parent", SANDBOX),
    f"{SANDBOX}_parent": (f"{SANDBOX}_host", f"{SANDBOX}_child", SANDBOX),
    f"{SANDBOX}_host": (f"{SANDBOX}_parent", f"{SANDBOX}_child", SANDBOX),
    f"{SANDBOX}_shared": (f"{SANDBOX}_host", f"{SANDBOX}_parent", f"{SANDBOX}_child", SANDBOX),
    "coursetools.grade.harness": (f"{SANDBOX}_host", SANDBOX),
    "coursetools.grade.zygote": (f"{SANDBOX}_host", SANDBOX),
}


def import_chains(graph: dict[str, set[str]], start: str) -> dict[str, list[str]]:
    """``{module: the shortest chain of imports from start to it}`` for every module ``start`` reaches."""
    chains = {start: [start]}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in chains:
                chains[nxt] = [*chains[node], nxt]
                queue.append(nxt)
    return chains


def sandbox_side_violations() -> list[str]:
    """Each module of :data:`SIDES` that reaches a module it must not, with the chain."""
    graph = coursetools_imports()
    found = []
    for module, banned in SIDES.items():
        chains = import_chains(graph, module)
        found += [
            f"{module} reaches {target}: {' -> '.join(chains[target])}"
            for target in banned
            if target in chains
        ]
    return found


def test_code_inside_the_sandbox_never_reaches_the_graders_side():
    assert set(SIDES) <= set(coursetools_imports()), sorted(set(SIDES) - set(coursetools_imports()))
    found = sandbox_side_violations()
    assert not found, "imports across the sandbox's sides (coursetools/grade/sandbox.py):\n" + "\n".join(
        found
    )
    # the rule reads the real imports: each side stands on the shared module
    graph = coursetools_imports()
    assert all(f"{SANDBOX}_shared" in graph[f"{SANDBOX}_{side}"] for side in ("host", "parent", "child"))


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        # the learner's process calling the grader's side
        (
            {"coursetools/grade/sandbox_child.py": "from coursetools.grade.sandbox_host import kill_uid\n"},
            f"{SANDBOX}_child reaches {SANDBOX}_host: {SANDBOX}_child -> {SANDBOX}_host",
        ),
        # the same through the shared module, inside a function
        (
            {
                "coursetools/grade/sandbox_child.py": "from . import sandbox_shared\n",
                "coursetools/grade/sandbox_shared.py": "def f():\n    from .sandbox_host import probe\n",
            },
            f"{SANDBOX}_child reaches {SANDBOX}_host: {SANDBOX}_child -> {SANDBOX}_shared -> {SANDBOX}_host",
        ),
        # the learner's process leaning on the trusted parent's code
        (
            {"coursetools/grade/sandbox_child.py": "from coursetools.grade import sandbox_parent\n"},
            f"{SANDBOX}_child reaches {SANDBOX}_parent",
        ),
        # the harness through the grader's façade
        (
            {"coursetools/grade/harness.py": "from coursetools.grade import sandbox\n"},
            f"coursetools.grade.harness reaches {SANDBOX}: coursetools.grade.harness -> {SANDBOX}",
        ),
    ],
)
def test_a_planted_import_across_the_sandboxs_sides_is_caught(tmp_path, monkeypatch, files, expected):
    """The rule itself, on a synthetic tree: a clean one passes, each planted import is named."""
    found = _found_when_planted(tmp_path, monkeypatch, files, sandbox_side_violations)
    assert any(line.startswith(expected) for line in found), found
    assert coursetools_violations() == []  # no floor rule sees it: the sides' rule is needed


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
        ("def f():\n    import coursetools", "attnlib.figures.plotting", "coursetools"),
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
