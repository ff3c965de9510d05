"""Run one call in a second Python process, on a second core, while the page goes on.

A chapter that trains independent models (a later section's runs, an ablation's
variants) need not train them one after the other: a learner's machine has two
cores and a page that sets ``torch.set_num_threads(1)`` uses one. ::

    job = second_process.start(tiny_lm.train, lm, steps=500, seed=0)
    ...                                   # the page goes on here
    lm_losses = job.result()              # waits for the second process
    lm = job.args[0]                      # the model as the second process trained it
    job.where, job.reason                 # where it ran, and why there

The second process is a fresh interpreter (``sys.executable``), not ``multiprocessing``: nothing
of the caller's ``__main__`` runs again. It inherits the environment (``ATEN_CPU_CAPABILITY``,
``OMP_NUM_THREADS``) and sets the caller's torch thread count, so a call that draws its random
numbers from its own seeded generators (every training function of the chapters does) gives the
same numbers there as here, bit for bit; ``tests/chapters/test_second_process.py`` checks that.
The function, its arguments and its result travel with ``torch.save`` and ``torch.load``
(modules and tensors exactly); the function must be importable by its module and name. The
second process finds attnlib, the function's own module, the interpreter's packages, the
``PYTHONPATH`` it was given and the current folder; nothing else of this process's ``sys.path``.

A second process starts only where a core is spare (:func:`spare_core`); elsewhere the call
runs in this process when :meth:`Job.result` asks for it: the same numbers, one after the other.

Switching it off: set the environment variable ``ATTNLIB_SECOND_PROCESS=0`` (or ``false``,
``no``, ``off``, in any case) before :func:`start` and no second process starts: every call
runs in this process, as on a busy machine.

The second process belongs to its :class:`Job`. It ends (and its temporary folder goes) when
the job is cancelled (:meth:`Job.cancel`), when waiting for it is interrupted (the kernel's
interrupt while :meth:`Job.result` waits), when the job is dropped (a cell that made it runs
again) and when this interpreter exits. It ignores a keyboard interrupt of its own, so
interrupting another cell leaves it running.
"""

from __future__ import annotations

import math
import os
import shutil
import site
import subprocess
import sys
import sysconfig
import tempfile
import time
import weakref
from pathlib import Path

import torch

__all__ = [
    "CGROUP_ROOT",
    "SWITCH",
    "Job",
    "call_each",
    "cgroup_cpu_limit",
    "spare_core",
    "spare_core_with_reason",
    "start",
    "usable_cpus",
]

SWITCH = "ATTNLIB_SECOND_PROCESS"  # the environment variable that switches second processes off
_OFF = ("0", "false", "no", "off")

CGROUP_ROOT = Path("/sys/fs/cgroup")  # where a container (Binder) sees its own cgroup's files

# The folder that holds the attnlib package: the second process imports attnlib from here.
_ATTNLIB_ROOT = Path(__file__).resolve().parents[2]

_CHILD = """
import signal, sys, time, torch
signal.signal(signal.SIGINT, signal.SIG_IGN)  # the caller's Job ends this process, not Ctrl-C
torch.set_num_threads(int(sys.argv[3]))
fn, args, kwargs = torch.load(sys.argv[1], weights_only=False)
start = time.perf_counter()
value = fn(*args, **kwargs)
seconds = time.perf_counter() - start
torch.save({"value": value, "args": args, "kwargs": kwargs, "seconds": seconds}, sys.argv[2])
"""


def _end(proc, folder) -> None:
    """End ``proc`` if it still runs (terminate, wait briefly, kill) and remove ``folder``.

    A function of the process and the folder, not of the :class:`Job`: ``weakref.finalize``
    calls it after the job is gone.
    """
    if proc is not None and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


