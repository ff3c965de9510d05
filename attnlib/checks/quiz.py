"""Concept questions (self-checks) in the exercise notebooks: checked for learners, counted for instructors.

One source per chapter, ``attnlib/quizzes/chNN.yml`` (package data: an installed attnlib has it),
feeds the website (book/_ext/course_explorers.py
draws the questions in the chapter's page) and the exercise notebook (coursetools/assign.py appends
the questions and an answer cell). In the notebook the learner fills in ``quiz_answers`` and runs
:func:`check_quiz`, which says for each question whether the answer is right and explains it (each
wrong option by the misconception it reflects), with the section to reread.

The answer cell is a check cell (metadata ``attnlib.check = "quiz"``, tag ``check``): the grader
does not run it. The instructor counts the answers with :func:`count_notebooks` (or
``python -m attnlib.checks.quiz NOTEBOOK...``), which reads the cell's ``quiz_answers = {...}``
without running anything: an answer cell that is missing, edited into something other than a
dict of literals, or names a question twice is *review*, never a count.

Answers: a letter (``"a"``, ``"b"``, ...) for a multiple-choice question, a number for the others
(within the question's tolerance). A number may also be written as text with its digits grouped,
as the page's answer box takes it: ``"1,050,624"``, ``"1 050 624"``, ``"1_050_624"`` (or the
literal ``1_050_624``), and with a decimal comma, ``"0,25"``. A lone comma before three digits
(``"2,828"``) reads both ways, 2828 and 2.828: the answer is right when either reading is
(:func:`number_readings`).
"""

from __future__ import annotations

import ast
import json
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "QuizResult",
    "QuizUnavailable",
    "answer_template",
    "answers_from_notebook",
    "check_quiz",
    "count_notebooks",
    "grade_quiz",
    "load_quiz",
    "number_readings",
]

QUIZ_DIR = Path(__file__).resolve().parents[1] / "quizzes"
ANSWERS_NAME = "quiz_answers"
LETTERS = "abcdefgh"


class QuizUnavailable(RuntimeError):
    """The quiz files are not here (attnlib installed without the course's checkout)."""


def _chapter(chapter) -> str:
    text = str(chapter).strip().lower().removeprefix("ch")
    if not (len(text) == 2 and text.isdigit()):
        raise ValueError(f"chapter must be a two-digit chapter number such as '04', got {chapter!r}")
    return text


def load_quiz(chapter, quiz_dir: Path | None = None) -> dict:
    """The questions of ``chapter`` ("04"), as in ``attnlib/quizzes/chNN.yml``."""
    chapter = _chapter(chapter)
    path = (quiz_dir or QUIZ_DIR) / f"ch{chapter}.yml"
    if not path.is_file():
        raise QuizUnavailable(
            f"no quiz file {path}: this attnlib has no questions for chapter {chapter} "
            "(they ship with attnlib in attnlib/quizzes/; install the course's attnlib to check them)"
        )
    import yaml

    return yaml.safe_load(path.read_text(encoding="utf-8"))


def answer_template(quiz: dict) -> dict[str, None]:
    """``{"1": None, "2": None, ...}``: one entry per question, in order."""
    return {str(q["id"]): None for q in quiz["questions"]}


@dataclass
class QuestionResult:
    id: str
    status: str  # "right", "wrong", "unanswered", "invalid"
    given: object
    explanation: str
    section: str


@dataclass
class QuizResult:
    """The outcome of one chapter's self-check: counts and one :class:`QuestionResult` per question."""

    chapter: str
    questions: list[QuestionResult] = field(default_factory=list)
    review: str = ""  # why the answers could not be read with certainty (then nothing is counted)

    @property
    def total(self) -> int:
        return len(self.questions)

    @property
    def correct(self) -> int:
        return 0 if self.review else sum(q.status == "right" for q in self.questions)

    @property
    def answered(self) -> int:
        return sum(q.status in ("right", "wrong") for q in self.questions)


_STRONG = re.compile(r"\*\*(?!\s)([^*]+?)(?<!\s)\*\*")
_EMPHASIS = re.compile(r"(?<![*\w])\*(?!\s)([^*]+?)(?<!\s)\*(?![*\w])")


def _plain(text: str) -> str:
    """A question's text for print: one line, its **bold** and *emphasis* marks dropped (the
    words stay; the page draws them as bold and italics)."""
    return _EMPHASIS.sub(r"\1", _STRONG.sub(r"\1", " ".join(str(text).split())))


