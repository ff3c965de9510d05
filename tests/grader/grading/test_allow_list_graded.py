"""Issue 34, item 1, through the real grader: the allow-list rule's verdict reaches the record.

The plan-level bank is tests/checks/test_forbidden_soundness.py (every kind of evasion,
many payloads). Here three submissions of chapter 04 go through the grader as a class would:
a forbidden function under another public path scores 0; a one-liner outside the families is
held for review (``needs-review``, its cases judged and shown, no score and no total, the
reason in the notes); an honest answer is graded with full marks and nothing to review.
"""

from __future__ import annotations

import nbformat
import pytest

from attnlib.checks import get_exercise
from coursetools.grade import batch
from coursetools.grade.grading import runner
from coursetools.grade.grading.submission import Submission, file_digest
from coursetools.grade.outputs import gradebook
from coursetools.grade.outputs.scores import ClassInfo, Sources, build
from coursetools.grade.records.record import Record, Status

pytestmark = [pytest.mark.grader, pytest.mark.slow]
EX = "ex-04-1"
HEAD = "def stable_softmax(x):\n"
ANSWERS = {
    "honest": HEAD
    + "    e = np.exp(x - x.max(axis=-1, keepdims=True))\n    return e / e.sum(axis=-1, keepdims=True)\n",
    # attnlib's softmax under the path of a chapter module that imports it
    "other-path": "import attnlib.functional as fn\n"
    + HEAD
    + "    return fn.softmax(torch.as_tensor(x), -1).numpy()\n",
    "categorical": "import torch\n"
    + HEAD
    + "    return torch.distributions.Categorical(logits=torch.as_tensor(x)).probs.numpy()\n",
    "loader": HEAD + "    import io\n    f = np.load(io.BytesIO(bytes(10)), allow_pickle=True)\n"
    "    return f(x) if callable(f) else np.exp(x) / np.exp(x).sum(-1, keepdims=True)\n",
}


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    top = tmp_path_factory.mktemp("allow-list")
    assignment = batch.load_assignment("04-scaling-softmax")
    exercises = {ex: get_exercise(ex) for ex in assignment.points}
    settings = runner.Settings(out=top / "out", timeout_cell=20.0, timeout_total=120.0)
    out = {}
    for name, answer in ANSWERS.items():
        nb = nbformat.read(assignment.path, as_version=4)
        index = next(i for i, c in enumerate(nb.cells) if c.metadata.get("attnlib", {}).get("exercise") == EX)
        nb.cells[index].source = answer
        path = top / f"{name}.ipynb"
        path.write_text(nbformat.writes(nb), encoding="utf-8")
        out[name] = runner.grade_submission(
            Submission(name, path, file_digest(path)), assignment, exercises, settings
        )
    return out


def test_an_honest_answer_is_graded_without_review(records):
    record = records["honest"]
    assert record.exercises[EX].score == record.exercises[EX].points, record.exercises[EX]
    assert not any(r.startswith(EX) for r in record.review), record.review


def test_a_forbidden_function_under_another_path_scores_zero(records):
    record = records["other-path"]
    assert record.exercises[EX].score == 0, record.exercises[EX]
    assert "not allowed" in record.exercises[EX].cases[0].message


@pytest.mark.parametrize("name, reason", [("categorical", "torch.distributions"), ("loader", "numpy.load")])
def test_an_answer_outside_the_allow_list_is_held_for_review(records, name, reason):
    record = records[name]
    assert record.status is Status.NEEDS_REVIEW, record.status
    assert record.exercises[EX].score is None and record.total is None, record.exercises[EX]
    assert any(reason in r for r in record.review), record.review
    assert record.exercises[EX].cases, "its cases are judged and shown"
    # what the class's files say: no total, the status, the reason in the notes
    data = Record.from_dict(record.to_dict())
    info = ClassInfo(assignment="04-scaling-softmax", points={EX: 2.0}, students=[data.student])
    grade = build(info, {data.student: data}, Sources({}, {}, [], {}, None, [], False)).grades[0]
    assert grade.total is None
    assert reason in gradebook.short_notes(data)
