"""The program that runs inside a submission's sandbox: a trusted parent and a learner child.

The parent (:func:`run`) reads its plan (the learner's code cells, where to
evaluate each exercise, the sandbox settings) as JSON into its types
(:class:`~coursetools.grade.events.RunPlan`,
:class:`~coursetools.grade.sandbox_shared.SandboxConfig`), builds the sandbox (see
:mod:`coursetools.grade.sandbox_parent`), and forks the learner's process, which
confines itself further (:mod:`coursetools.grade.sandbox_child`) and executes the cells one by one in a fresh
namespace, on the parent's request. Right after each exercise's answer cell
(where the notebook's check cell stood) the parent asks it to call
:func:`attnlib.checks.run_case` on the learner's function for every case,
hidden ones included, and sends each output (or the error's type and first
line) to the grader as one JSON line on the event pipe (issue 24).

Nothing is judged here: the grader's own process compares the outputs with the
reference, so whatever the learner's code patches in its process (NumPy,
torch, ``attnlib.checks``) cannot change a verdict.

Nor is the answer key here (issue 12): the cases' inputs come in the plan, made
by the grader (:mod:`coursetools.grade.inputs`), and no check module
(``attnlib/checks/chNN_*.py``, with the references and the known wrong answers)
is ever imported in either process. The learner's process never holds the
channel (closed before its first cell): learner code that walks its objects
(``gc``, frames) finds only its own socket to the parent, on which it can
answer the parent's questions, in the parent's order, with outputs it computes
itself.
"""

from __future__ import annotations

import builtins
import json
import os
import sys
import time
import traceback
from typing import NoReturn

from coursetools.grade import events
from coursetools.grade.events import CaseKind, LookupState, Phase, Request, RunPlan
from coursetools.grade.sandbox_child import confine
from coursetools.grade.sandbox_parent import enter, set_dumpable
from coursetools.grade.sandbox_shared import IsolationReport, SandboxConfig, set_pdeathsig


def _first_line(exc: BaseException, limit: int = 300) -> str:
    text = str(exc).strip()
    line = text.splitlines()[0] if text else ""
    return line[:limit]


class _Channel:
    """Writes JSON lines to the grader's event pipe with references taken before learner code runs."""

    def __init__(self, fd: int, token: str):
        self.fd = fd
        self._token = token
        self._write = os.write
        self._dumps = json.dumps

    def send(self, message: dict) -> None:
        """Write ``message`` (built by :mod:`coursetools.grade.events`) after the run's secret."""
        data = (self._dumps({"k": self._token, **message}) + "\n").encode()
        view = memoryview(data)
        while view:
            try:
                n = self._write(self.fd, view)
            except InterruptedError:
                continue
            except OSError:
                return  # the pipe is gone: the grader notices the missing messages
            view = view[n:]


def _error_line(exc: BaseException, cell_name: str) -> int | None:
    if isinstance(exc, SyntaxError) and exc.filename == cell_name:
        return exc.lineno
    line = None
    for frame, lineno in traceback.walk_tb(exc.__traceback__):
        if frame.f_code.co_filename == cell_name:
            line = lineno
    return line


class _Snapshot:
    """The parts of an exercise that the harness uses, read once before learner code runs."""

    __slots__ = ("function", "cases")

    def __init__(self, function: str, cases: tuple):
        self.function = function
        self.cases = cases


class _TimeitResult:
    """What ``%timeit -o`` returns in IPython, with the attributes a notebook reads."""

    def __init__(self, loops: int, runs: list[float]):
        self.loops = loops
        self.repeat = len(runs)
        self.all_runs = runs
        self.timings = [t / loops for t in runs]
        self.best = min(self.timings)
        self.worst = max(self.timings)
        self.average = sum(self.timings) / len(self.timings)
        mean = self.average
        self.stdev = (sum((t - mean) ** 2 for t in self.timings) / len(self.timings)) ** 0.5
        self.compile_time = 0.0

    def __repr__(self) -> str:
        return f"<TimeitResult : {self.average:.3g} s per loop ({self.repeat} runs, {self.loops} loop each)>"