_SPACES = dict.fromkeys(map(ord, "\u00a0\u2009\u202f"), " ")
_PLAIN_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_UNDERSCORES = re.compile(r"[-+]?\d+(?:_\d+)+(?:\.\d+)?")  # as Python writes 1_050_624
_GROUPED = {  # thousands separator: its pattern (the decimal mark after it, if any)
    ",": re.compile(r"[-+]?\d{1,3}(?:,\d{3})+(?:\.\d+)?"),
    " ": re.compile(r"[-+]?\d{1,3}(?: \d{3})+(?:[.,]\d+)?"),
    ".": re.compile(r"[-+]?\d{1,3}(?:\.\d{3}){2,}(?:,\d+)?"),  # 1.050.624 (one dot is a decimal)
}
_DECIMAL_COMMA = re.compile(r"[-+]?\d*,\d+")


def number_readings(given) -> list[float]:
    """The numbers an answer can mean, most likely first; ``[]`` when it is not a number.

    A number is itself. Text is read as the page's answer box reads it: ``"1,050,624"``,
    ``"1 050 624"``, ``"1_050_624"`` and ``"1.050.624"`` are 1050624; ``"0,25"`` is 0.25; a lone
    comma before three digits (``"2,828"``) reads both ways, ``[2828.0, 2.828]``.
    """
    if isinstance(given, bool):
        return []
    if isinstance(given, (int, float)):
        return [float(given)] if math.isfinite(given) else []
    if not isinstance(given, str):
        return []
    text = given.strip().translate(_SPACES).replace("\u2212", "-")
    found: list[float] = []

    def add(number: str) -> None:
        value = float(number)
        if math.isfinite(value) and value not in found:
            found.append(value)

    if _PLAIN_NUMBER.fullmatch(text):
        add(text)
    if _UNDERSCORES.fullmatch(text):
        add(text.replace("_", ""))
    for sep, pattern in _GROUPED.items():
        if pattern.fullmatch(text):
            add(text.replace(sep, "").replace(",", "."))
    if _DECIMAL_COMMA.fullmatch(text):
        add(text.replace(",", "."))
    return found


def _grade_one(q: dict, given) -> QuestionResult:
    qid, section = str(q["id"]), q["section"]
    if given is None:
        return QuestionResult(qid, "unanswered", given, "not answered yet", section)
    if q["kind"] == "choice":
        letters = LETTERS[: len(q["options"])]
        if not isinstance(given, str) or given.strip().lower() not in letters:
            return QuestionResult(
                qid, "invalid", given, f"answer with one of the letters {', '.join(letters)}", section
            )
        option = q["options"][letters.index(given.strip().lower())]
        status = "right" if option.get("correct") else "wrong"
        return QuestionResult(qid, status, given, _plain(option["why"]), section)
    readings = number_readings(given)
    if not readings:
        return QuestionResult(
            qid, "invalid", given, 'answer with a number (such as 1050624, 1_050_624 or "1,050,624")', section
        )
    tolerance = float(q.get("tolerance", 0))
    if any(abs(x - q["answer"]) <= tolerance + 1e-12 * abs(q["answer"]) for x in readings):
        return QuestionResult(qid, "right", given, _plain(q["why"]), section)
    for x in readings:
        for mistake in q.get("mistakes", []):
            if abs(x - mistake["value"]) <= tolerance + 1e-12:
                return QuestionResult(qid, "wrong", given, _plain(mistake["why"]), section)
    other = q.get("other", "work it out again from the section this question links to.")
    return QuestionResult(qid, "wrong", given, _plain(other), section)


def grade_quiz(chapter, answers: dict, quiz: dict | None = None) -> QuizResult:
    """Grade ``answers`` (``{question id: letter or number}``) against chapter ``chapter``'s quiz."""
    chapter = _chapter(chapter)
    quiz = quiz or load_quiz(chapter)
    if not isinstance(answers, dict):
        raise TypeError(
            f"check_quiz: answers must be a dict such as {answer_template(quiz)}, "
            f"got {type(answers).__name__}"
        )
    known = answer_template(quiz)
    unknown = sorted(str(k) for k in answers if str(k) not in known)
    if unknown:
        raise ValueError(
            f"check_quiz: no question {', '.join(unknown)} in chapter {chapter}; "
            f"the questions are {list(known)}"
        )
    given = {str(k): v for k, v in answers.items()}
    return QuizResult(chapter, [_grade_one(q, given.get(str(q["id"]))) for q in quiz["questions"]])


