"""Find the submissions of a class and turn a notebook into the harness's plan."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from coursetools.grade.grading import selection

CHECK_CALL = re.compile(r"^\s*check\s*\(")
MAGIC = re.compile(r"^(\s*)[%!]")
# a line that IPython's transformer may rewrite: a magic, a shell escape, help (f?, ?f), an
# autocall escape (/f, ,f, ;f), x = !cmd or x = %magic
IPYTHON_SYNTAX = re.compile(r"^[ \t]*[%!?/,;]|=[ \t]*[!%]|\?[ \t]*$", re.M)
SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")
MAX_NOTEBOOK_BYTES = 64 << 20
# what one notebook may ask the grader to read in its own thread (issue 24): parsing,
# IPython's transformer and the syntax-tree checks cost at most about linear in these
MAX_CELL_BYTES = 200_000
MAX_CELL_LINES = 4_000
MAX_MAGIC_LINES = 30  # IPython's transformer is quadratic in a cell's magic lines (200: 4 s)
MAX_MAGIC_LINES_TOTAL = 300
MAX_CODE_CELLS = 2_000
PLAN_SECONDS = 20.0  # reading a notebook beyond this: the rest is not run, the record is flagged
# answer cells that reach for the reference instead of computing it: the text (paths,
# names) and, by the syntax tree, any use of the checker's modules however it is spelt
SUSPICIOUS = re.compile(r"attnlib\.checks|get_exercise|all_exercises|_REGISTRY|solutions/|\.reference\b")
CHECKER_MODULES = ("attnlib.checks", "coursetools", "attnlib.grade", "attnlib.assign")
# what reaches into the grader's harness from any cell (issue 12): its modules, the objects
# of the process (gc) and the frames of the harness; an attention notebook needs none of it
HARNESS_INTERNALS = (
    "coursetools",
    "attnlib.grade",
    "gc.get_objects",
    "gc.get_referrers",
    "gc.get_referents",
    "sys._getframe",
    "sys._current_frames",
    "inspect.currentframe",
    "inspect.stack",
    "inspect.getouterframes",
    "inspect.trace",
    ".f_back",
    ".f_locals",
    ".f_globals",
    ".tb_frame",
    ".gi_frame",
    ".cr_frame",
)


@dataclass
class Submission:
    """One submission: who, which file, and a fingerprint of its bytes."""

    student: str
    path: Path
    digest: str = ""


@dataclass
class Assignment:
    """The exercises of the notebook being graded: ``{id: points}`` in notebook order.

    ``forbidden``: per exercise, the calls its answer may not use (``Exercise.forbidden``);
    ``digest``: a fingerprint of the notebook, the points and the checks' cases, part of
    each record's resume key so that a change of any of them regrades everyone.
    """

    path: Path
    points: dict[str, float]
    functions: dict[str, str] = field(default_factory=dict)
    forbidden: dict[str, tuple[str, ...]] = field(default_factory=dict)
    digest: str = ""

    @property
    def max_points(self) -> float:
        return float(sum(self.points.values()))


class Unreadable(Exception):
    """A submission that is not a notebook the grader can read."""


def safe_name(name: str) -> str:
    cleaned = SAFE_NAME.sub("_", name).strip("._") or "student"
    return cleaned[:100]


def file_digest(path: Path) -> str:
    h = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    except OSError:
        return "unreadable"
    return h.hexdigest()


# names the grader (and the class tools around it) write at the top of the output folder:
# a student key never takes one of them, whatever the submission file is called
RESERVED_KEYS = frozenset(
    {"grades.csv", "feedback", "report.html", "overrides.csv", "roster.csv", "submissions", "work", "student"}
)


def _name_hash(name: str) -> str:
    return hashlib.sha256(name.encode("utf-8", "surrogateescape")).hexdigest()[:8]


def student_key(raw: str) -> str:
    """The output key of a submission called ``raw`` (file stem or folder name).

    The key is ``raw`` itself when that is a safe, non-reserved file name;
    otherwise the safe form plus a fingerprint of ``raw``, so two names that
    clean up alike (``a b`` and ``a_b``) never share a key, and a key depends on
    its own file only (a rerun finds the same key, whatever else was added).
    """
    base = safe_name(raw)
    if base == raw and base.lower() not in RESERVED_KEYS:
        return base
    return f"{base[:90]}-{_name_hash(raw)}"


def find_submissions(folder: Path, assignment_stem: str) -> list[Submission]:
    """Every submission under ``folder``: ``<student>.ipynb`` files and nbgrader's
    ``<student>/<assignment>/<notebook>.ipynb`` folders (any other file at the top
    is a submission too, and will be reported unreadable). Each file gets its own
    record: ``student`` is a key unique per file (see :func:`student_key`).
    Symbolic links are never followed: a link is a submission reported unreadable."""
    found: list[tuple[str, Submission]] = []
    for entry in sorted(folder.iterdir(), key=lambda p: p.name):
        if entry.name.startswith(".") or entry.name.startswith("__"):
            continue
        if entry.is_symlink():
            found.append((entry.name, Submission(entry.name, entry)))
        elif entry.is_dir():
            notebooks = sorted(
                p
                for p in entry.rglob("*.ipynb")
                if ".ipynb_checkpoints" not in p.parts and not p.is_symlink() and p.is_file()
            )
            if not notebooks:
                found.append((entry.name, Submission(entry.name, entry)))
                continue
            named = [p for p in notebooks if p.stem == assignment_stem]
            in_assignment = [p for p in notebooks if p.parent.name == assignment_stem]
            pick = (named or in_assignment or notebooks)[0]
            found.append((entry.name, Submission(entry.name, pick)))
        elif entry.is_file():
            raw = entry.stem if entry.suffix == ".ipynb" else entry.name
            found.append((entry.name, Submission(raw, entry)))
    keys: dict[str, int] = {}
    for _, sub in found:
        sub.student = student_key(sub.student)
        keys[sub.student.lower()] = keys.get(sub.student.lower(), 0) + 1
    for name, sub in found:
        # a folder "ann" and a file "ann.ipynb", or "Ann"/"ann" on a case-blind file system
        if keys[sub.student.lower()] > 1:
            sub.student = f"{safe_name(sub.student)[:90]}-{_name_hash(name)}"
        sub.digest = file_digest(sub.path) if sub.path.is_file() and not sub.path.is_symlink() else "missing"
    return [sub for _, sub in found]


def resolve_assignment(spec: str, root: Path) -> Path:
    """A notebook path, or a stem such as ``00-how-to-use`` looked up in ``exercises/``."""
    path = Path(spec)
    if path.suffix == ".ipynb" and path.is_file():
        return path
    for candidate in (root / "exercises" / f"{spec}.ipynb", Path("exercises") / f"{spec}.ipynb"):
        if candidate.is_file():
            return candidate
    matches = sorted((root / "exercises").glob(f"{spec}*.ipynb"))
    if len(matches) == 1:
        return matches[0]
    raise FileNotFoundError(f"no exercise notebook {spec!r} (looked in {root / 'exercises'})")


def _meta(cell) -> dict:
    meta = cell.get("metadata", {}).get("attnlib", {})
    return meta if isinstance(meta, dict) else {}


def read_notebook(path: Path) -> nbformat.NotebookNode:
    """Read any nbformat version as v4; :class:`Unreadable` with a reason otherwise."""
    if path.is_symlink():
        raise Unreadable("a symbolic link: links are not followed, submit the notebook itself")
    if not path.is_file():
        raise Unreadable("no notebook found in this submission")
    if path.suffix != ".ipynb":
        raise Unreadable(f"not a notebook: {path.name}")
    size = path.stat().st_size
    if size == 0:
        raise Unreadable("the file is empty")
    if size > MAX_NOTEBOOK_BYTES:
        raise Unreadable(f"the file is too large ({size} bytes)")
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "rb") as fh:
            text = fh.read(MAX_NOTEBOOK_BYTES + 1).decode("utf-8")
        raw = json.loads(text)
    except RecursionError:
        raise Unreadable("not a notebook (JSON nested too deeply)") from None
    except OSError as exc:
        raise Unreadable(f"could not be read: {exc.strerror}") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise Unreadable(f"not a notebook (not JSON: {str(exc)[:80]})") from None
    if not isinstance(raw, dict) or "nbformat" not in raw:
        raise Unreadable("not a notebook (no nbformat field)")
    try:
        nb = nbformat.reads(text, as_version=4)
    except RecursionError:
        raise Unreadable("not a notebook (JSON nested too deeply)") from None
    except Exception as exc:  # noqa: BLE001 - nbformat raises many kinds
        raise Unreadable(f"not a readable notebook: {type(exc).__name__}: {str(exc)[:80]}") from None
    cells = nb.get("cells")
    if not isinstance(cells, list):
        raise Unreadable("the notebook has no cell list")
    return nb


def _cell_source(cell) -> str:
    source = cell.get("source", "")
    if isinstance(source, list):
        source = "".join(str(s) for s in source)
    return str(source)


def _strip_magics(source: str) -> tuple[str, bool]:
    """Turn IPython syntax into the Python that IPython itself runs (``get_ipython().…`` calls).

    The harness provides ``get_ipython()`` with stand-ins for the line and cell
    magics (``%time``, ``%timeit -o``, ``%%time`` run their code; others do
    nothing) and for shell escapes (``!cmd`` runs nothing; ``x = !cmd`` gives an
    empty list), so ``r = %timeit -o f()``, ``x = !ls`` and ``f?`` cost nothing.
    Without IPython, the offending lines become ``pass``.
    """
    if not IPYTHON_SYNTAX.search(source):
        return source, False  # plain Python: IPython's transformer (slow on long cells) has nothing to do
    transform = _ipython_transformer()
    if transform is not None:
        try:
            out = transform(source)
        except Exception:  # noqa: BLE001 - IPython's own parser gave up: run the cell as it is
            return source, False
        return out, out != source and out != source + "\n"
    lines = source.splitlines()
    changed = False
    if lines and lines[0].lstrip().startswith("%%"):
        lines = lines[1:]  # a cell magic such as %%time: run the body
        changed = True
    out_lines = []
    for line in lines:
        match = MAGIC.match(line)
        if match:
            out_lines.append(f"{match.group(1)}pass  # removed by the grader: {line.strip()[:60]}")
            changed = True
        else:
            out_lines.append(line)
    return "\n".join(out_lines), changed


_TRANSFORMER: list = []


def _ipython_transformer():
    """IPython's own cell transformer (``TransformerManager().transform_cell``), or None."""
    if not _TRANSFORMER:
        try:
            from IPython.core.inputtransformer2 import TransformerManager

            # cached by source: most cells of a class's notebooks are the handed-out ones
            _TRANSFORMER.append(functools.lru_cache(maxsize=4096)(TransformerManager().transform_cell))
        except ImportError:
            _TRANSFORMER.append(None)
    return _TRANSFORMER[0]


