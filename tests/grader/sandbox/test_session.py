"""Issue 24, item 6: one object owns every resource of a grading run
(:class:`coursetools.grade.batch.GradingSession`).

Its ``with`` block acquires the work folder, the sandbox uids (as root), the memory
cgroups, the zygotes, the notebook readers and the job threads, and releases them in
the reverse order: after a normal end, after a failure half-way through acquiring them,
and after an interrupt. The resources here are stand-ins that record what happens to
them (the real ones are exercised by every class test), so the order is checked exactly.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from fixtures import JOBS, _session

from coursetools.grade import batch
from coursetools.grade.grading.runner import Settings
from coursetools.grade.grading.submission import Submission

pytestmark = pytest.mark.grader


def _acquired(root: bool) -> list[str]:
    uids = ["uids"] if root else []
    return [
        *uids,
        "group",
        "group",
        "zygote",
        "zygote",
        "reader",
        "reader",
        "reader started",
        "reader started",
    ]


def _released(root: bool) -> list[str]:
    uids = ["uids released"] if root else []
    done = [
        "reader closed",
        "reader closed",
        "zygote closed",
        "zygote closed",
        "group removed",
        "group removed",
    ]
    return [f"{event} (work folder present)" for event in done + uids]


def test_every_resource_is_released_in_reverse_order(tmp_path, log):
    root = os.geteuid() == 0
    with _session(tmp_path, busy=5) as session:
        log.work = session.settings.work_dir
        assert log.work.is_dir() and (log.work.stat().st_mode & 0o777) == 0o711
        assert log.events == _acquired(root)
        assert session.memory_kind == "cgroup2" and len(session.readers) == JOBS
        assert session.settings.hide and session.settings.isolation == "none"
        log.events.clear()
    assert log.events == _released(root)
    assert not log.work.exists() and session.stop.is_set()


def test_a_failure_half_way_releases_what_was_acquired(tmp_path, log, monkeypatch):
    """The second reader fails to start: the first is closed, then the zygotes, the cgroups and
    the work folder, and the error reaches the caller."""
    started = []

    def start(self) -> None:
        if started:
            raise OSError("no more processes")
        started.append(self)
        log.add("reader started")

    monkeypatch.setattr(batch.NotebookReader, "start", start)
    folders_before = set(Path(batch.tempfile.gettempdir()).glob(f"coursetools-grade-{os.getpid()}-*"))
    with pytest.raises(OSError, match="no more processes"), _session(tmp_path, busy=5):
        pytest.fail("the with block must not run")
    released = [e.replace(" (work folder present)", "") for e in _released(os.geteuid() == 0)]
    assert log.events[-len(released) :] == released
    assert set(Path(batch.tempfile.gettempdir()).glob(f"coursetools-grade-{os.getpid()}-*")) == folders_before


def test_only_the_slots_that_will_be_used_start_processes(tmp_path, log):
    with _session(tmp_path, busy=1):
        assert log.events.count("zygote") == 1 and log.events.count("reader started") == 1
        assert log.events.count("reader") == JOBS  # a reader per slot, started when first used
    log.events.clear()
    with _session(tmp_path, busy=0):
        assert "zygote" not in log.events and "reader started" not in log.events


def test_lent_zygotes_and_work_folder_stay_the_callers(tmp_path, log):
    work = tmp_path / "work"
    work.mkdir()
    lent = [object()]
    out, subs = tmp_path / "out", tmp_path / "subs"
    out.mkdir()
    subs.mkdir()
    given = Settings(out=out, isolation="none", work_dir=work)
    with batch.GradingSession(given, subs, out, JOBS, 3, zygotes=lent) as session:
        assert session.zygotes is lent and session.settings.work_dir == work
    assert "zygote" not in log.events and "zygote closed" not in log.events
    assert work.is_dir()


def test_grade_all_runs_each_submission_in_a_free_slot(tmp_path, log):
    subs = [Submission(f"s{k}", tmp_path / f"s{k}.ipynb") for k in range(7)]
    busy: set[int] = set()
    lock = threading.Lock()
    done: list[str] = []

    def grade_one(sub: Submission, slot: int) -> dict:
        with lock:
            assert slot not in busy and 0 <= slot < JOBS
            busy.add(slot)
        with lock:
            busy.discard(slot)
        return {"student": sub.student}

    with _session(tmp_path, busy=len(subs)) as session:
        session.grade_all(subs, grade_one, lambda record: done.append(record["student"]))
    assert sorted(done) == sorted(s.student for s in subs)


def test_an_interrupt_stops_the_job_threads_before_the_resources_go(tmp_path, log):
    """Ctrl-C while grading (here: raised by the first submission): the rest are not started,
    the interrupt reaches the caller, and every resource is still released in reverse order."""
    subs = [Submission(f"s{k}", tmp_path / f"s{k}.ipynb") for k in range(20)]
    session = _session(tmp_path, busy=len(subs))

    def grade_one(sub: Submission, slot: int) -> dict:
        if sub.student == "s0":
            raise KeyboardInterrupt
        session.stop.wait(5)  # a submission in progress ends when grading stops
        return {"student": sub.student}

    finished: list[str] = []
    with pytest.raises(KeyboardInterrupt), session:
        log.work = session.settings.work_dir
        log.events.clear()
        session.grade_all(subs, grade_one, lambda record: finished.append(record["student"]))
    assert session.stop.is_set()
    assert len(finished) < len(subs) - 1  # the rest were never started
    assert log.events == _released(os.geteuid() == 0) and not log.work.exists()


def test_bad_uses_are_refused(tmp_path, log):
    out = tmp_path / "out"
    with pytest.raises(ValueError, match="jobs"):
        batch.GradingSession(Settings(out=out), tmp_path, out, 0, 1)
    with pytest.raises(RuntimeError, match="outside"):
        _session(tmp_path, busy=1).grade_all([], lambda sub, slot: {}, lambda record: None)
