"""Near-identical answers: pairs of submissions for a person to look at (never a grade change).

An answer is the source of an exercise's answer cell (found by its metadata,
else as the last cell that defines the exercise's function). It is normalised
through Python's syntax tree: comments and docstrings go, every name that is
bound or read (variables, arguments, functions, imported modules) becomes
``v0, v1, ...`` in order of first appearance, and the tree is printed back in one
canonical layout (``ast.unparse``), so renaming, reformatting and re-commenting
change nothing. Attribute names (``np.swapaxes``, ``.sum``) are kept.

Two answers are flagged when their normal forms are equal, or when their sets
of 5-token shingles overlap by at least ``threshold`` (Jaccard). What is common
is not evidence, so nothing is flagged that is

* shorter than ``min_tokens`` tokens (a one-line answer is written alike by many),
* the handed-out starter code, or
* shared by more than ``max(2, common_share * class size)`` submissions (the
  textbook answer); a shingle that many share does not make a pair either.

Candidate pairs come from an inverted index of the rare shingles, so a class
of a thousand costs about as much as reading it.
"""

from __future__ import annotations

import ast
import itertools
import json
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

TOKEN = re.compile(r"\w+|[^\w\s]")
# [ \t]*, never \s*, after ^ in MULTILINE: \s* also eats the blank lines below, and every line
# start tries again, so n blank lines cost n^2 steps (issue 34: 1,500 cells stalled the report)
MAGIC = re.compile(r"^[ \t]*[%!].*$", re.M)
MAX_ANSWER_CHARS = 20_000  # an answer cell longer than this is not compared (and not parsed)
SHINGLE = 5


@dataclass(frozen=True)
class Flag:
    exercise: str
    first: str
    second: str
    similarity: float  # 1.0: identical after normalisation
    tokens: int


class _Rename(ast.NodeTransformer):
    def __init__(self) -> None:
        self.names: dict[str, str] = {}

    def _name(self, name: str) -> str:
        if name not in self.names:
            self.names[name] = f"v{len(self.names)}"
        return self.names[name]

    def visit_Name(self, node):
        node.id = self._name(node.id)
        return node

    def visit_arg(self, node):
        node.arg = self._name(node.arg)
        node.annotation = None
        return node

    def _body(self, node):
        body = node.body
        if (
            body
            and isinstance(body[0], ast.Expr)
            and isinstance(getattr(body[0], "value", None), ast.Constant)
        ):
            if isinstance(body[0].value.value, str):
                body = body[1:] or [ast.Pass()]
        node.body = body

    def visit_FunctionDef(self, node):
        node.name = self._name(node.name)
        node.returns = None
        self._body(node)
        self.generic_visit(node)
        return node

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node):
        node.name = self._name(node.name)
        self._body(node)
        self.generic_visit(node)
        return node

    def visit_alias(self, node):
        node.asname = self._name(node.asname or node.name.split(".")[0])
        return node

    def visit_Global(self, node):
        node.names = [self._name(n) for n in node.names]
        return node

    visit_Nonlocal = visit_Global


def normalise(source: str) -> str | None:
    """The canonical form of an answer (None when it is not valid Python, longer than
    :data:`MAX_ANSWER_CHARS` or nested too deeply to parse)."""
    if len(source) > MAX_ANSWER_CHARS:
        return None
    source = MAGIC.sub("pass", source)
    try:
        tree = ast.parse(source)
        tree = _Rename().visit(tree)
        if tree.body and isinstance(tree.body[0], ast.Expr) and isinstance(tree.body[0].value, ast.Constant):
            tree.body = tree.body[1:]
        return ast.unparse(ast.fix_missing_locations(tree))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def tokens(normal: str) -> list[str]:
    return TOKEN.findall(normal)