def is_check_cell(cell) -> bool:
    meta = _meta(cell)
    tags = cell.get("metadata", {}).get("tags", []) or []
    if "check" in meta or (isinstance(tags, list) and "check" in tags):
        return True
    lines = [ln for ln in _cell_source(cell).splitlines() if ln.strip() and not ln.strip().startswith("#")]
    return bool(lines) and all(CHECK_CALL.match(ln) for ln in lines)


def build_plan(nb, assignment: Assignment) -> tuple[dict, list[str], list[str]]:
    """The harness plan for a submission; also the notes and the review reasons.

    Check cells are dropped; each exercise is evaluated right after its answer
    cell (found by its metadata, else as the last cell defining the function),
    or at the end of the notebook when neither is found.
    """
    notes: list[str] = []
    review: list[str] = []
    cells: list[list] = []
    by_meta: dict[str, int] = {}
    by_def: dict[str, int] = {}
    magic_cells = []
    magic_total = 0
    deadline = time.monotonic() + PLAN_SECONDS
    for index, cell in enumerate(nb.cells):
        if cell.get("cell_type") != "code":
            continue
        if is_check_cell(cell):
            continue
        raw = _cell_source(cell)
        too_big = _too_big(raw)
        magic_total += _magic_lines(raw)
        if not too_big and len(cells) >= MAX_CODE_CELLS:
            too_big = f"more than {MAX_CODE_CELLS} code cells"
        if not too_big and magic_total > MAX_MAGIC_LINES_TOTAL:
            too_big = f"more than {MAX_MAGIC_LINES_TOTAL} lines of IPython syntax in the notebook"
        if not too_big and time.monotonic() > deadline:
            too_big = f"reading the notebook took more than {PLAN_SECONDS:g} s"
        if too_big:
            why = too_big
            review.append(f"cell {index} was not run: {why}")
            cells.append([index, f"raise RuntimeError({('the grader did not run this cell: ' + why)!r})"])
            continue
        source, changed = _strip_magics(raw)
        if changed:
            magic_cells.append(index)
        cells.append([index, source])
        ex_id = _meta(cell).get("exercise")
        if isinstance(ex_id, str) and ex_id in assignment.points:
            if ex_id in by_meta:
                notes.append(f"{ex_id}: more than one answer cell; the last one counts")
            by_meta[ex_id] = index
        for ex_id, fname in assignment.functions.items():
            if _defines(source, fname):
                by_def[ex_id] = index
    if magic_cells:
        notes.append(
            f"IPython syntax in cells {magic_cells} ran with the grader's stand-ins "
            "(%time/%timeit run their code, other magics and shell commands do nothing)"
        )
    evaluate_after: dict[str, list[str]] = {}
    at_end: list[str] = []
    located = 0
    sources = {i: s for i, s in cells}
    forbidden: dict[str, list[str]] = {}
    held: dict[str, list[str]] = {}  # exercises whose answer the allow-list sends to review
    handed_out = _handed_out_cells(assignment.path)
    handed_out_indices = frozenset(i for i, src in cells if src in handed_out)
    selected: dict[str, dict[str, list[list]]] = {}
    read_units: set[tuple[int, str]] = set()  # learner units already read for the review reasons
    for ex_id in assignment.points:
        fname = assignment.functions.get(ex_id, "")
        where = _answer_cell(ex_id, fname, by_meta, by_def, sources, handed_out_indices, notes)
        chosen = selection.select(cells, handed_out_indices, where, fname)
        selected[ex_id] = {"handed_out": chosen.handed_out, "learner": chosen.learner}
        # what runs for this exercise, in notebook order: the only cells its checks read
        units = sorted(chosen.cells, key=lambda unit: unit[0])
        for index in chosen.unreadable:
            notes.append(
                f"{ex_id}: cell {index} could not be read (a syntax error?): it did not run for the answer"
            )
        if where is None:
            at_end.append(ex_id)
            found = _allow_list(units, [], ex_id, assignment, review, held, sorted(handed_out_indices))
            if found:
                forbidden[ex_id] = sorted(found)
        else:
            located += 1
            evaluate_after.setdefault(str(where), []).append(ex_id)
            answer = sources.get(where, "")
            if SUSPICIOUS.search(answer) or _uses(
                answer, CHECKER_MODULES, review, f"{ex_id}: the answer cell"
            ):
                review.append(f"{ex_id}: the answer cell refers to the checker or the solutions")
            # the answer cell, and every selected unit before it that (re)defines the function
            defining = [i for i, src in units if i < where and fname and _defines(src, fname)]
            found = set()
            for cell_index in [*defining, where]:
                found |= set(
                    forbidden_at(units, cell_index, assignment.forbidden.get(ex_id, ()), review, ex_id)
                )
            found |= _allow_list(
                units, [*defining, where], ex_id, assignment, review, held, sorted(handed_out_indices)
            )
            if found:
                forbidden[ex_id] = sorted(found)
        _read_units(chosen.learner, read_units, review, deadline)
    if assignment.points and located == 0:
        review.append("none of the assignment's answer cells is in this notebook: is it the right one?")
    plan = {
        "cells": cells,
        "evaluate_after": evaluate_after,
        "evaluate_at_end": at_end,
        "selected": selected,
    }
    if forbidden:
        plan["forbidden"] = forbidden  # read by the grader only (runner), never trusted from the sandbox
    held = {ex_id: reasons for ex_id, reasons in held.items() if ex_id not in forbidden}
    if held:
        plan["held"] = held  # scores withheld until a person has read the answer (verdict.finish)
    return plan, notes, review


