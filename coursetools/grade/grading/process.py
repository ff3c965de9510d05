"""One run of a submission's process: start it (forked from a zygote, or fresh), feed it
its plan, watch its events and output under the time limits, and kill it; and the
:class:`JobSlot` it runs in.

Used by :mod:`coursetools.grade.grading.runner`, which decides what to run again and judges.
"""

from __future__ import annotations

import json
import os
import secrets
import selectors
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from coursetools.grade.grading.parse_worker import NotebookReader
from coursetools.grade.records.events import Event, EventKind, RunEnd, RunOutcome, RunPlan, Step, Transcript
from coursetools.grade.records.paths import ROOT
from coursetools.grade.records.wire import check_line, containers
from coursetools.grade.sandbox import api as sandbox
from coursetools.grade.sandbox.zygote import Zygote

OUTPUT_KEEP = 8192
MAX_EVENT_BYTES = 256 << 20  # everything one run may send on the channel
MAX_LINE_BYTES = 100 << 20  # one message: a 64 MB array in base64, and room to spare
# JSON objects and arrays the grader parses from one run (every event is kept until judging):
# a bound on the parsed events' memory (~100 bytes a container) beside MAX_EVENT_BYTES
MAX_RUN_CONTAINERS = 1_000_000
CPU_MARGIN_S = 2.0  # a process seen this close to its RLIMIT_CPU (sampled once a second) reached it
MAX_CPU_SAMPLES = 256  # processes of one run whose CPU time is read at each sample
CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class JobSlot:
    """One job slot of a grading session: what each submission graded in it uses in turn.

    ``index`` (0 to jobs - 1) gives the slot's sandbox uid (``uid_base + index``, as root) and
    names its runs' cgroups; ``zygote`` is the pre-warmed process its runs fork from (None, or
    an isolation it cannot serve: a fresh interpreter for each run); ``memory_group`` the
    memory cgroup every process of a submission counts against (None: none could be made);
    ``reader`` the worker that reads and plans its notebooks (None: one is started for each
    submission). :class:`coursetools.grade.batch.GradingSession` makes one per slot.
    """

    index: int = 0
    zygote: Zygote | None = None
    memory_group: sandbox.MemoryGroup | None = None
    reader: NotebookReader | None = None


