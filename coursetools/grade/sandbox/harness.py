"""The program that runs inside a submission's sandbox: a trusted parent and a learner child.

The parent (:func:`run`) reads its plan (the learner's code cells, what runs for each
exercise, the sandbox settings) as JSON into its types
(:class:`~coursetools.grade.records.events.RunPlan`,
:class:`~coursetools.grade.sandbox.shared.SandboxConfig`) and builds the sandbox (see
:mod:`coursetools.grade.sandbox.parent`). Then, for each exercise in turn (issue 43), it
forks a fresh learner's process, which confines itself further
(:mod:`coursetools.grade.sandbox.child`) and, on the parent's requests, runs the
exercise's handed-out cells, records a snapshot (:mod:`coursetools.grade.sandbox.snapshot`),
runs the learner's statements the answer needs and the answer cell
(:mod:`coursetools.grade.grading.selection`), and calls :func:`attnlib.checks.run_case` on the
learner's function for every case, hidden ones included, comparing with the snapshot
before each case and after the last. The parent sends each output (or the error's type
and first line), and any change the snapshot found, to the grader as one JSON line on
the event pipe (issue 24), then kills that process and everything it started before the
next exercise: no learner state crosses exercises, and no other learner cell runs
beside an answer.

Nothing is judged here: the grader's own process compares the outputs with the
reference, so whatever the learner's code patches in its process (NumPy,
torch, ``attnlib.checks``) cannot change a verdict.

Nor is the answer key here (issue 12): the cases' inputs come in the plan, made
by the grader (:mod:`coursetools.grade.records.inputs`), and no check module
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

from coursetools.grade.records import events
from coursetools.grade.records.events import CaseKind, LookupState, Phase, Request, RunPlan
from coursetools.grade.sandbox.child import confine
from coursetools.grade.sandbox.parent import enter, set_dumpable
from coursetools.grade.sandbox.shared import IsolationReport, SandboxConfig, set_pdeathsig

_getframe = sys._getframe  # bound before learner code: the magics' stand-ins find their caller
PR_SET_CHILD_SUBREAPER = 36  # orphans of an exercise's process come to the trusted parent


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
        """Write ``message`` (built by :mod:`coursetools.grade.records.events`) after the run's secret."""
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


def _timed(code: str, want_value: bool, ns: dict):
    start = time.perf_counter()
    try:
        value = eval(compile(code, "<magic>", "eval"), ns) if want_value else None  # noqa: S307
    except SyntaxError:
        exec(compile(code, "<magic>", "exec"), ns)  # noqa: S102
        value = None
    return value, time.perf_counter() - start


