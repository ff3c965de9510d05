"""Run one call in a second Python process, on a second core, while the page goes on.

A chapter that trains independent models (a later section's runs, an ablation's
variants) need not train them one after the other: a learner's machine has two
cores and a page that sets ``torch.set_num_threads(1)`` uses one. ::

    job = second_process.start(tiny_lm.train, lm, steps=500, seed=0)
    ...                                   # the page goes on here
    lm_losses = job.result()              # waits for the second process
    lm = job.args[0]                      # the model as the second process trained it

The second process is a fresh interpreter (``sys.executable``), not ``multiprocessing``: nothing
of the caller's ``__main__`` runs again. It inherits the environment (``ATEN_CPU_CAPABILITY``,
``OMP_NUM_THREADS``) and sets the caller's torch thread count, so a call that draws its random
numbers from its own seeded generators (every training function of the chapters does) gives the
same numbers there as here, bit for bit; ``tests/chapters/test_second_process.py`` checks that.
The function, its arguments and its result travel with ``torch.save`` and ``torch.load``
(modules and tensors exactly); the function must be importable by its module and name.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

__all__ = ["Job", "call_each", "spare_core", "start"]

_CHILD = """
import sys, time, torch
torch.set_num_threads(int(sys.argv[3]))
fn, args, kwargs = torch.load(sys.argv[1], weights_only=False)
start = time.perf_counter()
value = fn(*args, **kwargs)
seconds = time.perf_counter() - start
torch.save({"value": value, "args": args, "kwargs": kwargs, "seconds": seconds}, sys.argv[2])
"""


class Job:
    """A call running in a second process (see :func:`start`).

    Attributes
    ----------
    args, kwargs
        The call's arguments; after :meth:`result`, as the call left them in the second
        process (a model it trained in place, for example).
    seconds : float or None
        After :meth:`result`: how long the call took (its process's start and imports not
        counted).
    where : str
        ``"a second process"``, or ``"this process"`` where :func:`spare_core` said no: the
        call then runs here, when :meth:`result` asks for it (the same numbers).
    """

    def __init__(self, proc, folder, args, kwargs, name, fn=None):
        self._proc, self._folder, self._name, self._fn = proc, folder, name, fn
        self.args, self.kwargs, self.seconds = args, kwargs, None
        self.where = "this process" if proc is None else "a second process"
        self._done = False
        self._value = None

    def result(self):
        """Wait for the call; its return value. Raises ``RuntimeError`` if the process failed."""
        if not self._done and self._proc is None:  # no spare core: the call runs here, now
            start = time.perf_counter()
            self._value = self._fn(*self.args, **self.kwargs)
            self.seconds, self._done = time.perf_counter() - start, True
        if not self._done:
            self._proc.wait()
            try:
                if self._proc.returncode != 0:
                    err = (Path(self._folder.name) / "stderr.txt").read_text(errors="replace")
                    raise RuntimeError(
                        f"second_process: {self._name} failed in the second process "
                        f"(exit {self._proc.returncode}):\n{err[-3000:]}"
                    )
                out = torch.load(Path(self._folder.name) / "out.pt", weights_only=False)
            finally:
                self._folder.cleanup()
            self.args, self.kwargs = tuple(out["args"]), out["kwargs"]
            self._value, self.seconds, self._done = out["value"], out["seconds"], True
        return self._value


def call_each(fn, calls) -> list:
    """``[fn(*args) for args in calls]``: several calls, one after the other, in one process.

    ``start(call_each, vit.trained, [("cnn", 0, x, y), ("mlp", 0, x, y)])`` trains two models in
    one second process (one interpreter to start, one core to fill).
    """
    return [fn(*args) for args in calls]


def spare_core() -> bool:
    """Whether a second process would find a core of its own.

    Yes where the 1-minute load average is below the core count less one half (on 2 cores:
    below 1.5; the page's own process counts in it). On a busy machine a second interpreter only
    adds its start (seconds) to the work the cores share, so :func:`start` keeps the call here.
    Where the load average cannot be read (Windows), yes if there are two cores or more.
    """
    cores = os.cpu_count() or 1
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        return cores >= 2
    return cores >= 2 and load < cores - 0.5


def start(fn, *args, **kwargs) -> Job:
    """Start ``fn(*args, **kwargs)`` in a fresh Python process; a :class:`Job` to wait on.

    Where no core is spare (:func:`spare_core`), nothing starts: the call runs in this
    process when :meth:`Job.result` asks for it, and ``Job.where`` says so.

    Parameters
    ----------
    fn : callable
        A function importable by its module and name (not one defined in a notebook).
    *args, **kwargs
        Its arguments: anything ``torch.save`` can write (tensors, modules, numbers, lists).

    Returns
    -------
    Job
    """
    if not callable(fn) or getattr(fn, "__module__", "__main__") in ("__main__", None):
        raise TypeError(f"second_process.start: fn must be an importable function, got {fn!r}")
    name = getattr(fn, "__qualname__", repr(fn))
    if not spare_core():
        return Job(None, None, args, kwargs, name, fn)
    folder = tempfile.TemporaryDirectory(prefix="attnlib-second-")
    call, out = Path(folder.name) / "call.pt", Path(folder.name) / "out.pt"
    torch.save((fn, args, kwargs), call)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in [str(Path(__file__).resolve().parents[2]), *sys.path] if p)
    argv = [sys.executable, "-c", _CHILD, str(call), str(out), str(torch.get_num_threads())]
    with open(Path(folder.name) / "stderr.txt", "wb") as err:  # a file: a pipe could fill and block
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=err)
    return Job(proc, folder, args, kwargs, name)
