"""What every side of the sandbox shares: the two types that cross into it and back, the kernel's
flags and the C library's entry points.

Imported by the three sides, each in its own process (issue 38: the sandbox split by where
its code runs), and by :mod:`coursetools.grade.sandbox.zygote`:

* :mod:`coursetools.grade.sandbox.host`: the grader's process (uids, cgroups, the command line);
* :mod:`coursetools.grade.sandbox.parent`: the sandbox's trusted parent (the new root);
* :mod:`coursetools.grade.sandbox.child`: the learner's process (limits, uid, seccomp).

Code here runs in any of them, so it assumes nothing of where it runs: no privileges, no
namespace, no particular root (``/proc`` may be missing; a call the platform refuses raises
OSError or is a no-op off Linux), and it imports no other module of the grader. The types:
:class:`SandboxConfig`, what the grader asks of a run's sandbox (in the run's plan), and
:class:`IsolationReport`, what the sandbox achieved (in the ``hello`` event); each crosses as
JSON through ``to_wire`` / ``from_wire``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_NOATIME = 1024
MS_NODIRATIME = 2048
MS_BIND = 4096
MS_MOVE = 8192
MS_REC = 16384
MS_PRIVATE = 1 << 18
MS_RELATIME = 1 << 21
MS_STRICTATIME = 1 << 24
PR_SET_PDEATHSIG = 1


class MountEntry(NamedTuple):
    """One line of ``/proc/self/mountinfo``."""

    point: str  # where it is mounted, unescaped
    fs_type: str  # "cgroup2", "cgroup", "tmpfs", ...
    options: list[str]  # this mount's options ("ro", "nosuid", ...)
    super_options: list[str]  # the file system's options (a v1 cgroup hierarchy's controllers)


def mountinfo_entries() -> list[MountEntry]:
    """The mounts of this mount namespace; OSError when ``/proc/self/mountinfo`` cannot be read.

    A line reads ``id parent major:minor root point options [optional fields] -
    fs-type source super-options``; a line without its ``" - "`` is skipped.
    """
    with open("/proc/self/mountinfo", encoding="utf-8") as fh:
        lines = fh.read().splitlines()
    entries = []
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 6 or not tail:
            continue
        super_options = tail[2].split(",") if len(tail) >= 3 else []
        entries.append(MountEntry(_unescape(fields[4]), tail[0], fields[5].split(","), super_options))
    return entries


def load_libc():
    """The C library, with ``errno`` kept for ``ctypes.get_errno``."""
    return ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)


def mount(libc, source, target, fstype, flags, data=None) -> None:
    enc = [None if s is None else os.fsencode(s) for s in (source, target, fstype, data)]
    if libc.mount(enc[0], enc[1], enc[2], ctypes.c_ulong(flags), enc[3]) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {target}: {os.strerror(err)}")


def _unescape(path: str) -> str:
    return path.encode().decode("unicode_escape") if "\\" in path else path


def under(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


def set_pdeathsig() -> None:
    """Ask Linux to SIGKILL this process when the grader dies (a no-op elsewhere)."""
    if sys.platform.startswith("linux"):
        try:
            load_libc().prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0)
        except (OSError, AttributeError):
            pass


HOME = "/home/student"


@dataclass(frozen=True)
class SandboxConfig:
    """What the grader asks of one run's sandbox (sent in the run's plan, read by the harness).

    ``mode`` (from :func:`~coursetools.grade.sandbox.host.probe`), ``scratch`` (the host
    folder the new root is mounted on), ``scratch_mb`` (its size), ``hide`` (more folders the
    run must not see), ``needed`` (folders the interpreter must read), ``uid`` (the sandbox
    uid; None: keep this one), and the learner's limits ``memory_mb``, ``nproc``, ``fsize_mb``,
    ``cpu_s`` (None or 0: unset).
    """

    scratch: str
    mode: str = "none"
    scratch_mb: int = 64
    hide: tuple[str, ...] = ()
    needed: tuple[str, ...] = ()
    uid: int | None = None
    memory_mb: int | None = None
    nproc: int | None = None
    fsize_mb: int | None = None
    cpu_s: int | None = None

    def to_wire(self) -> dict:
        return {name: getattr(self, name) for name in self.__dataclass_fields__} | {
            "hide": list(self.hide),
            "needed": list(self.needed),
        }

    @classmethod
    def from_wire(cls, data: dict) -> SandboxConfig:
        """The config a plan carries (a missing ``scratch`` raises KeyError: nothing runs)."""
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data and data[k] is not None}
        known["hide"] = tuple(str(p) for p in data.get("hide") or ())
        known["needed"] = tuple(str(p) for p in data.get("needed") or ())
        return cls(**{**known, "scratch": str(data["scratch"])})


def machine_name() -> str:
    """This kernel's architecture (``x86_64``, ``aarch64``): the numbers of its system calls."""
    return os.uname().machine


def traversable(paths) -> bool:
    """True when every folder on the way to each of ``paths`` may be entered by other users."""
    for path in paths:
        parts = Path(os.path.realpath(path)).parts
        for i in range(1, len(parts)):
            try:
                if not os.stat(str(Path(*parts[: i + 1]))).st_mode & 0o001:
                    return False
            except OSError:
                return False
    return True


@dataclass
class IsolationReport:
    """What the sandbox of one run achieved, sent to the grader in the ``hello`` event.

    Started by the trusted parent (:func:`~coursetools.grade.sandbox.parent.enter`: ``mode``,
    ``network``, ``readonly``, ``root``, ``hidden``, ``uid`` as the host sees it), completed by
    the learner's process before any learner code
    (:func:`~coursetools.grade.sandbox.child.confine`: ``limits``, ``seccomp``, the sandbox
    ``uid``), which sends it to the parent (:meth:`to_wire`); the parent reads it back
    (:meth:`from_wire`) and sends it on. The grader keeps the wire form in ``record.json``
    (``isolation``). ``errors``: what the platform refused, in words; ``opened``: folders
    covered for the interpreter's sake (:func:`~coursetools.grade.sandbox.parent.open_up`).
    """

    mode: str
    network: bool = False  # a network namespace of its own: only a loopback, which is down
    readonly: bool = False  # the new root is read-only but the home folder, /tmp, /dev/shm, /proc
    root: list[str] = field(default_factory=list)  # host paths bind-mounted into the new root
    hidden: list[str] = field(default_factory=list)  # what the grader asked to hide, absent there
    opened: list[str] = field(default_factory=list)
    uid: int | None = None  # the learner's uid as the host sees it
    limits: list[str] = field(default_factory=list)  # the resource limits set (RLIMIT_AS, ...)
    seccomp: bool = False
    errors: list[str] = field(default_factory=list)

    def to_wire(self) -> dict:
        """The JSON object of the ``hello`` event, its keys in the order of the fields."""
        return {name: getattr(self, name) for name in self.__dataclass_fields__} | {
            name: list(getattr(self, name)) for name in _REPORT_LISTS
        }

    @classmethod
    def from_wire(cls, data: dict) -> IsolationReport:
        """The report :meth:`to_wire` wrote (a missing ``mode`` raises KeyError)."""
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        lists = {name: [str(x) for x in data.get(name) or ()] for name in _REPORT_LISTS}
        return cls(**{**known, **lists, "mode": str(data["mode"])})


_REPORT_LISTS = ("root", "hidden", "opened", "limits", "errors")