class _IPythonStandIn:
    """``get_ipython()`` for cells that IPython's transformer rewrote (see submission._strip_magics).

    ``%time``/``%%time``/``%timeit``/``%%timeit``/``%%capture`` run their code once (a
    timing is never part of a grade); every other magic does nothing; shell commands
    (``!cmd``, ``x = !cmd``) run nothing, and ``x = !cmd`` gives an empty list.
    """

    def __init__(self, ns: dict):
        self._ns = ns

    def _timed(self, code: str, want_value: bool):
        start = time.perf_counter()
        try:
            value = eval(compile(code, "<magic>", "eval"), self._ns) if want_value else None  # noqa: S307
        except SyntaxError:
            exec(compile(code, "<magic>", "exec"), self._ns)  # noqa: S102
            value = None
        return value, time.perf_counter() - start

    def run_line_magic(self, name: str, line: str):
        if name == "time":
            return self._timed(line, True)[0]
        if name == "timeit":
            words = line.split()
            keep_o = "-o" in words
            code_words: list[str] = []
            skip = False
            for word in words:
                if skip:
                    skip = False
                elif word in ("-n", "-r", "-p"):
                    skip = True
                elif not (word.startswith("-") and not code_words):
                    code_words.append(word)
            _, seconds = self._timed(line[line.find(code_words[0]) :] if code_words else "None", False)
            return _TimeitResult(1, [seconds]) if keep_o else None
        return None

    def run_cell_magic(self, name: str, line: str, cell: str):
        if name in ("time", "timeit", "capture"):
            exec(compile(cell, "<magic>", "exec"), self._ns)  # noqa: S102
        return None

    def system(self, cmd: str) -> None:
        return None

    def getoutput(self, cmd: str, split: bool = True) -> list:
        return []

    def __getattr__(self, name: str):
        return lambda *args, **kwargs: None


def _display(*objs, **kwargs) -> None:
    """``display`` as a notebook has it: here, the repr of each object on stdout."""
    for obj in objs:
        print(repr(obj))


def main() -> None:
    """Entry point of a fresh interpreter: the plan comes on stdin."""
    wire = json.loads(sys.stdin.buffer.read().decode("utf-8"))
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    run(wire)


MAX_REPLY_BYTES = 100 << 20  # one reply of the learner's process: a 64 MB array in base64, and room
MAX_REPLIES_BYTES = 256 << 20  # everything the learner's process may send in one run


