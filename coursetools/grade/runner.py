"""Run one submission in its sandboxed process, with time limits and restarts, and judge it.

A run executes the learner's cells in order (see :mod:`coursetools.grade.harness`).
The grader watches the step (cell or case) in progress: a step that exceeds
the per-cell limit, or during which the process dies, is recorded, the process
group is killed, and a fresh process runs the notebook again *without* that
step, so that one endless playground cell does not cost the later exercises
(at most ``max_runs`` runs, always within the per-submission limit). Outputs
are judged here, in the grader's process, with :func:`attnlib.checks.judge_case`.
"""

from __future__ import annotations

import json
import os
import secrets
import selectors
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from attnlib.checks.core import (
    FORBIDDEN_MISCONCEPTION,
    CaseResult,
    Exercise,
    forbidden_message,
    judge_case,
    judge_error,
)
from coursetools.grade import sandbox
from coursetools.grade.submission import Assignment, Submission, Unreadable, build_plan, read_notebook
from coursetools.grade.wire import WireError, decode

ROOT = Path(__file__).resolve().parents[2]
OUTPUT_KEEP = 8192
MAX_EVENT_BYTES = 256 << 20  # everything one run may send on the channel
MAX_LINE_BYTES = 100 << 20  # one message: a 64 MB array in base64, and room to spare


@dataclass
class Settings:
    """Limits and isolation for every submission of a run."""

    out: Path
    timeout_cell: float = 30.0
    timeout_total: float = 180.0
    timeout_setup: float = 60.0
    memory_mb: int = 2048
    nproc: int = 64
    scratch_mb: int = 64
    fsize_mb: int = 64
    max_runs: int = 4
    isolation: str = "none"
    python: str = sys.executable
    hide: list[str] = field(default_factory=list)
    zygote: bool = True
    zygotes: list | None = None
    work_dir: Path | None = None  # scratch folders' parent (batch: a fresh folder in the system's temp)
    uid_base: int | None = None  # first sandbox uid of this grader (sandbox.allocate_uids); root only


@dataclass
class RunOutcome:
    end: str  # done, step-timeout, died, deadline, fatal, stopped
    step: dict | None = None
    message: str = ""
    returncode: int | None = None


