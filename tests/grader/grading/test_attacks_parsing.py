"""Issue 24, items 3 and 4 (inside the grader): the forbidden-call check fails closed in the
grader, and nothing a notebook holds makes the grader's own thread slow or large.

* Marks not earned: a forbidden call inside a cell magic, in a helper cell that defines the
  answer by assignment (moved metadata), in a later cell that redefines the function
  (reported by the code object that the run evaluated), a function built at run time, a
  cell with a dynamic lookup, a cell too deep for the check: each is found or flagged.
* Parsing: a cell of blank lines (the old ``def`` pattern was quadratic), a cell of many
  magic lines (IPython's transformer is quadratic), a long cell without IPython syntax, a
  deep expression, an over-long cell, too many cells: each is read within a bound, and a
  cell that is not read is flagged, never run unread.
* The event pipe: a line is checked for the run's secret and for its nesting before it is
  parsed, so a line of nested brackets costs a scan, never a deep parse.
"""

from __future__ import annotations

import time

import nbformat
import pytest

from coursetools.grade import batch
from coursetools.grade.grading import runner, submission
from coursetools.grade.grading.process import Run
from coursetools.grade.records import wire
from coursetools.grade.records.events import RunPlan
from coursetools.grade.records.record import Record

pytestmark = pytest.mark.grader
EX = "ex-04-1"  # stable_softmax: forbids the softmax and logsumexp families
HONEST = (
    "def stable_softmax(x):\n"
    "    e = np.exp(x - x.max(axis=-1, keepdims=True))\n"
    "    return e / e.sum(axis=-1, keepdims=True)\n"
)


@pytest.fixture(scope="module")
def assignment():
    return batch.load_assignment("04-scaling-softmax")


def _notebook(assignment, answer: str, before=(), after=()):
    nb = nbformat.read(assignment.path, as_version=4)
    index = next(i for i, c in enumerate(nb.cells) if c.metadata.get("attnlib", {}).get("exercise") == EX)
    nb.cells[index].source = answer
    for extra in reversed(list(after)):
        nb.cells.insert(index + 1, nbformat.v4.new_code_cell(extra))
    for extra in reversed(list(before)):
        nb.cells.insert(index, nbformat.v4.new_code_cell(extra))
    return nb


def _plan(assignment, nb):
    start = time.monotonic()
    plan, notes, review = submission.build_plan(nb, assignment)
    return plan, review, time.monotonic() - start


def test_an_honest_answer_is_neither_forbidden_nor_flagged(assignment):
    plan, review, _ = _plan(assignment, _notebook(assignment, HONEST))
    assert "forbidden" not in plan and review == [], (plan.get("forbidden"), review)


@pytest.mark.parametrize(
    "answer, before",
    [
        ("%%time\ndef stable_softmax(x):\n    return F.softmax(torch.as_tensor(x), -1).numpy()\n", []),
        ("r = %time scipy.special.softmax(np.ones(3))\n" + HONEST, ["import scipy.special"]),
        ("stable_softmax = lambda x: torch.log_softmax(torch.as_tensor(x), -1).exp().numpy()\n", []),
        ("# the answer is in the cell above\n", ["stable_softmax = lambda x: scipy.special.softmax(x, -1)"]),
        (
            "# moved\n",
            ["def stable_softmax(x):\n    return torch.nn.Softmin(-1)(-torch.as_tensor(x)).numpy()\n"],
        ),
    ],
    ids=["cell-magic", "line-magic", "assignment", "helper-assignment", "helper-def"],
)
def test_a_forbidden_call_is_found_wherever_the_answer_is_defined(assignment, answer, before):
    plan, review, _ = _plan(assignment, _notebook(assignment, answer, before=before))
    assert plan.get("forbidden", {}).get(EX), (plan.get("forbidden"), review)


@pytest.mark.parametrize(
    "cell, reason",
    [
        ("import pickle\nf = pickle.loads(bytes.fromhex('80'))", "pickle"),
        ("f = getattr(np, ''.join(reversed('xamtfos')))", "getattr() with a computed name"),
        ("import importlib\nm = importlib.import_module('sci' + name)", "importlib"),
        ("import types\nf = types.FunctionType(stable_softmax.__code__, {})", "types.FunctionType"),
        ("import sys\nm = sys.modules['scipy.special']", "sys.modules"),
        ("import marshal\ncode = marshal.loads(blob)", "marshal"),
        ("exec(source)", "exec"),
    ],
)
def test_a_dynamic_lookup_before_the_evaluation_is_flagged(assignment, cell, reason):
    """What runs before the evaluation (issue 43: the answer cell and the statements it needs) is
    read; the same cell as a playground cell does not run for the answer, and holds nothing."""
    plan, review, _ = _plan(assignment, _notebook(assignment, cell + "\n" + HONEST))
    assert any("cannot see through" in r and reason in r for r in review), review
    plan, review, _ = _plan(assignment, _notebook(assignment, HONEST, before=[cell]))
    assert not any("cannot see through" in r for r in review), review
    assert all(cell not in src for ex in plan["selected"].values() for _, src in ex["learner"])