def run(wire: dict) -> None:
    """The sandbox's trusted parent: confine, start the learner's process, drive it; never returns.

    ``wire``: the plan as the grader sent it (:meth:`RunPlan.to_wire`, with the channel's
    ``fd`` and secret ``token``, the ``env`` and the ``sandbox`` settings beside it), read
    once into :class:`RunPlan` and :class:`SandboxConfig`.

    This process holds the grader's channel and never runs learner code. In a
    namespace mode it is PID 1 of the submission's PID namespace (the zygote or
    ``unshare --fork`` made it so), so every process of the submission dies with
    it, and a signal from inside the namespace cannot kill it. It builds the
    sandbox's root (:func:`coursetools.grade.sandbox_parent.enter`), then forks the
    learner's process, which confines itself further (limits, sandbox uid, no
    capabilities, seccomp: :func:`coursetools.grade.sandbox_child.confine`), closes the
    channel and answers this process's requests over a private socketpair: run
    cell ``i``, look up exercise ``ex``'s function, run one case. Every event on
    the channel is written here, in the plan's order; a reply must carry the
    request's fresh nonce (replies written ahead by learner code are dropped and
    counted). When the learner's process ends, or the run is over, every other
    process of the namespace is killed.
    """
    for key, value in wire.get("env", {}).items():
        os.environ[str(key)] = str(value)

    set_pdeathsig()
    channel = _Channel(int(wire.pop("fd")), str(wire.pop("token")))
    # Trusted imports and references, taken before any learner code runs and before the
    # sandbox's root leaves attnlib/checks out: the checker's machinery (core: run_case,
    # to_arrays), never a chapter's check module (the grader ships the cases' inputs instead).
    try:
        import socket

        import numpy  # noqa: F401  (warm import, so the first cell's time is the learner's)

        import attnlib.checks as checks_pkg
        from attnlib.checks import core
        from coursetools.grade.inputs import unship
        from coursetools.grade.wire import check_line, encode
    except Exception as exc:  # noqa: BLE001 - report and stop
        channel.send(events.fatal(f"harness imports failed: {type(exc).__name__}: {exc}"))
        os._exit(3)
    try:
        settings = SandboxConfig.from_wire(wire["sandbox"])
        isolation = enter(settings)
    except Exception as exc:  # noqa: BLE001 - report and stop: never run unconfined by surprise
        channel.send(events.fatal(f"sandbox setup failed: {type(exc).__name__}: {exc}"))
        os._exit(3)
    plan = RunPlan.from_wire(wire)
    wire.clear()  # the typed plan is what the rest reads
    try:
        shipped = unship(plan.inputs)
    except Exception as exc:  # noqa: BLE001 - e.g. a grader and a sandbox of different Pythons
        channel.send(events.fatal(f"the cases' inputs could not be read: {type(exc).__name__}: {exc}"))
        os._exit(3)
    plan.inputs = ""  # unshipped once, not kept (the string may be large)
    exercises = {ex_id: _Snapshot(function, cases) for ex_id, (function, cases) in shipped.items()}
    core.check = lambda *args, **kwargs: None  # check cells left in place cost nothing
    checks_pkg.check = core.check
    cells = {index: source for index, source in plan.cells}

    try:
        set_dumpable(False)  # not traceable, nor readable through /proc, by the learner's uid
    except (OSError, AttributeError):
        pass
    parent_end, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    learner = os.fork()
    if learner == 0:
        try:
            parent_end.close()
            os.close(channel.fd)
            del channel
            confine(settings, isolation)
        except BaseException:  # noqa: BLE001 - the parent sees the socket close before "ready"
            os._exit(3)
        _learner(child_end.detach(), isolation, cells, exercises, core.run_case, core.NotAttempted, encode)
        os._exit(0)
    child_end.close()
    _ignore_signals()
    _supervise(plan, channel, parent_end.detach(), learner, exercises, check_line)


# what the trusted parent keeps: SIGCHLD (it waits for the learner's process), the faults of its
# own code, and the two signals nobody can catch (the grader ends a run with SIGKILL)
_KEPT_SIGNALS = {
    "SIGCHLD",
    "SIGKILL",
    "SIGSTOP",
    "SIGSEGV",
    "SIGBUS",
    "SIGFPE",
    "SIGILL",
    "SIGABRT",
    "SIGTRAP",
}


def _ignore_signals() -> None:
    """The trusted parent ignores every signal it can (issue 34): in ``userns`` mode the learner's
    process has the same uid and could end it with ``kill(getppid(), SIGINT)``, SIGTERM, SIGHUP,
    SIGUSR1 ...; a Ctrl-C in the instructor's terminal is the grader's to handle. Set after the
    fork, in the parent only: the learner's process keeps the default handlers."""
    import signal

    for sig in signal.Signals:
        if sig.name in _KEPT_SIGNALS:
            continue
        try:
            signal.signal(sig, signal.SIG_IGN)
        except (OSError, ValueError, RuntimeError):
            pass  # not catchable here


class _LearnerGone(Exception):
    """The learner's process ended, closed its socket or broke the protocol."""


