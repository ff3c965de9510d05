"""Which of a notebook's code runs for one exercise (issue 43: isolation instead of inference).

Each exercise is evaluated in a fresh process that runs, in notebook order:

1. the handed-out cells (code cells left as the course handed them out) before the
   exercise's answer cell;
2. from the learner's other cells, only the top-level statements that bind a name the
   answer needs, directly or through another selected statement (a ``def``, a ``class``,
   an import, ``NEG_INF = -np.inf``, a cell-level lambda ...), found by the syntax tree;
3. the answer cell itself.

Nothing else of the learner's runs there: a playground cell, a cell that patches NumPy or
enters a torch function mode, is never selected unless the answer needs a name it binds,
and then only the statement that binds it is.

A name is resolved to its latest binding before the place it is needed: a name a
statement reads when it runs (an assignment's value, a decorator, a default, a base
class) before that statement; a name read inside a function body, which runs at the
case, before the end of the answer cell. A binding inside a compound statement (``if``,
``for``, ``try``, ``with``) may not happen, so an earlier binding of the name is selected too.
"""

from __future__ import annotations

import ast
import functools
import symtable
from dataclasses import dataclass

# the magics whose code the harness's stand-in runs (harness._IPythonStandIn): a statement
# ``get_ipython().run_cell_magic("time", "", "<code>")`` binds what ``<code>`` binds
RUNNING_MAGICS = frozenset({"time", "timeit", "capture"})
COMPREHENSIONS = frozenset({"listcomp", "setcomp", "dictcomp", "genexpr"})
STAR = "*"  # what a star import binds: any name


@dataclass(frozen=True)
class Statement:
    """One top-level statement of a cell, as the selection reads it.

    ``binds``: the module-level names it binds; ``eager``: the names it reads when it
    runs; ``lazy``: the names read by the function bodies it defines (at call time);
    ``definite``: it binds every name of ``binds`` whenever it runs (not in a branch).
    """

    index: int  # its position in the cell's body
    binds: frozenset[str]
    eager: frozenset[str]
    lazy: frozenset[str]
    definite: bool


class Unreadable(Exception):
    """A cell whose syntax tree cannot be read (a syntax error, too deep a tree)."""


def _names(table: symtable.SymbolTable, eager: bool, out_eager: set[str], out_lazy: set[str]) -> None:
    """The global names that ``table``'s scope and the scopes inside it read."""
    module = table.get_type() == "module"
    for symbol in table.get_symbols():
        if not symbol.is_referenced():
            continue
        if module or symbol.is_global():
            (out_eager if eager else out_lazy).add(symbol.get_name())
    for child in table.get_children():
        kind, name = child.get_type(), child.get_name()
        # a class body and a comprehension run where they stand; a function body at its call
        child_eager = eager and (kind == "class" or name in COMPREHENSIONS)
        _names(child, child_eager, out_eager, out_lazy)


