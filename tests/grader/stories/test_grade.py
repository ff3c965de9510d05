"""The instructor's grader grades a fake class of honest, broken and hostile submissions.

One module-scoped run grades the whole class (tests/grader/fixtures.py);
the tests then read its gradebook, feedback and Gradescope files. Time limits
are short (a few seconds per cell) so the batch stays bounded.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import fixtures
import nbformat
import numpy as np
import pytest

from coursetools.grade import batch
from coursetools.grade.grading import submission
from coursetools.grade.grading.runner import Settings
from coursetools.grade.records import wire
from coursetools.grade.records.record import number
from coursetools.grade.sandbox import api as sandbox
from coursetools.grade.sandbox import host

ROOT = Path(__file__).resolve().parents[3]

TIMEOUT_CELL = 4.0
TIMEOUT_TOTAL = 40.0
JOBS = 2
ISOLATION = sandbox.probe()
ISOLATED = ISOLATION in ("namespaces", "userns")


def _settings(out: Path) -> Settings:
    return Settings(
        out=out,
        timeout_cell=TIMEOUT_CELL,
        timeout_total=TIMEOUT_TOTAL,
        timeout_setup=120.0,
        memory_mb=1536,
        isolation="auto",
    )


def _tree(folder: Path, skip: Path | None = None) -> dict[str, str]:
    found = {}
    for path in sorted(folder.rglob("*")):
        if skip is not None and (path == skip or skip in path.parents):
            continue
        if path.is_file():
            found[str(path.relative_to(folder))] = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            found[str(path.relative_to(folder))] = "dir"
    return found


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _sandbox_processes() -> list[int]:
    """Processes still running as one of the sandbox uids."""
    uids = {sandbox.SANDBOX_UID_BASE + k for k in range(8)}
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid in uids:
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def _read_csv(out: Path) -> list[dict]:
    with open(out / "grades.csv", encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    top = tmp_path_factory.mktemp("grading")
    canary = top / "outside" / "canary.txt"
    canary.parent.mkdir()
    canary.write_text("do not touch\n", encoding="utf-8")
    subs = top / "submissions"
    expected = fixtures.make_class(subs, canary)
    out = top / "out"
    before = _tree(top)
    # other people may edit the repository meanwhile: watch only what the submissions attack
    repo_before = _digest(ROOT / "solutions" / "00-how-to-use.ipynb")
    start = time.monotonic()
    records = batch.grade("00-how-to-use", subs, out, jobs=JOBS, settings=_settings(out), quiet=True)
    elapsed = time.monotonic() - start
    return {
        "top": top,
        "out": out,
        "subs": subs,
        "canary": canary,
        "expected": expected,
        "records": {r["student"]: r for r in records},
        "elapsed": elapsed,
        "before": before,
        "repo_before": repo_before,
    }


STUDENTS = sorted(fixtures.notebooks(Path("/nonexistent/canary.txt"))) + ["nbgrader-student"]


def _student_id(name: str) -> str:
    return submission.safe_name(name)


@pytest.mark.parametrize("student", STUDENTS)
@pytest.mark.slow
def test_each_submission_gets_the_right_score_and_status(graded, student):
    status, score, total = graded["expected"][student]
    if not ISOLATED and student in ("reads-solutions", "vandal"):
        pytest.skip(f"no namespaces here (isolation: {ISOLATION})")
    rows = {row["student"]: row for row in _read_csv(graded["out"])}
    row = rows[_student_id(student)]
    record = graded["records"][_student_id(student)]
    detail = json.dumps({k: record.get(k) for k in ("status", "incidents", "review", "notes", "cell_errors")})
    assert row["status"] == status, detail
    assert row["ex-00-1"] == ("" if score is None else number(score)), detail
    assert row["total"] == ("" if total is None else number(total)), detail
    assert row["max"] == "1"


@pytest.mark.slow
def test_the_gradebook_has_every_submission_exactly_once(graded):
    rows = _read_csv(graded["out"])
    names = [row["student"] for row in rows]
    assert sorted(names) == sorted(_student_id(s) for s in graded["expected"])
    assert len(names) == len(set(names))
    assert list(rows[0]) == ["student", "ex-00-1", "total", "max", "status", "notes"]


@pytest.mark.slow
def test_a_failed_run_is_never_a_plain_zero(graded):
    for row in _read_csv(graded["out"]):
        if row["total"] == "":
            assert row["status"] != "graded", row
        if row["status"] == "unreadable":
            assert row["total"] == "" and row["ex-00-1"] == "", row


@pytest.mark.slow
def test_the_batch_finishes_in_bounded_time(graded):
    bound = len(graded["expected"]) * TIMEOUT_TOTAL / JOBS + 120
    assert graded["elapsed"] < bound


@pytest.mark.slow
def test_nothing_outside_the_output_folder_changes(graded):
    assert graded["canary"].read_text(encoding="utf-8") == "do not touch\n"
    assert not (graded["canary"].parent / "planted.txt").exists()
    assert _tree(graded["top"], skip=graded["out"]) == {
        k: v for k, v in graded["before"].items() if k != "out" and not k.startswith("out/")
    }
    assert _digest(ROOT / "solutions" / "00-how-to-use.ipynb") == graded["repo_before"]
    assert not (ROOT / "attnlib" / "planted.py").exists()
    assert not Path("/tmp/attnlib-grade-planted").exists()
    assert not (graded["out"] / ".work").exists()


@pytest.mark.slow
def test_no_process_of_a_submission_survives(graded):
    if os.geteuid() != 0:
        pytest.skip("sandbox uids are used only when the grader runs as root")
    deadline = time.monotonic() + 10
    while _sandbox_processes() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _sandbox_processes() == []


@pytest.mark.slow
def test_isolation_is_recorded(graded):
    iso = graded["records"]["correct"]["isolation"]
    assert iso["mode"] == ISOLATION
    if ISOLATED:
        assert iso["network"] and iso["readonly"]
        assert str((ROOT / "solutions").resolve()) in iso["hidden"]
        assert "RLIMIT_AS" in iso["limits"]
    if os.geteuid() == 0 and ISOLATED:
        assert iso["uid"] >= sandbox.SANDBOX_UID_BASE


@pytest.mark.slow
def test_feedback_names_the_misconceptions_and_never_shows_the_solution(graded):
    fb = graded["out"] / "feedback"
    text = (fb / "mis-transposed.md").read_text(encoding="utf-8")
    assert "the result is transposed" in text and "put a on the left" in text
    text = (fb / "mis-batch-transpose.md").read_text(encoding="utf-8")
    assert "b.T swaps the batch axes too" in text
    text = (fb / "stub.md").read_text(encoding="utf-8")
    assert "Not attempted" in text
    text = (fb / "loop-in-function.md").read_text(encoding="utf-8")
    assert "did not finish within" in text
    text = (fb / "syntax-error.md").read_text(encoding="utf-8")
    assert "SyntaxError" in text
    for path in fb.glob("*.md"):
        body = path.read_text(encoding="utf-8")
        assert "return a @ np.swapaxes(b, -1, -2)" not in body
        assert "BEGIN SOLUTION" not in body
    assert len(list(fb.glob("*.md"))) == len(graded["expected"])


@pytest.mark.slow
def test_gradescope_results(graded):
    for student, (_status, _score, total) in graded["expected"].items():
        data = json.loads((graded["out"] / _student_id(student) / "results.json").read_text(encoding="utf-8"))
        assert set(data) >= {"score", "tests"}
        if total is not None:
            assert data["score"] == pytest.approx(total)
        for test in data["tests"]:
            assert set(test) >= {"name", "score", "max_score", "output"}
            assert 0 <= test["score"] <= test["max_score"]
        if data["tests"]:
            assert sum(t["max_score"] for t in data["tests"]) == pytest.approx(1.0)


@pytest.mark.slow
def test_output_is_capped(graded):
    record = graded["records"]["output-flood"]
    assert record["output"]["bytes"] > 20_000_000
    assert len(record["output"]["head"]) + len(record["output"]["tail"]) < 40_000


@pytest.mark.slow
def test_the_hostile_actions_in_the_answer_cell_ran_and_were_contained(graded):
    """Since issue 43 only the answer cell and what it needs run for an exercise: the fake class's
    hostile actions stand there, after the function. The audit alone would hold most of them; these
    show that each one also ran in the exercise's process and met the sandbox's limit."""
    records = graded["records"]
    assert "the process sent too long a message to the sandbox's parent" in records["channel-flood"]["review"]
    printed = records["memory-bomb"]["output"]["head"]
    assert printed.split() == ["HOG-REFUSED", "HOGS-REFUSED", "BIG-REFUSED"], printed
    for name in ("fork-bomb", "loop-ignores-interrupt", "loop-in-answer-cell"):
        assert any("no progress within" in i for i in records[name]["incidents"]), records[name]
    assert any("exited with code 1" in i for i in records["os-exit"]["incidents"]), records["os-exit"]
    if ISOLATED:  # each change to the host's files (actions 0-4) was tried and refused
        refused = {line.split()[1] for line in records["vandal"]["output"]["head"].splitlines()}
        assert {"0", "1", "2", "3", "4"} <= refused, records["vandal"]["output"]
    # after the answer: nothing ran, nothing was held or noted
    for name in ("loop-after", "os-exit-after"):
        assert (records[name]["incidents"], records[name]["review"]) == ([], []), records[name]


@pytest.mark.slow
def test_rerun_keeps_finished_students_and_regrades_changed_ones(graded, tmp_path):
    out = tmp_path / "out"
    subs = tmp_path / "subs"
    subs.mkdir()
    for name in ("correct", "stub", "empty"):
        (subs / f"{name}.ipynb").write_bytes((graded["subs"] / f"{name}.ipynb").read_bytes())
    zygote = _zygote()
    try:
        _rerun_checks(graded, subs, out, _settings(out), [zygote])
    finally:
        zygote.close()


def _zygote():
    from coursetools.grade.grading.runner import base_env
    from coursetools.grade.sandbox.zygote import Zygote

    return Zygote(sys.executable, str(ROOT), base_env(), ISOLATION == "namespaces")


def _rerun_checks(graded, subs, out, settings, zygotes):
    batch.grade("00-how-to-use", subs, out, jobs=1, settings=settings, quiet=True, zygotes=zygotes)
    first = {p.parent.name: p.stat().st_mtime_ns for p in out.glob("*/record.json")}
    assert set(first) == {"correct", "stub", "empty"}
    (subs / "stub.ipynb").write_bytes((graded["subs"] / "correct.ipynb").read_bytes())
    records = batch.grade("00-how-to-use", subs, out, jobs=1, settings=settings, quiet=True, zygotes=zygotes)
    second = {p.parent.name: p.stat().st_mtime_ns for p in out.glob("*/record.json")}
    assert second["correct"] == first["correct"] and second["empty"] == first["empty"]
    assert second["stub"] != first["stub"]
    assert {r["student"]: r["total"] for r in records} == {"correct": 1, "empty": None, "stub": 1}
    batch.grade(
        "00-how-to-use", subs, out, jobs=1, force=True, settings=settings, quiet=True, zygotes=zygotes
    )
    third = {p.parent.name: p.stat().st_mtime_ns for p in out.glob("*/record.json")}
    assert all(third[k] != second[k] for k in third)


@pytest.mark.slow
def test_kill_9_loses_nothing_finished(graded, tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    names = ["correct", "fork-bomb", "mis-transposed", "partial-3d", "stub"]
    for name in names:
        (subs / f"{name}.ipynb").write_bytes((graded["subs"] / f"{name}.ipynb").read_bytes())
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "coursetools.grade", "00-how-to-use", str(subs), "--out", str(out)]
    cmd += ["--jobs", "1", "--timeout-cell", "4", "--timeout-total", "40", "--memory-mb", "1536"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not list(out.glob("*/record.json")) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    finished = {p.parent.name: p.read_text(encoding="utf-8") for p in out.glob("*/record.json")}
    assert finished, "nothing finished before the kill"
    rows = _read_csv(out)
    assert sorted(r["student"] for r in rows) == sorted(names)
    for row in rows:
        if row["student"] not in finished:
            assert row["status"] == "not-graded" and row["total"] == ""
    # the children die with the grader
    if os.geteuid() == 0:
        killed_groups = [
            p for _, top in host._cgroup_roots() for p in Path(top).glob(f"coursetools-grade-{proc.pid}-*")
        ]
        deadline = time.monotonic() + 10
        while _sandbox_processes() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _sandbox_processes() == []
    # rerun (in this process, to save a start-up; the command line ran above)
    batch.grade("00-how-to-use", subs, out, jobs=1, settings=_settings(out), quiet=True)
    if os.geteuid() == 0:  # the memory groups the killed grader left are swept by the next one
        assert not any(p.exists() for p in killed_groups)
    assert not list(Path(tempfile.gettempdir()).glob(f"coursetools-grade-{proc.pid}-*"))
    for name, text in finished.items():
        assert (out / name / "record.json").read_text(encoding="utf-8") == text
    rows = {r["student"]: r for r in _read_csv(out)}
    assert len(rows) == len(names)
    assert rows["correct"]["total"] == "1" and rows["mis-transposed"]["total"] == "0"
    assert all(r["status"] != "not-graded" for r in rows.values())


@pytest.mark.slow
def test_a_fresh_interpreter_per_run_gives_the_same_verdicts(graded, tmp_path):
    """The fallback without the pre-warmed zygote: one new Python per run."""
    subs = tmp_path / "subs"
    subs.mkdir()
    names = ["correct", "loop-in-function", "os-exit", "mis-batch-transpose"]
    for name in names:
        (subs / f"{name}.ipynb").write_bytes((graded["subs"] / f"{name}.ipynb").read_bytes())
    out = tmp_path / "out"
    settings = replace(_settings(out), zygote=False)
    records = {
        r["student"]: r for r in batch.grade("00-how-to-use", subs, out, settings=settings, quiet=True)
    }
    for name in names:
        status, _score, total = graded["expected"][name]
        assert (records[name]["status"], records[name]["total"]) == (status, total), records[name]


CHAPTERS = sorted(
    p.stem for p in (ROOT / "solutions").glob("*.ipynb") if (ROOT / "exercises" / p.name).is_file()
)


COPIES = 2


@pytest.mark.slow
def test_every_chapters_solution_gets_full_marks(tmp_path):
    """Copies of every chapter's official solution, graded two chapters at a time, all get full marks.

    The grader works for every chapter's exercises, whatever their outputs (scalars, tuples,
    tensors); and verdicts from concurrent threads never depend on each other (issue 12:
    references computed in threads that shared torch's global generator failed 6 of 48).
    """
    from concurrent.futures import ThreadPoolExecutor
    from queue import Queue

    zygotes: Queue = Queue()
    for _ in range(JOBS):
        zygotes.put(_zygote())

    def grade_solution(chapter):
        subs = tmp_path / chapter / "subs"
        subs.mkdir(parents=True)
        for copy in range(COPIES):  # copies judged while the other thread judges another chapter
            (subs / f"solution-{copy}.ipynb").write_bytes(
                (ROOT / "solutions" / f"{chapter}.ipynb").read_bytes()
            )
        out = tmp_path / chapter / "out"
        settings = replace(_settings(out), timeout_cell=120.0, timeout_total=400.0)
        zygote = zygotes.get()
        try:
            records = batch.grade(chapter, subs, out, jobs=1, settings=settings, quiet=True, zygotes=[zygote])
        finally:
            zygotes.put(zygote)
        problems = []
        for record in records:
            if record["status"] == "graded" and record["total"] == record["max"]:
                continue
            failed = {
                ex: [c for c in data["cases"] if c["status"] != "passed"][:2]
                for ex, data in record["exercises"].items()
                if data["score"] != data["points"]
            }
            problems.append((chapter, record["student"], record["status"], record.get("incidents"), failed))
        return problems or None

    try:
        with ThreadPoolExecutor(JOBS) as pool:
            problems = [p for p in pool.map(grade_solution, CHAPTERS) if p is not None]
    finally:
        while not zygotes.empty():
            zygotes.get().close()
    assert not problems, problems


# --------------------------------------------------------------------------- units


def test_wire_round_trip_and_refusals():
    value = (np.arange(6.0).reshape(2, 3), {"w": np.array([True, False])}, None, np.int64(3))
    encoded = wire.encode(tuple(np.asarray(v) if isinstance(v, np.generic) else v for v in value))
    back = wire.decode(json.loads(json.dumps(encoded)))
    assert np.array_equal(back[0], value[0]) and back[1]["w"].dtype == bool and back[2] is None
    for scalar in (np.asarray(2.5), np.asarray(True), np.asarray(7)):
        back = wire.decode(wire.encode(scalar))
        assert back.shape == () and back.dtype == scalar.dtype and back == scalar
    strided = np.arange(12.0).reshape(3, 4)[:, ::2].T
    assert np.array_equal(wire.decode(wire.encode(strided)), strided)
    with pytest.raises(TypeError, match="cannot compare an array of dtype object"):
        wire.encode(np.array([object()], dtype=object))
    bad = wire.encode(np.zeros(3))
    bad["dtype"] = "|O"
    with pytest.raises(wire.WireError, match="dtype object is not allowed"):
        wire.decode(bad)
    bad = wire.encode(np.zeros(3))
    bad["shape"] = [4]
    with pytest.raises(wire.WireError, match="size does not match its shape"):
        wire.decode(bad)
    with pytest.raises(wire.WireError, match="unknown output kind 'pickle'"):
        wire.decode({"k": "pickle", "data": "gASV"})


def test_submissions_are_found_in_both_layouts(tmp_path):
    (tmp_path / "ann.ipynb").write_text("{}", encoding="utf-8")
    nested = tmp_path / "ben" / "ps1" / "00-how-to-use.ipynb"
    nested.parent.mkdir(parents=True)
    nested.write_text("{}", encoding="utf-8")
    (tmp_path / "ben" / "ps1" / "scratch.ipynb").write_text("{}", encoding="utf-8")
    (tmp_path / ".hidden.ipynb").write_text("{}", encoding="utf-8")
    found = {s.student: s.path for s in submission.find_submissions(tmp_path, "00-how-to-use")}
    assert found == {"ann": tmp_path / "ann.ipynb", "ben": nested}


def test_plan_drops_check_cells_and_places_each_exercise():
    nb = nbformat.read(ROOT / "exercises" / "00-how-to-use.ipynb", as_version=4)
    assignment = batch.load_assignment("00-how-to-use")
    plan, notes, review = submission.build_plan(nb, assignment)
    sources = [s for _, s in plan["cells"]]
    assert not any(s.lstrip().startswith("check(") for s in sources)
    answer = next(i for i, c in enumerate(nb.cells) if c.metadata.get("attnlib", {}).get("exercise"))
    assert plan["evaluate_after"] == {str(answer): ["ex-00-1"]}
    assert not review


def test_command_line_usage_errors(tmp_path, capsys):
    from coursetools.grade.__main__ import main

    assert main(["no-such-chapter", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    assert "no exercise notebook" in capsys.readouterr().err


# --------------------------------------------------------------------------- the same under load (issue 43.5)

# graded again beside two CPU-bound processes per core: time limits, crashes and honest answers
LOADED = [
    "correct",
    "loop-in-function",
    "os-exit",
    "segfault-in-function",
    "mis-batch-transpose",
    "fork-bomb",
]

# grades one correct notebook again and again outside any GradingSession (as tests that call
# runner.grade_submission do): before issue 43 such a run took the first block of sandbox uids
# without its lock and killed that uid's processes after each run, a session's learners included
OUTSIDE_A_SESSION = """
import sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from attnlib.checks import get_exercise
from coursetools.grade import batch
from coursetools.grade.grading import runner
from coursetools.grade.grading.submission import Submission, file_digest
path = Path(sys.argv[2])
assignment = batch.load_assignment("00-how-to-use")
exercises = {"ex-00-1": get_exercise("ex-00-1")}
settings = runner.Settings(out=path.parent / "outside-out", timeout_cell=4.0, timeout_total=60.0)
while True:
    runner.grade_submission(Submission("outside", path, file_digest(path)), assignment, exercises, settings)
"""


@pytest.fixture
def busy_cores():
    """Two CPU-bound processes per core beside the test, killed after it."""
    count = 2 * (os.cpu_count() or 1)
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield count
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait()


@pytest.mark.slow
def test_the_verdicts_are_the_same_under_load(graded, tmp_path, busy_cores):
    """The class's time limits and crashes give the verdicts of the unloaded run, with two busy
    processes per core and a grader outside any session beside them (issue 43.5: an infinite loop
    ended ``kernel-died`` by a SIGKILL the grader did not send to it)."""
    subs = tmp_path / "subs"
    subs.mkdir()
    for name in LOADED:
        (subs / f"{name}.ipynb").write_bytes((graded["subs"] / f"{name}.ipynb").read_bytes())
    outside = tmp_path / "outside" / "correct.ipynb"
    outside.parent.mkdir()
    outside.write_bytes((graded["subs"] / "correct.ipynb").read_bytes())
    beside = subprocess.Popen(
        [sys.executable, "-c", OUTSIDE_A_SESSION, str(ROOT), str(outside)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        out = tmp_path / "out"
        records = {
            r["student"]: r
            for r in batch.grade("00-how-to-use", subs, out, jobs=JOBS, settings=_settings(out), quiet=True)
        }
    finally:
        os.killpg(beside.pid, signal.SIGKILL)
        beside.wait()
    for name in LOADED:
        unloaded = graded["records"][name]
        got = records[name]
        assert (got["status"], got["total"]) == (unloaded["status"], unloaded["total"]), (
            name,
            got.get("incidents"),
            unloaded.get("incidents"),
        )
        assert not any("SIGKILL" in str(i) for i in got.get("incidents") or []), got["incidents"]
