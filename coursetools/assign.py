"""Generate the learners' exercise notebooks from the solution notebooks.

``solutions/NN-slug.ipynb`` is the single source of every exercise. This module
copies it to ``exercises/NN-slug.ipynb`` with each answer region::

    ### BEGIN SOLUTION
    ...the answer...
    ### END SOLUTION

replaced by a stub that raises ``NotImplementedError`` (at the same
indentation), and with every output and execution count cleared.

A written question graded by hand is a markdown answer cell with metadata
``{"attnlib": {"manual": "q-NN-k", "points": P}}`` whose model answer sits between
the same markers; the exercise notebook gets ``YOUR ANSWER HERE`` in its place
(:mod:`coursetools.grade.outputs.manual` collects the learners' answers). A markdown cell
with an answer region and no such metadata is refused: its answer would be handed out.

An exercise whose check forbids calls (``Exercise.forbidden`` in
``attnlib/checks/chNN_slug.py``: an answer that uses one scores 0) gets, at the
end of its text (the markdown cell above its answer cell), one line naming them
in the learner's words (:func:`not_allowed_line`), made here from the check's
list so that the notebook cannot drift from what the grader flags.

A chapter with concept questions (``attnlib/quizzes/chNN.yml``, the same file that the website's
page draws) gets, before the "check all" cells, the questions as a markdown cell and an answer
cell ``quiz_answers = {...}`` that runs :func:`attnlib.checks.quiz.check_quiz` (metadata
``{"attnlib": {"check": "quiz", "quiz": "NN"}}``, tags ``check`` and ``quiz``: the grader does not
run it; the instructor counts the answers with ``python -m attnlib.checks.quiz``), generated here
(:func:`quiz_cells`), never written in a solution notebook.

Every exercise notebook ends with a "check all" cell (a markdown cell, then a
code cell calling :func:`attnlib.checks.check_all` with the notebook's
exercises and points), generated here, never written in a solution notebook.
Its metadata ``{"attnlib": {"check": "all"}}`` and tag ``check`` make the
grader skip it like the other check cells.

Usage::

    python -m coursetools.assign             # every solutions/*.ipynb
    python -m coursetools.assign solutions/02-additive-attention.ipynb
    python -m coursetools.assign --check         # exit 1 if a committed exercise is stale
"""

from __future__ import annotations

import argparse
import copy
import importlib
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import nbformat

from attnlib.checks.rules import FAMILIES, FAMILY_NAMES, family_covers

BEGIN = "### BEGIN SOLUTION"
END = "### END SOLUTION"
STUB_COMMENT = "# YOUR CODE HERE"
ANSWER_STUB = "YOUR ANSWER HERE"
EXERCISE_ID = re.compile(r"^ex-\d{2}-\d+$")
QUESTION_ID = re.compile(r"^q-\d{2}-\d+$")
# The generated last cells of every exercise notebook (see check_all_cells).
CHECK_ALL = "all"
CHECK_ALL_IDS = ("check-all-intro", "check-all")
CHECK_ALL_INTRO = """## Before you hand in: check everything

The cell below runs the check of every exercise in this notebook on your
functions as they are now, and prints a table: which pass, which fail, which
you have not attempted yet and which are not defined (run their cells first).
It shows no hints and uses up none of them. The grader adds hidden cases."""
# The generated self-check cells (see quiz_cells).
QUIZ = "quiz"
QUIZ_IDS = ("quiz-intro", "quiz-answers")
# The start of the generated line that names an exercise's forbidden calls (see not_allowed_line).
NOT_ALLOWED = "**Not allowed in this answer**"
# Examples shown per family when a line names several families (all of them when it names one).
_EXAMPLES_WHEN_SEVERAL = 2
# Metadata that nbclient and editors add and that must not leak into the exercises.
_DROP_CELL_METADATA = ("execution", "collapsed", "scrolled", "ExecuteTime")


class AssignError(ValueError):
    """A solution notebook that breaks the exercise format."""


def exercise_meta(cell) -> dict:
    """The ``attnlib`` block of a cell's metadata (empty dict if absent)."""
    return dict(cell.get("metadata", {}).get("attnlib", {}))


