"""Issue 24, item 4: reading a notebook runs in a worker process under a time, CPU and memory
limit, never in the grader's own thread (:mod:`coursetools.grade.grading.parse_worker`).

* the worker reads a normal notebook as the grader's thread did (same plan, notes, labels);
* a notebook crafted to make reading slow (100,000 markdown cells: nbformat's validation
  takes seconds) ends ``unreadable`` within its limit, with a note saying why, while a
  normal submission of the same class is graded normally;
* the worker limits its own CPU time (``RLIMIT_CPU``: killed by SIGXCPU) and its memory
  (``RLIMIT_AS``: a MemoryError is the submission's answer, not the worker's end);
* a worker that dies, between requests or while reading, is replaced, and the next
  submission of the same job slot is read normally.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import fixtures
import nbformat
import pytest

from attnlib.checks import get_exercise
from coursetools.grade import batch
from coursetools.grade.grading import parse_worker, runner, submission
from coursetools.grade.grading.parse_worker import NotebookReader, ReaderDidNotStart, ReadFailed
from coursetools.grade.grading.runner import Settings
from coursetools.grade.grading.submission import Submission
from coursetools.grade.records.record import Status

ROOT = Path(__file__).resolve().parents[3]

pytestmark = pytest.mark.grader
STEM = "00-how-to-use"
SLOW_CELLS = 100_000  # markdown cells: reading them takes seconds, far beyond LIMIT
LIMIT = 1.0  # seconds a notebook may take to be read in these tests


def _worker_command(patch: str) -> list[str]:
    """A worker whose :mod:`coursetools.grade.grading.submission` is patched by the code ``patch`` first."""
    code = (
        "import os, sys, time\n"
        "from pathlib import Path\n"
        "from coursetools.grade.grading import parse_worker, submission\n"
        f"{patch}\n"
        "sys.exit(parse_worker.main())\n"
    )
    return [sys.executable, "-c", code]


# reading spins (CPU) for a notebook whose file name holds "spin", and the process
# exits at once for one whose name holds "crash"; other notebooks are read as usual
PATCHED = """
def read_notebook(path):
    if "spin" in str(path):
        while True:
            pass
    if "crash" in str(path):
        os._exit(3)
    return real_read_notebook(path)