class Run:
    """One process: start it, feed the plan, collect events until it ends or a limit strikes.

    ``slot``: the :class:`JobSlot` it runs in (an index alone: a slot without a zygote or a
    memory cgroup)."""

    def __init__(
        self,
        plan: RunPlan,
        settings,
        scratch: Path,
        slot: JobSlot | int,
        deadline: float,
        stop,
    ):
        self.plan = plan
        self.slot = slot if isinstance(slot, JobSlot) else JobSlot(slot)
        self.uid: int | None = None
        self.token = ""
        self.settings = settings
        self.scratch = scratch
        self.deadline = deadline
        self.stop = stop
        self.events: list[Event] = []
        self.head = bytearray()
        self.tail = bytearray()
        self.output_bytes = 0
        self.bad_lines = 0
        self.containers = 0  # JSON objects and arrays of the lines parsed so far
        self.transcript = Transcript(plan)
        self.out_of_order = 0  # well-formed events that the harness did not send there (forged)
        self.forged = 0  # replies of the learner's process that the trusted parent dropped
        self.cleanup: list[str] = []  # what the kill after the run could not do
        self.group: sandbox.RunGroup | None = None
        self.cpu_budget = 0.0  # RLIMIT_CPU of each of the run's processes (seconds)
        self.cpu_peak = 0.0  # the most CPU time one process of the run was seen to use (seconds)
        self._cpu_pids: dict[int, float] = {}
        self._cpu_sampled = 0.0
        self._root_pid: int | None = None

    def _keep_output(self, data: bytes) -> None:
        self.output_bytes += len(data)
        if len(self.head) < OUTPUT_KEEP:
            self.head += data[: OUTPUT_KEEP - len(self.head)]
        self.tail = (self.tail + data)[-OUTPUT_KEEP:]

    def _parse(self, line: bytes) -> Event | None:
        # the secret first, and a bounded nesting, before any parsing (issue 24)
        if not check_line(line, b'{"k": "' + self.token.encode() + b'"'):
            self.bad_lines += 1
            return None
        self.containers += containers(line)
        if self.containers > MAX_RUN_CONTAINERS:
            self.bad_lines += 1
            return None  # execute() ends the run as a flood
        try:
            data = json.loads(line)
        except (ValueError, RecursionError):
            self.bad_lines += 1
            return None
        event = Event.parse(data, self.token)
        if event is None:
            self.bad_lines += 1
        return event

    def execute(self) -> RunOutcome:
        settings = self.settings
        uid = None
        own_uids = None
        if os.geteuid() == 0:
            base = settings.uid_base
            if base is None:
                # a run outside a GradingSession holds a block of uids of its own for its length:
                # the first block unlocked would be a session's, and the kill of this run's uid
                # after it would end that session's learner processes with SIGKILL (issue 43.5)
                try:
                    base = own_uids = sandbox.allocate_uids(self.slot.index + 1)
                except (RuntimeError, ValueError) as exc:
                    return RunOutcome(RunEnd.FATAL, message=f"no sandbox uid is free: {exc}")
            uid = base + self.slot.index
        self.uid = uid
        self.cpu_budget = float(settings.timeout_total + settings.timeout_setup + 10)
        try:
            return self._execute(uid)
        finally:
            if own_uids is not None:
                sandbox.release_uids(own_uids)

    def _execute(self, uid: int | None) -> RunOutcome:
        settings = self.settings
        read_fd, write_fd = os.pipe()
        plan = self.plan.to_wire()
        plan["fd"] = write_fd
        plan["token"] = self.token = secrets.token_hex(16)
        plan["sandbox"] = sandbox.SandboxConfig(
            mode=settings.isolation,
            scratch=str(self.scratch),
            scratch_mb=settings.scratch_mb,
            hide=tuple(str(p) for p in settings.hide),
            needed=tuple(needed_paths(settings.python)),
            uid=uid,
            memory_mb=settings.memory_mb,
            nproc=settings.nproc,
            fsize_mb=settings.fsize_mb,
            cpu_s=int(self.cpu_budget),
        ).to_wire()
        # in a namespace mode the sandbox's root is built on the scratch folder and the
        # learner's home is a tmpfs at sandbox.HOME; without namespaces, the scratch folder
        home = sandbox.HOME if settings.isolation in ("namespaces", "userns") else str(self.scratch)
        plan["env"] = {"HOME": home, "TMPDIR": home, "MPLCONFIGDIR": os.path.join(home, ".matplotlib")}
        self.scratch.mkdir(parents=True, exist_ok=True)
        payload = json.dumps(plan).encode("utf-8")
        zygote = self.slot.zygote if settings.isolation in ("namespaces", "none") else None
        name = f"coursetools-grade-{os.getpid()}-run-{self.slot.index}-{secrets.token_hex(4)}"
        self.group = sandbox.RunGroup.create(name, self.slot.memory_group)
        try:
            return self._judge_end(self._execute_on(zygote, payload, read_fd, write_fd, plan))
        finally:
            self._clean_up(uid)

    def _judge_end(self, outcome: RunOutcome) -> RunOutcome:
        """Timeout or crash from the grader's own accounting, never from which signal came first:
        a process killed by SIGKILL or SIGXCPU after one of the run's processes was seen at its
        CPU budget (``RLIMIT_CPU``, the grader's own limit) ran out of time; any other death is one."""
        if outcome.end is not RunEnd.DIED:
            return outcome
        code = outcome.returncode
        signal_number = -code if code is not None and code < 0 else code - 128 if code and code > 128 else 0
        self._sample_cpu(force=True)
        at_budget = self.cpu_peak >= self.cpu_budget - CPU_MARGIN_S
        if signal_number in (signal.SIGKILL, signal.SIGXCPU) and at_budget:
            return RunOutcome(
                RunEnd.STEP_TIMEOUT,
                outcome.step,
                f"the CPU time limit of a run ({self.cpu_budget:g} s) was reached",
                code,
            )
        return outcome

    def _sample_cpu(self, force: bool = False) -> None:
        """Note the CPU time each process of the run has used (from /proc, at most once a second):
        :attr:`cpu_peak` is the most any one of them used, what ``RLIMIT_CPU`` counts."""
        now = time.monotonic()
        if not force and now - self._cpu_sampled < 1.0:
            return
        self._cpu_sampled = now
        if self.group is not None and self.group.members:
            pids = sorted(self.group.pids())
        elif self._root_pid is not None:
            pids = [self._root_pid, *_descendants(self._root_pid)]
        else:
            return
        for pid in pids[:MAX_CPU_SAMPLES]:
            seconds = _cpu_seconds(pid)
            if seconds is not None:
                self._cpu_pids[pid] = seconds
        self.cpu_peak = max(self._cpu_pids.values(), default=0.0)

    def _clean_up(self, uid: int | None) -> None:
        """After every run, in every isolation mode: kill every task of the run's cgroups, check
        them empty and remove them, then kill every process left on the sandbox uid (issue 24)."""
        if self.group is not None:
            self.cleanup += self.group.destroy()
        if uid is not None:
            sandbox.kill_uid(uid)
            if sandbox._uid_processes(uid):
                self.cleanup.append(f"processes of uid {uid} outlived the run")

    def _execute_on(
        self, zygote: Zygote | None, payload: bytes, read_fd: int, write_fd: int, plan: dict
    ) -> RunOutcome:
        if zygote is not None:
            try:
                return self._execute_forked(zygote, payload, read_fd, write_fd)
            except OSError:
                # the zygote failed: start a fresh interpreter instead
                read_fd, write_fd = os.pipe()
                plan["fd"] = write_fd
                payload = json.dumps(plan).encode("utf-8")
        return self._execute_fresh(payload, read_fd, write_fd)

    def _enter_group(self, pid: int, scan: bool = False) -> None:
        """Put the run's first process (and any child it already has) in the run's cgroups;
        it waits for its plan meanwhile, so no learner code runs outside them."""
        if self.group is None or not self.group.members:
            return
        pids = [pid, *_descendants(pid)] if scan else [pid]
        for each in pids:
            self.group.add(each)

    def _feed(self, write, payload: bytes) -> threading.Thread:
        def feed():
            try:
                write(payload)
            except OSError:
                pass

        feeder = threading.Thread(target=feed, daemon=True)
        feeder.start()
        return feeder

    def _execute_forked(self, zygote: Zygote, payload: bytes, read_fd: int, write_fd: int) -> RunOutcome:
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
        self._root_pid = pid
        self._enter_group(pid)

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
            "from coursetools.grade.sandbox.harness import main; main()"
        )
        argv = sandbox.command(settings.isolation, [settings.python, "-I", "-B", "-c", boot])
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
            return RunOutcome(RunEnd.FATAL, message=f"could not start Python: {exc}")
        os.close(write_fd)
        self._root_pid = proc.pid
        self._enter_group(proc.pid, scan=True)
        stdout = proc.stdout
        assert stdout is not None  # started with stdout=PIPE

        def write(data):
            proc.stdin.write(data)
            proc.stdin.close()

        feeder = self._feed(write, payload)
        try:
            outcome = self._watch(read_fd, stdout.fileno(), proc.poll)
        finally:
            self._kill(proc)
            os.close(read_fd)
            stdout.close()
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
        step: Step | None = None
        step_started = time.monotonic()
        open_streams = 2
        exited_at = None
        while True:
            now = time.monotonic()
            limit = settings.timeout_setup if step is None else settings.timeout_cell
            wait = min(step_started + limit, self.deadline) - now
            if self.stop.is_set():
                return RunOutcome(RunEnd.STOPPED, step, "grading was interrupted")
            if now >= self.deadline:
                return RunOutcome(
                    RunEnd.DEADLINE, step, "the time limit for the whole submission was reached"
                )
            if wait <= 0:
                return RunOutcome(RunEnd.STEP_TIMEOUT, step, f"no progress within {limit:g} s")
            if open_streams == 0 or (exited_at is not None and now - exited_at > 0.5):
                return RunOutcome(RunEnd.DIED, step)
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
                    return RunOutcome(
                        RunEnd.FLOOD, step, "the process sent too much data on the grader's channel"
                    )
                while True:
                    cut = buffer.find(b"\n", start)
                    if cut < 0:
                        break
                    line = bytes(buffer[:cut])
                    del buffer[: cut + 1]
                    start = 0
                    event = self._parse(line)
                    if self.containers > MAX_RUN_CONTAINERS:
                        return RunOutcome(
                            RunEnd.FLOOD, step, "the process sent too many values on the grader's channel"
                        )
                    if event is None:
                        continue
                    if not self.transcript.accept(event):
                        self.out_of_order += 1
                        continue
                    if event.kind is EventKind.STEP:
                        step = Step.from_event(event.data)
                        step_started = time.monotonic()
                    elif event.kind is EventKind.DONE:
                        forged = event.data.get("forged")
                        self.forged = forged if isinstance(forged, int) and forged > 0 else 0
                        self._drain(out_fd, open_streams)
                        return RunOutcome(RunEnd.DONE, step)
                    elif event.kind is EventKind.FLOOD:
                        return RunOutcome(RunEnd.FLOOD, step, str(event.data.get("message", ""))[:500])
                    elif event.kind is EventKind.FATAL:
                        return RunOutcome(RunEnd.FATAL, step, str(event.data.get("message", ""))[:500])
                    else:
                        self.events.append(event)
                if len(buffer) > MAX_LINE_BYTES:
                    return RunOutcome(
                        RunEnd.FLOOD, step, "the process sent too long a message on the grader's channel"
                    )
            if exited_at is None and poll() is not None:
                exited_at = time.monotonic()
            self._sample_cpu()


def _cpu_seconds(pid: int) -> float | None:
    """The CPU time (user and system) process ``pid`` has used, from ``/proc/<pid>/stat``."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    except (OSError, IndexError, ValueError):
        return None


def _descendants(pid: int) -> list[int]:
    """The processes below ``pid`` (from /proc), for a start that forks before it is grouped."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for name in entries:
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as fh:
                    ppid = int(fh.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def needed_paths(python: str) -> list[str]:
    """The folders a submission's interpreter must read: the Python installation, the virtual
    environment, and the attnlib and coursetools packages, not the repository root (a root
    folder of mode 0700, a fresh mktemp clone, is opened up with only these children visible)."""
    return sorted(
        {
            sys.prefix,
            sys.base_prefix,
            str(Path(python).resolve().parent),
            str(ROOT / "attnlib"),
            str(ROOT / "coursetools"),
        }
    )


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