class _IPythonStandIn:
    """``get_ipython()`` for cells that IPython's transformer rewrote (see submission._strip_magics).

    ``%time``/``%%time``/``%timeit``/``%%timeit``/``%%capture`` run their code once (a
    timing is never part of a grade), in the globals of the code that called them; every
    other magic does nothing; shell commands (``!cmd``, ``x = !cmd``) run nothing, and
    ``x = !cmd`` gives an empty list. It holds nothing (issue 43): no attribute reaches the
    notebook's namespace, so ``get_ipython()`` cannot swap what an answer's names mean.
    """

    __slots__ = ()

    def run_line_magic(self, name: str, line: str):
        ns = _getframe(1).f_globals
        if name == "time":
            return _timed(line, True, ns)[0]
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
            _, seconds = _timed(line[line.find(code_words[0]) :] if code_words else "None", False, ns)
            return _TimeitResult(1, [seconds]) if keep_o else None
        return None

    def run_cell_magic(self, name: str, line: str, cell: str):
        if name in ("time", "timeit", "capture"):
            exec(compile(cell, "<magic>", "exec"), _getframe(1).f_globals)  # noqa: S102
        return None

    def system(self, cmd: str) -> None:
        return None

    def getoutput(self, cmd: str, split: bool = True) -> list:
        return []

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)  # no protocol (copy, pickle, vars) finds anything here
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
    sandbox's root (:func:`coursetools.grade.sandbox.parent.enter`), then forks the
    learner's process, which confines itself further (limits, sandbox uid, no
    capabilities, seccomp: :func:`coursetools.grade.sandbox.child.confine`), closes the
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
        from coursetools.grade.records.inputs import unship
        from coursetools.grade.records.wire import check_line, encode
        from coursetools.grade.sandbox.snapshot import take as take_snapshot
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
    import gc

    gc.freeze()  # what is loaded now is never traversed again: each fork starts cheaper

    try:
        set_dumpable(False)  # not traceable, nor readable through /proc, by the learner's uid
    except (OSError, AttributeError):
        pass
    _set_subreaper()
    handlers = _ignore_signals()

    def spawn(ex_id: str) -> tuple[int, int]:
        """Fork exercise ``ex_id``'s process (confined, holding only that exercise's cases and
        cells); return its pid and the parent's end of their socketpair."""
        parent_end, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        learner = os.fork()
        if learner == 0:
            try:
                _restore_signals(handlers)
                parent_end.close()
                os.close(channel.fd)
                channel._token = ""  # this copy of the parent's memory forgets the run's secret
                for other in [e for e in exercises if e != ex_id]:
                    del exercises[other]  # nor the other exercises' cases (hidden ones included)
                shipped.clear()
                handed, learner_units = plan.units(ex_id)
                plan.cells, plan.selected = [], {}
                confine(settings, isolation)
            except BaseException:  # noqa: BLE001 - the parent sees the socket close before "ready"
                os._exit(3)
            _learner(
                child_end.detach(),
                isolation,
                {int(i): src for i, src in [*handed, *learner_units]},
                exercises,
                core.run_case,
                core.NotAttempted,
                encode,
                take_snapshot,
            )
            os._exit(0)
        child_end.close()
        return learner, parent_end.detach()

    home = os.getcwd()  # the learner's working folder (in a namespace mode: the private home)
    private_shm = isolation.mode in ("namespaces", "userns")
    supervisor = _Supervisor(plan, channel, spawn, exercises, check_line)
    supervisor.clean = lambda: _clear_writable(home, private_shm)
    supervisor.run()


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


def _ignore_signals() -> dict:
    """The trusted parent ignores every signal it can (issue 34): in ``userns`` mode the learner's
    process has the same uid and could end it with ``kill(getppid(), SIGINT)``, SIGTERM, SIGHUP,
    SIGUSR1 ...; a Ctrl-C in the instructor's terminal is the grader's to handle. Returns the
    handlers it replaced: each exercise's process restores them (:func:`_restore_signals`), so
    the learner's process keeps the default handlers."""
    import signal

    replaced = {}
    for sig in signal.Signals:
        if sig.name in _KEPT_SIGNALS:
            continue
        try:
            replaced[sig] = signal.signal(sig, signal.SIG_IGN)
        except (OSError, ValueError, RuntimeError):
            pass  # not catchable here
    return replaced


def _restore_signals(handlers: dict) -> None:
    """In an exercise's process: the handlers the trusted parent replaced (:func:`_ignore_signals`)."""
    import signal

    for sig, handler in handlers.items():
        try:
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        except (OSError, ValueError, RuntimeError, TypeError):
            pass


def _set_subreaper() -> None:
    """Orphans of an exercise's process (a daemon it started) become the trusted parent's children,
    so that they are killed with it (outside a PID namespace, where ``kill(-1)`` does it)."""
    try:
        from coursetools.grade.sandbox.shared import load_libc

        load_libc().prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except Exception:  # noqa: BLE001, S110 - not Linux: the process group is killed instead
        pass