class _Run:
    """One process: start it, feed the plan, collect events until it ends or a limit strikes."""

    def __init__(self, plan: dict, settings: Settings, scratch: Path, slot: int, deadline: float, stop):
        self.plan = plan
        self.settings = settings
        self.scratch = scratch
        self.slot = slot
        self.deadline = deadline
        self.stop = stop
        self.events: list[dict] = []
        self.head = bytearray()
        self.tail = bytearray()
        self.output_bytes = 0
        self.bad_lines = 0

    def _keep_output(self, data: bytes) -> None:
        self.output_bytes += len(data)
        if len(self.head) < OUTPUT_KEEP:
            self.head += data[: OUTPUT_KEEP - len(self.head)]
        self.tail = (self.tail + data)[-OUTPUT_KEEP:]

    def _parse(self, line: bytes) -> dict | None:
        try:
            event = json.loads(line)
        except ValueError:
            self.bad_lines += 1
            return None
        if not isinstance(event, dict) or event.get("k") != self.token or not isinstance(event.get("t"), str):
            self.bad_lines += 1
            return None
        return event

    def execute(self) -> RunOutcome:
        settings = self.settings
        read_fd, write_fd = os.pipe()
        uid = None
        if os.geteuid() == 0:
            base = settings.uid_base if settings.uid_base is not None else sandbox.SANDBOX_UID_BASE
            uid = base + self.slot
        self.uid = uid
        plan = dict(self.plan)
        plan["fd"] = write_fd
        plan["token"] = self.token = secrets.token_hex(16)
        plan["sandbox"] = {
            "mode": settings.isolation,
            "scratch": str(self.scratch),
            "scratch_mb": settings.scratch_mb,
            "hide": [str(p) for p in settings.hide],
            # The attnlib and coursetools packages, not the repository root: a root folder
            # of mode 0700 (a fresh mktemp clone) is opened up with only these children visible.
            "needed": sorted(
                {
                    sys.prefix,
                    sys.base_prefix,
                    str(Path(settings.python).resolve().parent),
                    str(ROOT / "attnlib"),
                    str(ROOT / "coursetools"),
                }
            ),
            "uid": uid,
            "memory_mb": settings.memory_mb,
            "nproc": settings.nproc,
            "fsize_mb": settings.fsize_mb,
            "cpu_s": int(settings.timeout_total + settings.timeout_setup + 10),
        }
        home = str(self.scratch)
        plan["env"] = {"HOME": home, "TMPDIR": home, "MPLCONFIGDIR": os.path.join(home, ".matplotlib")}
        self.scratch.mkdir(parents=True, exist_ok=True)
        payload = json.dumps(plan).encode("utf-8")
        zygote = None
        if settings.zygotes and settings.isolation in ("namespaces", "none"):
            zygote = settings.zygotes[self.slot % len(settings.zygotes)]
        try:
            return self._execute_on(zygote, payload, read_fd, write_fd, plan)
        finally:
            if uid is not None:
                sandbox.kill_uid(uid)  # whatever escaped the process group (setsid, daemons)

    def _execute_on(self, zygote, payload: bytes, read_fd: int, write_fd: int, plan: dict) -> RunOutcome:
        if zygote is not None:
            try:
                return self._execute_forked(zygote, payload, read_fd, write_fd)
            except OSError:
                # the zygote failed: start a fresh interpreter instead
                read_fd, write_fd = os.pipe()
                plan["fd"] = write_fd
                payload = json.dumps(plan).encode("utf-8")
        return self._execute_fresh(payload, read_fd, write_fd)

    def _feed(self, write, payload: bytes) -> threading.Thread:
        def feed():
            try:
                write(payload)
            except OSError:
                pass

        feeder = threading.Thread(target=feed, daemon=True)
        feeder.start()
        return feeder

    def _execute_forked(self, zygote, payload: bytes, read_fd: int, write_fd: int) -> RunOutcome:
        plan_r, plan_w = os.pipe()
        out_r, out_w = os.pipe()
        try:
            pid = zygote.spawn([plan_r, write_fd, out_w])
        except (OSError, ValueError, KeyError) as exc:
            for fd in (plan_r, plan_w, out_r, out_w, read_fd, write_fd):
                os.close(fd)
            raise OSError(f"zygote: {exc}") from None
        os.close(plan_r)
        os.close(out_w)
        os.close(write_fd)

        def write(data):
            with open(plan_w, "wb", closefd=True) as fh:
                fh.write(data)

        feeder = self._feed(write, payload)
        try:
            outcome = self._watch(read_fd, out_r, lambda: None)
        finally:
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError, OSError):
                pass
            code = zygote.wait(pid)
            os.close(read_fd)
            os.close(out_r)
            feeder.join(timeout=1)
        outcome.returncode = code
        return outcome

    def _execute_fresh(self, payload: bytes, read_fd: int, write_fd: int) -> RunOutcome:
        settings = self.settings
        boot = (
            f"import sys; sys.path.insert(0, {str(ROOT)!r}); "
            "from coursetools.grade.harness import main; main()"
        )
        argv = sandbox.command(settings.isolation, [settings.python, "-I", "-c", boot])
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                pass_fds=(write_fd,),
                start_new_session=True,
                env=base_env(),
                cwd=str(self.scratch),
            )
        except OSError as exc:
            os.close(read_fd)
            os.close(write_fd)
            return RunOutcome("fatal", message=f"could not start Python: {exc}")
        os.close(write_fd)

        def write(data):
            proc.stdin.write(data)
            proc.stdin.close()

        feeder = self._feed(write, payload)
        try:
            outcome = self._watch(read_fd, proc.stdout.fileno(), proc.poll)
        finally:
            self._kill(proc)
            os.close(read_fd)
            proc.stdout.close()
            feeder.join(timeout=1)
        outcome.returncode = proc.returncode
        return outcome

    @staticmethod
    def _kill(proc) -> None:
        for target in (lambda: os.killpg(proc.pid, signal.SIGKILL), lambda: proc.kill()):
            try:
                target()
            except (ProcessLookupError, PermissionError, OSError):
                pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass

    def _drain(self, out_fd: int, open_streams: int) -> None:
        """Read the printed output that is still in the pipe after "done" (until EOF, at most 1 s)."""
        if open_streams == 0:
            return
        end = time.monotonic() + 1.0
        sel = selectors.DefaultSelector()
        try:
            sel.register(out_fd, selectors.EVENT_READ)
        except (ValueError, KeyError, OSError):
            return
        while time.monotonic() < end:
            if not sel.select(timeout=max(0.0, end - time.monotonic())):
                break
            data = os.read(out_fd, 1 << 16)
            if not data:
                break
            self._keep_output(data)
        sel.close()

    def _watch(self, read_fd: int, out_fd: int, poll) -> RunOutcome:
        settings = self.settings
        sel = selectors.DefaultSelector()
        sel.register(read_fd, selectors.EVENT_READ, "events")
        sel.register(out_fd, selectors.EVENT_READ, "output")
        buffer = bytearray()
        event_bytes = 0
        step: dict | None = None
        step_started = time.monotonic()
        open_streams = 2
        exited_at = None
        while True:
            now = time.monotonic()
            limit = settings.timeout_setup if step is None else settings.timeout_cell
            wait = min(step_started + limit, self.deadline) - now
            if self.stop.is_set():
                return RunOutcome("stopped", step, "grading was interrupted")
            if now >= self.deadline:
                return RunOutcome("deadline", step, "the time limit for the whole submission was reached")
            if wait <= 0:
                return RunOutcome("step-timeout", step, f"no progress within {limit:g} s")
            if open_streams == 0 or (exited_at is not None and now - exited_at > 0.5):
                return RunOutcome("died", step)
            for key, _ in sel.select(timeout=min(max(wait, 0.01), 0.25)):
                if key.data == "output":
                    data = os.read(out_fd, 1 << 16)
                    if not data:
                        sel.unregister(out_fd)
                        open_streams -= 1
                    else:
                        self._keep_output(data)
                    continue
                data = os.read(read_fd, 1 << 20)
                if not data:
                    sel.unregister(read_fd)
                    open_streams -= 1
                    continue
                event_bytes += len(data)
                start = len(buffer)  # only the new bytes can hold the next newline
                buffer += data
                if event_bytes > MAX_EVENT_BYTES:
                    return RunOutcome("flood", step, "the process sent too much data on the grader's channel")
                while True:
                    cut = buffer.find(b"\n", start)
                    if cut < 0:
                        break
                    line = bytes(buffer[:cut])
                    del buffer[: cut + 1]
                    start = 0
                    event = self._parse(line)
                    if event is None:
                        continue
                    kind = event["t"]
                    if kind == "step":
                        step = event
                        step_started = time.monotonic()
                    elif kind == "done":
                        self._drain(out_fd, open_streams)
                        return RunOutcome("done", step)
                    elif kind == "fatal":
                        return RunOutcome("fatal", step, str(event.get("message", ""))[:500])
                    else:
                        self.events.append(event)
                if len(buffer) > MAX_LINE_BYTES:
                    return RunOutcome(
                        "flood", step, "the process sent too long a message on the grader's channel"
                    )
            if exited_at is None and poll() is not None:
                exited_at = time.monotonic()