def _cell_source(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def answer_sources(notebook: Path, functions: dict[str, str]) -> dict[str, str]:
    """``{exercise: answer cell source}`` of a notebook file (empty when it cannot be read).

    For the assignment's own notebook (trusted); a learner's notebook is read by
    :func:`coursetools.grade.grading.parse_worker.read_answers`, in the limited worker."""
    try:
        raw = json.loads(Path(notebook).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}  # unreadable, or nested too deeply to parse: the grader reports it "unreadable"
    return sources_of(raw, functions)


def sources_of(raw, functions: dict[str, str]) -> dict[str, str]:
    """``{exercise: answer cell source}`` of a notebook's JSON (empty when it has no cells)."""
    try:
        cells = raw.get("cells") or [c for ws in raw.get("worksheets", []) for c in ws.get("cells", [])]
    except (AttributeError, TypeError):
        return {}
    if not isinstance(cells, list):
        return {}
    by_meta: dict[str, str] = {}
    by_def: dict[str, str] = {}
    for cell in cells:
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        try:
            source = _cell_source(cell) if "source" in cell else "".join(cell.get("input", []))
            meta = (cell.get("metadata") or {}).get("attnlib") or {}
        except (AttributeError, TypeError):
            continue
        ex_id = meta.get("exercise") if isinstance(meta, dict) else None
        if isinstance(ex_id, str) and ex_id in functions:
            by_meta[ex_id] = source
        for ex, name in functions.items():
            if re.search(rf"^[ \t]*def[ \t]+{re.escape(name)}[ \t]*\(", source, re.M):
                by_def[ex] = source
    return {
        ex: by_meta[ex] if ex in by_meta else by_def[ex] for ex in functions if ex in by_meta or ex in by_def
    }


def _shingles(toks: list[str]) -> set[tuple[str, ...]]:
    if len(toks) < SHINGLE:
        return {tuple(toks)}
    return {tuple(toks[i : i + SHINGLE]) for i in range(len(toks) - SHINGLE + 1)}


def flag_pairs(
    answers: dict[str, dict[str, str]],
    starters: dict[str, str] | None = None,
    threshold: float = 0.85,
    min_tokens: int = 40,
    common_share: float = 0.05,
    limit: int = 500,
) -> list[Flag]:
    """Pairs of near-identical answers, per exercise, most similar first.

    ``answers`` is ``{student: {exercise: source}}``; ``starters`` the starter
    code of each exercise (never flagged). At most ``limit`` pairs are returned.
    """
    normal = {s: {ex: normalise(src or "") for ex, src in by_ex.items()} for s, by_ex in answers.items()}
    return flag_normals(normal, starters, threshold, min_tokens, common_share, limit)


def flag_normals(
    answers: dict[str, dict[str, str | None]],
    starters: dict[str, str] | None = None,
    threshold: float = 0.85,
    min_tokens: int = 40,
    common_share: float = 0.05,
    limit: int = 500,
) -> list[Flag]:
    """:func:`flag_pairs` on answers already normalised (:func:`normalise`; None: not Python),
    as the limited reader worker returns them for learners' notebooks."""
    flags: list[Flag] = []
    exercises = sorted({ex for by_ex in answers.values() for ex in by_ex})
    for ex in exercises:
        starter = normalise((starters or {}).get(ex, "") or "")
        normals: dict[str, str] = {}
        for student, by_ex in answers.items():
            normal = by_ex.get(ex)
            if not isinstance(normal, str) or normal == starter or len(tokens(normal)) < min_tokens:
                continue
            normals[student] = normal
        if len(normals) < 2:
            continue
        cap = max(2, int(common_share * len(answers)))
        groups: dict[str, list[str]] = defaultdict(list)
        for student, normal in normals.items():
            groups[normal].append(student)
        for normal, members in groups.items():
            if len(members) > cap:
                continue  # the textbook answer: common, not evidence
            for a, b in itertools.combinations(sorted(members), 2):
                flags.append(Flag(ex, a, b, 1.0, len(tokens(normal))))
        # near-identical: distinct answers that share rare shingles, then Jaccard
        forms = {n: _shingles(tokens(n)) for n, members in groups.items() if len(members) <= cap}
        index: dict[tuple, list[str]] = defaultdict(list)
        for form, shs in forms.items():
            for sh in shs:
                index[sh].append(form)
        rare = max(cap, 10)  # a shingle in more answers than this says nothing about a pair
        candidates: set[tuple[str, str]] = set()
        for holders in index.values():
            if 1 < len(holders) <= rare:
                candidates.update(itertools.combinations(sorted(holders), 2))
        for x, y in candidates:
            union = len(forms[x] | forms[y])
            jaccard = len(forms[x] & forms[y]) / union if union else 0.0
            if jaccard < threshold:
                continue
            for a, b in itertools.product(groups[x], groups[y]):
                a, b = sorted((a, b))
                flags.append(Flag(ex, a, b, round(jaccard, 3), len(tokens(x))))
    flags.sort(key=lambda f: (-f.similarity, f.exercise, f.first, f.second))
    return flags[:limit]