def test_a_cell_too_deep_for_the_check_is_flagged_not_passed(assignment):
    deep = "y = " + "+".join(["1"] * 60_000)
    plan, review, seconds = _plan(assignment, _notebook(assignment, deep + "\n" + HONEST))
    assert any("RecursionError" in r or "MemoryError" in r for r in review), review
    assert seconds < 10, seconds
    # before the answer, a cell the selection cannot read binds nothing it can see: it does not run
    plan, review, seconds = _plan(assignment, _notebook(assignment, HONEST, before=[deep]))
    assert all(src != deep for ex in plan["selected"].values() for _, src in ex["learner"])
    assert seconds < 10, seconds


@pytest.mark.slow
def test_the_code_object_that_was_evaluated_is_checked(assignment):
    """The run reports where the evaluated function was defined: a later cell that redefines it
    (evaluated again at the end) is read; a function not written in a cell is flagged."""
    nb = _notebook(
        assignment, HONEST, after=["def stable_softmax(x):\n    return scipy.special.softmax(x, -1)\n"]
    )
    plan, review, _ = _plan(assignment, nb)
    later = max(i for i, src in plan["cells"] if "scipy.special.softmax" in src)
    record = Record("s", runs=0)
    runner._check_definitions(
        record, plan["cells"], plan["evaluate_after"], assignment, {EX: {(f"<cell {later}>", 1)}}
    )
    assert "scipy.special.softmax" in record.forbidden[EX], record
    record = Record("s", runs=0)
    runner._check_definitions(
        record, plan["cells"], plan["evaluate_after"], assignment, {EX: {("<string>", 1)}}
    )
    assert any("not written in a cell" in r for r in record.review), record
    assert "forbidden" not in record.to_dict()


@pytest.mark.parametrize(
    "label, cell, flagged",
    [
        ("blank lines", "\n" * 3_990 + "x = 1", False),
        ("spaces before a def", (" " * 40 + "\n") * 3_900 + "def stable_softmax(x):\n    return x\n", False),
        ("many magic lines", "%time x = 1\n" * 30, False),
        ("too many magic lines", "%time x = 1\n" * 31, True),
        ("a long line without IPython syntax", "y = " + "+".join(["1"] * 40_000), False),
        ("too many lines", "x = 1\n" * 4_001, True),
        ("too many characters", "x = '" + "a" * 200_001 + "'", True),
    ],
)
def test_reading_a_crafted_cell_is_bounded(assignment, label, cell, flagged):
    plan, review, seconds = _plan(assignment, _notebook(assignment, HONEST, after=[cell]))
    assert seconds < 5, (label, seconds)
    not_run = [r for r in review if "was not run" in r]
    assert bool(not_run) == flagged, (label, review)
    if flagged:
        assert any("the grader did not run this cell" in src for _, src in plan["cells"])


def test_the_def_pattern_does_not_cross_lines():
    source = " \n" * 100_000 + "x = 1"
    start = time.monotonic()
    assert not submission._defines(source, "stable_softmax")
    assert time.monotonic() - start < 1
    assert submission._defines("def stable_softmax(x):\n    pass", "stable_softmax")
    assert submission._defines("stable_softmax = lambda x: x", "stable_softmax")
    assert submission._defines("stable_softmax: object = f", "stable_softmax")
    assert not submission._defines("y = stable_softmax == f", "stable_softmax")


def test_plain_python_skips_ipythons_transformer():
    long = "y = " + "+".join(["1"] * 60_000)
    start = time.monotonic()
    assert submission._strip_magics(long) == (long, False)
    assert time.monotonic() - start < 1
    assert submission._strip_magics("x = !ls\n")[1]
    assert submission._strip_magics("%%time\nx = 1\n")[1]
    assert submission._strip_magics("f?\n")[1]


TOKEN = "ab" * 16
PREFIX = b'{"k": "' + TOKEN.encode() + b'"'


@pytest.mark.parametrize(
    "line, ok",
    [
        (PREFIX + b', "t": "done"}', True),
        (PREFIX + b', "t": "case", "value": {"k": "tuple", "items": [{"k": "none"}]}}', True),
        (PREFIX + b', "text": "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["}', True),
        (b'{"k": "' + b"cd" * 16 + b'", "t": "done"}', False),
        (b'{"t": "done", "k": "' + TOKEN.encode() + b'"}', False),
        (PREFIX + b', "x": ' + b"[" * 100 + b"]" * 100 + b"}", False),
        (PREFIX + b', "x": ' + b"{" * 1000, False),
    ],
    ids=[
        "plain",
        "nested output",
        "brackets in a string",
        "other token",
        "token not first",
        "deep",
        "deeper",
    ],
)
def test_event_lines_are_checked_before_parsing(line, ok):
    assert wire.check_line(line, PREFIX) is ok


def test_a_huge_nested_line_costs_a_scan_not_a_parse():
    line = PREFIX + b', "x": ' + b"[" * (20 << 20)
    start = time.monotonic()
    assert not wire.check_line(line, PREFIX)
    assert time.monotonic() - start < 3


def test_the_grader_counts_a_nested_line_as_malformed_without_parsing_it(tmp_path):
    plan = RunPlan([[0, "x = 1"]], {}, [], [])
    run = Run(plan, None, tmp_path, 0, time.monotonic() + 10, None)
    run.token = TOKEN
    assert run._parse(PREFIX + b', "t": "hello", "x": ' + b"[" * 200_000 + b"}") is None
    assert run.bad_lines == 1
    assert run._parse(PREFIX + b', "t": "hello", "isolation": {}}') is not None