def _replace_regions(source: str, where: str, stub) -> str:
    """``source`` with each BEGIN/END SOLUTION region replaced by the lines ``stub(indent)`` gives
    (``indent``: the BEGIN line's); raises :class:`AssignError` for a nested, stray or unclosed
    marker. The one scanner of both kinds of answer (code and written)."""
    out: list[str] = []
    inside = False
    for lineno, line in enumerate(source.splitlines(), start=1):
        stripped = line.strip()
        if stripped == BEGIN:
            if inside:
                raise AssignError(f"{where}, line {lineno}: nested {BEGIN}")
            inside = True
            out += stub(line[: len(line) - len(line.lstrip())])
        elif stripped == END:
            if not inside:
                raise AssignError(f"{where}, line {lineno}: {END} without {BEGIN}")
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise AssignError(f"{where}: {BEGIN} is never closed by {END}")
    return "\n".join(out)


def strip_solution(source: str, exercise_id: str, where: str) -> str:
    """Replace each BEGIN/END SOLUTION region in ``source`` with a stub."""
    message = f"{exercise_id}: replace this line with your answer"

    def stub(indent: str) -> list[str]:
        return [f"{indent}{STUB_COMMENT}", f'{indent}raise NotImplementedError("{message}")']

    return _replace_regions(source, where, stub)


def strip_written_answer(source: str, where: str) -> str:
    """Replace each BEGIN/END SOLUTION region of a markdown answer cell with ``YOUR ANSWER HERE``."""
    return _replace_regions(source, where, lambda indent: [ANSWER_STUB])


def _check_answer_cell(
    where: str,
    noun: str,
    answer_id,
    pattern,
    form: str,
    meta: dict,
    has_region: bool,
    seen: set,
    region_note: str = "",
) -> None:
    """The checks every graded cell passes (an exercise or a written question); records its id in ``seen``."""
    if not pattern.match(str(answer_id)):
        raise AssignError(f"{where}: {noun} id {answer_id!r} is not of the form '{form}'")
    if answer_id in seen:
        raise AssignError(f"{where}: {noun} id {answer_id!r} is used twice")
    if not isinstance(meta.get("points"), int | float) or meta["points"] <= 0:
        raise AssignError(f"{where}: {noun} {answer_id!r} needs positive metadata attnlib.points")
    if not has_region:
        raise AssignError(f"{where}: {noun} {answer_id!r} has no {BEGIN} region{region_note}")
    seen.add(answer_id)


def _written_question(cell, where: str, seen: set[str]) -> None:
    """Check and hand out a markdown cell: a written question's answer cell loses its answer."""
    meta = exercise_meta(cell)
    has_region = BEGIN in cell.source or END in cell.source
    q_id = meta.get("manual")
    if q_id is None:
        if has_region:
            raise AssignError(f"{where}: answer region in a markdown cell without metadata attnlib.manual")
        return
    _check_answer_cell(
        where,
        "written question",
        q_id,
        QUESTION_ID,
        "q-NN-k",
        meta,
        has_region,
        seen,
        region_note=" (its model answer)",
    )
    cell.source = strip_written_answer(cell.source, where)


def _check_all_call(points: dict[str, float], width: int = 79) -> str:
    """``check_all(points={...})``, folded to ``width`` columns.

    Without a namespace, ``check_all`` reads the calling cell's globals: the cell
    holds no ``globals()`` call, which the forbidden-call check would flag."""
    items = [f'"{ex_id}": {value!r}' for ex_id, value in points.items()]
    one_line = f"check_all(points={{{', '.join(items)}}})"
    if len(one_line) <= width:
        return one_line
    lines = ["check_all(points={"]
    row = ""
    for item in items:
        if row and len(f"    {row} {item},") > width:
            lines.append(f"    {row}")
            row = ""
        row = f"{row} {item}," if row else f"{item},"
    lines += [f"    {row}", "})"]
    return "\n".join(lines)


def check_all_cells(points: dict[str, float], with_ids: bool = True) -> list:
    """The last cells of an exercise notebook: a short text and the "check all" code cell.

    The code cell calls :func:`attnlib.checks.check_all` (which reads the
    notebook's globals) with ``points`` (``{exercise id: points}``, notebook order);
    its metadata tags it as a check cell, which the grader does not run.
    """
    source = "\n".join(
        [
            "# Every exercise of this notebook, on its visible cases (no hints used up).",
            "from attnlib.checks import check_all",
            "",
            _check_all_call(points),
        ]
    )
    intro = nbformat.v4.new_markdown_cell(CHECK_ALL_INTRO)
    code = nbformat.v4.new_code_cell(
        source, metadata={"attnlib": {"check": CHECK_ALL}, "tags": ["check", "check-all"]}
    )
    for cell, cell_id in zip((intro, code), CHECK_ALL_IDS, strict=True):
        if with_ids:
            cell["id"] = cell_id
        else:
            cell.pop("id", None)
    return [intro, code]