def base_env() -> dict[str, str]:
    """The environment of every child: nothing of the grader's, one thread per library."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "USER": "student",
        "LOGNAME": "student",
        "LANG": "C.UTF-8",
        "MPLBACKEND": "Agg",
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
    }


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "the process died"
    if code < 0 or code > 128:
        sig = -code if code < 0 else code - 128
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        return f"the process was killed by {name}"
    return f"the process exited with code {code}"


def _case_dict(result: CaseResult) -> dict:
    return asdict(result)


def grade_submission(
    sub: Submission,
    assignment: Assignment,
    exercises: dict[str, Exercise],
    settings: Settings,
    slot: int = 0,
    stop: threading.Event | None = None,
) -> dict:
    """Grade one submission; return its record (see :mod:`coursetools.grade.report`)."""
    stop = stop or threading.Event()
    started = time.monotonic()
    record: dict = {
        "student": sub.student,
        "file": str(sub.path),
        "digest": sub.digest,
        "status": "graded",
        "notes": [],
        "review": [],
        "cell_errors": [],
        "exercises": {},
        "isolation": None,
        "runs": 0,
        "output": {},
    }
    try:
        nb = read_notebook(sub.path)
    except Unreadable as exc:
        record["status"] = "unreadable"
        record["notes"].append(str(exc))
        return _finish(record, assignment, exercises, {}, settings, started)
    plan, notes, review = build_plan(nb, assignment)
    plan["exercises"] = list(assignment.points)
    forbidden = plan.pop("forbidden", {})
    if forbidden:
        record["forbidden"] = forbidden
    record["notes"] += notes
    record["review"] += review

    results: dict[tuple[str, str], dict] = {}
    skip_cells: list[int] = []
    incidents: list[str] = []
    deadline = started + settings.timeout_total
    # under the system's temporary folder, not the output folder: an output folder below a
    # folder of mode 0700 stays gradable (the sandbox uid must reach its scratch folder)
    scratch = (settings.work_dir or settings.out / ".work") / f"{sub.student}"
    protocol_problems = 0
    while record["runs"] < settings.max_runs:
        record["runs"] += 1
        plan["skip_cells"] = skip_cells
        plan["skip_cases"] = [list(k) for k in results]
        run = _Run(plan, settings, scratch, slot, deadline, stop)
        try:
            outcome = run.execute()
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        protocol_problems += run.bad_lines
        record["output"] = {
            "bytes": run.output_bytes,
            "head": run.head.decode("utf-8", "replace"),
            "tail": run.tail.decode("utf-8", "replace") if run.output_bytes > OUTPUT_KEEP else "",
        }
        for event in run.events:
            kind = event.get("t")
            if kind == "hello" and record["isolation"] is None:
                record["isolation"] = event.get("isolation")
            elif kind == "case":
                key = (str(event.get("ex")), str(event.get("case")))
                if key[0] in exercises:
                    results[key] = event
            elif kind == "cell-error":
                error = {k: event.get(k) for k in ("cell", "etype", "text", "line")}
                if error not in record["cell_errors"]:
                    record["cell_errors"].append(error)
        step = outcome.step
        if outcome.end == "done":
            expected = {(ex, c.name) for ex in assignment.points for c in exercises[ex].cases}
            if expected - set(results):
                record["review"].append("the run ended before every case was evaluated")
            break
        if outcome.end == "stopped":
            record["status"] = "interrupted"
            break
        if outcome.end == "flood":
            record["review"].append(outcome.message)
            break
        if outcome.end == "fatal":
            record["status"] = "grader-error"
            incidents.append(outcome.message)
            break
        where = _where(step)
        if outcome.end in ("step-timeout", "deadline"):
            record["status"] = "timeout"
            incidents.append(f"{where}: {outcome.message}")
        else:
            if record["status"] != "timeout":
                record["status"] = "kernel-died"
            incidents.append(f"{where}: {_describe_exit(outcome.returncode)}")
            if step is None:
                tail = (run.tail or run.head).decode("utf-8", "replace").strip().splitlines()[-3:]
                if tail:
                    incidents.append("last output: " + " | ".join(tail)[:400])
        if outcome.end == "deadline" or step is None:
            break
        if step.get("kind") == "cell":
            skip_cells.append(int(step.get("cell", -1)))
        else:
            key = (str(step.get("ex")), str(step.get("case")))
            if key in results or key[0] not in exercises:
                break  # a forged step message: do not loop on it
            kind = "timeout" if outcome.end == "step-timeout" else "died"
            results[key] = {"kind": kind}
            # the function hung or crashed once: its other cases are not tried again
            for case in exercises[key[0]].cases:
                results.setdefault((key[0], case.name), {"kind": f"{kind}-skipped"})
        if _all_judged(results, assignment, exercises):
            break  # every case already has a verdict: a rerun cannot change the grade
    if skip_cells:
        record["notes"].append(f"cells {skip_cells} were skipped after they hung or crashed the process")
    if protocol_problems:
        record["review"].append(f"{protocol_problems} malformed messages on the grader's channel")
    record["incidents"] = incidents
    return _finish(record, assignment, exercises, results, settings, started)


def _all_judged(results: dict, assignment: Assignment, exercises: dict[str, Exercise]) -> bool:
    """True when every case has a verdict that a later redefinition could not improve."""
    for ex_id in assignment.points:
        for case in exercises[ex_id].cases:
            event = results.get((ex_id, case.name))
            if event is None or event.get("kind") in ("not-attempted", "missing"):
                return False
    return True


def _where(step: dict | None) -> str:
    if step is None:
        return "while starting"
    if step.get("kind") == "cell":
        return f"cell {step.get('cell')}"
    return f"{step.get('ex')}, case {step.get('case')!r}"


# Verdicts compute references in the grader's process, from several job threads. A
# reference or a case may draw from (or seed) a global random generator, or import a
# part of torch lazily (two threads doing that at once fail): one verdict at a time, with
# torch's and NumPy's global generators saved and restored around it, so that no verdict
# depends on another thread's timing.
_JUDGE_LOCK = threading.RLock()


def judge(exercise: Exercise, case, event: dict | None, settings: Settings) -> CaseResult | None:
    """The verdict for one case from what the harness sent (``None``: no verdict)."""
    if event is None:
        return None
    import numpy as np
    import torch

    with _JUDGE_LOCK, torch.random.fork_rng(devices=[]):
        np_state = np.random.get_state()  # noqa: NPY002 - saving the legacy global state
        try:
            return _judge(exercise, case, event, settings)
        finally:
            np.random.set_state(np_state)  # noqa: NPY002


def _judge(exercise: Exercise, case, event: dict, settings: Settings) -> CaseResult | None:
    kind = event.get("kind")
    try:
        if kind == "value":
            try:
                got = decode(event.get("value"))
            except WireError as exc:
                return CaseResult(
                    case.name, "error", f"the output could not be read: {exc}", hidden=case.hidden
                )
            return judge_case(exercise, case, got)
        if kind == "not-attempted":
            return CaseResult(case.name, "not-attempted", "not attempted yet", hidden=case.hidden)
        if kind == "missing":
            return CaseResult(
                case.name,
                "error",
                str(event.get("text", ""))[:300],
                hint=f"define {exercise.function}() in the answer cell, with the name given in the exercise",
                hidden=case.hidden,
            )
        if kind == "error":
            return judge_error(
                exercise, case, str(event.get("etype", "Exception"))[:80], str(event.get("text", ""))[:300]
            )
        if kind == "timeout":
            return CaseResult(
                case.name,
                "error",
                f"did not finish within {settings.timeout_cell:g} s",
                hint="look for a loop that never ends, or work that grows much faster than the input",
                hidden=case.hidden,
            )
        if kind in ("timeout-skipped", "died-skipped"):
            what = "did not finish" if kind == "timeout-skipped" else "crashed the process"
            return CaseResult(
                case.name,
                "error",
                f"not run: an earlier case of this exercise {what}",
                hidden=case.hidden,
            )
        if kind == "died":
            return CaseResult(
                case.name,
                "error",
                "the process died while running this case (os._exit, a crash, or the memory limit)",
                hint="run the function on the case's inputs in a fresh kernel",
                hidden=case.hidden,
            )
    except Exception as exc:  # noqa: BLE001 - a verdict must never crash the grader
        return CaseResult(
            case.name, "error", f"could not be judged: {type(exc).__name__}: {exc}"[:300], hidden=case.hidden
        )
    return None


def _finish(record, assignment, exercises, results, settings, started) -> dict:
    total = 0.0
    complete = record["status"] != "unreadable"
    for ex_id, points in assignment.points.items():
        exercise = exercises[ex_id]
        cases = []
        banned = record.get("forbidden", {}).get(ex_id)
        for case in exercise.cases:
            if banned and record["status"] != "unreadable":
                # the answer cell uses a call that already implements the exercise: 0 points
                verdict = CaseResult(
                    case.name,
                    "failed",
                    forbidden_message(banned),
                    FORBIDDEN_MISCONCEPTION,
                    "write the computation with basic operations (matrix products, exp, sums, max).",
                    case.hidden,
                )
            else:
                verdict = judge(exercise, case, results.get((ex_id, case.name)), settings)
            cases.append(None if verdict is None else _case_dict(verdict))
        judged = [c for c in cases if c is not None]
        score = None
        if record["status"] != "unreadable" and len(judged) == len(cases):
            score = round(points * sum(c["status"] == "passed" for c in judged) / len(cases), 6)
            total += score
        else:
            complete = False
        record["exercises"][ex_id] = {
            "function": exercise.function,
            "points": points,
            "score": score,
            "cases": [
                c if c is not None else {"case": case.name, "status": "no-verdict", "hidden": case.hidden}
                for c, case in zip(cases, exercise.cases, strict=True)
            ],
        }
    record["total"] = round(total, 6) if complete else None
    record["max"] = assignment.max_points
    if record["status"] == "graded" and record["review"]:
        record["status"] = "needs-review"
    record["seconds"] = round(time.monotonic() - started, 3)
    return record