class Job:
    """A call running in a second process, or waiting to run in this one (see :func:`start`).

    Attributes
    ----------
    args, kwargs
        The call's arguments; after :meth:`result`, as the call left them in the second
        process (a model it trained in place, for example).
    seconds : float or None
        After :meth:`result`: how long the call took (its process's start and imports not
        counted).
    where : str
        ``"a second process"``, or ``"this process"`` where no second process started: the
        call then runs here, when :meth:`result` asks for it (the same numbers).
    reason : str
        Why the call runs where it runs, for the reader: ``"a core was spare (load 0.40 of 2
        usable CPUs)"``, ``"no core was spare (load 1.70 of 2 usable CPUs)"``, ``"only 1 usable
        CPU"``, ``"ATTNLIB_SECOND_PROCESS=0 switches the second process off"``.
    """

    def __init__(self, proc, folder, args, kwargs, name, fn=None, reason=""):
        self._proc, self._folder, self._name, self._fn = proc, folder, name, fn
        self.args, self.kwargs, self.seconds = args, kwargs, None
        self.where = "this process" if proc is None else "a second process"
        self.reason = reason
        self._done = False
        self._value = None
        self._ended: str | None = None  # why there is no value to give: result() raises it
        # Ends the process and removes the folder when this job is dropped or the interpreter exits.
        self._finalizer = weakref.finalize(self, _end, proc, folder)

    def result(self):
        """Wait for the call; its return value.

        Raises ``RuntimeError`` if the second process failed (with its error), or if the run was
        cancelled or interrupted: it must then be started again. An interrupt (or any other
        exception) while this waits ends the second process, removes its folder and is raised.
        """
        if self._ended is not None:
            raise RuntimeError(self._ended)
        if not self._done and self._proc is None:  # no second process: the call runs here, now
            start = time.perf_counter()
            try:
                self._value = self._fn(*self.args, **self.kwargs)
            except BaseException as error:
                self._ended = (
                    f"second_process: the call to {self._name} stopped in this process "
                    f"({type(error).__name__}) and may have changed its arguments part way: "
                    "start it again with second_process.start"
                )
                raise
            self.seconds, self._done = time.perf_counter() - start, True
        if not self._done:
            try:
                self._proc.wait()
            except BaseException:  # KeyboardInterrupt from the kernel, for one
                self._ended = (
                    f"second_process: the run of {self._name} was interrupted while result() "
                    "waited, and its second process ended: start it again with second_process.start"
                )
                self._finalizer()
                raise
            try:
                folder = Path(self._folder)
                if self._proc.returncode != 0:
                    err = (folder / "stderr.txt").read_text(errors="replace")
                    self._ended = (
                        f"second_process: {self._name} failed in the second process "
                        f"(exit {self._proc.returncode}):\n{err[-3000:]}"
                    )
                    raise RuntimeError(self._ended)
                try:
                    out = torch.load(folder / "out.pt", weights_only=False)
                except Exception as error:  # a result that cannot travel back, for one
                    self._ended = (
                        f"second_process: the result of {self._name} could not be read back from "
                        f"the second process ({type(error).__name__}: {error})"
                    )
                    raise RuntimeError(self._ended) from error
            finally:
                self._finalizer()  # the process has ended: this removes the folder
            self.args, self.kwargs = tuple(out["args"]), out["kwargs"]
            self._value, self.seconds, self._done = out["value"], out["seconds"], True
        return self._value

    def cancel(self) -> None:
        """Give up the run: end its second process (if it still runs) and remove its folder.

        A later :meth:`result` raises ``RuntimeError``. A run that :meth:`result` already
        finished keeps its value (nothing is left to end).
        """
        if self._done or self._ended is not None:
            return
        self._ended = (
            f"second_process: the run of {self._name} was cancelled: start it again with second_process.start"
        )
        self._finalizer()


def call_each(fn, calls) -> list:
    """``[fn(*args) for args in calls]``: several calls, one after the other, in one process.

    ``start(call_each, vit.trained, [("cnn", 0, x, y), ("mlp", 0, x, y)])`` trains two models in
    one second process (one interpreter to start, one core to fill).
    """
    return [fn(*args) for args in calls]


def cgroup_cpu_limit(root=None) -> float | None:
    """The CPUs that the cgroup quota under ``root`` allows this process, or None for no quota.

    cgroup v2 (``root/cpu.max``: ``"max 100000"`` is no quota, ``"200000 100000"`` two CPUs) is read
    first, then cgroup v1 (``cpu.cfs_quota_us`` over ``cpu.cfs_period_us`` in ``root/cpu`` or
    ``root/cpu,cpuacct``; a quota of -1 is none). A file that is missing or unreadable counts as no
    quota. ``root`` defaults to :data:`CGROUP_ROOT`.
    """
    root = Path(CGROUP_ROOT if root is None else root)
    try:
        quota, period = (root / "cpu.max").read_text().split()[:2]
        return None if quota == "max" else _ratio(int(quota), int(period))
    except (OSError, ValueError):
        pass
    for folder in (root / "cpu", root / "cpu,cpuacct"):
        try:
            quota = int((folder / "cpu.cfs_quota_us").read_text())
            period = int((folder / "cpu.cfs_period_us").read_text())
        except (OSError, ValueError):
            continue
        return None if quota < 0 else _ratio(quota, period)
    return None


def _ratio(quota: int, period: int) -> float | None:
    return quota / period if quota > 0 and period > 0 else None


def usable_cpus(root=None) -> int:
    """How many CPUs this process may use: at least 1.

    The CPUs its affinity mask allows (``os.sched_getaffinity``; elsewhere ``os.cpu_count()``),
    fewer where a cgroup quota allows fewer (:func:`cgroup_cpu_limit`, rounded down): in a container
    (Binder) ``os.cpu_count()`` counts the host's CPUs, not the container's.
    """
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # no affinity masks here (Windows, macOS)
        cpus = os.cpu_count() or 1
    limit = cgroup_cpu_limit(root)
    if limit is not None:
        cpus = min(cpus, math.floor(limit))
    return max(cpus, 1)