def _learner(
    fd: int, confined: IsolationReport, cells: dict, exercises: dict, run_case, not_attempted, encode
) -> None:
    """The learner's process: answer the trusted parent's requests, one at a time; its first
    line is ``confined``, the isolation report it completed before any learner code.

    Learner code runs here and can change anything in this process, this loop
    included; it cannot reach the grader's channel (closed before the first cell)
    and it can only answer the questions the parent asks, in the parent's order.
    """
    read, write, loads, dumps = os.read, os.write, json.loads, json.dumps
    monotonic = time.monotonic
    ns: dict = {"__name__": "__main__", "__builtins__": builtins, "display": _display}
    shell = _IPythonStandIn(ns)
    ns["get_ipython"] = lambda: shell
    current: dict[str, object] = {}
    buffer = bytearray()

    def reply(message: dict) -> None:
        view = memoryview((dumps(message) + "\n").encode())
        while view:
            try:
                view = view[write(fd, view) :]
            except InterruptedError:
                continue

    def request() -> dict:
        while True:
            cut = buffer.find(b"\n")
            if cut >= 0:
                line = bytes(buffer[:cut])
                del buffer[: cut + 1]
                return loads(line)
            data = read(fd, 1 << 16)
            if not data:
                os._exit(0)
            buffer.extend(data)

    reply({"ready": confined.to_wire()})
    while True:
        req = request()
        op, nonce = req.get("op"), req.get("n")
        if op == Request.CELL:
            index = int(req["cell"])
            cell_name = f"<cell {index}>"
            answer: dict = {"n": nonce}
            try:
                code = compile(cells[index], cell_name, "exec")
                exec(code, ns)  # noqa: S102 - running the learner's code is the point
            except BaseException as exc:  # noqa: BLE001 - SystemExit and KeyboardInterrupt too
                answer["error"] = {
                    "etype": type(exc).__name__,
                    "text": _first_line(exc),
                    "line": _error_line(exc, cell_name),
                }
            reply(answer)
        elif op == Request.LOOKUP:
            exercise = exercises[req["ex"]]
            func = ns.get(exercise.function)
            current[req["ex"]] = func
            if func is None:
                state = LookupState.MISSING
            else:
                state = LookupState.OK if callable(func) else LookupState.NOT_CALLABLE
            where = None if func is None else ["<no code object>", 0]
            func_code = getattr(func, "__code__", None)
            if func_code is not None:
                where = [
                    str(getattr(func_code, "co_filename", ""))[:100],
                    int(getattr(func_code, "co_firstlineno", 0)),
                ]
            reply({"n": nonce, "state": state, "id": id(func), "where": where})
        elif op == Request.CASE:
            exercise = exercises[req["ex"]]
            func = current.get(req["ex"])
            case = next(c for c in exercise.cases if c.name == req["case"])
            start = monotonic()
            answer = {"n": nonce}
            try:
                out = run_case(func, case)
                try:
                    answer.update(kind=CaseKind.VALUE, value=encode(out))
                except BaseException as exc:  # noqa: BLE001
                    answer.update(kind=CaseKind.ERROR, etype=type(exc).__name__, text=_first_line(exc))
            except not_attempted:
                answer.update(kind=CaseKind.NOT_ATTEMPTED)
            except BaseException as exc:  # noqa: BLE001 - SystemExit and KeyboardInterrupt too
                answer.update(kind=CaseKind.ERROR, etype=type(exc).__name__, text=_first_line(exc))
            answer["seconds"] = round(monotonic() - start, 4)
            reply(answer)
        elif op == Request.FLUSH:
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except Exception:  # noqa: BLE001, S110 - a closed or replaced stream
                    pass
            reply({"n": nonce})


