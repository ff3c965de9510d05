"""The library code the chapters print with ``show_source`` fits the page: 80 columns at most.

The targets are read from the notebooks themselves, not from a list kept by hand: every
``show_source(X)`` call in a code cell of ``book/`` or ``solutions/``, with ``X`` a name or a
dotted name the notebook imported, or the variable of a ``for`` loop over a literal tuple or
list of such names (``for part in (A, B): display(show_source(part))``). The notebook's import
statements are run in a fresh namespace, and each target is measured in the text
``show_source`` itself gives, that is without its docstrings, as the page shows it.
"""

import ast
import json
from pathlib import Path

import pytest

from attnlib.utils import show_source

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted([*ROOT.glob("book/*.ipynb"), *ROOT.glob("solutions/*.ipynb")])
PAGE_COLUMNS = 80


def _code_cells(path: Path) -> list[str]:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return ["".join(cell["source"]) for cell in cells if cell["cell_type"] == "code"]


def _trees(path: Path) -> list[ast.Module]:
    """The notebook's code cells, parsed; IPython's magic and shell lines (``%``, ``!``) read as comments."""
    trees = []
    for source in _code_cells(path):
        lines = source.splitlines()
        lines = [f"# {line}" if line.lstrip().startswith(("%", "!")) else line for line in lines]
        trees.append(ast.parse("\n".join(lines), filename=path.name))
    return trees


def _imports(trees: list[ast.Module]) -> dict:
    """The notebook's namespace of imported names: every import statement of every cell, run."""
    namespace: dict = {}
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                exec(compile(ast.Module([node], type_ignores=[]), "<imports>", "exec"), namespace)  # noqa: S102
    return namespace


def _loop_items(tree: ast.Module) -> dict[str, list[ast.expr]]:
    """For each ``for NAME in (a, b, ...)`` over a literal tuple or list: NAME -> its items."""
    items: dict[str, list[ast.expr]] = {}
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.For)
            and isinstance(node.target, ast.Name)
            and isinstance(node.iter, ast.Tuple | ast.List)
        ):
            items[node.target.id] = list(node.iter.elts)
    return items


def shown_targets(path: Path) -> list[tuple[str, object]]:
    """``(expression, object)`` for every ``show_source`` call in the notebook at ``path``."""
    trees = _trees(path)
    namespace = _imports(trees)
    targets = []
    for tree in trees:
        loops = _loop_items(tree)
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "show_source"):
                continue
            assert node.args, f"{path.name}: show_source() without an argument"
            arg = node.args[0]
            exprs = loops[arg.id] if isinstance(arg, ast.Name) and arg.id in loops else [arg]
            for expr in exprs:
                text = ast.unparse(expr)
                try:
                    targets.append((text, eval(text, dict(namespace))))  # noqa: S307 - a name or a.b.c
                except (NameError, AttributeError) as error:
                    pytest.fail(
                        f"{path.name}: show_source({text}): expected a name the notebook imports, "
                        f"could not resolve it from its imports ({error})"
                    )
    return targets


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_shown_sources_fit_the_page(path):
    wide = []
    for text, obj in shown_targets(path):
        for line in show_source(obj).data.splitlines():
            if len(line) > PAGE_COLUMNS:
                wide.append(f"show_source({text}): {len(line)} columns: {line.strip()[:60]}")
    assert not wide, f"{path.name} prints lines wider than {PAGE_COLUMNS} columns:\n" + "\n".join(wide)


def test_the_notebooks_targets_are_found():
    """The reader finds what the chapters show, the loops' items included (a reader that found
    nothing would make the test above pass without measuring anything)."""
    found = {
        path.name: {text for text, _ in shown_targets(path)}
        for path in NOTEBOOKS
        if path.parent.name == "book"
    }
    assert {"SelfAttentionLayer", "EncoderLayer", "DecoderLayer", "CrossAttentionSeq2Seq"} <= found[
        "07-cross-attention.ipynb"
    ], found["07-cross-attention.ipynb"]
    assert "retrieval.attend" in found["03-queries-keys-values.ipynb"]
    assert "efficient.online_update_" in found["08-efficiency.ipynb"]
    total = sum(len(texts) for texts in found.values())
    assert total >= 25, f"expected at least 25 shown sources over the book, found {total}: {found}"