def _children(root: int | None = None) -> list[int]:
    """The descendants of ``root`` (by default the trusted parent: the exercise's process, the
    orphans it left and theirs), from /proc."""
    parents: dict[int, list[int]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    for name in names:
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as fh:
                    ppid = int(fh.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            parents.setdefault(ppid, []).append(int(name))
    found, todo = list[int](), [os.getpid() if root is None else root]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _clear_writable(home: str, private_shm: bool) -> None:
    """Empty what an exercise's process could write (its home folder, which is also ``/tmp`` in a
    namespace mode, and there the private ``/dev/shm``) before the next exercise: no file a
    process left (a hidden case's inputs, say) reaches the next one. Links are removed, never
    followed."""
    import shutil

    for folder in (home, "/dev/shm") if private_shm else (home,):
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    os.unlink(entry.path)
            except OSError:
                pass


def _kill_learner(pid: int) -> None:
    """Kill exercise process ``pid`` and everything it started (its descendants; their orphans come
    to the trusted parent, a subreaper); reap them all. It stays in the trusted parent's process
    group, so that the grader's kill of the run's group reaches it too."""
    targets = [pid, *_children(pid)]
    if os.getpid() == 1:
        targets.append(-1)  # PID 1 of the namespace: every other process in it
    for _ in range(3):
        for target in targets:
            try:
                os.kill(target, 9)
            except OSError:
                pass
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
        while True:
            try:
                reaped, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if reaped == 0:
                break
        targets = [p for p in _children() if p != pid]
        if not targets:
            return


class _LearnerGone(Exception):
    """The learner's process ended, closed its socket or broke the protocol."""


def _learner(
    fd: int,
    confined: IsolationReport,
    cells: dict,
    exercises: dict,
    run_case,
    not_attempted,
    encode,
    take_snapshot=None,
) -> None:
    """One exercise's process: answer the trusted parent's requests, one at a time; its first
    line is ``confined``, the isolation report it completed before any learner code.

    ``cells``: the units it may run (``{cell index: source}``: the handed-out cells and the
    learner's selected statements); ``exercises``: this exercise's cases only. On the
    ``snapshot`` request (after the handed-out cells, before any learner statement) it
    records what the answer may reach (``take_snapshot``, :func:`coursetools.grade.sandbox.snapshot.take`);
    before each case and on ``guard`` it compares and reports any change (``altered``).

    Learner code runs here and can change anything in this process, this loop
    included; it cannot reach the grader's channel (closed before the first cell)
    and it can only answer the questions the parent asks, in the parent's order.
    """
    read, write, loads, dumps = os.read, os.write, json.loads, json.dumps
    monotonic = time.monotonic
    getpid, leave = os.getpid, os._exit
    me = getpid()  # a process the learner's code forked never answers in its place
    ns: dict = {"__name__": "__main__", "__builtins__": builtins, "display": _display}
    shell = _IPythonStandIn()
    ns["get_ipython"] = lambda: shell
    current: dict[str, object] = {}
    guard: list = []  # the snapshot's check, once taken

    def altered() -> list:
        if not guard:
            return []
        try:
            return list(guard[0]())
        except BaseException as exc:  # noqa: BLE001 - a check that fails is a change too
            return [f"made the snapshot's check fail ({type(exc).__name__})"]

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
            if getpid() != me:
                leave(0)  # a child the cell forked came back here (sys.exit, an error): it ends
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
        elif op == Request.SNAPSHOT:
            if take_snapshot is not None and not guard:
                guard.append(take_snapshot(ns))
            reply({"n": nonce})
        elif op == Request.GUARD:
            reply({"n": nonce, "altered": altered()})
        elif op == Request.CASE:
            exercise = exercises[req["ex"]]
            func = current.get(req["ex"])
            case = next(c for c in exercise.cases if c.name == req["case"])
            changed = altered()
            start = monotonic()
            answer = {"n": nonce}
            if changed:
                answer["altered"] = changed
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
            if getpid() != me:
                leave(0)  # a child the function forked came back here: it ends
            reply(answer)
        elif op == Request.FLUSH:
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except Exception:  # noqa: BLE001, S110 - a closed or replaced stream
                    pass
            reply({"n": nonce})


class _Supervisor:
    """The trusted parent of one run: for each exercise of ``plan`` it starts a fresh learner's
    process (``spawn``, which returns its pid and this end of their private line), asks it for
    each step, writes every event to the grader's ``channel``, and kills it.

    A reply counts only when it carries the nonce of its question (``check_line`` checks the
    line's start), so what learner code writes ahead is dropped and counted (:attr:`forged`).
    The run ends through :meth:`finish`, which never returns.
    """

    def __init__(self, plan: RunPlan, channel: _Channel, spawn, exercises: dict, check_line):
        import secrets

        self.token = secrets.token_hex
        self.read, self.write, self.monotonic = os.read, os.write, time.monotonic
        self.plan = plan
        self.channel = channel
        self.spawn = spawn
        self.fd = -1
        self.learner = 0
        self.clean = lambda: None  # empties what a process could write, between exercises
        self.exercises = exercises
        self.check_line = check_line
        self.buffer = bytearray()
        self.received = 0  # bytes read from the learner's process
        self.forged = 0  # lines dropped: written ahead by learner code, or malformed
        self.skip_cases = set(plan.skip_cases)

    def finish(self, code: int) -> NoReturn:
        """Kill every process of the submission but this one, then end with ``code``.

        As PID 1 of the namespace, ``kill(-1)`` reaches every other process in it
        (a learner's ``setsid`` daemon included); without a namespace, what the
        learner started is killed by the grader (the run's cgroup, the sandbox uid).
        """
        if self.learner:
            _kill_learner(self.learner)
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
        self.learner = 0  # reaped: finish() has nothing more to kill but what it started
        for pid in _children():  # what it started
            try:
                os.kill(pid, 9)
            except OSError:
                pass
        if os.getpid() == 1:
            try:
                os.kill(-1, 9)
            except OSError:
                pass
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
        lookup = LookupState.read(found.get("state"))
        last = None
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
                last = case.name
                if answer.get("altered"):
                    channel.send(events.altered(ex_id, case.name, "before", answer.get("altered")))
                read_kind = CaseKind.read(answer.get("kind"))
                if read_kind is None or read_kind.by_grader:
                    kind, answer = CaseKind.ERROR, {"etype": "ProtocolError", "text": "malformed reply"}
                else:
                    kind = read_kind
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
        if last is not None:
            after = self.ask(op=Request.GUARD).get("altered")
            if after:
                channel.send(events.altered(ex_id, last, "after", after))

    def cell(self, index: int) -> None:
        """Run unit ``index`` of the current exercise's process (a cell, or the statements of a
        cell that the answer needs)."""
        channel, monotonic = self.channel, self.monotonic
        channel.send(events.cell_step(index))
        start = monotonic()
        answer = self.ask(op=Request.CELL, cell=index)
        error = answer.get("error")
        if isinstance(error, dict):
            channel.send(
                events.cell_error(index, error.get("etype", ""), error.get("text", ""), error.get("line"))
            )
        channel.send(events.cell_done(index, round(monotonic() - start, 4)))

    def exercise(self, ex_id: str, hello: bool) -> None:
        """Exercise ``ex_id`` in a fresh process: its handed-out cells, the snapshot, the learner's
        units, its cases; then the process and everything it started are killed."""
        plan, skip_cells = self.plan, set(self.plan.skip_cells)
        self.learner, self.fd = self.spawn(ex_id)
        self.buffer = bytearray()
        # the learner's process confined itself before any learner code: its report first
        ready = receive_ready(self.fd, self.buffer, self.died)
        if hello:
            self.channel.send(events.hello(ready.to_wire(), os.getpid()))
        handed, learner = plan.units(ex_id)
        for index, _source in handed:
            if index not in skip_cells:
                self.cell(index)
        self.ask(op=Request.SNAPSHOT)
        for index, _source in learner:
            if index not in skip_cells:
                self.cell(index)
        self.evaluate(ex_id, Phase.END if ex_id in plan.evaluate_at_end else Phase.CELL)
        # flush what the learner printed before its process ends: the grader stops reading at "done"
        self.ask(op=Request.FLUSH)
        learner_pid, self.learner = self.learner, 0
        _kill_learner(learner_pid)
        try:
            os.close(self.fd)
        except OSError:
            pass
        self.clean()

    def run(self) -> NoReturn:
        """The whole run: one fresh process per exercise (none of them sees another's state)."""
        order = [ex for ex in self.plan.exercises if ex in self.exercises]
        # an exercise whose every case already has a verdict (a rerun after a hang) is not run again
        todo = [
            ex for ex in order if any((ex, c.name) not in self.skip_cases for c in self.exercises[ex].cases)
        ] or order[:1]
        for position, ex_id in enumerate(todo):
            self.exercise(ex_id, hello=position == 0)
        if not todo:  # no exercise at all: one process still reports its confinement
            self.learner, self.fd = self.spawn("")
            self.buffer = bytearray()
            ready = receive_ready(self.fd, self.buffer, self.died)
            self.channel.send(events.hello(ready.to_wire(), os.getpid()))
            learner_pid, self.learner = self.learner, 0
            _kill_learner(learner_pid)
        self.channel.send(events.done(self.forged))
        self.finish(0)


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