class _Supervisor:
    """The trusted parent of one run: it asks the learner's process for each step of ``plan``
    and writes every event to the grader's ``channel``.

    ``fd`` is its end of the private line to the learner's process (``learner``, a pid); a
    reply counts only when it carries the nonce of its question (``check_line`` checks the
    line's start), so what learner code writes ahead is dropped and counted (:attr:`forged`).
    The run ends through :meth:`finish`, which never returns.
    """

    def __init__(self, plan: RunPlan, channel: _Channel, fd: int, learner: int, exercises: dict, check_line):
        import secrets

        self.token = secrets.token_hex
        self.read, self.write, self.monotonic = os.read, os.write, time.monotonic
        self.plan = plan
        self.channel = channel
        self.fd = fd
        self.learner = learner
        self.exercises = exercises
        self.check_line = check_line
        self.buffer = bytearray()
        self.received = 0  # bytes read from the learner's process
        self.forged = 0  # lines dropped: written ahead by learner code, or malformed
        self.skip_cases = set(plan.skip_cases)
        self.seen: dict[str, int | None] = {}  # the id of each function the lookup found
        self.attempted: dict[str, bool] = {}

    def finish(self, code: int) -> NoReturn:
        """Kill every process of the submission but this one, then end with ``code``.

        As PID 1 of the namespace, ``kill(-1)`` reaches every other process in it
        (a learner's ``setsid`` daemon included); without a namespace, what the
        learner started is killed by the grader (the run's cgroup, the sandbox uid).
        """
        for target in (self.learner, -1) if os.getpid() == 1 else (self.learner,):
            try:
                os.kill(target, 9)
            except OSError:
                pass
        os._exit(code)

    def died(self) -> NoReturn:
        """The learner's process is gone (or broke the protocol): end as it ended."""
        try:
            os.kill(self.learner, 9)
        except OSError:
            pass
        try:
            _, status = os.waitpid(self.learner, 0)
            code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        except ChildProcessError:
            code = 1
        self.finish(128 - code if code < 0 else code)

    def flood(self, message: str) -> NoReturn:
        self.channel.send(events.flood(message))
        self.finish(0)

    def receive(self, nonce: str) -> dict:
        buffer = self.buffer
        while True:
            cut = buffer.find(b"\n")
            while cut < 0:
                if len(buffer) > MAX_REPLY_BYTES:
                    self.flood("the process sent too long a message to the sandbox's parent")
                try:
                    data = self.read(self.fd, 1 << 20)
                except InterruptedError:
                    continue
                except OSError:
                    data = b""
                if not data:
                    self.died()
                self.received += len(data)
                if self.received > MAX_REPLIES_BYTES:
                    self.flood("the process sent too much data to the sandbox's parent")
                start = len(buffer)
                buffer.extend(data)
                cut = buffer.find(b"\n", start)
            line = bytes(buffer[:cut])
            del buffer[: cut + 1]
            message = None
            if self.check_line(line, b'{"n": "' + nonce.encode() + b'"'):
                try:
                    message = json.loads(line)
                except (ValueError, RecursionError):
                    message = None
            if isinstance(message, dict) and message.get("n") == nonce:
                return message
            self.forged += 1  # written ahead by learner code, or malformed: dropped

    def ask(self, **req) -> dict:
        nonce = self.token(16)
        data = (json.dumps({"n": nonce, **req}) + "\n").encode()
        view = memoryview(data)
        while view:
            try:
                view = view[self.write(self.fd, view) :]
            except InterruptedError:
                continue
            except OSError:
                self.died()
        return self.receive(nonce)

    def evaluate(self, ex_id: str, phase: Phase) -> None:
        channel, monotonic = self.channel, self.monotonic
        exercise = self.exercises[ex_id]
        found = self.ask(op=Request.LOOKUP, ex=ex_id)
        self.seen[ex_id] = found.get("id")
        self.attempted[ex_id] = False
        lookup = LookupState.read(found.get("state"))
        where = found.get("where")
        for case in exercise.cases:
            if (ex_id, case.name) in self.skip_cases:
                continue
            channel.send(events.case_step(ex_id, case.name))
            start = monotonic()
            if lookup is LookupState.MISSING:
                kind = CaseKind.MISSING
                answer = {"etype": "NameError", "text": f"no function named {exercise.function} is defined"}
            elif lookup is not LookupState.OK:
                kind = CaseKind.ERROR
                answer = {"etype": "TypeError", "text": f"{exercise.function} is not a function"}
            else:
                answer = self.ask(op=Request.CASE, ex=ex_id, case=case.name)
                read_kind = CaseKind.read(answer.get("kind"))
                if read_kind is None or read_kind.by_grader:
                    kind, answer = CaseKind.ERROR, {"etype": "ProtocolError", "text": "malformed reply"}
                else:
                    kind = read_kind
                self.attempted[ex_id] = self.attempted[ex_id] or kind.ran
            defined = None
            if lookup is LookupState.OK and isinstance(where, list) and len(where) == 2:
                defined = [str(where[0])[:100], where[1] if isinstance(where[1], int) else 0]
            channel.send(
                events.case_outcome(
                    ex_id,
                    case.name,
                    phase,
                    kind,
                    round(monotonic() - start, 4),
                    value=answer.get("value"),
                    etype=answer.get("etype", ""),
                    text=answer.get("text", ""),
                    defined=defined,
                )
            )

    def run(self) -> NoReturn:
        """The whole run: the learner's report, each cell and its checks, the checks at the end."""
        channel, monotonic, plan = self.channel, self.monotonic, self.plan
        # the learner's process confined itself before any learner code: its report first
        ready = receive_ready(self.fd, self.buffer, self.died)
        channel.send(events.hello(ready.to_wire(), os.getpid()))
        skip_cells = set(plan.skip_cells)
        for index, _source in plan.cells:
            if index not in skip_cells:
                channel.send(events.cell_step(index))
                start = monotonic()
                answer = self.ask(op=Request.CELL, cell=index)
                error = answer.get("error")
                if isinstance(error, dict):
                    channel.send(
                        events.cell_error(
                            index, error.get("etype", ""), error.get("text", ""), error.get("line")
                        )
                    )
                channel.send(events.cell_done(index, round(monotonic() - start, 4)))
            for ex_id in plan.evaluate_after.get(str(index), []):
                self.evaluate(ex_id, Phase.CELL)
        for ex_id in plan.evaluate_at_end:
            self.evaluate(ex_id, Phase.END)
        # An exercise that was not attempted where its check stood, but whose
        # function was redefined further down, is evaluated again at the end.
        for ex_id in self.exercises:
            if ex_id in self.seen and not self.attempted.get(ex_id):
                found = self.ask(op=Request.LOOKUP, ex=ex_id)
                if (
                    LookupState.read(found.get("state")) is not LookupState.MISSING
                    and found.get("id") != self.seen[ex_id]
                ):
                    self.evaluate(ex_id, Phase.END)
        # flush what the learner printed before "done": the grader stops reading at "done"
        self.ask(op=Request.FLUSH)
        try:
            os.kill(self.learner, 9)
            os.waitpid(self.learner, 0)
        except OSError:
            pass
        if os.getpid() == 1:
            try:
                os.kill(-1, 9)  # every other process of the namespace: what the learner started
            except OSError:
                pass
        channel.send(events.done(self.forged))
        self.finish(0)


def _supervise(plan: RunPlan, channel: _Channel, fd: int, learner: int, exercises: dict, check_line) -> None:
    """The trusted parent's loop: ask the learner's process for each step, write every event."""
    _Supervisor(plan, channel, fd, learner, exercises, check_line).run()


def receive_ready(fd: int, buffer: bytearray, died) -> IsolationReport:
    """The learner's process's first line: its confinement report, written before learner code."""
    while b"\n" not in buffer:
        data = os.read(fd, 1 << 16)
        if not data or len(buffer) > 1 << 20:
            died()
        buffer.extend(data)
    cut = buffer.find(b"\n")
    line = bytes(buffer[:cut])
    del buffer[: cut + 1]
    return IsolationReport.from_wire(json.loads(line)["ready"])


if __name__ == "__main__":
    main()
