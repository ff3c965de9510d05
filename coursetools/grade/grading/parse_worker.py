"""Reading a submission's notebook in a worker process, under a time, CPU and memory limit.

Everything the grader reads from a learner's notebook before running it (the JSON,
nbformat's validation, IPython's transformer, the plan and the forbidden-call checks
of :mod:`.submission`) is learner-controlled work. It runs here, in a separate
process, never in the grader's own thread (issue 24): a notebook crafted to make
parsing slow or huge costs its own submission a limited time and leaves the class
going on.

The grader keeps one :class:`NotebookReader` per job slot, started once per grading
run and reused for every submission of that slot (starting Python and importing the
checks costs a second or more; a request costs milliseconds). Each request carries
its own limits: the worker sets its ``RLIMIT_CPU`` soft limit to the CPU time it
has used plus the request's budget, and the parent waits for the answer no longer
than the budget (plus two seconds' grace) and kills the worker otherwise. The
worker's address space is capped once, after its imports (``RLIMIT_AS``). A worker
that was killed or died is replaced before the next request. A failed request
raises :class:`ReadFailed`, whose message says what happened; the runner turns it
into an ``unreadable`` record (nothing was run, nothing scored).

The channel is the worker's standard input and output: one JSON object per message,
preceded by its length (8 bytes, big-endian). The worker's own ``print`` output and
warnings go to its standard error (discarded), never into the channel.

Run as ``python -m coursetools.grade.grading.parse_worker`` (by :class:`NotebookReader` only).
"""

from __future__ import annotations

import json
import math
import os
import resource
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from coursetools.grade.records.paths import ROOT
from coursetools.grade.records.record import Record, Status
from coursetools.grade.records.store import AnswerCache, answers_key

HEADER_BYTES = 8
MAX_REPLY_BYTES = 512 << 20  # a plan holds the notebook's code (64 MiB at most) once
START_SECONDS = 120.0  # starting a worker: Python and the checks' imports, on a loaded machine
GRACE_SECONDS = 2.0  # past its budget: the worker's CPU limit (SIGXCPU, 1 s steps) has had its chance
LABEL_CHARS = 80


class ReadFailed(Exception):
    """The worker did not answer a request: it ran past a limit, died, or could not start."""


class ReaderDidNotStart(ReadFailed):
    """No worker could be started (the grader's trouble, not the submission's)."""


@dataclass
class Reading:
    """What the worker read from one submission.

    ``unreadable``: why the file is not a notebook the grader can read (then the rest is
    empty). ``plan``: :func:`coursetools.grade.grading.submission.build_plan`'s plan (``cells``,
    ``evaluate_after``, ``evaluate_at_end`` and, when found, ``forbidden``); ``notes`` and
    ``review``: its notes and review reasons. ``labels``: ``{notebook index: {"number": n,
    "first": line}}`` for every code cell, in notebook order (the cell's number among the
    code cells, from 1, and its first non-blank line, as the learner sees it in Jupyter).
    """

    unreadable: str | None = None
    plan: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    review: list[str] = field(default_factory=list)
    labels: dict[str, dict] = field(default_factory=dict)


# --------------------------------------------------------------------------- the channel


def _pipes(proc: subprocess.Popen) -> tuple[IO[bytes], IO[bytes]]:
    """The worker's stdin and stdout: it is always started with both as pipes."""
    if proc.stdin is None or proc.stdout is None:
        raise ValueError("the notebook reader was started without its pipes")
    return proc.stdin, proc.stdout


def _encode(message: dict) -> bytes:
    body = json.dumps(message, ensure_ascii=False).encode("utf-8", "surrogatepass")
    return len(body).to_bytes(HEADER_BYTES, "big") + body