def _answer_cell(
    ex_id: str,
    fname: str,
    by_meta: dict[str, int],
    by_def: dict[str, int],
    sources: dict[int, str],
    handed_out: frozenset[int],
    notes: list[str],
) -> int | None:
    """Exercise ``ex_id``'s answer cell: the cell with its metadata; when that cell does not define
    the function (or is left as handed out while a later cell of the learner defines it), the last
    cell that defines it; None when neither is found (the function is looked up after every cell)."""
    meta, last = by_meta.get(ex_id), by_def.get(ex_id)
    if meta is None:
        if last is not None:
            notes.append(f"{ex_id}: the answer cell lost its metadata; found it by its function name")
        return last
    if last is not None and last != meta and fname:
        if not _defines(sources.get(meta, ""), fname):
            notes.append(f"{ex_id}: the answer cell does not define {fname}; cell {last} does, and counts")
            return last
        if meta in handed_out and last > meta and last not in handed_out:
            notes.append(
                f"{ex_id}: the answer cell is as handed out; cell {last} defines {fname}, and counts"
            )
            return last
    return meta


def _read_units(units: list[list], done: set[tuple[int, str]], review: list[str], deadline: float) -> None:
    """Review reasons for the learner's code that runs (issue 43: only what runs is read): what
    reaches into the grader's process, and what the forbidden-call check cannot see through."""
    for index, source in units:
        if (index, source) in done:
            continue
        done.add((index, source))
        if time.monotonic() > deadline:
            review.append(f"cell {index} was not read by the checks: reading took over {PLAN_SECONDS:g} s")
            return
        try:
            reached = _reaches_harness(source)
            dynamic = _dynamic(source)
        except (RecursionError, MemoryError) as exc:
            review.append(
                f"cell {index} could not be read by the forbidden-call check ({type(exc).__name__})"
            )
            continue
        if reached:
            review.append(
                f"cell {index} reaches into the grader's process ({', '.join(reached)}): "
                "it may have written to the grader's channel"
            )
        if dynamic:
            review.append(
                f"cell {index} uses what the forbidden-call check cannot see through "
                f"({', '.join(dynamic)}): read it"
            )


