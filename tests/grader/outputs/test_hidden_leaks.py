"""Issue 43, item 3: nothing the learner's code controls reaches the learner after (or during) a
hidden case.

A learner's code sees a hidden case's inputs when it is called on them; whatever it then
chooses, the learner must not read back: the type name of an exception it makes (a class named
``HX_2_3_5_4_2_3_7_4``, the whole input), the line a later cell raises at, the exit code or
signal of the process it ends, the time it takes (a sleep as long as an input's value). The
feedback, Gradescope's ``results.json``, ``grades.csv`` and ``report.html`` say "an error",
"a wrong output", "the process crashed" or "did not finish" there; the instructor's
``record.json`` keeps everything, and ``--show-hidden-inputs`` shows it. Hints of hidden
cases never ask for their inputs.

The quick tests render records built here; the slow one grades real notebooks through the
real grader (one class of five).
"""

from __future__ import annotations

import csv
import io
import json
import re

import fixtures
import nbformat
import pytest

from attnlib.checks import all_exercises, get_exercise
from attnlib.checks.judge import CaseResult, _failed, error_hint, name_mistakes
from coursetools.grade import batch, gradescope
from coursetools.grade.grading import runner, verdict
from coursetools.grade.outputs import feedback as learner_feedback
from coursetools.grade.outputs import gradebook
from coursetools.grade.outputs.scores import ClassInfo, Sources, build
from coursetools.grade.records.events import CaseEvent, CaseKind
from coursetools.grade.records.paths import Out
from coursetools.grade.records.record import Case, CaseStatus, ExerciseResult, Record, Status

pytestmark = pytest.mark.grader


def _grade(record: Record, points: dict[str, float]):
    record = Record.from_dict(record.to_dict())  # what the later commands read back
    info = ClassInfo(assignment="99-test", points=points, students=[record.student])
    return build(info, {record.student: record}, Sources({}, {}, [], {}, None, [], False)).grades[0]


def _learner_texts(record: Record, points: dict[str, float], show: bool = False) -> dict[str, str]:
    grade = _grade(record, points)
    return {
        "feedback": learner_feedback.feedback_markdown(grade, "99-test", show),
        "results.json": json.dumps(gradescope.results_json(grade, show), ensure_ascii=False),
    }


# --------------------------------------------------------------------------- rendering (quick)

SECRETS = ["HX_2_4_4", "123456789", "line 17", "code 44", "SIGUSR1", "987.654", "boom-2-4-4"]


def _record() -> tuple[Record, dict[str, float]]:
    """Exercise A (a visible case, then a hidden one), then exercise B, whose cases run after A's
    hidden case: its visible cases' messages carry what the learner's code chose there."""
    a = ExerciseResult(
        "ex-9-1",
        1.0,
        0.5,
        "f",
        (
            Case("first", CaseStatus.PASSED, False),
            Case("hidden: a batch (2, 4, 4)", CaseStatus.ERROR, True, "raised HX_2_4_4: boom-2-4-4"),
        ),
    )
    b = ExerciseResult(
        "ex-9-2",
        1.0,
        0.0,
        "g",
        (
            Case("later visible", CaseStatus.FAILED, False, "values differ: expected 1.0, got 123456789.0"),
            Case("later error", CaseStatus.ERROR, False, "raised HX_2_4_4: boom-2-4-4", hint="h"),
            Case("later timeout", CaseStatus.ERROR, False, "did not finish within 3 s"),
        ),
    )
    record = Record(
        "ada",
        status=Status.KERNEL_DIED,
        runs=2,
        exercises={"ex-9-1": a, "ex-9-2": b},
        incidents=[
            "ex-9-1, case 'first': the process exited with code 7",
            "ex-9-1, case 'hidden: a batch (2, 4, 4)': the process exited with code 44",
            "ex-9-2, case 'later visible': the process was killed by SIGUSR1",
            "cell 12: the process exited with code 44",
            "while starting: the process was killed by SIGUSR1",
            "last output: HX_2_4_4",
        ],
        cell_errors=[
            {"cell": 3, "etype": "NameError", "text": "name 'x' is not defined", "line": 2},
            {"cell": 12, "etype": "HX_2_4_4", "text": "boom-2-4-4", "line": 17, "after_hidden": True},
        ],
        seconds=987.654,
    )
    return record, {"ex-9-1": 1.0, "ex-9-2": 1.0}


