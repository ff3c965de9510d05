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
GRADE = ROOT / "coursetools" / "grade"
# coursetools/grade's floors are its folders, from the bottom; a module's floor is where it is saved
FLOOR_FOLDERS = ("records", "sandbox", "grading", "outputs", "lms")
# the top floor, the commands: the modules at the top of coursetools/grade, the package itself
# and the folders named here (Gradescope's archive and its container's command)
TOP = "commands"
TOP_FOLDERS = ("gradescope",)


def floor_of(module: str, package: bool = False) -> int | None:
    """The floor of a ``coursetools`` module (0: the tools; 1..5: :data:`FLOOR_FOLDERS`; 6: the
    top), read from where it is saved (``package``: it is a folder's ``__init__``); None for a
    module in a folder that is on no floor."""
    if module in TOOLS_FLOOR[1]:
        return 0
    if not module.startswith("coursetools.grade"):
        return None
    parts = module.split(".")[2:]
    if not parts or (len(parts) == 1 and not package):
        return len(FLOOR_FOLDERS) + 1  # the package itself or a module at its top
    if parts[0] in FLOOR_FOLDERS:
        return FLOOR_FOLDERS.index(parts[0]) + 1
    if parts[0] in TOP_FOLDERS:
        return len(FLOOR_FOLDERS) + 1
    return None


FLOOR_NAMES = {
    0: TOOLS_FLOOR[0],
    **{n: f for n, f in enumerate(FLOOR_FOLDERS, start=1)},
    len(FLOOR_FOLDERS) + 1: TOP,
}


def coursetools_floors() -> dict[str, int]:
    """``{module: floor number}`` for every module of ``coursetools`` that is on a floor."""
    floors = {
        module_name(path): floor_of(module_name(path), path.name == "__init__.py")
        for path in sorted((ROOT / "coursetools").rglob("*.py"))
    }
    return {module: floor for module, floor in floors.items() if floor is not None}


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
    graph = coursetools_imports()
    found = [
        f"{m} is on no floor: save it in a floor's folder ({', '.join(FLOOR_FOLDERS)}) or at the top"
        for m in sorted(set(graph) - set(floors))
    ]
    for module in sorted(graph):
        for target in sorted(graph[module]):
            if module in floors and target in floors and floors[target] > floors[module]:
                below, above = FLOOR_NAMES[floors[module]], FLOOR_NAMES[floors[target]]
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


def test_every_floor_is_a_folder_that_holds_modules():
    """A floor that names a folder no longer there is a stale rule (and could hide a move); every
    folder of the grader is a floor or on the top one."""
    folders = {p.name for p in GRADE.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    assert folders == set(FLOOR_FOLDERS) | set(TOP_FOLDERS), sorted(folders)
    floors = coursetools_floors()
    assert all(any(floors.get(m) == n for m in floors) for n in range(len(FLOOR_FOLDERS) + 2))


def test_the_sandboxs_package_imports_nothing():
    """``coursetools/grade/sandbox/__init__.py`` is empty of imports: the harness imports its
    siblings inside the sandbox, and importing the package starts nothing of the grader's side."""
    assert list(import_targets(GRADE / "sandbox" / "__init__.py")) == []


def _module_paths(root: Path) -> list[Path]:
    """Where each module of the real tree is saved, relative to the checkout."""
    return [path.relative_to(ROOT) for path in sorted((ROOT / "coursetools").rglob("*.py"))]


REAL_MODULES = _module_paths(ROOT)
OUTPUTS = "coursetools.grade.outputs"


def _plant(root: Path, files: dict[str, str]) -> None:
    """A synthetic coursetools tree: every module of the real tree, empty, then ``files``."""
    for rel in REAL_MODULES:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
    for rel, source in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(source, encoding="utf-8")


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        # an output that reads an LMS's naming (the intake), relative and inside a function
        (
            {"coursetools/grade/outputs/overrides.py": "def apply(out):\n    from ..lms import intake\n"},
            "coursetools.grade.outputs.overrides (outputs) imports coursetools.grade.lms.intake, a floor",
        ),
        # the vocabulary reaching the grading floor, relative and at the top
        (
            {"coursetools/grade/records/record.py": "from ..grading import runner\n"},
            "coursetools.grade.records.record (records) imports coursetools.grade.grading.runner",
        ),
        # the authoring tool reaching the grader
        (
            {"coursetools/assign.py": "import coursetools.grade.batch\n"},
            "coursetools.assign (tools) imports coursetools.grade.batch",
        ),
        # two outputs that import each other: a circle on one floor
        (
            {
                "coursetools/grade/outputs/scores.py": "from . import feedback\n",
                "coursetools/grade/outputs/feedback.py": "def f():\n    from . import scores\n",
            },
            f"{OUTPUTS}.feedback -> {OUTPUTS}.scores -> {OUTPUTS}.feedback",
        ),
        # a new module saved in a folder that is on no floor
        ({"coursetools/grade/helpers/__init__.py": ""}, "coursetools.grade.helpers is on no floor"),
        # a new module saved on the records floor that reaches the sandbox: placed by its folder
        (
            {"coursetools/grade/records/newcomer.py": "from coursetools.grade.sandbox import api\n"},
            "coursetools.grade.records.newcomer (records) imports coursetools.grade.sandbox.api, a floor",
        ),
        # the package's own name (its lazy grade()) from the grading floor
        (
            {"coursetools/grade/grading/runner.py": "from coursetools.grade import grade\n"},
            "coursetools.grade.grading.runner (grading) imports coursetools.grade, a floor above",
        ),
        # the commands' module from the outputs
        (
            {"coursetools/grade/outputs/publish.py": "from coursetools.grade import commands\n"},
            "coursetools.grade.outputs.publish (outputs) imports coursetools.grade.commands, a floor above",
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
HOST, PARENT, CHILD, SHARED, FACE = (f"{SANDBOX}.{m}" for m in ("host", "parent", "child", "shared", "api"))
SIDES = {
    CHILD: (HOST, PARENT, FACE),
    PARENT: (HOST, CHILD, FACE),
    HOST: (PARENT, CHILD, FACE),
    SHARED: (HOST, PARENT, CHILD, FACE),
    f"{SANDBOX}.harness": (HOST, FACE),
    f"{SANDBOX}.zygote": (HOST, FACE),
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
    assert not found, "imports across the sandbox's sides (coursetools/grade/sandbox/):\n" + "\n".join(found)
    # the rule reads the real imports: each side stands on the shared module
    graph = coursetools_imports()
    assert all(SHARED in graph[side] for side in (HOST, PARENT, CHILD))


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        # the learner's process calling the grader's side
        (
            {"coursetools/grade/sandbox/child.py": "from coursetools.grade.sandbox.host import kill_uid\n"},
            f"{CHILD} reaches {HOST}: {CHILD} -> {HOST}",
        ),
        # the same through the shared module, inside a function
        (
            {
                "coursetools/grade/sandbox/child.py": "from . import shared\n",
                "coursetools/grade/sandbox/shared.py": "def f():\n    from .host import probe\n",
            },
            f"{CHILD} reaches {HOST}: {CHILD} -> {SHARED} -> {HOST}",
        ),
        # the learner's process leaning on the trusted parent's code
        (
            {"coursetools/grade/sandbox/child.py": "from coursetools.grade.sandbox import parent\n"},
            f"{CHILD} reaches {PARENT}",
        ),
        # the harness through the grader's façade
        (
            {"coursetools/grade/sandbox/harness.py": "from coursetools.grade.sandbox import api\n"},
            f"{SANDBOX}.harness reaches {FACE}: {SANDBOX}.harness -> {FACE}",
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