def _magic_code(stmt: ast.stmt) -> str | None:
    """The code a running magic statement runs (``get_ipython().run_cell_magic('time', '', code)``
    or ``run_line_magic('time', code)``), or None."""
    value = stmt.value if isinstance(stmt, (ast.Expr, ast.Assign)) else None
    if not isinstance(value, ast.Call) or not isinstance(value.func, ast.Attribute):
        return None
    method, args = value.func.attr, value.args
    if method not in ("run_cell_magic", "run_line_magic") or not args:
        return None
    words = [a.value for a in args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    if len(words) != len(args) or words[0] not in RUNNING_MAGICS:
        return None
    return words[-1] if method == "run_cell_magic" or len(words) >= 2 else None


def _read(stmt: ast.stmt, position: int, depth: int = 0) -> Statement:
    binds: set[str] = set()
    eager: set[str] = set()
    lazy: set[str] = set()
    code = ast.unparse(stmt)
    table = symtable.symtable(code, "<statement>", "exec")
    for symbol in table.get_symbols():
        if symbol.is_assigned() or symbol.is_imported():
            binds.add(symbol.get_name())
    _names(table, True, eager, lazy)
    for node in ast.walk(stmt):
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            eager.add(node.target.id)  # x += 1 reads x first
        elif isinstance(node, ast.ImportFrom) and any(alias.name == "*" for alias in node.names):
            binds.add(STAR)
    magic = _magic_code(stmt) if depth == 0 else None
    if magic is not None:
        try:
            for inner in ast.parse(magic).body:
                read = _read(inner, position, depth + 1)
                binds |= read.binds
                eager |= read.eager
                lazy |= read.lazy
        except (SyntaxError, ValueError):
            pass
    definite = isinstance(
        stmt,
        (
            ast.FunctionDef,
            ast.AsyncFunctionDef,
            ast.ClassDef,
            ast.Import,
            ast.ImportFrom,
            ast.Assign,
            ast.AnnAssign,
        ),
    )
    definite = definite or isinstance(stmt, ast.AugAssign)
    return Statement(position, frozenset(binds), frozenset(eager), frozenset(lazy), definite)


@functools.lru_cache(maxsize=4096)
def unwrap_magics(source: str) -> str:
    """A learner cell with each top-level running magic replaced by the code it runs, on the lines
    it had: ``%%time`` / ``%%timeit`` / ``%%capture`` over a cell (its body, from line 2) and
    ``%time <statement>`` (the statement). The harness's stand-ins run that code once in the
    notebook's globals, so running it directly does the same, and the checks read plain Python
    (a ``def`` under ``%%time`` is a ``def``). Anything else is left as it is."""
    if "get_ipython()" not in source:
        return source
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return source
    lines = source.splitlines()
    changed = False
    for stmt in tree.body:
        if not isinstance(stmt, ast.Expr) or stmt.lineno != stmt.end_lineno:
            continue
        code = _magic_code(stmt)
        if code is None:
            continue
        call = stmt.value
        assert isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)  # noqa: S101 (_magic_code)
        method = call.func.attr
        first = call.args[0]
        name = first.value if isinstance(first, ast.Constant) else None
        if method == "run_line_magic" and name != "time":
            continue  # %timeit's options are not Python: left to the stand-in
        try:
            ast.parse(code)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue  # magics inside the body, say: left to the stand-in
        if method == "run_cell_magic":
            if stmt.lineno != 1 or len(tree.body) != 1:
                continue
            return "\n" + code if code.endswith("\n") else "\n" + code + "\n"
        if "\n" in code.strip():
            continue
        lines[stmt.lineno - 1] = code.strip()
        changed = True
    if not changed:
        return source
    return "\n".join(lines) + "\n"


@functools.lru_cache(maxsize=4096)
def statements(source: str) -> tuple[tuple[Statement, ...], ast.Module]:
    """The top-level statements of a cell's source (IPython syntax already transformed), and its
    tree; :class:`Unreadable` when the cell cannot be read."""
    try:
        tree = ast.parse(source)
        return tuple(_read(stmt, i) for i, stmt in enumerate(tree.body)), tree
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise Unreadable(f"{type(exc).__name__}") from None


@dataclass(frozen=True)
class Selection:
    """What runs for one exercise: ``handed_out`` cells first (the course's own code, whole),
    then the learner's ``learner`` units in notebook order (each ``[cell index, source]``, a
    partial cell's source keeping its statements on their own lines), the answer cell last.
    ``unreadable``: the learner's cells before the answer that could not be read (they bind
    nothing the selection can see, so they do not run)."""

    handed_out: list[list]
    learner: list[list]
    unreadable: list[int]

    @property
    def cells(self) -> list[list]:
        """Every unit, in the order the exercise's process runs them."""
        return [*self.handed_out, *self.learner]