def test_after_a_hidden_case_the_learner_reads_a_fixed_vocabulary():
    record, points = _record()
    for door, text in _learner_texts(record, points).items():
        leaks = [s for s in SECRETS if s in text]
        assert leaks == [], (door, leaks, text)
        assert learner_feedback.CRASHED in text, door
        assert learner_feedback.RAISED in text and learner_feedback.WRONG_OUTPUT in text, door
        assert "did not finish within 3 s" in text, door  # the verdict's own words stay
    feedback = _learner_texts(record, points)["feedback"]
    # a visible case before every hidden case keeps its detail, as in the notebook
    assert "ex-9-1, case 'first': the process exited with code 7" in feedback
    assert "line 2: `NameError`" in feedback  # a cell before the first answer: its error as raised
    # the instructor asked for everything: it is all there (the test sees what it forbids)
    shown = _learner_texts(record, points, show=True)
    for door, text in shown.items():
        assert "HX_2_4_4" in text and "code 44" in text and "SIGUSR1" in text, door
    assert "line 17" in shown["feedback"] and "123456789" in shown["feedback"]


def test_the_gradebook_names_no_exit_code_or_signal_after_a_hidden_case():
    record, points = _record()
    notes = gradebook.short_notes(record)
    assert "code 44" not in notes and "SIGUSR1" not in notes, notes
    assert "exited with code 7" in notes  # before every hidden case: the instructor's detail stays
    assert "hidden: a batch (2, 4, 4)" in notes  # the instructor's gradebook names the case


def test_results_json_holds_no_time():
    record, points = _record()
    data = gradescope.results_json(_grade(record, points))
    assert "execution_time" not in data
    assert "987" not in json.dumps(data) and "988" not in json.dumps(data)


def test_learner_message_keeps_only_the_verdicts_own_words():
    assert learner_feedback.learner_message("raised HX_1: x", True) == learner_feedback.RAISED
    message = learner_feedback.learner_message("values differ at [0]: expected 1, got 5", True)
    assert message == learner_feedback.WRONG_OUTPUT
    assert (
        learner_feedback.learner_message("the output could not be read: array of dtype <U3", True)
        == learner_feedback.WRONG_OUTPUT
    )
    assert learner_feedback.learner_message("raised HX_1: x", False) == "raised HX_1: x"
    exercise = get_exercise(fixtures.EX)
    settings = runner.Settings(out=fixtures.ROOT / "unused", timeout_cell=3.0)
    for case in exercise.cases:
        for kind in (CaseKind.TIMEOUT, CaseKind.DIED, CaseKind.TIMEOUT_SKIPPED, CaseKind.DIED_SKIPPED):
            message = verdict.judge(exercise, case, CaseEvent(kind), settings).message
            assert learner_feedback.learner_message(message, True) == message, message  # fixed words pass
    forbidden = verdict._verdict(exercise, fixtures.EX, exercise.cases[0], ["numpy.matmul"], {}, settings)
    assert learner_feedback.learner_message(forbidden.message, True) == forbidden.message


# --------------------------------------------------------------------------- hints (quick)

# what a hint would say to ask for a case's inputs: call / run / print ... on the case's inputs
ASKS_FOR_INPUTS = re.compile(
    r"\b(call|run|try|print|inspect|look at|use|pass|feed|evaluate|check)\b[^.;:]{0,60}?"
    r"\b((the|this|that|each|a) (hidden )?case'?s? (inputs?|arguments?)|its inputs|on (the|this) case\b)",
    re.IGNORECASE,
)


def test_the_pattern_finds_a_hint_that_asks_for_inputs():
    assert ASKS_FOR_INPUTS.search("call your function on the case's inputs by hand and read the traceback")
    assert ASKS_FOR_INPUTS.search("run the function on the case's inputs in a fresh kernel")
    assert not ASKS_FOR_INPUTS.search(error_hint(True))
    assert not ASKS_FOR_INPUTS.search(verdict.DIED_HINT_HIDDEN)