real_read_notebook = submission.read_notebook
submission.read_notebook = read_notebook
"""


@pytest.fixture(scope="module")
def assignment():
    return batch.load_assignment(STEM)


@pytest.fixture(scope="module")
def notebooks(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("notebooks")
    correct = folder / "correct.ipynb"
    nbformat.write(fixtures.with_answer(fixtures.CORRECT), correct)
    slow = {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {},
        "cells": [
            {"cell_type": "markdown", "id": f"m{k}", "metadata": {}, "source": "x"} for k in range(SLOW_CELLS)
        ],
    }
    (folder / "slow.ipynb").write_text(json.dumps(slow), encoding="utf-8")
    for name in ("spin", "crash"):
        (folder / f"{name}.ipynb").write_bytes(correct.read_bytes())
    return {p.stem: p for p in folder.glob("*.ipynb")}


@pytest.mark.slow
def test_the_worker_reads_as_the_grader_did(assignment, notebooks):
    """Same plan, notes and review as build_plan in this process; every code cell labelled."""
    nb = submission.read_notebook(notebooks["correct"])
    plan, notes, review = submission.build_plan(nb, assignment)
    with NotebookReader() as reader:
        reading = reader.read(notebooks["correct"], assignment, 30.0)
    assert reading.unreadable is None
    assert (reading.plan, reading.notes, reading.review) == (json.loads(json.dumps(plan)), notes, review)
    code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    assert reading.labels == parse_worker.code_cell_labels(nb)
    assert list(reading.labels) == [str(i) for i in code]
    assert [label["number"] for label in reading.labels.values()] == list(range(1, len(code) + 1))


@pytest.mark.slow
def test_a_file_that_is_not_a_notebook_is_unreadable_with_its_reason(assignment, tmp_path):
    text = tmp_path / "answer.ipynb"
    text.write_text("not json at all", encoding="utf-8")
    with NotebookReader() as reader:
        reading = reader.read(text, assignment, 30.0)
    assert reading.unreadable is not None and "not JSON" in reading.unreadable
    assert reading.plan == {} and reading.labels == {}


@pytest.mark.slow
def test_a_notebook_slow_to_read_is_stopped_at_its_limit(assignment, notebooks):
    """Reading 100,000 cells takes seconds: the worker is stopped after LIMIT (plus its grace)
    and replaced; the next notebook of the same reader is read normally."""
    with NotebookReader() as reader:
        reader.read(notebooks["correct"], assignment, 30.0)  # started and warm
        first = reader.pid
        start = time.monotonic()
        with pytest.raises(ReadFailed, match=r"took more than 1 s|CPU limit"):
            reader.read(notebooks["slow"], assignment, LIMIT)
        assert time.monotonic() - start < LIMIT + parse_worker.GRACE_SECONDS + 3
        assert reader.pid is None  # killed, not left reading
        assert not Path(f"/proc/{first}").exists()  # and reaped
        reading = reader.read(notebooks["correct"], assignment, 30.0)
        assert reading.unreadable is None and reading.plan["evaluate_after"]
        assert reader.started == 2


@pytest.mark.slow
def test_a_worker_that_dies_is_replaced(assignment, notebooks):
    """Killed between two requests, or dying in the middle of one: the request that saw it die
    fails with a reason, and the next request gets a fresh worker."""
    with NotebookReader(command=_worker_command(PATCHED)) as reader:
        reader.read(notebooks["correct"], assignment, 30.0)
        victim = reader.pid
        os.kill(victim, signal.SIGKILL)
        _wait_dead(victim)
        assert reader.read(notebooks["correct"], assignment, 30.0).unreadable is None
        assert reader.started == 2
        with pytest.raises(ReadFailed, match="exited with code 3"):
            reader.read(notebooks["crash"], assignment, 30.0)
        assert reader.read(notebooks["correct"], assignment, 30.0).unreadable is None
        assert reader.started == 3


def _wait_dead(pid: int) -> None:
    """Until ``pid`` has ended (a zombie not yet reaped counts as ended)."""
    for _ in range(100):
        try:
            if Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z"):
                return
        except OSError:
            return
        time.sleep(0.05)
    raise AssertionError(f"process {pid} did not end")


@pytest.mark.slow
def test_the_worker_limits_its_own_cpu_time(assignment, notebooks):
    """Without the parent's wall clock (a raw worker, no time limit on reading its answer), a
    request that spins is ended by the worker's own RLIMIT_CPU (SIGXCPU)."""
    proc = subprocess.Popen(
        [*_worker_command(PATCHED), "512"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=str(ROOT),
    )
    try:
        assert parse_worker._receive(proc.stdout.fileno(), time.monotonic() + 120) == {"ready": True}
        request = {**parse_worker.read_request(notebooks["spin"], assignment), "cpu_s": 1.0}
        parse_worker._send(proc.stdin.fileno(), request)
        assert parse_worker._receive(proc.stdout.fileno(), time.monotonic() + 60) is None
        assert proc.wait(timeout=10) == -signal.SIGXCPU
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.slow
def test_the_worker_limits_its_memory(assignment, notebooks, tmp_path):
    """A notebook of 20 MB whose metadata holds ten million numbers takes hundreds of MiB once
    parsed: a reader given 128 MiB more than its imports ends that request with a MemoryError
    (the submission's answer) and the same worker reads the next notebook; with the grader's
    default memory the same notebook is read."""
    big = tmp_path / "big.ipynb"
    body = {"nbformat": 4, "nbformat_minor": 5, "metadata": {"x": [0] * 10_000_000}, "cells": []}
    big.write_text(json.dumps(body, separators=(",", ":")), encoding="utf-8")
    with NotebookReader(memory_mb=128) as reader:
        reader.read(notebooks["correct"], assignment, 30.0)
        first = reader.pid
        with pytest.raises(ReadFailed, match="MemoryError"):
            reader.read(big, assignment, 60.0)
        assert reader.read(notebooks["correct"], assignment, 30.0).unreadable is None
        assert reader.pid == first
    with NotebookReader() as reader:
        assert reader.read(big, assignment, 60.0).unreadable is None


def test_bad_arguments_are_refused(assignment):
    with pytest.raises(ValueError, match="memory_mb"):
        NotebookReader(memory_mb=0)
    with pytest.raises(ReadFailed, match="no time was left"):
        NotebookReader().read(Path("x.ipynb"), assignment, 0.0)  # refused before any worker starts


class _FailingReader:
    """A reader whose every reading fails with ``error`` (no process)."""

    def __init__(self, error: ReadFailed) -> None:
        self.error = error

    def read(self, path, assignment, seconds, deadline=None):
        raise self.error


@pytest.mark.parametrize(
    "error, stopped, status",
    [
        (
            ReadFailed("reading the notebook took more than 1 s: the grader stopped it"),
            False,
            Status.UNREADABLE,
        ),
        (
            ReaderDidNotStart("the notebook reader could not start: it exited with code 1"),
            False,
            Status.GRADER_ERROR,
        ),
        (
            ReadFailed("the notebook reader died (SIGINT) while reading this notebook"),
            True,
            Status.INTERRUPTED,
        ),
    ],
    ids=["overrun", "no-reader", "interrupted"],
)
def test_a_failed_reading_scores_nothing(assignment, notebooks, tmp_path, error, stopped, status):
    """The submission's own overrun is unreadable (final); a reader that could not start is the
    grader's error, and a reading cut short by Ctrl-C is interrupted (both graded again by the
    next run). None of them is scored, and the note says why."""
    stop = threading.Event()
    if stopped:
        stop.set()
    exercises = {ex_id: get_exercise(ex_id) for ex_id in assignment.points}
    sub = Submission("s", notebooks["correct"], "digest")
    settings = Settings(out=tmp_path, isolation="none")
    record = runner.grade_submission(
        sub, assignment, exercises, settings, stop=stop, reader=_FailingReader(error)
    )
    assert record.status is status
    assert record.total is None and record.runs == 0
    assert record.notes == [f"{error}: nothing was run"]
    assert record.status.final is (status is Status.UNREADABLE)


def _settings(out: Path) -> Settings:
    return Settings(
        out=out,
        timeout_cell=6.0,
        timeout_total=60.0,
        timeout_setup=120.0,
        timeout_parse=LIMIT,
        memory_mb=1536,
        isolation="auto",
    )


@pytest.mark.slow
def test_a_class_goes_on_past_a_notebook_slow_to_read(notebooks, tmp_path):
    """In one class, with one job slot: the slow notebook ends unreadable within its limit (a
    note says the grader stopped reading it, nothing is scored), and the submissions after it
    in the same slot are graded normally."""
    subs = tmp_path / "subs"
    subs.mkdir()
    for name in ("a-correct", "b-slow", "c-correct"):
        (subs / f"{name}.ipynb").write_bytes(notebooks[name[2:]].read_bytes())
    out = tmp_path / "out"
    records = {
        r["student"]: r for r in batch.grade(STEM, subs, out, jobs=1, settings=_settings(out), quiet=True)
    }
    slow = records["b-slow"]
    assert Status.parse(slow["status"]) is Status.UNREADABLE, slow
    assert slow["total"] is None and all(e["score"] is None for e in slow["exercises"].values())
    assert any("took more than 1 s" in n or "CPU limit" in n for n in slow["notes"]), slow["notes"]
    assert slow["seconds"] < LIMIT + parse_worker.GRACE_SECONDS + 5, slow["seconds"]
    for name in ("a-correct", "c-correct"):
        assert Status.parse(records[name]["status"]) is Status.GRADED, records[name]
        assert records[name]["total"] == records[name]["max"] > 0
    stored = json.loads((out / "b-slow" / "record.json").read_text(encoding="utf-8"))
    assert stored["status"] == Status.UNREADABLE.value


@pytest.mark.slow
def test_a_class_goes_on_past_a_notebook_that_crashes_the_reader(notebooks, tmp_path, monkeypatch):
    """The slot's reader dies while reading one notebook: that submission is unreadable with the
    reason, the reader is replaced, and the next submission of the slot is graded."""
    monkeypatch.setattr(
        batch, "NotebookReader", functools.partial(NotebookReader, command=_worker_command(PATCHED))
    )
    subs = tmp_path / "subs"
    subs.mkdir()
    for name in ("a-crash", "b-correct"):
        (subs / f"{name}.ipynb").write_bytes(notebooks[name[2:]].read_bytes())
    out = tmp_path / "out"
    records = {
        r["student"]: r for r in batch.grade(STEM, subs, out, jobs=1, settings=_settings(out), quiet=True)
    }
    crashed = records["a-crash"]
    assert Status.parse(crashed["status"]) is Status.UNREADABLE and crashed["total"] is None
    assert any("exited with code 3" in n for n in crashed["notes"]), crashed["notes"]
    assert Status.parse(records["b-correct"]["status"]) is Status.GRADED
    assert records["b-correct"]["total"] == records["b-correct"]["max"]


@pytest.mark.slow
def test_no_worker_outlives_the_grading_run(notebooks, tmp_path):
    """Every reader the run started is gone when grade() returns."""
    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "a.ipynb").write_bytes(notebooks["correct"].read_bytes())
    out = tmp_path / "out"
    batch.grade(STEM, subs, out, jobs=2, settings=_settings(out), quiet=True)
    assert _workers() == []


def _workers() -> list[int]:
    """Processes of this test's user running the parse worker, children of this process."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            stat = (entry / "stat").read_text().split(") ", 1)[1].split()
        except OSError:
            continue
        if (
            b"coursetools.grade.grading.parse_worker" in cmdline
            and int(stat[1]) == os.getpid()
            and stat[0] != "Z"
        ):
            found.append(int(entry.name))
    return found