def _send(fd: int, message: dict | bytes) -> None:
    data = message if isinstance(message, bytes) else _encode(message)
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _read_exact(fd: int, size: int, deadline: float | None) -> bytes | None:
    """``size`` bytes from ``fd``; None at end of file; TimeoutError past ``deadline``."""
    chunks, missing = [], size
    while missing:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError
        chunk = os.read(fd, min(missing, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        missing -= len(chunk)
    return b"".join(chunks)


def _receive(fd: int, deadline: float | None = None, limit: int = MAX_REPLY_BYTES) -> dict | None:
    """The next message on ``fd``; None at end of file. ValueError for one over ``limit`` bytes."""
    header = _read_exact(fd, HEADER_BYTES, deadline)
    if header is None:
        return None
    size = int.from_bytes(header, "big")
    if size > limit:
        raise ValueError(f"a message of {size} bytes (at most {limit})")
    body = _read_exact(fd, size, deadline)
    if body is None:
        return None
    message = json.loads(body.decode("utf-8", "surrogatepass"))
    if not isinstance(message, dict):
        raise ValueError("a message that is not a JSON object")
    return message


# --------------------------------------------------------------------------- the grader's side


def read_request(path: Path, assignment) -> dict:
    """The request that asks the worker to read the notebook at ``path`` and plan it for ``assignment``."""
    return {
        "op": "read",
        "path": str(path),
        "assignment": {
            "path": str(assignment.path),
            "points": dict(assignment.points),
            "functions": dict(assignment.functions),
            "forbidden": {k: list(v) for k, v in assignment.forbidden.items()},
            "digest": assignment.digest,
        },
    }


class NotebookReader:
    """One worker process that reads notebooks for one job slot (see the module's docstring).

    Parameters
    ----------
    memory_mb : int
        The address space the worker may add to what its imports took (``RLIMIT_AS``).
    command : list of str, optional
        The worker's command line; by default ``python -m coursetools.grade.grading.parse_worker``
        with the grader's own interpreter (a test may start a worker with a slower parser).

    Use it as a context manager, or call :meth:`close`. Not for two threads at once: a job
    slot grades one submission at a time.
    """

    def __init__(self, memory_mb: int = 2048, command: list[str] | None = None) -> None:
        if isinstance(memory_mb, bool) or not isinstance(memory_mb, int) or memory_mb <= 0:
            raise ValueError(f"memory_mb must be a positive integer, got {memory_mb!r}")
        self.memory_mb = memory_mb
        self.command = (
            list(command) if command else [sys.executable, "-m", "coursetools.grade.grading.parse_worker"]
        )
        self._proc: subprocess.Popen | None = None
        self._ready = False
        self.started = 0  # workers started so far (a replaced worker counts again)

    @property
    def pid(self) -> int | None:
        """The running worker's process id (None when none is running)."""
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    def start(self) -> None:
        """Start the worker without waiting for it (its imports overlap the grader's own start)."""
        if self._proc is not None and self._proc.poll() is None:
            return
        self._discard()
        env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1")
        self._proc = subprocess.Popen(
            [*self.command, str(self.memory_mb)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=str(ROOT),
            env=env,
            close_fds=True,
        )
        self._ready = False
        self.started += 1

    def read(self, path: Path, assignment, seconds: float, deadline: float | None = None) -> Reading:
        """Read the notebook at ``path`` and build its plan for ``assignment``, within ``seconds``
        (and before ``deadline``, a :func:`time.monotonic` time, when given: the submission's
        ``--timeout-total``, which the grace for the worker's CPU limit never extends).

        Raises :class:`ReadFailed` when the worker runs past ``seconds`` (wall or CPU), past its
        memory, dies, or cannot start; the worker is then replaced before the next request.
        """
        reply = self._call(read_request(path, assignment), seconds, deadline)
        if reply.get("unreadable") is not None:
            return Reading(unreadable=str(reply["unreadable"]))
        return Reading(None, reply["plan"], reply["notes"], reply["review"], reply["labels"])

    def forbidden_at(
        self, cells: list, cell_index: int, names, ex_id: str, seconds: float
    ) -> tuple[list[str], list[str]]:
        """:func:`coursetools.grade.grading.submission.forbidden_at` in the worker: the names found, the
        review reasons. Raises :class:`ReadFailed` like :meth:`read`."""
        upto = [[i, s] for i, s in cells if i <= cell_index]
        request = {
            "op": "forbidden",
            "cells": upto,
            "index": cell_index,
            "names": list(names),
            "ex_id": ex_id,
        }
        reply = self._call(request, seconds)
        return [str(n) for n in reply["found"]], [str(r) for r in reply["review"]]

    def answers(
        self, path: Path, digest: str | None, functions: dict, questions: list[str], seconds: float
    ) -> dict:
        """A graded notebook's answers, read in the worker (:func:`answers_of`): ``{"normal":
        {exercise: normal form or None}, "written": {question: text}}``, or ``{"skipped": why}``.
        Raises :class:`ReadFailed` like :meth:`read`."""
        request = {
            "op": "answers",
            "path": str(path),
            "digest": digest,
            "functions": dict(functions),
            "questions": list(questions),
        }
        reply = self._call(request, seconds)
        if reply.get("skipped"):
            return {"skipped": str(reply["skipped"])[:200]}
        normal = reply["normal"] if isinstance(reply.get("normal"), dict) else {}
        written = reply["written"] if isinstance(reply.get("written"), dict) else {}
        return {
            "normal": {str(k): v if isinstance(v, str) else None for k, v in normal.items()},
            "written": {str(k): str(v) for k, v in written.items()},
        }

    def close(self) -> None:
        """Stop the worker (closing its input ends it; one that does not end is killed)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        stdin, stdout = _pipes(proc)
        try:
            stdin.close()
            proc.wait(timeout=2)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()
        stdout.close()

    def __enter__(self) -> NotebookReader:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _call(self, request: dict, seconds: float, deadline: float | None = None) -> dict:
        if not seconds > 0:
            raise ReadFailed("no time was left to read the notebook")
        self._wait_ready()
        if deadline is not None:
            seconds = min(seconds, deadline - time.monotonic())
            if not seconds > 0:
                raise ReadFailed("no time was left to read the notebook")
        wait_until = time.monotonic() + seconds + GRACE_SECONDS
        if deadline is not None:
            wait_until = min(wait_until, deadline)
        request["cpu_s"] = seconds
        proc = self._running()
        stdin, stdout = _pipes(proc)
        try:
            _send(stdin.fileno(), request)
        except OSError:
            self._discard()
            raise ReadFailed(f"the notebook reader {self._ended(proc)} before it was asked") from None
        try:
            reply = _receive(stdout.fileno(), wait_until)
        except TimeoutError:
            self._discard()
            raise ReadFailed(
                f"reading the notebook took more than {seconds:g} s: the grader stopped it"
            ) from None
        except (ValueError, UnicodeDecodeError) as exc:
            self._discard()
            raise ReadFailed(f"the notebook reader's answer could not be read ({exc})") from None
        if reply is None:
            ended = self._ended(proc)
            self._discard()
            raise ReadFailed(f"the notebook reader {ended} while reading this notebook")
        if not reply.get("ok"):
            raise ReadFailed(f"the notebook reader failed: {str(reply.get('error'))[:200]}")
        return reply

    def _wait_ready(self) -> None:
        self.start()
        if self._ready:
            return
        proc = self._running()
        try:
            hello = _receive(_pipes(proc)[1].fileno(), time.monotonic() + START_SECONDS, limit=1 << 10)
        except (TimeoutError, ValueError, UnicodeDecodeError):
            hello = None
        if not hello or not hello.get("ready"):
            ended = self._ended(proc) if proc.poll() is not None else "did not start in time"
            self._discard()
            raise ReaderDidNotStart(f"the notebook reader could not start: it {ended}")
        self._ready = True

    def _running(self) -> subprocess.Popen:
        """The worker :meth:`start` started (it raises when it cannot)."""
        if self._proc is None:
            raise ReaderDidNotStart("the notebook reader is not running")
        return self._proc

    @staticmethod
    def _ended(proc: subprocess.Popen) -> str:
        """How the worker ended, in words (``died (SIGXCPU: its CPU limit)``)."""
        try:
            code = proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            return "stopped answering"
        if code < 0:
            why = ": its CPU limit" if -code == signal.SIGXCPU else ""
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return f"died ({name}{why})"
        return f"exited with code {code}"

    def _discard(self) -> None:
        """Kill the worker in place (it overran, died or spoke out of turn); the next call starts one."""
        proc, self._proc, self._ready = self._proc, None, False
        if proc is None:
            return
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        for pipe in _pipes(proc):
            try:
                pipe.close()
            except OSError:
                pass


ANSWER_SECONDS = 10.0  # reading one graded notebook's answers again (ms for a notebook of the course)
ANSWER_MEMORY_MB = 1024
# reading a class's notebooks again, in all, per command (what was read is cached in OUT: the next
# command goes on from there); a command never waits longer than this for the similarity pass
CLASS_ANSWER_SECONDS = 60.0


def read_answers(
    wanted: list[tuple[str, str, str | None]],
    functions: dict[str, str],
    questions: Sequence[str] = (),
    seconds: float = ANSWER_SECONDS,
    memory_mb: int = ANSWER_MEMORY_MB,
    budget: float | None = None,
    on_read=None,
) -> tuple[dict[str, dict], list[str]]:
    """The answers of graded notebooks, for the report's similarity pass and ``manual``.

    ``wanted`` holds ``(student, path, digest)`` of the records whose notebook the grader
    read (never an unreadable one). Each is read in one :class:`NotebookReader` (started only
    when there is one to read), under ``seconds`` of CPU and wall time and the worker's memory
    cap, opened with ``O_NOFOLLOW`` (a symbolic link is never followed), at most the grader's
    notebook size, and only when its bytes still have the record's digest. ``budget``: the
    seconds all of them may take (the rest is skipped, with one line that says so);
    ``on_read(student, answers)`` is called for each notebook read. Returns ``{student:
    {"normal", "written"}}`` and what was skipped, and why (one line per learner)."""
    results: dict[str, dict] = {}
    problems: list[str] = []
    if not wanted:
        return results, problems
    end = None if budget is None else time.monotonic() + budget
    with NotebookReader(memory_mb) as reader:
        for done, (student, path, digest) in enumerate(wanted):
            each = seconds if end is None else min(seconds, end - time.monotonic())
            if each <= 0:
                left = len(wanted) - done
                problems.append(
                    f"{left} notebook{'' if left == 1 else 's'} not read again: the class's "
                    f"{budget:g} s for reading answers again was spent (what was read is kept in "
                    "OUT; run the command again to go on)"
                )
                break
            try:
                got = reader.answers(Path(path), digest, functions, list(questions), each)
            except ReaderDidNotStart as exc:
                problems.append(f"answers not read again: {exc}")
                break
            except ReadFailed as exc:
                if each < seconds:  # cut by the class's budget, not its own limit: tried next time
                    problems.append(f"{student}: answers not read again ({exc})")
                    continue
                # past its own limits (time, memory): kept as skipped too, so that no later command
                # spends its time on this notebook again; regrading it (a new digest) tries again
                got = {"skipped": str(exc)[:200]}
            if on_read is not None:  # the answers, or why the file was not read (it stays so)
                on_read(student, got)
            if "skipped" in got:
                problems.append(f"{student}: answers not read again ({got['skipped']})")
                continue
            results[student] = got
    return results, problems


# the records whose notebook the grader read (and ran): only theirs are read again
READ_STATUSES = frozenset({Status.GRADED, Status.NEEDS_REVIEW, Status.TIMEOUT, Status.KERNEL_DIED})


def read_record_answers(
    records: Iterable[Record],
    functions: dict[str, str],
    questions: Sequence[str] = (),
    out: Path | None = None,
    budget: float | None = CLASS_ANSWER_SECONDS,
) -> tuple[dict[str, dict], list[str]]:
    """The answers of the records' notebooks, read again in the limited reader worker
    (:func:`read_answers`: time, memory and size limits, ``O_NOFOLLOW``, the record's digest):
    only records the grader read (:data:`READ_STATUSES`) of a ``.ipynb`` file; an unreadable
    record is never opened. With ``out``, answers are kept in ``OUT/.coursetools-answers.json``
    (:class:`~coursetools.grade.records.store.AnswerCache`, by the notebook's digest and the assignment's)
    and a notebook already read is not read again; ``budget`` bounds the reading of the rest."""
    cache = AnswerCache.load(out) if out is not None else None
    functions = {str(k): str(v) for k, v in functions.items()}
    results: dict[str, dict] = {}
    problems_before: list[str] = []
    wanted = []
    keys: dict[str, str] = {}
    for r in records:
        if r.status not in READ_STATUSES or not str(r.file or "").endswith(".ipynb"):
            continue
        if cache is not None and r.digest:
            keys[str(r.student)] = key = answers_key(
                str(r.student), r.digest, str(r.assignment or ""), functions, list(questions)
            )
            found = cache.get(key)
            if found is not None and "skipped" in found:  # skipped before: not tried again
                problems_before.append(f"{r.student}: answers not read again ({found['skipped']})")
                continue
            if found is not None:
                results[str(r.student)] = found
                continue
        wanted.append((str(r.student), str(r.file or ""), r.digest))

    def keep(student: str, got: dict) -> None:
        if cache is not None and student in keys:
            cache.put(keys[student], got)

    read, problems = read_answers(wanted, functions, questions, budget=budget, on_read=keep)
    results.update(read)
    problems = problems_before + problems
    if cache is not None:
        try:
            cache.save()
        except OSError as exc:
            problems.append(f"the answers read could not be kept for the next command ({exc.strerror})")
    return results, problems


# --------------------------------------------------------------------------- the worker's side


def answers_of(path: str, digest: str | None, functions: dict, questions: list[str]) -> dict:
    """The worker's side of :meth:`NotebookReader.answers`."""
    import hashlib
    import stat

    from coursetools.grade.grading import similarity, submission
    from coursetools.grade.records.written import MAX_ANSWER
    from coursetools.grade.records.written import answers as written_answers

    limit = submission.MAX_NOTEBOOK_BYTES
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        return {"ok": True, "skipped": f"not opened: {exc.strerror}"}
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fh.fileno())
        if not stat.S_ISREG(info.st_mode):
            return {"ok": True, "skipped": "not a plain file"}
        if info.st_size > limit:
            return {"ok": True, "skipped": f"larger than {limit} bytes"}
        data = fh.read(limit + 1)
    if len(data) > limit:
        return {"ok": True, "skipped": f"larger than {limit} bytes"}
    if digest and hashlib.sha256(data).hexdigest() != digest:
        return {"ok": True, "skipped": "the file changed since it was graded"}
    try:
        raw = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError):
        return {"ok": True, "skipped": "not a notebook"}
    del data
    if not isinstance(raw, dict):
        return {"ok": True, "skipped": "not a notebook"}
    functions = {str(k): str(v) for k, v in functions.items()}
    normal = {ex: similarity.normalise(src) for ex, src in similarity.sources_of(raw, functions).items()}
    written: dict[str, str] = {}
    if questions:
        try:
            found = written_answers(raw)
        except (AttributeError, TypeError, ValueError):
            found = {}
        written = {q: str(found[q])[:MAX_ANSWER] for q in questions if q in found}
    return {"ok": True, "normal": normal, "written": written}


def code_cell_labels(nb) -> dict[str, dict]:
    """:attr:`Reading.labels` of the notebook ``nb``: ``{notebook index: {"number": n, "first":
    line}}`` for every code cell (its number among the code cells, from 1, and its first
    non-blank line, at most :data:`LABEL_CHARS` characters)."""
    labels, number = {}, 0
    for index, cell in enumerate(nb.cells):
        if cell.get("cell_type") != "code":
            continue
        number += 1
        source = cell.get("source", "")
        if isinstance(source, list):
            source = "".join(str(s) for s in source)
        first = next((ln.strip() for ln in str(source).splitlines() if ln.strip()), "")
        labels[str(index)] = {"number": number, "first": first[:LABEL_CHARS]}
    return labels


def _handle(request: dict) -> dict:
    from coursetools.grade.grading import submission

    if request.get("op") == "read":
        spec = request["assignment"]
        assignment = submission.Assignment(
            Path(spec["path"]),
            {str(k): float(v) for k, v in spec["points"].items()},
            {str(k): str(v) for k, v in spec["functions"].items()},
            {str(k): tuple(v) for k, v in spec["forbidden"].items()},
            str(spec["digest"]),
        )
        try:
            nb = submission.read_notebook(Path(request["path"]))
        except submission.Unreadable as exc:
            return {"ok": True, "unreadable": str(exc)}
        plan, notes, review = submission.build_plan(nb, assignment)
        labels = code_cell_labels(nb)
        return {"ok": True, "plan": plan, "notes": notes, "review": review, "labels": labels}
    if request.get("op") == "answers":
        return answers_of(
            str(request["path"]),
            request.get("digest"),
            dict(request.get("functions") or {}),
            [str(q) for q in request.get("questions") or []],
        )
    if request.get("op") == "forbidden":
        reasons: list[str] = []
        cells = [(int(i), str(s)) for i, s in request["cells"]]
        found = submission.forbidden_at(
            cells, int(request["index"]), request["names"], reasons, request["ex_id"]
        )
        return {"ok": True, "found": list(found), "review": reasons}
    return {"ok": False, "error": f"unknown request {str(request.get('op'))[:40]!r}"}


def _address_space() -> int:
    """This process's address space in bytes (``/proc/self/statm``)."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def _cpu_used() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _checks_without_the_core() -> None:
    """Make ``attnlib.checks.rules`` importable without attnlib's core.

    The forbidden-call check reads syntax trees with the standard library alone, but
    importing it through its packages runs ``attnlib/__init__.py``, which imports torch:
    a second or more of CPU per worker, while the grader's zygotes import it too. The
    worker registers the two packages as empty modules over their real folders, so only
    the module itself runs (the worker never needs attnlib's core; a module that did would
    fail to import, and every request would say so).
    """
    import importlib.util
    import types

    if "attnlib" in sys.modules:
        return
    spec = importlib.util.find_spec("attnlib")
    if spec is None or not spec.submodule_search_locations:
        return
    for name, folders in (
        ("attnlib", list(spec.submodule_search_locations)),
        ("attnlib.checks", [os.path.join(f, "checks") for f in spec.submodule_search_locations]),
    ):
        package = types.ModuleType(name)
        package.__path__ = folders
        sys.modules[name] = package


def serve(memory_mb: int) -> None:
    """The worker: answer requests on standard input until it closes."""
    # Ctrl-C in the grader's terminal reaches this process group too: the grader stops its
    # workers itself (closing their input), so a reading is never cut short by it
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    channel_in, channel_out = os.dup(0), os.dup(1)
    os.dup2(2, 1)  # a stray print (nbformat, IPython) goes to standard error, not into the channel
    sys.stdout = sys.stderr
    _checks_without_the_core()
    from attnlib.checks import rules  # noqa: F401 - the imports the requests need, before the limits
    from coursetools.grade.grading import submission

    submission._ipython_transformer()

    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a worker killed by its CPU limit leaves no core
    cap = _address_space() + (memory_mb << 20)
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    _, cpu_hard = resource.getrlimit(resource.RLIMIT_CPU)
    _send(channel_out, {"ready": True})
    while True:
        request = _receive(channel_in, limit=1 << 31)
        if request is None:
            return
        budget = math.ceil(_cpu_used() + float(request.get("cpu_s", 30.0)))  # whole seconds
        if cpu_hard != resource.RLIM_INFINITY:
            budget = min(budget, cpu_hard)
        resource.setrlimit(resource.RLIMIT_CPU, (budget, cpu_hard))
        try:
            reply = _encode(_handle(request))
        except (MemoryError, RecursionError) as exc:
            reply = _encode({"ok": False, "error": f"{type(exc).__name__} while reading the notebook"})
        except Exception as exc:  # noqa: BLE001 - any failure is the submission's answer, not the worker's end
            reply = _encode({"ok": False, "error": f"{type(exc).__name__}: {exc}"[:300]})
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_hard, cpu_hard))
        _send(channel_out, reply)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    serve(int(args[0]) if args else 2048)
    return 0


if __name__ == "__main__":
    sys.exit(main())