def _quiz_markdown(number: str, quiz: dict) -> str:
    lines = [
        "## Self-check: concept questions",
        "",
        "The questions at the end of the chapter's page. Set each answer in `quiz_answers`",
        "below (a letter for a multiple-choice question, a number otherwise) and run the cell:",
        "every answer, right or wrong, is explained. The grader does not run this cell; your",
        "instructor counts the answers.",
    ]
    for q in quiz["questions"]:
        lines += ["", f"**Question {q['id']}.** {' '.join(str(q['prompt']).split())}"]
        if q["kind"] == "choice":
            lines.append("")
            for letter, option in zip("abcdefgh", q["options"], strict=False):
                lines.append(f"- **{letter}**: {' '.join(str(option['text']).split())}")
        else:
            lines += ["", "*(a number)*"]
    return "\n".join(lines)


def quiz_cells(stem: str, with_ids: bool = True) -> list:
    """The self-check cells of chapter ``stem`` ("04-scaling-softmax"): the questions and the answer
    cell, or ``[]`` when the chapter has no quiz file."""
    from attnlib.checks.quiz import QuizUnavailable, answer_template, load_quiz

    number = stem[:2]
    try:
        quiz = load_quiz(number)
    except (QuizUnavailable, ValueError):
        return []
    kinds = {str(q["id"]): q["kind"] for q in quiz["questions"]}
    entries = [
        f'    "{qid}": None,  # ' + ("a letter" if kinds[qid] == "choice" else "a number")
        for qid in answer_template(quiz)
    ]
    source = "\n".join(
        [
            '# Your answers: a letter ("a", "b", ...) or a number; run the cell to check them.',
            "from attnlib.checks.quiz import check_quiz",
            "",
            "quiz_answers = {",
            *entries,
            "}",
            f'check_quiz("{number}", quiz_answers)',
        ]
    )
    intro = nbformat.v4.new_markdown_cell(_quiz_markdown(number, quiz))
    code = nbformat.v4.new_code_cell(
        source, metadata={"attnlib": {"check": QUIZ, "quiz": number}, "tags": ["check", QUIZ]}
    )
    for cell, cell_id in zip((intro, code), QUIZ_IDS, strict=True):
        if with_ids:
            cell["id"] = cell_id
        else:
            cell.pop("id", None)
    return [intro, code]


def registered_forbidden(exercise_id: str) -> tuple[str, ...]:
    """The forbidden calls of a registered exercise (``Exercise.forbidden``); ``()`` for an unknown id.

    Only the exercise's own chapter's check module is imported (:func:`attnlib.checks.get_exercise`).
    """
    from attnlib.checks.exercise import get_exercise

    try:
        return tuple(get_exercise(exercise_id).forbidden)
    except KeyError:
        return ()


def _is_module(path: str) -> bool:
    """True when the dotted ``path`` names an importable module (``torch.autograd``), not a function."""
    try:
        importlib.import_module(path)
    except ImportError:
        return False
    return True


def _named_entries(entries: Sequence[str], words: Sequence[str]) -> list[str]:
    """The learner's spelling of each entry that no named family covers, in the check's order.

    attnlib's spellings of one function (``attnlib.scores.additive_scores``,
    ``attnlib.additive_scores``, its ``attnlib.numpy`` twin: the check forbids them
    together) are named once, by the top-level name when the list holds it."""
    shown: dict[str, str] = {}
    for entry in entries:
        if entry.startswith("~") or family_covers(entry, words):
            continue
        if entry.endswith("()"):
            shown[entry] = f"calling `{entry[:-2]}(...)`"
        elif entry.startswith("."):
            shown[entry] = f"any `{entry}(...)` method"
        elif _is_module(entry):
            shown[entry] = f"anything in `{entry}`"
        elif entry.startswith("attnlib."):
            key = "attnlib twin " + entry.rsplit(".", 1)[-1]
            top = "attnlib." + entry.rsplit(".", 1)[-1]
            shown.setdefault(key, f"`{top if top in entries else entry}`")
        else:
            shown[entry] = f"`{entry}`"
    return list(shown.values())