def spare_core_with_reason() -> tuple[bool, str]:
    """:func:`spare_core`, and why: ``(True, "a core was spare (load 0.40 of 2 usable CPUs)")``."""
    cpus = usable_cpus()
    if cpus < 2:
        return False, "only 1 usable CPU"
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):  # Windows: no load average
        return True, f"{cpus} usable CPUs (the machine's load cannot be read here, so it was not checked)"
    if load < cpus - 0.5:
        return True, f"a core was spare (load {load:.2f} of {cpus} usable CPUs)"
    return False, f"no core was spare (load {load:.2f} of {cpus} usable CPUs)"


def spare_core() -> bool:
    """Whether a second process would find a core of its own.

    Yes where this process may use two CPUs or more (:func:`usable_cpus`: its affinity mask and
    cgroup quota, not the host's CPU count) and the 1-minute load average is below those CPUs less
    one half (on 2: below 1.5; the page's own process counts in it). On a busy machine a second
    interpreter only adds its start (seconds) to the work the cores share, so :func:`start` keeps
    the call here. The load average is the machine's: in a container it counts the host's other
    work too, so a shared host says no more often (the call then runs here, with the same numbers).
    Where no load average can be read (Windows) the load is unknown: yes with two usable CPUs or
    more, whatever else runs. :func:`spare_core_with_reason` says why.
    """
    return spare_core_with_reason()[0]


def _switched_off() -> str | None:
    """The value of :data:`SWITCH` where it switches second processes off, else None."""
    value = os.environ.get(SWITCH)
    return value if value is not None and value.strip().lower() in _OFF else None


def _child_pythonpath(fn) -> str:
    """The second process's ``PYTHONPATH``: the folder that holds attnlib; the folder that holds
    ``fn``'s module or package where a fresh interpreter would not find it (a folder this process
    added to ``sys.path``); then the ``PYTHONPATH`` this process was given. The interpreter adds
    its own packages (site-packages) and the current folder itself."""
    roots = [str(_ATTNLIB_ROOT)]
    own = {Path(p).resolve() for p in sysconfig.get_paths().values()}
    own |= {Path(site.getusersitepackages()).resolve(), Path.cwd().resolve()}
    for folder in _module_folders(fn.__module__):
        if folder not in own:
            roots.append(str(folder))
    roots += [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return os.pathsep.join(dict.fromkeys(roots))


def _module_folders(module_name: str) -> list[Path]:
    """The folders on ``sys.path`` that this process imported ``module_name``'s top package from."""
    top = sys.modules.get(module_name.partition(".")[0])
    location = getattr(top, "__file__", None)
    if location is None:  # a built-in module, or a namespace package (its __path__ has its parts)
        return [Path(p).resolve().parent for p in getattr(top, "__path__", ())]
    location = Path(location).resolve()
    return [location.parent.parent if location.stem == "__init__" else location.parent]


def start(fn, *args, **kwargs) -> Job:
    """Start ``fn(*args, **kwargs)`` in a fresh Python process; a :class:`Job` to wait on.

    Where no core is spare (:func:`spare_core`), or :data:`SWITCH` is ``0`` (see the module's
    text), nothing starts: the call runs in this process when :meth:`Job.result` asks for it,
    and ``Job.where`` and ``Job.reason`` say so.

    Parameters
    ----------
    fn : callable
        A function importable by its module and name (not one defined in a notebook).
    *args, **kwargs
        Its arguments: anything ``torch.save`` can write (tensors, modules, numbers, lists) whose
        classes the second process can import (attnlib's, torch's).

    Returns
    -------
    Job
    """
    if not callable(fn) or getattr(fn, "__module__", "__main__") in ("__main__", None):
        raise TypeError(f"second_process.start: fn must be an importable function, got {fn!r}")
    name = getattr(fn, "__qualname__", repr(fn))
    switch = _switched_off()
    if switch is not None:
        spare, reason = False, f"{SWITCH}={switch.strip()} switches the second process off"
    else:
        spare, reason = spare_core_with_reason()
    if not spare:
        return Job(None, None, args, kwargs, name, fn, reason)
    folder = tempfile.mkdtemp(prefix="attnlib-second-")
    call, out = Path(folder) / "call.pt", Path(folder) / "out.pt"
    try:
        torch.save((fn, args, kwargs), call)
        env = {**os.environ, "PYTHONPATH": _child_pythonpath(fn)}
        argv = [sys.executable, "-c", _CHILD, str(call), str(out), str(torch.get_num_threads())]
        with open(Path(folder) / "stderr.txt", "wb") as err:  # a file: a pipe could fill and block
            proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=err)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return Job(proc, folder, args, kwargs, name, reason=reason)