def _hidden_hints(exercise) -> list[tuple[str, str]]:
    """Every hint the grader's feedback can show under one of ``exercise``'s hidden cases."""
    settings = runner.Settings(out=fixtures.ROOT / "unused", timeout_cell=3.0)
    found = [("exercise hint", exercise.hint)] + [
        (f"hint tier {i}", h) for i, h in enumerate(exercise.hint_tiers())
    ]
    found += [(f"mistake {m.name!r}", m.hint) for m in exercise.misconceptions]
    for case in (c for c in exercise.cases if c.hidden):
        found.append(
            ("an error no mistake explains", _failed(exercise, case, "error", "raised X", [], []).hint)
        )
        unnamed = CaseResult(case.name, "error", "raised X", "some mistake", "its hint", True)
        found.append(("an error once named", name_mistakes(exercise, [case], [unnamed])[0].hint))
        for kind in (CaseKind.TIMEOUT, CaseKind.DIED, CaseKind.TIMEOUT_SKIPPED, CaseKind.DIED_SKIPPED):
            found.append((str(kind), verdict.judge(exercise, case, CaseEvent(kind), settings).hint))
        found.append(("missing", verdict.judge(exercise, case, CaseEvent(CaseKind.MISSING), settings).hint))
    return [(what, hint) for what, hint in found if hint]


@pytest.mark.parametrize("ex_id", sorted(all_exercises()))
def test_no_hint_of_a_hidden_case_asks_for_its_inputs(ex_id):
    exercise = get_exercise(ex_id)
    hints = _hidden_hints(exercise)
    assert any(what == "an error no mistake explains" for what, _ in hints)
    asking = [(what, hint) for what, hint in hints if ASKS_FOR_INPUTS.search(hint)]
    assert asking == [], asking


# --------------------------------------------------------------------------- the real grader (slow)

EX = fixtures.EX
CASES = get_exercise(EX).cases
FIRST_HIDDEN = next(i for i, c in enumerate(CASES) if c.hidden) + 1  # the call that meets it
RIGHT = "    return a @ np.swapaxes(b, -1, -2)\n"
COUNTED = "CALLS = []\n" + fixtures.HEADER + "    CALLS.append(1)\n"
# the first hidden case's inputs are (2, 4, 4) and (2, 4, 4); the last, (2, 3, 5, 4) and (2, 3, 7, 4)
RECORDER = (
    "SEEN = []\n"
    + fixtures.HEADER
    + "    SEEN.append('_'.join(str(n) for n in a.shape + b.shape))\n"
    + f"    if len(SEEN) == {FIRST_HIDDEN}:\n"
    + "        raise type('HX_' + SEEN[-1], (Exception,), {})('boom-' + SEEN[-1])\n"
    + RIGHT
)
TYPE_CELL = "raise type('HX_' + SEEN[-1], (Exception,), {})('boom-' + SEEN[-1])\n"
# a later cell that raises at line 1 + (the last hidden case's second key length: 7), of 12
LINE_CELL = "k = int(SEEN[-1].split('_')[-2])\n" + "".join(
    f"if k == {n}: raise ValueError()\n" for n in range(1, 12)
)
SLEEPER = (
    "import time\n"
    + fixtures.HEADER
    + "    if a.ndim >= 3 and b.shape[-2] > 3:\n        time.sleep({factor} * a.shape[-1])\n"
    + RIGHT
)
NOTEBOOKS = {
    "later-cells": (RECORDER, [TYPE_CELL, LINE_CELL]),
    "exit-code": (
        "import os\n"
        + COUNTED
        + f"    if len(CALLS) == {FIRST_HIDDEN}:\n        os._exit(40 + a.shape[-1])\n"
        + RIGHT,
        [],
    ),
    "signal": (
        "import os, signal\n"
        + COUNTED
        + f"    if len(CALLS) == {FIRST_HIDDEN}:\n"
        + "        os.kill(os.getpid(), signal.SIGUSR1 if a.shape[-1] % 2 == 0 else signal.SIGUSR2)\n"
        + RIGHT,
        [],
    ),
    # right on every case, but as slow as a hidden input is large (4 -> 1.6 s per hidden case);
    # its twin is the same answer with a sleep of 0 s
    "sleeper": (SLEEPER.format(factor="0.4"), []),
    "honest": (SLEEPER.format(factor="0.0"), []),
}
# (the signal's name itself may appear where the gradebook quotes the source, "uses signal.SIGUSR1")
FORBIDDEN = ["HX_", "boom-", "line 8", "code 44", "exited with code", "killed by", "execution_time"]


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """The class of five graded by the real grader: ``(OUT, {student: Record})``."""
    top = tmp_path_factory.mktemp("hidden-leaks")
    subs = top / "subs"
    subs.mkdir()
    for name, (answer, after) in NOTEBOOKS.items():
        (subs / f"{name}.ipynb").write_text(
            nbformat.writes(fixtures.with_answer(answer, after=after)), "utf-8"
        )
    out = top / "out"
    settings = runner.Settings(out=out, timeout_cell=10.0, timeout_total=120.0)
    records = batch.grade("00-how-to-use", subs, out, jobs=1, settings=settings, quiet=True, force=True)
    return out, {r["student"]: Record.from_dict(r) for r in records}