def not_allowed_line(forbidden: Sequence[str]) -> str | None:
    """The line an exercise's text gets for its forbidden calls; None when there are none.

    A family (``"~softmax"``, :data:`attnlib.checks.rules.FAMILY_NAMES`) is
    named by its label with a few of the calls it catches; the families whose
    whole constant the list holds come first (``ex-04-2``, a log-sum-exp, leads
    with the log-sum-exp). Every other entry is named as the learner would write
    it. The line names calls only, never how to write the answer.
    """
    entries = [str(entry).strip() for entry in forbidden if str(entry).strip()]
    if not entries:
        return None
    order = list(FAMILY_NAMES)
    families = [name for name in order if f"~{name}" in entries]
    families.sort(
        key=lambda name: (not set(FAMILY_NAMES[name].implementations) <= set(entries), order.index(name))
    )
    items = []
    if families:
        count = None if len(families) == 1 else _EXAMPLES_WHEN_SEVERAL
        phrases = []
        for name in families:
            examples = ", ".join(f"`{call}`" for call in FAMILY_NAMES[name].examples[:count])
            phrases.append(f"{FAMILY_NAMES[name].label} ({examples}, ...)")
        joined = phrases[0] if len(phrases) == 1 else f"{', '.join(phrases[:-1])} or {phrases[-1]}"
        items.append(f"any library {joined}")
    named = _named_entries(entries, [word for name in families for word in FAMILIES[name]])
    if named:
        items.append(", ".join(named))
    # the families' examples hold commas: a semicolon parts them from the other names
    return f"{NOT_ALLOWED} (an answer that uses one scores 0): {'; '.join(items)}."


def _exercise_text_cell(nb: nbformat.NotebookNode, index: int, where: str):
    """The markdown cell that states the exercise whose answer cell is ``nb.cells[index]``: the
    nearest one above it, before any other exercise's or check's cell."""
    for cell in reversed(nb.cells[:index]):
        meta = exercise_meta(cell)
        if cell.cell_type == "markdown" and not meta:
            return cell
        if "exercise" in meta or "check" in meta:
            break
    raise AssignError(
        f"{where}: exercise {exercise_meta(nb.cells[index])['exercise']!r} forbids calls "
        "but has no markdown text above its answer cell to state them in"
    )


def _state_forbidden(
    nb: nbformat.NotebookNode, forbidden_of: Callable[[str], Sequence[str]], name: str
) -> None:
    """Append :func:`not_allowed_line` to the text of every exercise that has forbidden calls."""
    for index, cell in enumerate(nb.cells):
        ex_id = exercise_meta(cell).get("exercise") if cell.cell_type == "code" else None
        line = not_allowed_line(forbidden_of(ex_id)) if ex_id else None
        if line is None:
            continue
        text = _exercise_text_cell(nb, index, f"{name}, cell {index}")
        text.source = f"{text.source.rstrip()}\n\n{line}"


def make_exercise(
    solution: nbformat.NotebookNode,
    name: str = "notebook",
    forbidden_of: Callable[[str], Sequence[str]] = registered_forbidden,
) -> nbformat.NotebookNode:
    """Return the exercise version of a solution notebook (the input is not modified).

    ``forbidden_of`` gives an exercise's forbidden calls (default: its check's
    list); the exercise's text gets a line naming them (:func:`not_allowed_line`).

    Raises :class:`AssignError` when an answer region sits in a cell without an
    exercise id, an id is malformed or used twice, the markers are unbalanced,
    a solution already holds the generated line, or an exercise with forbidden
    calls has no markdown text above its answer cell.
    """
    nb = copy.deepcopy(solution)
    seen: set[str] = set()
    questions: set[str] = set()
    for index, cell in enumerate(nb.cells):
        where = f"{name}, cell {index}"
        for key in _DROP_CELL_METADATA:
            cell.metadata.pop(key, None)
        if exercise_meta(cell).get("check") == CHECK_ALL or cell.get("id") in CHECK_ALL_IDS:
            raise AssignError(f"{where}: the check-all cells are generated by assign, not kept in solutions")
        if exercise_meta(cell).get("check") == QUIZ or cell.get("id") in QUIZ_IDS:
            raise AssignError(f"{where}: the self-check cells are generated by assign, not kept in solutions")
        if cell.cell_type == "markdown":
            if NOT_ALLOWED in cell.source:
                raise AssignError(
                    f"{where}: the line {NOT_ALLOWED!r} is generated by assign, not kept in solutions"
                )
            _written_question(cell, where, questions)
            continue
        if cell.cell_type != "code":
            continue
        cell.outputs = []
        cell.execution_count = None
        meta = exercise_meta(cell)
        has_region = BEGIN in cell.source or END in cell.source
        ex_id = meta.get("exercise")
        if has_region and not ex_id:
            raise AssignError(f"{where}: answer region in a cell without metadata attnlib.exercise")
        if ex_id is None:
            continue
        _check_answer_cell(where, "exercise", ex_id, EXERCISE_ID, "ex-NN-k", meta, has_region, seen)
        cell.source = strip_solution(cell.source, ex_id, where)
    _state_forbidden(nb, forbidden_of, name)
    with_ids = bool(nb.cells) and all("id" in cell for cell in nb.cells)
    if re.match(r"^\d\d-", name):
        nb.cells.extend(quiz_cells(Path(name).stem, with_ids=with_ids))
    if seen:
        nb.cells.extend(check_all_cells(exercise_ids(nb), with_ids=with_ids))
    nb.metadata.pop("widgets", None)
    nb.metadata.setdefault("attnlib", {})["generated_from"] = f"solutions/{name}"
    return nb


