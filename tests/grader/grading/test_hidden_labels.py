"""Issue 34, item 3: hidden cases reach the learner by no side door.

Without ``--show-hidden-inputs`` a learner must not learn what a hidden case holds. The case
lines already hide it; these payloads try the other doors, through the real grader:

* a function that crashes (``os._exit``) or hangs on the first hidden case, so that the
  incident ("What went wrong", Gradescope's visible output) names the case it died on; one
  such upload per case would enumerate them;
* a function that records its inputs, and a later cell that raises an error quoting them
  ("Cells that raised an error").

The learner's feedback and Gradescope's results name a hidden case by its label ("hidden case
k") and a later cell's error as "raised an error" (issue 43.3: not even its type); the
instructor's record keeps everything, and ``show_hidden_inputs`` shows it.
"""

from __future__ import annotations

import json

import fixtures
import nbformat
import pytest

from attnlib.checks import get_exercise
from coursetools.grade import batch, gradescope
from coursetools.grade.grading import runner
from coursetools.grade.grading.submission import Submission, file_digest
from coursetools.grade.outputs import feedback
from coursetools.grade.outputs.scores import ClassInfo, Sources, build
from coursetools.grade.records.record import Record

pytestmark = pytest.mark.grader
EX = fixtures.EX
CASES = get_exercise(EX).cases
FIRST_HIDDEN = next(i for i, c in enumerate(CASES) if c.hidden) + 1  # the call that meets it
HIDDEN_NAMES = [c.name for c in CASES if c.hidden]
# the distinctive part of each hidden name (what it tries), and the shapes its inputs have
SECRETS = [n.split(":", 1)[-1].strip() for n in HIDDEN_NAMES]
COUNTER = "    CALLS.append(1)\n    if len(CALLS) == {k}:\n{action}    return a @ np.swapaxes(b, -1, -2)\n"
CRASH = "CALLS = []\n" + fixtures.HEADER + COUNTER.format(k=FIRST_HIDDEN, action="        os._exit(3)\n")
HANG = (
    "CALLS = []\n"
    + fixtures.HEADER
    + COUNTER.format(k=FIRST_HIDDEN, action="        while True:\n            pass\n")
)
RECORDER = (
    "SEEN = []\n" + fixtures.HEADER + "    SEEN.append(f'SHAPES{a.shape}x{b.shape}')\n"
    "    return a @ np.swapaxes(b, -1, -2)\n"
)
LEAK_CELL = "raise ValueError('recorded: ' + ' '.join(SEEN))\n"


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """``{name: Record}`` of the three payloads, graded by the real grader (one at a time)."""
    top = tmp_path_factory.mktemp("hidden-labels")
    assignment = batch.load_assignment("00-how-to-use")
    exercises = {EX: get_exercise(EX)}
    settings = runner.Settings(out=top / "out", timeout_cell=3.0, timeout_total=60.0)
    notebooks = {
        "crash": fixtures.with_answer("import os\n" + CRASH),
        "hang": fixtures.with_answer(HANG),
        "recorder": fixtures.with_answer(RECORDER, after=[LEAK_CELL]),
    }
    records = {}

    for name, nb in notebooks.items():
        path = top / f"{name}.ipynb"
        path.write_text(nbformat.writes(nb), encoding="utf-8")
        records[name] = runner.grade_submission(
            Submission(name, path, file_digest(path)), assignment, exercises, settings
        )
    return records


def _grade(record: Record):
    record = Record.from_dict(record.to_dict())  # what the later commands read back
    info = ClassInfo(assignment="00-how-to-use", points={EX: 1.0}, students=[record.student])
    return build(info, {record.student: record}, Sources({}, {}, [], {}, None, [], False)).grades[0]


def _learner_texts(record: Record, show: bool) -> dict[str, str]:
    grade = _grade(record)
    return {
        "feedback": feedback.feedback_markdown(grade, "00-how-to-use", show),
        "gradescope": json.dumps(gradescope.results_json(grade, show), ensure_ascii=False),
    }


def _leaks(text: str) -> list[str]:
    return [s for s in [*HIDDEN_NAMES, *SECRETS] if s in text] + (["SHAPES"] if "SHAPES" in text else [])


@pytest.mark.parametrize("name, word", [("crash", "exited with code 3"), ("hang", "no progress")])
@pytest.mark.slow
def test_a_crash_or_hang_on_a_hidden_case_names_it_by_its_label(graded, name, word):
    record = graded[name]
    # the instructor's record names the case the run died on
    assert any(HIDDEN_NAMES[0] in str(i) and word in str(i) for i in record.incidents), record.incidents
    for door, text in _learner_texts(record, show=False).items():
        assert _leaks(text) == [], (door, _leaks(text))
        assert f"{EX}, hidden case 1" in text, (door, text)
    shown = _learner_texts(record, show=True)
    assert HIDDEN_NAMES[0] in shown["feedback"] and HIDDEN_NAMES[0] in shown["gradescope"]


@pytest.mark.slow
def test_a_later_cells_error_shows_neither_its_type_nor_its_text(graded):
    """(Issue 43.3: a type's name is the learner's code's to choose, "type only" was a channel.)

    Since each exercise runs in its own process (issue 43.1) the later cell no longer runs beside
    the hidden cases, so the grader may record no error at all; where it records one, it came
    after the hidden cases and the learner reads "raised an error" only."""
    record = graded["recorder"]
    assert all(c.passed for c in record.exercises[EX].cases)  # the recorder saw every hidden input
    errors = [e for e in record.cell_errors if e.get("etype") == "ValueError"]
    for door, text in _learner_texts(record, show=False).items():
        assert _leaks(text) == [], (door, _leaks(text))
    feedback = _learner_texts(record, show=False)["feedback"]
    assert "`ValueError`" not in feedback
    if errors:
        assert "SHAPES" in errors[0]["text"] and errors[0].get("after_hidden"), record.cell_errors
        assert feedback.RAISED in feedback
        assert "SHAPES" in _learner_texts(record, show=True)["feedback"]


def test_each_hidden_case_name_would_otherwise_be_enumerable():
    """The payloads would reach every hidden case: one crash per upload, at call k."""
    assert FIRST_HIDDEN <= len(CASES) and len(HIDDEN_NAMES) >= 2
    record = Record(
        "s", incidents=[f"{EX}, case {n!r}: the process was killed by SIGKILL" for n in HIDDEN_NAMES]
    )
    record.exercises = _grade_like(record)
    texts = feedback.learner_incidents(record)
    assert [t.split(":")[0] for t in texts] == [
        f"{EX}, hidden case {k}" for k in range(1, len(HIDDEN_NAMES) + 1)
    ]
    assert not any(_leaks(t) for t in texts)
    assert feedback.learner_incidents(record, show_hidden_inputs=True) == record.incidents


def _grade_like(record: Record) -> dict:
    from coursetools.grade.records.record import Case, CaseStatus, ExerciseResult

    cases = tuple(Case(c.name, CaseStatus.ERROR, c.hidden) for c in CASES)
    return {EX: ExerciseResult(EX, 1.0, 0.0, "pairwise_dot", cases)}