def _files(out, student: str) -> dict[str, str]:
    layout = Out(out)
    return {
        "feedback": layout.feedback(student).read_text(encoding="utf-8"),
        "results.json": layout.results(student).read_text(encoding="utf-8"),
    }


def _gradebook_row(out, student: str) -> str:
    rows = list(csv.reader(io.StringIO(Out(out).grades.read_text(encoding="utf-8"))))
    return ",".join(next(r for r in rows if r and r[0] == student))


@pytest.mark.slow
@pytest.mark.parametrize("student", ["later-cells", "exit-code", "signal", "sleeper"])
def test_what_the_learners_code_chose_after_a_hidden_case_stays_with_the_instructor(graded, student):
    out, records = graded
    record = records[student]
    texts = {**_files(out, student), "grades.csv": _gradebook_row(out, student)}
    texts["report.html"] = Out(out).report.read_text(encoding="utf-8")
    for door, text in texts.items():
        found = [s for s in FORBIDDEN if s in text]
        assert found == [], (student, door, found)
    data = json.loads(texts["results.json"])
    assert "execution_time" not in data
    instructor = json.dumps(record.to_dict())
    # the channel was there: the instructor's record holds what the learner's code chose
    if student == "later-cells":
        hidden = [c for c in record.exercises[EX].cases if c.hidden]
        assert (hidden[0].message or "").startswith("raised HX_2_4_4_2_4_4: boom-2_4_4_2_4_4"), hidden[0]
        # the later cells raise (where the grader runs them after the hidden cases) a type named
        # after the last hidden case's inputs, and at line 8 (the length it saw: 7)
        for error in record.cell_errors:
            assert error.get("after_hidden"), error
            assert error["etype"] == "HX_2_3_5_4_2_3_7_4" or error["line"] == 8, error
        if record.cell_errors:
            assert learner_feedback.RAISED in texts["feedback"]
    elif student == "exit-code":
        assert "exited with code 44" in instructor, record.incidents
        assert learner_feedback.CRASHED in texts["feedback"] and f"{EX}, hidden case 1" in texts["feedback"]
    elif student == "signal":
        assert "SIGUSR1" in instructor, record.incidents
        assert learner_feedback.CRASHED in texts["feedback"]


@pytest.mark.slow
def test_a_slow_right_answer_reads_exactly_what_a_quick_one_reads(graded):
    """The time a run takes is no channel: the sleeper's feedback and results.json are the honest
    answer's, but for the name, although it took seconds longer on the hidden cases."""
    out, records = graded
    sleeper, honest = records["sleeper"], records["honest"]
    assert [c.status for c in sleeper.exercises[EX].cases] == [CaseStatus.PASSED] * len(CASES)
    assert [c.status for c in honest.exercises[EX].cases] == [CaseStatus.PASSED] * len(CASES)
    assert (sleeper.seconds or 0) > (honest.seconds or 0) + 2.0, (sleeper.seconds, honest.seconds)
    mine, theirs = _files(out, "sleeper"), _files(out, "honest")
    for door in mine:
        assert mine[door].replace("sleeper", "NAME") == theirs[door].replace("honest", "NAME"), door
    row = _gradebook_row(out, "sleeper").split(",")[1:]
    assert row == _gradebook_row(out, "honest").split(",")[1:]