def check_quiz(chapter, answers: dict) -> QuizResult:
    """Print, for each question, whether the answer is right and why; return the :class:`QuizResult`."""
    try:
        result = grade_quiz(chapter, answers)
    except QuizUnavailable as exc:
        print(f"The self-check cannot be checked here: {exc}")
        return QuizResult(_chapter(chapter), review=str(exc))
    marks = {
        "right": "right",
        "wrong": "not this one",
        "unanswered": "not answered",
        "invalid": "cannot read",
    }
    for q in result.questions:
        line = f"Question {q.id}: {marks[q.status]}."
        if q.status in ("right", "wrong", "invalid"):
            line += f" {q.explanation}"
        if q.status == "wrong":
            line += f" (Reread the section #{q.section} of chapter {result.chapter}.)"
        print(line)
    print(f"{result.correct} of {result.total} right ({result.answered} answered).")
    return result


# --- counting a class's notebooks (no learner code runs) -----------------------------------------


def _quiz_cells(nb: dict) -> list[dict]:
    return [
        c
        for c in nb.get("cells", [])
        if c.get("cell_type") == "code"
        and isinstance(c.get("metadata", {}).get("attnlib"), dict)
        and "quiz" in c["metadata"]["attnlib"]
    ]


def answers_from_notebook(path: str | Path) -> tuple[str | None, dict | None, str]:
    """``(chapter, answers, review)`` read from a notebook's quiz cell without running it.

    ``review`` is empty when the answers were read with certainty; otherwise it says why not
    (and ``answers`` is None).
    """
    try:
        nb = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return None, None, f"cannot read the notebook: {exc}"
    cells = _quiz_cells(nb)
    if len(cells) != 1:
        return None, None, f"expected one quiz cell (metadata attnlib.quiz), found {len(cells)}"
    chapter = str(cells[0]["metadata"]["attnlib"]["quiz"])
    source = cells[0].get("source", "")
    source = "".join(source) if isinstance(source, list) else str(source)
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return chapter, None, f"the quiz cell does not parse: {exc.msg} (line {exc.lineno})"
    found = [
        node
        for node in tree.body
        if isinstance(node, ast.Assign)
        and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Name)
        and node.targets[0].id == ANSWERS_NAME
    ]
    others = [
        node
        for node in ast.walk(tree)
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.NamedExpr)) and node not in found
    ]
    if len(found) != 1 or others:
        return chapter, None, f"expected exactly one assignment `{ANSWERS_NAME} = {{...}}` in the quiz cell"
    value = found[0].value
    if not isinstance(value, ast.Dict) or any(k is None for k in value.keys):
        return chapter, None, f"`{ANSWERS_NAME}` is not a plain dict"
    keys = [k.value if isinstance(k, ast.Constant) else None for k in value.keys]
    if any(not isinstance(k, str) for k in keys) or len(set(keys)) != len(keys):
        return chapter, None, f"`{ANSWERS_NAME}` must have each question's id once, as a string"
    try:
        answers = ast.literal_eval(value)
    except ValueError:
        return chapter, None, f"`{ANSWERS_NAME}` holds something other than letters and numbers"
    return chapter, answers, ""


def count_notebooks(paths, quiz_dir: Path | None = None) -> list[dict]:
    """One row per notebook: ``notebook, chapter, correct, total, answered, review``."""
    rows = []
    for path in paths:
        chapter, answers, review = answers_from_notebook(path)
        row = {
            "notebook": str(path),
            "chapter": chapter,
            "correct": 0,
            "total": 0,
            "answered": 0,
            "review": review,
        }
        if not review:
            try:
                result = grade_quiz(chapter, answers, load_quiz(chapter, quiz_dir))
                row.update(correct=result.correct, total=result.total, answered=result.answered)
            except (ValueError, TypeError, QuizUnavailable) as exc:
                row["review"] = str(exc)
        rows.append(row)
    return rows


def main(argv: list[str]) -> int:
    """``python -m attnlib.checks.quiz NOTEBOOK...``: a CSV of each notebook's self-check count."""
    import csv

    rows = count_notebooks(argv)
    writer = csv.DictWriter(
        sys.stdout, fieldnames=["notebook", "chapter", "correct", "total", "answered", "review"]
    )
    writer.writeheader()
    writer.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
