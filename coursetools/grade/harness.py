"""The program that runs inside a submission's sandboxed process.

It reads its plan (the learner's code cells, where to evaluate each exercise,
the sandbox settings) as JSON from stdin, confines itself (see
:mod:`coursetools.grade.sandbox`), then executes the cells one by one in a fresh
namespace. Right after each exercise's answer cell (where the notebook's check
cell stood) it calls :func:`attnlib.checks.run_case` on the learner's function
for every case, hidden ones included, and sends each output (or the error's
type and first line) to the grader as one JSON line on the event pipe.

Nothing is judged here: the grader's own process compares the outputs with the
reference, so whatever the learner's code patches in this process (NumPy,
torch, ``attnlib.checks``) cannot change a verdict.

Nor is the answer key here (issue 12): the cases' inputs come in the plan, made
by the grader (:mod:`coursetools.grade.inputs`), and no check module
(``attnlib/checks/chNN_*.py``, with the references and the known wrong answers)
is ever imported in this process. Learner code can find this process's channel
and its secret (``gc``, frames): what it sends is checked against the run's
order of events by the grader (:class:`coursetools.grade.events.Transcript`),
and in any case it can only send outputs that it can compute without the key.
"""

from __future__ import annotations

import builtins
import json
import os
import sys
import time
import traceback


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

    def send(self, **message) -> None:
        message["k"] = self._token
        data = (self._dumps(message) + "\n").encode()
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
            code_words, skip = [], False
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
    plan = json.loads(sys.stdin.buffer.read().decode("utf-8"))
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    run(plan)


def run(plan: dict) -> None:
    """Confine this process, run the learner's cells and send the outputs; never returns."""
    from coursetools.grade import sandbox

    for key, value in plan.get("env", {}).items():
        os.environ[str(key)] = str(value)

    sandbox.set_pdeathsig()
    channel = _Channel(int(plan.pop("fd")), str(plan.pop("token")))
    # Trusted imports and references, taken before any learner code runs and before the
    # sandbox hides attnlib/checks: the checker's machinery (core: run_case, to_arrays),
    # never a chapter's check module (the grader ships the cases' inputs instead).
    try:
        import numpy  # noqa: F401  (warm import, so the first cell's time is the learner's)

        import attnlib.checks as checks_pkg
        from attnlib.checks import core
        from coursetools.grade.inputs import unship
        from coursetools.grade.wire import encode
    except Exception as exc:  # noqa: BLE001 - report and stop
        channel.send(t="fatal", message=f"harness imports failed: {type(exc).__name__}: {exc}")
        os._exit(3)
    try:
        isolation = sandbox.enter(plan["sandbox"])
    except Exception as exc:  # noqa: BLE001 - report and stop: never run unconfined by surprise
        channel.send(t="fatal", message=f"sandbox setup failed: {type(exc).__name__}: {exc}")
        os._exit(3)

    run_case = core.run_case
    not_attempted = core.NotAttempted
    # a snapshot, taken before learner code runs: the function's name and the cases
    # (a helper cell that rebinds anything cannot change what is run)
    try:
        shipped = unship(plan.pop("inputs"))
    except Exception as exc:  # noqa: BLE001 - e.g. a grader and a sandbox of different Pythons
        channel.send(t="fatal", message=f"the cases' inputs could not be read: {type(exc).__name__}: {exc}")
        os._exit(3)
    exercises = {ex_id: _Snapshot(function, cases) for ex_id, (function, cases) in shipped.items()}
    core.check = lambda *args, **kwargs: None  # check cells left in place cost nothing
    checks_pkg.check = core.check
    channel.send(t="hello", isolation=isolation, pid=os.getpid())

    skip_cells = set(plan.get("skip_cells", []))
    skip_cases = {tuple(x) for x in plan.get("skip_cases", [])}
    evaluate_after: dict[str, list[str]] = plan.get("evaluate_after", {})
    ns: dict = {"__name__": "__main__", "__builtins__": builtins, "display": _display}
    shell = _IPythonStandIn(ns)
    ns["get_ipython"] = lambda: shell
    seen_function: dict[str, object] = {}
    attempted: dict[str, bool] = {}
    monotonic = time.monotonic

    def evaluate(ex_id: str, phase: str) -> None:
        exercise = exercises[ex_id]
        name = exercise.function
        func = ns.get(name)
        seen_function[ex_id] = func
        attempted[ex_id] = False
        for case in exercise.cases:
            if (ex_id, case.name) in skip_cases:
                continue
            channel.send(t="step", kind="case", ex=ex_id, case=case.name)
            start = monotonic()
            msg = {"t": "case", "ex": ex_id, "case": case.name, "phase": phase}
            if func is None:
                msg.update(kind="missing", etype="NameError", text=f"no function named {name} is defined")
            elif not callable(func):
                msg.update(kind="error", etype="TypeError", text=f"{name} is not a function")
            else:
                try:
                    out = run_case(func, case)
                    msg.update(kind="value", value=encode(out))
                    attempted[ex_id] = True
                except not_attempted:
                    msg.update(kind="not-attempted")
                except BaseException as exc:  # noqa: BLE001 - SystemExit and KeyboardInterrupt too
                    msg.update(kind="error", etype=type(exc).__name__, text=_first_line(exc))
                    attempted[ex_id] = True
            msg["seconds"] = round(monotonic() - start, 4)
            channel.send(**msg)

    for index, source in plan["cells"]:
        if index not in skip_cells:
            cell_name = f"<cell {index}>"
            channel.send(t="step", kind="cell", cell=index)
            start = monotonic()
            try:
                code = compile(source, cell_name, "exec")
                exec(code, ns)  # noqa: S102 - running the learner's code is the point
            except BaseException as exc:  # noqa: BLE001 - SystemExit and KeyboardInterrupt too
                channel.send(
                    t="cell-error",
                    cell=index,
                    etype=type(exc).__name__,
                    text=_first_line(exc),
                    line=_error_line(exc, cell_name),
                )
            channel.send(t="cell-done", cell=index, seconds=round(monotonic() - start, 4))
        for ex_id in evaluate_after.get(str(index), []):
            evaluate(ex_id, "cell")
    for ex_id in plan.get("evaluate_at_end", []):
        evaluate(ex_id, "end")
    # An exercise that was not attempted where its check stood, but whose
    # function was redefined further down, is evaluated again at the end.
    for ex_id, exercise in exercises.items():
        if ex_id in seen_function and not attempted.get(ex_id):
            func = ns.get(exercise.function)
            if func is not None and func is not seen_function[ex_id]:
                evaluate(ex_id, "end")
    # flush what the learner printed before "done": the grader stops reading at "done"
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001, S110 - a closed or replaced stream
            pass
    channel.send(t="done")
    os._exit(0)


if __name__ == "__main__":
    main()
