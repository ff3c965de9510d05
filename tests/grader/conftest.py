"""The grader tests' shared pytest fixtures (their helpers are in ``fixtures.py``)."""

from __future__ import annotations

import sys

import nbformat
import pytest
from fixtures import NOTEBOOK, _Log

from attnlib.checks import get_exercise
from coursetools.grade import batch
from coursetools.grade.grading import runner
from coursetools.grade.grading.parse_worker import NotebookReader
from coursetools.grade.grading.process import JobSlot
from coursetools.grade.grading.submission import Submission, file_digest
from coursetools.grade.records.paths import ROOT
from coursetools.grade.records.record import Record
from coursetools.grade.sandbox import api as sandbox


@pytest.fixture(scope="module")
def grader(tmp_path_factory):
    """Grade notebooks of chapter 04 one by one in one job slot (a zygote and a reader)."""
    from coursetools.grade.sandbox import api as sandbox
    from coursetools.grade.sandbox.zygote import Zygote

    top = tmp_path_factory.mktemp("isolation")
    assignment = batch.load_assignment(NOTEBOOK)
    exercises = {ex: get_exercise(ex) for ex in assignment.points}
    settings = runner.Settings(out=top / "out", timeout_cell=30.0, timeout_total=150.0, isolation="auto")
    zygote = Zygote(sys.executable, str(ROOT), runner.base_env(), sandbox.probe() == "namespaces")
    reader = NotebookReader()
    slot = JobSlot(0, zygote=zygote, reader=reader)

    def grade(name: str, nb) -> Record:
        path = top / f"{name}.ipynb"
        path.write_text(nbformat.writes(nb), encoding="utf-8")
        return runner.grade_submission(
            Submission(name, path, file_digest(path)), assignment, exercises, settings, slot
        )

    grade.assignment, grade.exercises, grade.settings, grade.slot, grade.top = (
        assignment,
        exercises,
        settings,
        slot,
        top,
    )
    yield grade
    zygote.close()
    reader.close()


@pytest.fixture
def log(monkeypatch) -> _Log:
    """Stand-ins for the zygotes, the notebook readers, the memory cgroups and the uids."""
    log = _Log()

    class Zygote:
        def __init__(self, *args) -> None:
            log.add("zygote")

        def warm(self) -> None:
            pass

        def close(self) -> None:
            log.add("zygote closed")

    class NotebookReader:
        def __init__(self, memory_mb: int) -> None:
            log.add("reader")

        def start(self) -> None:
            log.add("reader started")

        def close(self) -> None:
            log.add("reader closed")

    class Group:
        kind = "cgroup2"

        def remove(self) -> None:
            log.add("group removed")

    def create(name: str, limit_mb: int) -> Group:
        log.add("group")
        return Group()

    monkeypatch.setattr(batch, "Zygote", Zygote)
    monkeypatch.setattr(batch, "NotebookReader", NotebookReader)
    monkeypatch.setattr(sandbox.MemoryGroup, "create", staticmethod(create))
    monkeypatch.setattr(sandbox, "sweep_memory_groups", lambda: None)
    monkeypatch.setattr(sandbox, "allocate_uids", lambda jobs: log.add("uids") or 70000)
    monkeypatch.setattr(sandbox, "release_uids", lambda base: log.add("uids released"))
    return log