def select(
    cells: list[list], handed_out: set[int] | frozenset[int], answer: int | None, function: str
) -> Selection:
    """The code that runs for an exercise whose answer cell is ``answer`` (None: not found, the
    function is looked up after the whole notebook) and whose function is ``function``.

    ``cells``: the notebook's ``[index, source]`` in order (check cells left out);
    ``handed_out``: the indices of the cells that are the handed-out notebook's own code.
    """
    cells = [[i, src if i in handed_out else unwrap_magics(src)] for i, src in cells]
    end = len(cells)
    order = [i for i, _ in cells]
    if answer is not None and answer in order:
        end = order.index(answer)
    before = cells[:end]
    answer_cell = cells[end] if end < len(cells) else None
    # every statement that may bind a name: (cell position, statement index) -> Statement
    table: list[tuple[tuple[int, int], int, Statement]] = []
    unreadable: list[int] = []
    trees: dict[int, ast.Module] = {}
    sources = dict((int(i), s) for i, s in cells)
    for position, (index, source) in enumerate(cells[: end + 1]):
        try:
            found, tree = statements(source)
        except Unreadable:
            if index not in handed_out and position < end:
                unreadable.append(index)
            continue
        trees[index] = tree
        for stmt in found:
            table.append(((position, stmt.index), index, stmt))
    chosen: set[tuple[int, int]] = set()
    finish = (end + 1, 0)  # after the answer cell: where the cases run
    todo: list[tuple[str, tuple[int, int]]] = []
    if answer_cell is not None and answer_cell[0] not in handed_out:
        for where, _index, stmt in table:
            if where[0] == end:
                chosen.add(where)
                todo += [(n, where) for n in stmt.eager] + [(n, finish) for n in stmt.lazy]
    if function:
        todo.append((function, finish))
    seen: set[tuple[str, tuple[int, int]]] = set()
    while todo:
        name, limit = todo.pop()
        if (name, limit) in seen:
            continue
        seen.add((name, limit))
        for where, index, stmt in reversed(table):
            if where >= limit or not (name in stmt.binds or STAR in stmt.binds):
                continue
            if index in handed_out or where[0] == end:
                if stmt.definite and name in stmt.binds:
                    break  # the course's own code (it runs whole) or the answer cell binds it last
                continue
            if where not in chosen:
                chosen.add(where)
                todo += [(n, where) for n in stmt.eager] + [(n, finish) for n in stmt.lazy]
            if stmt.definite and name in stmt.binds:
                break
    learner: list[list] = []
    for position, (index, source) in enumerate(before):
        if index in handed_out or index not in trees:
            continue
        picked = [i for (p, i) in sorted(chosen) if p == position]
        if picked:
            learner.append([index, _partial(source, trees[index], picked)])
    handed = [[i, s] for i, s in before if i in handed_out]
    if answer_cell is not None:
        (handed if answer_cell[0] in handed_out else learner).append(
            [answer_cell[0], sources[answer_cell[0]]]
        )
    return Selection(handed, learner, unreadable)


def _partial(source: str, tree: ast.Module, picked: list[int]) -> str:
    """``source`` with only the top-level statements ``picked``, each on its own lines (so that
    a traceback's line and a function's first line are the notebook cell's); when that cannot
    be kept (statements that share a line in a way the layout cannot keep), the statements
    unparsed in order."""
    if len(picked) == len(tree.body):
        return source
    lines = source.splitlines()
    out = [""] * len(lines)
    try:
        for i in picked:
            stmt = tree.body[i]
            first = min([stmt.lineno, *(d.lineno for d in getattr(stmt, "decorator_list", []))])
            col = stmt.col_offset if first == stmt.lineno else 0
            last, end_col = stmt.end_lineno or first, stmt.end_col_offset or 0
            segment = lines[first - 1 : last]
            if first == last:
                segment = [segment[0][col:end_col]]
            else:
                segment = [segment[0][col:], *segment[1:-1], segment[-1][:end_col]]
            for k, text in enumerate(segment):
                row = first - 1 + k
                out[row] = (
                    f"{out[row]}; {text}"
                    if out[row].strip() and k == 0
                    else (out[row] + text if k == 0 else text)
                )
        text = "\n".join(out) + "\n"
        wanted = ast.dump(ast.Module([tree.body[i] for i in picked], []))
        if ast.dump(ast.parse(text)) == wanted:
            return text
    except (SyntaxError, ValueError, IndexError, RecursionError):
        pass
    return ast.unparse(ast.Module([tree.body[i] for i in picked], [])) + "\n"
