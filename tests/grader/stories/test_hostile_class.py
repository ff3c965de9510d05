"""Issue 12: right grades, no escape, no lost work, for a class the grader has never seen.

One module-scoped run grades a small class of honest and hostile submissions
written for the findings of issue 12 (names, IPython syntax, escapes, reaching
the answers, statuses); unit tests cover the mechanisms behind them
(verdicts from concurrent threads, forbidden calls, resume key, uid blocks).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace as dataclasses_replace
from pathlib import Path

import fixtures
import nbformat
import pytest

from coursetools.grade import batch
from coursetools.grade.grading import runner, submission, verdict
from coursetools.grade.grading.runner import Settings
from coursetools.grade.records import wire
from coursetools.grade.records.record import Record, Status
from coursetools.grade.sandbox import api as sandbox

ROOT = Path(__file__).resolve().parents[3]

pytestmark = pytest.mark.grader
ISOLATION = sandbox.probe()
ISOLATED = ISOLATION in ("namespaces", "userns")
SLEEP_MARK = "987654"
SHM_KEY = 0x5EED
C = fixtures.CORRECT
Z = fixtures.ZEROS


def _settings(out: Path) -> Settings:
    return Settings(
        out=out, timeout_cell=6.0, timeout_total=60.0, timeout_setup=120.0, memory_mb=1536, isolation="auto"
    )


def _reader(path: Path) -> str:
    """An answer that is right only if it can read ``path`` (so a score of 0 means: not reachable)."""
    return (
        fixtures.HEADER
        + "    try:\n"
        + f"        open({str(path)!r}, 'rb').read(1)\n"
        + "    except OSError:\n"
        + "        return np.zeros(a.shape[:-1] + b.shape[-2:-1])\n"
        + "    return a @ np.swapaxes(b, -1, -2)\n"
    )


# (The payloads call the channel as the harness does, send(message dict), so that they would
# work if the channel were reachable: it is not, since issue 24 the learner's process has none.)
# Issue 12, "the result channel is reachable through gc": a cell after a wrong answer finds
# the harness's channel (gc) and the cases' inputs, computes the right outputs itself and
# sends them as case results, in the middle of its own cell.
FORGES_IN_CELL = """import gc
from coursetools.grade.records.wire import encode
channel = [o for o in gc.get_objects() if type(o).__name__ == "_Channel"]
cases = [o for o in gc.get_objects() if type(o).__name__ == "ShippedCase"]
print("FORGER channel", len(channel), "cases", len(cases))
for case in cases:
    a, b = case.make_inputs()
    right = a @ np.swapaxes(b, -1, -2)
    channel[0].send({"t": "case", "ex": "ex-00-1", "case": case.name, "phase": "cell",
                     "kind": "value", "value": encode(right), "seconds": 0.0})
"""

# The same, done as well as code inside the process can do it: it hunts for the answer key
# (gc, sys.modules, import by a computed name, the file), then takes the channel over: it
# closes its own cell, writes a complete, well-ordered account of the rest of the run with
# the key's outputs (or, without the key, its own wrong ones) and ends the process before
# the harness can write again. The grader cannot tell this account from the harness's; the
# answer key must be out of reach for it to earn nothing.
KEY_HUNTER = """import gc, importlib, os, sys
from coursetools.grade.records.wire import encode
key = [o for o in gc.get_objects() if type(o).__name__ in ("Exercise", "Misconception")]
key += [m for n, m in list(sys.modules.items()) if n.startswith("attnlib.checks.ch")]
try:
    key.append(importlib.import_module("attnlib.checks.ch" + "00_how_to_use"))
except Exception as exc:
    print("HUNTER import failed:", type(exc).__name__)
try:
    open(os.path.join(os.path.dirname(importlib.import_module("attnlib").__file__),
                      "checks", "ch00_how_to_use.py")).read(1)
    key.append("file")
except OSError as exc:
    print("HUNTER file failed:", type(exc).__name__)