def _marked_cells(nb: nbformat.NotebookNode, cell_type: str, key: str) -> dict[str, float]:
    """``{id: points}`` of the ``cell_type`` cells whose ``attnlib`` metadata has ``key``, in order."""
    found: dict[str, float] = {}
    for cell in nb.cells:
        meta = exercise_meta(cell)
        if cell.cell_type == cell_type and key in meta:
            found[meta[key]] = meta.get("points", 0)
    return found


def exercise_ids(nb: nbformat.NotebookNode) -> dict[str, float]:
    """The exercises of a notebook (code cells), ``{id: points}``, in notebook order."""
    return _marked_cells(nb, "code", "exercise")


def written_questions(nb: nbformat.NotebookNode) -> dict[str, float]:
    """The written questions graded by hand (markdown cells), ``{id: points}``, in notebook order."""
    return _marked_cells(nb, "markdown", "manual")


def add_written_question(
    solution_path: Path, question_id: str, points: float, prompt: str, answer: str, after: str | None = None
) -> bool:
    """Add a written question graded by hand to a solution notebook: a markdown prompt cell and
    its answer cell (metadata ``attnlib.manual``, the model answer between the solution
    markers), after the cell whose id is ``after`` (default: at the end). Cell ids and the
    other cells are kept. Returns False when the notebook already has ``question_id``."""
    nb = nbformat.read(solution_path, as_version=4)
    if question_id in written_questions(nb):
        return False
    if not QUESTION_ID.match(question_id):
        raise AssignError(f"written question id {question_id!r} is not of the form 'q-NN-k'")
    cells = [
        nbformat.v4.new_markdown_cell(prompt.strip()),
        nbformat.v4.new_markdown_cell(
            f"{BEGIN}\n{answer.strip()}\n{END}",
            metadata={"attnlib": {"manual": question_id, "points": points}},
        ),
    ]
    ids = [c.get("id") for c in nb.cells]
    where = len(nb.cells) if after is None else ids.index(after) + 1
    nb.cells[where:where] = cells
    make_exercise(nb, Path(solution_path).name)  # refuses a malformed question before writing
    nbformat.write(nb, solution_path)
    return True


def render(solution_path: Path) -> str:
    """The text of the exercise notebook generated from ``solution_path``."""
    solution = nbformat.read(solution_path, as_version=4)
    exercise = make_exercise(solution, solution_path.name)
    return nbformat.writes(exercise) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m coursetools.assign", description=__doc__.split("\n")[0])
    parser.add_argument(
        "solutions", nargs="*", type=Path, help="solution notebooks (default: solutions/*.ipynb)"
    )
    parser.add_argument(
        "--out", type=Path, default=Path("exercises"), help="output folder (default: exercises)"
    )
    parser.add_argument(
        "--check", action="store_true", help="only report stale exercise notebooks; exit 1 if any"
    )
    args = parser.parse_args(argv)
    paths = args.solutions or sorted(Path("solutions").glob("*.ipynb"))
    if not paths:
        print("no solution notebooks found", file=sys.stderr)
        return 1
    stale = []
    for path in paths:
        try:
            text = render(path)
        except AssignError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        target = args.out / path.name
        current = target.read_text(encoding="utf-8") if target.exists() else None
        if current == text:
            continue
        if args.check:
            stale.append(target)
        else:
            args.out.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
            print(f"wrote {target}")
    if stale:
        for target in stale:
            print(f"stale: {target} (run: python -m coursetools.assign)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
