"""Limits end to end, the same under load (issue 43.5).

* A run's verdict comes from the grader's own accounting: a process killed after one of the run's
  processes reached its CPU budget ran out of time; any other death is a crash. And a run outside a
  grading session holds its own block of sandbox uids, so the kill after it never reaches another
  grader's learners (the SIGKILL that made an infinite loop ``kernel-died`` under a loaded suite).
* The answers of a class's notebooks are read again once: every later command (report, overrides,
  manual, export) takes them from ``OUT/.coursetools-answers.json`` by digest, and reads what is
  left within a budget per class.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import time
from pathlib import Path

import fixtures
import nbformat
import pytest

from coursetools.grade.grading import parse_worker, process
from coursetools.grade.grading.runner import Settings
from coursetools.grade.outputs.publish import publish
from coursetools.grade.records.events import RunEnd, RunOutcome, RunPlan
from coursetools.grade.records.store import ANSWERS_CACHE, AnswerCache, answers_key
from coursetools.grade.sandbox import api as sandbox
from coursetools.grade.sandbox import host as sandbox_host

# --------------------------------------------------------------------------- timeout or crash


def _run(tmp_path: Path, budget: float, peak: float) -> process.Run:
    run = process.Run(
        RunPlan([], {}, [], []), Settings(out=tmp_path), tmp_path, 0, time.monotonic() + 10, None
    )
    run.cpu_budget, run.cpu_peak = budget, peak
    return run


@pytest.mark.parametrize(
    "code,peak,end",
    [
        (-signal.SIGKILL, 9.5, RunEnd.STEP_TIMEOUT),  # RLIMIT_CPU's SIGKILL: the grader's own limit
        (128 + signal.SIGKILL, 9.5, RunEnd.STEP_TIMEOUT),  # as the sandbox's trusted parent reports it
        (-signal.SIGXCPU, 9.9, RunEnd.STEP_TIMEOUT),
        (-signal.SIGKILL, 1.0, RunEnd.DIED),  # a SIGKILL far below the budget: not a time limit
        (-signal.SIGSEGV, 9.9, RunEnd.DIED),  # a crash is a crash, whatever the CPU used
        (1, 9.9, RunEnd.DIED),  # os._exit(1)
    ],
)
def test_timeout_or_crash_comes_from_the_runs_cpu_against_its_budget(tmp_path, code, peak, end):
    judged = _run(tmp_path, 10.0, peak)._judge_end(RunOutcome(RunEnd.DIED, None, "", code))
    assert judged.end is end
    if end is RunEnd.STEP_TIMEOUT:
        assert "CPU time limit" in judged.message


def test_a_processs_cpu_time_is_read_from_proc():
    start = process._cpu_seconds(os.getpid())
    spent = time.process_time()
    while time.process_time() - spent < 0.3:
        pass
    assert start is not None and process._cpu_seconds(os.getpid()) >= start + 0.2
    assert process._cpu_seconds(2**22 + 12345) is None  # no such process


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="sandbox uids are used by a grader that is root")
def test_a_run_outside_a_session_holds_its_own_uids(tmp_path, monkeypatch):
    """Each uid the grader kills after a run is in a block this grader holds (before issue 43 a
    run outside a session used the first block unlocked: another session's learners died)."""
    from attnlib.checks import get_exercise
    from coursetools.grade import batch
    from coursetools.grade.grading import runner
    from coursetools.grade.grading.submission import Submission, file_digest

    killed: list[tuple[int, bool]] = []
    real_kill = sandbox.kill_uid

    def held(uid: int) -> bool:
        names = []
        for fd in sandbox_host._HELD_LOCKS:
            try:
                names.append(os.readlink(f"/proc/self/fd/{fd}"))
            except OSError:
                pass
        block = (
            sandbox.SANDBOX_UID_BASE
            + (uid - sandbox.SANDBOX_UID_BASE) // sandbox.UID_BLOCK * sandbox.UID_BLOCK
        )
        return any(name.endswith(f"-{block}.lock") for name in names)

    def recording_kill(uid: int) -> None:
        killed.append((uid, held(uid)))
        real_kill(uid)

    monkeypatch.setattr(sandbox, "kill_uid", recording_kill)
    path = tmp_path / "correct.ipynb"
    path.write_text(nbformat.writes(fixtures.with_answer(fixtures.CORRECT)), encoding="utf-8")
    settings = runner.Settings(out=tmp_path / "out", timeout_cell=20.0, timeout_total=120.0)
    record = runner.grade_submission(
        Submission("correct", path, file_digest(path)),
        batch.load_assignment("00-how-to-use"),
        {"ex-00-1": get_exercise("ex-00-1")},
        settings,
    )
    assert record.runs and killed
    assert all(was_held for _, was_held in killed), killed
    assert not any(uid for uid, _ in killed if held(uid))  # and given back after the run


# --------------------------------------------------------------------------- answers read once


def test_the_answers_cache_keeps_what_was_asked_about_this_time(tmp_path):
    cache = AnswerCache.load(tmp_path)
    assert cache.entries == {}
    old = answers_key("ada", "d1", "a1", {"ex-1": "f"}, [])
    other_question = answers_key("ada", "d1", "a1", {}, ["q-00-1"])
    gone = answers_key("ada", "d2", "a1", {"ex-1": "f"}, [])
    for key in (old, other_question, gone):
        cache.put(key, {"normal": {"ex-1": "v0"}, "written": {}})
    cache.save()
    again = AnswerCache.load(tmp_path)
    assert again.get(old) == {"normal": {"ex-1": "v0"}, "written": {}}  # the notebook d1 asked about
    again.save()
    kept = json.loads((tmp_path / ANSWERS_CACHE).read_text())["answers"]
    assert set(kept) == {old, other_question}  # d1's other questions kept, d2 (not asked about) dropped
    assert answers_key("ada", "d1", "a2", {"ex-1": "f"}, []) != old  # another assignment: read again
    assert answers_key("eve", "d1", "a1", {"ex-1": "f"}, []) != old  # a classmate claiming the digest


def _class(tmp_path: Path, n: int) -> tuple[Path, list[dict]]:
    out = tmp_path / "out"
    records = []
    for i in range(n):
        nb = fixtures.with_answer(fixtures.CORRECT + f"\n# learner {i}\n")
        path = tmp_path / f"s{i}.ipynb"
        path.write_text(nbformat.writes(nb), encoding="utf-8")
        record = fixtures.record(f"s{i}", {"ex-00-1": 1.0}, {"ex-00-1": 1.0})
        record.update(file=str(path), digest=hashlib.sha256(path.read_bytes()).hexdigest(), assignment="a1")
        record["exercises"]["ex-00-1"]["function"] = "pairwise_dot"
        records.append(record)
    fixtures.write_graded(out, records, assignment="00-how-to-use")
    return out, records


@pytest.mark.slow
def test_a_later_command_reads_no_notebook_when_nothing_changed(tmp_path, monkeypatch):
    out, records = _class(tmp_path, 3)  # its first publish reads the three notebooks once
    assert len(json.loads((out / ANSWERS_CACHE).read_text())["answers"]) == 3
    read: list[str] = []
    real = parse_worker.NotebookReader.answers

    def counting(self, path, *args, **kwargs):
        read.append(Path(path).name)
        return real(self, path, *args, **kwargs)

    monkeypatch.setattr(parse_worker.NotebookReader, "answers", counting)
    started: list[int] = []
    real_start = parse_worker.NotebookReader.start
    monkeypatch.setattr(
        parse_worker.NotebookReader, "start", lambda self: started.append(1) or real_start(self)
    )
    before = (out / "report.html").read_text(encoding="utf-8")
    publish(out)  # report, overrides, manual and export all end with it
    assert read == [] and started == []  # not one notebook opened, no reader started
    assert (out / "report.html").read_text(encoding="utf-8") == before
    # one learner's notebook changes (regraded): only that one is read again
    path = Path(records[1]["file"])
    path.write_text(nbformat.writes(fixtures.with_answer(fixtures.ZEROS)), encoding="utf-8")
    record = json.loads((out / "s1" / "record.json").read_text())
    record["digest"] = hashlib.sha256(path.read_bytes()).hexdigest()
    (out / "s1" / "record.json").write_text(json.dumps(record), encoding="utf-8")
    publish(out)
    assert read == ["s1.ipynb"]


@pytest.mark.slow
def test_reading_answers_again_stops_at_the_class_budget_with_a_note(tmp_path):
    paths = []
    for i in range(3):
        path = tmp_path / f"s{i}.ipynb"
        path.write_text(nbformat.writes(fixtures.with_answer(fixtures.CORRECT)), encoding="utf-8")
        paths.append((f"s{i}", str(path), None))
    got, problems = parse_worker.read_answers(paths, {"ex-00-1": "pairwise_dot"}, budget=0.0)
    assert got == {}
    assert problems == [
        "3 notebooks not read again: the class's 0 s for reading answers again was spent (what was "
        "read is kept in OUT; run the command again to go on)"
    ]
    got, problems = parse_worker.read_answers(paths, {"ex-00-1": "pairwise_dot"}, budget=60.0)
    assert sorted(got) == ["s0", "s1", "s2"] and problems == []