MAX_REASONS = 20  # per exercise: the record stays small whatever the answer holds
_NAMES: dict = {}  # the last notebook's names (build_plan reads one notebook at a time)


def _allow_list(
    cells: list,
    answers: list[int],
    ex_id: str,
    assignment: Assignment,
    review: list[str],
    held: dict[str, list[str]],
    handed_out: Sequence[int] = (),
) -> set[str]:
    """The allow-list rule (attnlib.checks.rules.audit_notebook) on exercise ``ex_id``: the
    forbidden entries it found (the answer scores 0); its review reasons go to ``review`` and,
    per exercise, to ``held`` (the exercise's score waits for a person)."""
    from attnlib.checks.rules import audit_notebook, notebook_names
    from attnlib.checks.rules.allowed import policy

    rule = policy(ex_id, assignment.functions.get(ex_id, ""), assignment.forbidden.get(ex_id, ()))
    if not rule.function:
        return set()
    key = id(cells)  # the notebook's names are read once for all its exercises
    if _NAMES.get("key") != key:
        try:
            _NAMES.update(key=key, names=notebook_names(cells), cells=cells)
        except (RecursionError, MemoryError):
            _NAMES.update(key=key, names=None, cells=cells)
    audit = audit_notebook(cells, answers, rule, handed_out, names=_NAMES["names"])
    reasons = [f"{ex_id}: {why}" for why in audit.review[:MAX_REASONS]]
    if len(audit.review) > MAX_REASONS:
        reasons.append(f"{ex_id}: and {len(audit.review) - MAX_REASONS} more reasons")
    if reasons:
        held.setdefault(ex_id, []).extend(reasons)
        review.extend(r for r in reasons if r not in review)
    return set(audit.forbidden)