reference = None
for found in key:
    module = found if hasattr(found, "__dict__") else None
    for value in (vars(module).values() if module is not None else ()):
        if getattr(value, "id", None) == "ex-00-1":
            reference = value.reference
print("HUNTER key found:", reference is not None)
frame = sys._getframe(0)
while frame is not None and "channel" not in frame.f_locals:
    frame = frame.f_back
scope = frame.f_locals
channel = [o for o in gc.get_objects() if type(o).__name__ == "_Channel"][0]
assert channel is scope["channel"]
function, cases = scope["exercises"]["ex-00-1"].function, scope["exercises"]["ex-00-1"].cases
answer = reference or scope["ns"][function]
channel.send({"t": "cell-done", "cell": scope["index"], "seconds": 0.0})
for case in cases:
    channel.send({"t": "step", "kind": "case", "ex": "ex-00-1", "case": case.name})
    channel.send({"t": "case", "ex": "ex-00-1", "case": case.name, "phase": "end", "kind": "value",
                  "value": encode(np.asarray(answer(*case.make_inputs()))), "seconds": 0.0})
channel.send({"t": "done"})
sys.stdout.flush()
os._exit(0)
"""


IPYTHON = (
    "r = %timeit -o pairwise_dot(np.ones((2, 2)), np.ones((2, 2)))\n"
    "x = !ls\npairwise_dot?\ndisplay(r.best >= 0, x)\n%time y = 1\n"
)


def _class(top: Path) -> dict[str, tuple]:
    subs = top / "submissions"
    subs.mkdir()
    secret = top / "answers-folder" / "key.txt"  # a sibling folder of the submissions
    secret.parent.mkdir()
    secret.write_text("the answers\n", encoding="utf-8")
    w = fixtures.with_answer
    nbs: dict[str, tuple] = {
        "a b": (w(C), ("graded", "1")),
        "a_b": (w(Z), ("graded", "0")),
        "a_b-2": (fixtures._base(), ("graded", "0")),
        "grades.csv": (w(C), ("graded", "1")),
        # IPython syntax after the answer never runs for it, and holds nothing (issue 43) ...
        "ipython": (w(C, after=[IPYTHON]), ("graded", "1")),
        # ... in the answer cell it runs with the grader's stand-ins; the allow-list holds an answer
        # cell that names get_ipython or display for review (no score)
        "ipython-in-answer": (w(C + IPYTHON), ("needs-review", "")),
        # Since issue 43 a cell after the answer never runs for it (its own process runs the answer
        # cell and what it needs): each hostile action stands in the answer cell, after the function
        "setsid-escape": (
            w(
                C + "import os\nif os.fork() == 0:\n    os.setsid()\n"
                f"    os.execvp('sleep', ['sleep', '{SLEEP_MARK}'])\n"
            ),
            ("needs-review", ""),  # fork and exec (os): held for review, no score
        ),
        "sysv-shm": (
            w(C + f"import ctypes\nctypes.CDLL(None).shmget({SHM_KEY}, 4096, 0o1666)\n"),
            ("needs-review", ""),  # ctypes can change what the answer uses: held for review (issue 34)
        ),
        # open() in the answer is outside the allow-list: held for review (issue 34), never marked
        "reads-git": (w(_reader(ROOT / ".git" / "HEAD")), ("needs-review", "")),
        "reads-sibling": (w(_reader(secret)), ("needs-review", "")),
        "checker-by-string": (
            w("import importlib\nm = importlib.import_module('attnlib.che' + 'cks')\n" + C),
            ("needs-review", ""),  # importlib in the answer cell: held for review
        ),
        "prints-last": (w(C + "print('LAST-WORDS', end='')\n"), ("graded", "1")),
        "pdeathsig": (
            w(
                C + "import ctypes\nv = ctypes.c_int(-1)\n"
                "ctypes.CDLL(None).prctl(2, ctypes.byref(v), 0, 0, 0)\n"  # PR_GET_PDEATHSIG
                "print('PDEATHSIG', v.value, 'UID', __import__('os').getuid())\n"
            ),
            ("needs-review", ""),  # ctypes: held for review (issue 34)
        ),
        "rebinds-cases": (
            w(
                "import attnlib.checks.core as core\n"
                "try:\n"
                "    core.get_exercise('ex-00-1').cases = core.get_exercise('ex-00-1').cases[:1]\n"
                "    core.get_exercise('ex-00-1').function = 'other'\n"
                "except KeyError:\n"
                "    print('NO-REGISTRY')\n"
                "def other(a, b):\n    return a @ b.T\n" + C
            ),
            ("needs-review", ""),  # the answer cell sets attributes of the checker: held
        ),
        "forges-in-cell": (w(Z + FORGES_IN_CELL), ("needs-review", "")),  # gc, frames: held
        # without namespaces the check modules are readable (documented): the forgery succeeds
        "key-hunter": (w(Z + KEY_HUNTER), ("needs-review", "")),
        # a cell after a wrong answer that would forge its results never runs for it (issue 43)
        "forges-after": (w(Z, after=[FORGES_IN_CELL, KEY_HUNTER]), ("graded", "0")),
    }
    expected = {}
    for name, (nb, outcome) in nbs.items():
        (subs / f"{name}.ipynb").write_text(nbformat.writes(nb), encoding="utf-8")
        expected[name] = outcome
    (subs / "deep.ipynb").write_text("[" * 200_000, encoding="utf-8")
    expected["deep"] = ("unreadable", "")
    os.symlink(ROOT / "solutions" / "00-how-to-use.ipynb", subs / "link.ipynb")
    expected["link"] = ("unreadable", "")
    return expected


def _by_file(records: list[dict]) -> dict[str, dict]:
    return {Path(r["file"]).name.removesuffix(".ipynb"): r for r in records}


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    top = tmp_path_factory.mktemp("hostile")
    expected = _class(top)
    out = top / "out"
    records = batch.grade(
        "00-how-to-use", top / "submissions", out, jobs=2, settings=_settings(out), quiet=True
    )
    return {"top": top, "out": out, "expected": expected, "records": _by_file(records)}


@pytest.mark.slow
def test_every_file_gets_its_own_record_and_the_right_grade(hostile):
    records = hostile["records"]
    assert sorted(records) == sorted(hostile["expected"])
    keys = [r["student"] for r in records.values()]
    assert len(keys) == len(set(keys))
    for name, (status, total) in hostile["expected"].items():
        record = records[name]
        got = "" if record["total"] is None else f"{record['total']:g}"
        assert (record["status"], got) == (status, total), (name, record.get("review"), record.get("notes"))
    # held for review (issue 34): the verdicts still say what each could read or forge
    for name in ("reads-git", "reads-sibling", "key-hunter"):
        cases = records[name]["exercises"]["ex-00-1"]["cases"]
        assert all(c["status"] == ("failed" if ISOLATED else "passed") for c in cases), (name, cases)
    assert not any(
        c["status"] == "passed" for c in records["forges-in-cell"]["exercises"]["ex-00-1"]["cases"]
    )
    with open(hostile["out"] / "grades.csv", encoding="utf-8") as fh:
        rows = fh.read().splitlines()
    assert len(rows) == 1 + len(records)
    assert (hostile["out"] / "grades.csv").is_file()  # not replaced by the student called grades.csv


@pytest.mark.slow
def test_ipython_syntax_runs_and_display_exists(hostile):
    record = hostile["records"]["ipython-in-answer"]
    assert record["cell_errors"] == [], record["cell_errors"]
    assert any("stand-ins" in n for n in record["notes"])
    assert record["output"]["head"].startswith("True\n"), record["output"]  # display() showed it
    cases = record["exercises"]["ex-00-1"]["cases"]
    assert cases and all(c["status"] == "passed" for c in cases), cases  # the answer still ran


@pytest.mark.slow
def test_printed_output_is_kept_up_to_the_end(hostile):
    out = hostile["records"]["prints-last"]["output"]
    assert "LAST-WORDS" in out["head"] + out["tail"]


@pytest.mark.slow
def test_the_death_signal_is_armed_after_dropping_privileges(hostile):
    """A change of credentials clears the parent-death signal; the sandbox arms it again."""
    out = hostile["records"]["pdeathsig"]["output"]
    assert "PDEATHSIG 9 UID" in out["head"], out


@pytest.mark.slow
def test_every_case_is_run_whatever_a_cell_rebinds(hostile):
    record = hostile["records"]["rebinds-cases"]
    cases = record["exercises"]["ex-00-1"]["cases"]
    assert len(cases) > 1 and all(c["status"] == "passed" for c in cases), cases


@pytest.mark.slow
def test_results_written_on_the_channel_from_a_cell_are_ignored(hostile):
    """Issue 12, then issue 24: a later cell hunts for the channel with gc to send right outputs.
    The channel lives in the sandbox's trusted parent, never in the learner's process: the hunt
    finds nothing, no case passes, and the cell (gc) is flagged."""
    record = hostile["records"]["forges-in-cell"]
    assert "FORGER channel 0 cases" in record["output"]["head"], record["output"]
    # held for review (gc can change what an answer uses, issue 34): no score; no forged pass
    assert record["exercises"]["ex-00-1"]["score"] is None
    assert not any(c["status"] == "passed" for c in record["exercises"]["ex-00-1"]["cases"])
    assert record["status"] == "needs-review", record["review"]


@pytest.mark.slow
def test_the_answer_key_is_out_of_the_sandboxs_reach(hostile):
    """Issue 12: neither the sandboxed process's memory nor its file system holds the check
    modules (references, known wrong answers), so a submission that takes the channel over
    entirely can only report outputs it computed itself."""
    if not ISOLATED:
        pytest.skip("without namespaces the check modules are readable on disk (documented)")
    record = hostile["records"]["key-hunter"]
    printed = record["output"]["head"]
    assert "HUNTER key found: False" in printed, printed
    assert "HUNTER import failed" in printed and "HUNTER file failed" in printed, printed
    assert record["exercises"]["ex-00-1"]["score"] is None  # held for review (issue 34)
    assert not any(c["status"] == "passed" for c in record["exercises"]["ex-00-1"]["cases"])
    assert "NO-REGISTRY" in hostile["records"]["rebinds-cases"]["output"]["head"]


@pytest.mark.slow
def test_a_cell_that_reaches_into_the_harness_is_flagged(hostile):
    """The takeover is not told apart from the harness on the channel, but its cell's syntax
    tree shows what it used (gc, the harness's frames, coursetools): needs-review."""
    review = " ".join(hostile["records"]["key-hunter"]["review"])
    assert "reaches into the grader's process" in review, review
    for name in ("gc.get_objects", "sys._getframe", ".f_back", ".f_locals", "coursetools"):
        assert name in review, (name, review)
    assert not any("reaches into" in r for r in hostile["records"]["a b"]["review"])


def test_the_guide_names_every_module_outside_the_check_modules_that_holds_a_reference():
    """The sandbox hides attnlib/checks; a reference defined anywhere else is reachable from a
    submission, and the instructor guide's isolation section must say where."""
    guide = (ROOT / "book" / "instructor-guide.md").read_text(encoding="utf-8")
    reachable = {
        exercise.reference.__module__
        for exercise in _exercises()
        if not exercise.reference.__module__.startswith("attnlib.checks.")
    }
    assert [m for m in sorted(reachable) if f"`{m}`" not in guide] == []


def test_a_transcript_accepts_the_harness_order_and_refuses_the_rest():
    from coursetools.grade.records.events import Event, RunPlan, Transcript

    plan = RunPlan([[0, "x = 1"], [2, "def f(): ..."], [4, "y = 2"]], {"2": ["ex-00-1"]}, [], ["ex-00-1"])

    def run(*events) -> list[bool]:
        transcript = Transcript(plan)
        return [transcript.accept(Event(kind, data)) for kind, data in events]

    cell = lambda i: ("step", {"kind": "cell", "cell": i})  # noqa: E731
    done = lambda i: ("cell-done", {"cell": i, "seconds": 0.0})  # noqa: E731
    step = ("step", {"kind": "case", "ex": "ex-00-1", "case": "c1"})
    case = ("case", {"ex": "ex-00-1", "case": "c1", "kind": "value"})
    hello = ("hello", {"isolation": {}})
    honest = [hello, cell(0), ("cell-error", {"cell": 0}), done(0), cell(2), done(2), step, case]
    honest += [cell(4), done(4), ("done", {})]
    assert all(run(*honest))
    assert run(("fatal", {"message": "x"})) == [True]
    # injected while a cell runs: a case, a second error, a done, a fatal, a hello, a step
    for forged in [case, ("done", {}), ("fatal", {}), hello, step, cell(4)]:
        assert run(hello, cell(0), forged, done(0)) == [True, True, False, True], forged
    assert run(hello, cell(0), ("cell-error", {"cell": 0}), ("cell-error", {"cell": 0}))[-1] is False
    # a second case result for one step (the function sent one itself), a cell out of order
    assert run(hello, step, case, case) == [True, True, True, False]
    assert run(hello, cell(2), done(2), cell(0)) == [True, True, True, False]
    assert run(cell(0)) == [False]  # nothing before hello


@pytest.mark.slow
def test_the_cases_inputs_reach_a_process_that_cannot_import_a_check_module(tmp_path):
    """Every registered case's inputs, shipped by the grader, unpickle where every
    ``attnlib.checks.chNN_*`` import fails, equal to the grader's own; a chapter 10 input whose
    forward is switched off (a class of attnlib.chapters.handouts) behaves the same there."""
    import subprocess

    from coursetools.grade.records import inputs

    exercises = {e.id: e for e in _exercises()}
    text = inputs.ship(exercises)
    (tmp_path / "inputs.txt").write_text(text, encoding="ascii")
    summary = {
        f"{ex_id}/{case.name}": fixtures.summarise(case.make_inputs())
        for ex_id, exercise in exercises.items()
        for case in exercise.cases
    }
    script = (
        "import importlib.abc, json, sys\n"
        "class Refuse(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name.startswith('attnlib.checks.ch'):\n"
        "            raise ImportError(name)\n"
        "sys.meta_path.insert(0, Refuse())\n"
        f"sys.path[:0] = [{str(ROOT)!r}, {str(ROOT / 'tests' / 'grader')!r}]\n"
        "from coursetools.grade.records.inputs import unship\n"
        "import fixtures\n"
        f"parts = unship(open({str(tmp_path / 'inputs.txt')!r}).read())\n"
        "out = {f'{ex}/{c.name}': fixtures.summarise(c.make_inputs())\n"
        "       for ex, (_f, cases) in parts.items() for c in cases}\n"
        "block = parts['ex-10-1'][1][0].make_inputs()[0]\n"
        "try:\n"
        "    block(parts['ex-10-1'][1][0].make_inputs()[1])\n"
        "except RuntimeError as exc:\n"
        "    out['refused'] = str(exc)\n"
        "out['checks-modules'] = sorted(m for m in sys.modules if m.startswith('attnlib.checks.ch'))\n"
        "print(json.dumps(out))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout)
    assert got.pop("checks-modules") == []
    assert "write the block yourself" in got.pop("refused")
    assert got == json.loads(json.dumps(summary))
    # nothing of a check module travels: a function may be the answer, a class may hold one
    with pytest.raises(TypeError, match="check module"):
        inputs.dumps((exercises["ex-00-1"].reference,))
    check_class = type("Shortcut", (), {"__module__": "attnlib.checks.ch10_transformer"})
    for shipped in (check_class, check_class(), [{"x": check_class}]):
        with pytest.raises(TypeError, match="attnlib.checks.ch10_transformer.Shortcut"):
            inputs.dumps(shipped)


def test_leftovers_on_a_sandbox_uid_are_killed():
    if os.geteuid() != 0:
        pytest.skip("sandbox uids are used only when the grader runs as root")
    uid = sandbox.SANDBOX_UID_BASE + sandbox.UID_BLOCK * sandbox.UID_BLOCKS + 7  # outside every block
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()  # as a submission that leaves its process group would
            os.setgid(uid)
            os.setuid(uid)
            time.sleep(60)
        finally:
            os._exit(0)
    try:
        deadline = time.monotonic() + 10
        while sandbox._uid_processes(uid) == [] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sandbox._uid_processes(uid) == [pid]
        sandbox.kill_uid(uid)
        assert sandbox._uid_processes(uid) == []
    finally:
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
        os.waitpid(pid, 0)


@pytest.mark.slow
def test_unreadable_reasons(hostile):
    assert "nested too deeply" in " ".join(hostile["records"]["deep"]["notes"])
    assert "symbolic link" in " ".join(hostile["records"]["link"]["notes"])


def _processes_with(mark: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if mark.encode() in (entry / "cmdline").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


@pytest.mark.slow
def test_a_setsid_process_does_not_outlive_grading(hostile):
    if not ISOLATED and os.geteuid() != 0:
        pytest.skip("without namespaces or root, a process that calls setsid escapes (documented)")
    deadline = time.monotonic() + 10
    while _processes_with(SLEEP_MARK) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _processes_with(SLEEP_MARK) == []


@pytest.mark.slow
def test_sysv_shared_memory_does_not_outlive_grading(hostile):
    table = Path("/proc/sysvipc/shm")
    if not table.exists() or not ISOLATED:
        pytest.skip("no /proc/sysvipc/shm here, or no IPC namespace")
    keys = [line.split()[0] for line in table.read_text().splitlines()[1:] if line.split()]
    assert str(SHM_KEY) not in keys


def test_two_graders_on_one_host_get_different_uids():
    first = sandbox.allocate_uids(2)
    try:
        second = sandbox.allocate_uids(2)
        try:
            assert abs(first - second) >= sandbox.UID_BLOCK
        finally:
            sandbox.release_uids(second)
    finally:
        sandbox.release_uids(first)


@pytest.mark.slow
def test_the_zygote_survives_the_thread_that_started_it():
    from coursetools.grade.sandbox.zygote import Zygote

    zygote = Zygote(sys.executable, str(ROOT), runner.base_env(), False)
    try:
        zygote.warm()  # starts it from a short-lived thread
        deadline = time.monotonic() + 120
        while zygote.proc is None and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1.0)  # the starting thread has ended by now
        assert zygote.proc is not None and zygote.proc.poll() is None
    finally:
        zygote.close()


@pytest.mark.slow
def test_a_changed_assignment_regrades(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "ann.ipynb").write_text(nbformat.writes(fixtures.with_answer(C)), encoding="utf-8")
    out = tmp_path / "out"
    batch.grade("00-how-to-use", subs, out, jobs=1, settings=_settings(out), quiet=True)
    path = out / "ann" / "record.json"
    first = json.loads(path.read_text(encoding="utf-8"))
    assert first["assignment"] == batch.load_assignment("00-how-to-use").digest
    first["assignment"] = "points-were-different"
    path.write_text(json.dumps(first), encoding="utf-8")
    before = path.stat().st_mtime_ns
    batch.grade("00-how-to-use", subs, out, jobs=1, settings=_settings(out), quiet=True)
    assert path.stat().st_mtime_ns != before
    assert json.loads(path.read_text(encoding="utf-8"))["assignment"] != "points-were-different"


def test_an_answer_using_a_forbidden_call_scores_zero():
    exercise = next(e for e in _exercises() if e.forbidden and not e.forbidden[0].startswith("."))
    assignment = submission.Assignment(
        Path("x.ipynb"),
        {exercise.id: 2.0},
        {exercise.id: exercise.function},
        {exercise.id: tuple(exercise.forbidden)},
    )
    name = exercise.forbidden[0]
    module, attr = name.rsplit(".", 1)
    cell = nbformat.v4.new_code_cell(
        f"import importlib\nm = importlib.import_module({module[:3]!r} + {module[3:]!r})\n"
        f"def {exercise.function}(*args):\n    return getattr(m, {attr!r})(*args)\n"
    )
    cell.metadata["attnlib"] = {"exercise": exercise.id, "points": 2}
    nb = nbformat.v4.new_notebook(cells=[cell])
    plan, _notes, _review = submission.build_plan(nb, assignment)
    assert plan["forbidden"] == {exercise.id: [name]}
    record = Record("s", status=Status.GRADED, runs=0, forbidden=plan["forbidden"])
    verdict.finish(record, assignment, {exercise.id: exercise}, {}, _settings(Path(".")), time.monotonic())
    ex = record.exercises[exercise.id]
    assert ex.score == 0 and all("not allowed" in c.message for c in ex.cases)


def test_a_forbidden_call_imported_in_an_earlier_cell_is_found():
    """The alias lives in one cell and the call in the answer cell; a demonstration cell's own
    call of the same function does not count."""
    assignment = submission.Assignment(
        Path("x.ipynb"),
        {"ex-04-1": 2.0},
        {"ex-04-1": "stable_softmax"},
        {"ex-04-1": ("torch.softmax", "torch.nn.functional.softmax")},
    )
    setup = nbformat.v4.new_code_cell("import torch.nn.functional as nnf\nsmx = nnf.softmax")
    answer = nbformat.v4.new_code_cell("def stable_softmax(x):\n    return smx(x, dim=-1)\n")
    answer.metadata["attnlib"] = {"exercise": "ex-04-1", "points": 2}
    plan, _notes, _review = submission.build_plan(nbformat.v4.new_notebook(cells=[setup, answer]), assignment)
    assert plan["forbidden"] == {"ex-04-1": ["torch.nn.functional.softmax"]}

    demo = nbformat.v4.new_code_cell("import torch\nprint(torch.softmax(torch.zeros(3), -1))")
    honest = nbformat.v4.new_code_cell(
        "def stable_softmax(x):\n    e = (x - x.max(-1, keepdim=True).values).exp()\n"
        "    return e / e.sum(-1, keepdim=True)\n"
    )
    honest.metadata["attnlib"] = {"exercise": "ex-04-1", "points": 2}
    plan, _notes, _review = submission.build_plan(nbformat.v4.new_notebook(cells=[demo, honest]), assignment)
    assert "forbidden" not in plan


def _exercises():
    from attnlib.checks import all_exercises

    found = all_exercises()
    return list(found.values()) if isinstance(found, dict) else list(found)


@pytest.mark.slow
def test_verdicts_from_concurrent_threads_are_right():
    """Every exercise's reference output, judged from 4 threads at once, 3 times: always passed.

    The verdicts compute references in the grader's threads; a reference or case that
    used (or seeded) a global generator, or imported torch lazily, made correct answers
    fail at random (6 of 48 official solutions in one measurement of issue 12).
    """
    from attnlib.checks.core import run_case

    events = []
    for exercise in _exercises():
        for case in exercise.cases:
            out = run_case(exercise.reference, case)
            events.append((exercise, case, {"kind": "value", "value": wire.encode(out)}))
    settings = _settings(Path("."))
    failures = []
    lock = threading.Lock()

    def judge(item):
        exercise, case, event = item
        verdict = runner.judge(exercise, case, event, settings)
        if verdict.status != "passed":
            with lock:
                failures.append((exercise.id, case.name, verdict.message))

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(judge, events * 3))
    assert failures == []


def test_typed_internals():
    """Issue 17.4: the plan, events, outcomes and case kinds are typed; Settings holds no processes."""
    import dataclasses

    from coursetools.grade.records import events

    settings = _settings(Path("."))
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.isolation = "none"  # type: ignore[misc]
    assert "zygotes" not in {f.name for f in dataclasses.fields(Settings)}
    assert {end.value for end in events.RunEnd} == {
        "done", "step-timeout", "died", "deadline", "fatal", "stopped", "flood"
    }  # fmt: skip
    assert events.Event.parse({"t": "done", "k": "secret"}, "secret") == events.Event("done", {})
    assert events.Event.parse({"t": "done", "k": "forged"}, "secret") is None
    assert events.Event.parse({"t": "pickle", "k": "secret"}, "secret") is None
    assert (
        events.Step.from_event({"kind": "case", "ex": "ex-00-1", "case": "c"}).where() == "ex-00-1, case 'c'"
    )
    assert events.CaseEvent.from_event({"kind": "value", "value": 1}).kind is events.CaseKind.VALUE
    assert (
        events.CaseEvent.from_event({"kind": "passed"}) is None
    )  # a verdict is never taken from the sandbox
    plan = events.RunPlan([[0, "x = 1"]], {}, [], ["ex-00-1"], skip_cases=[("ex-00-1", "c")])
    assert plan.to_wire()["skip_cases"] == [["ex-00-1", "c"]]


FORKS_FILL_MEMORY = """import os, select, time
ready_r, ready_w = os.pipe()
hold_r, hold_w = os.pipe()
kids = []
for _ in range(3):
    pid = os.fork()
    if pid == 0:
        os.close(hold_w)
        block = bytearray(200 * 1024 * 1024)  # touched: 200 MB resident in each child
        os.write(ready_w, b'x')
        os.read(hold_r, 1)  # hold it until every child has its block: the three overlap
        os._exit(0)
    kids.append(pid)
os.close(ready_w)
os.close(hold_r)
ready, end = 0, time.monotonic() + 3
while ready < 3 and time.monotonic() < end:
    if select.select([ready_r], [], [], 0.1)[0]:
        data = os.read(ready_r, 3)
        if not data:
            break
        ready += len(data)
os.close(hold_w)
codes = [os.waitpid(pid, 0)[1] for pid in kids]
print('ALL-CHILDREN-OK' if all(c == 0 for c in codes) else 'SOME-CHILD-KILLED', codes, ready)
"""


@pytest.mark.slow
def test_memory_is_limited_per_submission_where_cgroups_are_writable(tmp_path):
    """Three forks of 200 MB each pass a per-process limit of 1536 MB, not a submission limit of 400 MB."""
    probe = sandbox.MemoryGroup.create(f"coursetools-grade-probe-{os.getpid()}", 64)
    if probe is None:
        pytest.skip("no writable memory cgroup here: only RLIMIT_AS per process and the process count")
    probe.remove()
    subs = tmp_path / "subs"
    subs.mkdir()
    nb = fixtures.with_answer(C + FORKS_FILL_MEMORY)  # in the answer cell: its process runs it
    (subs / "forks.ipynb").write_text(nbformat.writes(nb), encoding="utf-8")
    out = tmp_path / "out"
    settings = dataclasses_replace(_settings(out), group_mb=400)
    [record] = batch.grade("00-how-to-use", subs, out, jobs=1, settings=settings, quiet=True)
    printed = record["output"]["head"] + record["output"]["tail"]
    assert record["memory_group"] in ("cgroup v1", "cgroup v2")
    assert "ALL-CHILDREN-OK" not in printed, printed
    assert "SOME-CHILD-KILLED" in printed or record["status"] == "kernel-died", (printed, record["status"])
    # the children were killed, not the exercise's process: the answer's cases ran after them, all
    # passed (its score waits for a person: the cell forks, issue 43)
    cases = record["exercises"]["ex-00-1"]["cases"]
    assert cases and all(c["status"] == "passed" for c in cases), (record["status"], cases)
    assert record["exercises"]["ex-00-1"]["score"] is None and record["status"] == "needs-review"