def _too_big(source: str) -> str:
    """Why a cell is too large to be read in the grader's thread, or ``""``."""
    if len(source) > MAX_CELL_BYTES:
        return f"{len(source)} characters (at most {MAX_CELL_BYTES})"
    lines = source.count("\n") + 1
    if lines > MAX_CELL_LINES:
        return f"{lines} lines (at most {MAX_CELL_LINES})"
    magic = _magic_lines(source)
    if magic > MAX_MAGIC_LINES:
        return f"{magic} lines of IPython syntax (at most {MAX_MAGIC_LINES})"
    return ""


def _magic_lines(source: str) -> int:
    return sum(1 for line in source.splitlines() if line.lstrip()[:1] in ("%", "!"))


@functools.lru_cache(maxsize=256)
def _defines(source: str, name: str) -> bool:
    """True when ``source`` defines ``name`` at the start of a line: ``def name(`` or ``name =``.
    The pattern never lets a blank run cross a newline (issue 24: ``^\\s*`` with re.M was
    quadratic on a cell of blank lines)."""
    name = re.escape(name)
    pattern = rf"^[ \t]*(?:(?:async[ \t]+)?def[ \t]+{name}[ \t]*\(|{name}[ \t]*(?::[^=\n]*)?=(?!=))"
    return re.search(pattern, source, re.M) is not None


@functools.lru_cache(maxsize=64)
def _handed_out_sources(path: str, mtime: float) -> frozenset[str]:
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception:  # noqa: BLE001 - no handed-out notebook: every cell is read
        return frozenset()
    return frozenset(_strip_magics(_cell_source(c))[0] for c in nb.cells if c.get("cell_type") == "code")


def _handed_out_cells(path) -> frozenset[str]:
    """The code cells of the handed-out notebook (after IPython's transformer): unchanged, they are
    the course's own code (its setup cell installs packages), not read for dynamic lookups."""
    try:
        return _handed_out_sources(str(path), os.stat(path).st_mtime)
    except (OSError, TypeError):
        return frozenset()


def forbidden_at(cells: list, cell_index: int, names, review: list[str], ex_id: str) -> list[str]:
    """The entries of ``names`` that cell ``cell_index`` uses, with the aliases and helper functions of
    the cells before it (attnlib.checks.rules.find_forbidden_in_cells): ``s = F.softmax`` in one
    cell and ``s(x)`` in the answer count, a demonstration cell's own calls do not. A cell the
    check cannot read (too deep, too large) adds a reason to ``review``: never "nothing found"."""
    if not names:
        return []
    from attnlib.checks.rules import find_forbidden_in_cells

    sources = [source for index, source in cells if index <= cell_index]
    try:
        return list(find_forbidden_in_cells(sources, len(sources) - 1, names))
    except (RecursionError, MemoryError) as exc:
        review.append(
            f"{ex_id}: the forbidden-call check could not read the cells up to cell {cell_index} "
            f"({type(exc).__name__}): read them"
        )
        return []


@functools.lru_cache(maxsize=4096)
def _reaches_harness(source: str) -> tuple[str, ...]:
    """The entries of :data:`HARNESS_INTERNALS` a cell uses (cached: most cells are the handed-out ones).
    Raises RecursionError or MemoryError where the cell cannot be read."""
    from attnlib.checks.rules import find_forbidden

    return tuple(find_forbidden(source, HARNESS_INTERNALS))


@functools.lru_cache(maxsize=4096)
def _dynamic(source: str) -> tuple[str, ...]:
    """What a cell uses that the forbidden-call check cannot see through (forbidden.find_dynamic)."""
    from attnlib.checks.rules import find_dynamic

    return tuple(find_dynamic(source))


def _uses(source: str, names, review: list[str] | None = None, what: str = "") -> list[str]:
    """The entries of ``names`` that ``source`` uses, by its syntax tree (attnlib.checks.rules)."""
    if not names:
        return []
    from attnlib.checks.rules import find_forbidden

    try:
        return list(find_forbidden(source, names))
    except (RecursionError, MemoryError) as exc:
        if review is not None:
            review.append(f"{what} could not be read by the checks ({type(exc).__name__}): read it")
        return []
