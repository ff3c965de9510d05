"""The grader's side of the sandbox: how a run is started, grouped and cleaned up after.

Runs in the grader's own process (and, for :func:`kill_uid`, a short fork of it), never
inside a sandbox: it may assume the host's file system, its ``/proc`` and ``PATH``, and the
grader's privileges, whatever they are (root gets sandbox uids and cgroups; a grader that is
not root gets neither, and every function here then does what it can, or nothing). It
decides how the sandbox is started: :func:`probe` finds the strongest isolation that works
here, :func:`command` the command line (``setpriv --pdeathsig KILL unshare --mount --net
--ipc --pid --fork --kill-child --mount-proc`` where that works: Linux, root or
unprivileged user namespaces; else a plain child process), :func:`describe` says in words
what that amounts to. :func:`allocate_uids` claims a block of sandbox uids per grader;
:class:`MemoryGroup` bounds a job slot's memory, :class:`RunGroup` puts every process of a
run in its own cgroups and kills them all after it, :func:`kill_uid` kills what is left on
the sandbox uid, :func:`sweep_memory_groups` what graders killed with ``kill -9`` left.

Its callers (:mod:`coursetools.grade.grading.process`, :mod:`coursetools.grade.batch`) reach it
through :mod:`coursetools.grade.sandbox.api`; the sandbox's own code never imports it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from typing import Literal

from coursetools.grade.sandbox.shared import MountEntry, mountinfo_entries, traversable, under

UNSHARE_FLAGS = ["--mount", "--net", "--ipc", "--pid", "--fork", "--kill-child", "--mount-proc"]
# uids of the sandbox users: one per job slot AND per grader instance (see
# allocate_uids), so that one submission's fork bomb cannot use up another's
# RLIMIT_NPROC, and two graders on one host never share a uid.
SANDBOX_UID_BASE = int(os.environ.get("ATTNLIB_GRADE_UID_BASE", "62000"))
UID_BLOCK = 16  # uids per grader instance: its job slots
UID_BLOCKS = 64
_HELD_LOCKS: list[int] = []


def allocate_uids(jobs: int) -> int:
    """The first of ``jobs`` sandbox uids that no other grader on this host holds.

    Blocks of :data:`UID_BLOCK` uids are claimed with ``flock`` on a lock file per
    block (released by the kernel when this process ends, even after ``kill -9``).
    """
    import fcntl

    if jobs > UID_BLOCK:
        raise ValueError(f"at most {UID_BLOCK} jobs per grader (got {jobs})")
    folder = os.environ.get("COURSETOOLS_LOCK_DIR", "/tmp")
    for block in range(UID_BLOCKS):
        path = os.path.join(folder, f".coursetools-grade-uids-{SANDBOX_UID_BASE + block * UID_BLOCK}.lock")
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        _HELD_LOCKS.append(fd)
        return SANDBOX_UID_BASE + block * UID_BLOCK
    raise RuntimeError(f"every block of sandbox uids is held by another grader ({UID_BLOCKS} blocks)")


def release_uids(base: int) -> None:
    """Give back the block of uids that :func:`allocate_uids` returned."""
    import fcntl

    for fd in list(_HELD_LOCKS):
        try:
            name = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            name = ""
        if name.endswith(f"-{base}.lock"):
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
            _HELD_LOCKS.remove(fd)


class MemoryGroup:
    """A memory cgroup for one job slot: every process of a submission counts against one limit.

    cgroup v2 where a writable cgroup2 mount offers the memory controller (``memory.max``,
    no swap), else the v1 memory hierarchy (``memory.limit_in_bytes``); :meth:`create`
    returns None where neither is writable (then only the per-process ``RLIMIT_AS`` and
    the process count bound a submission). The grader puts a run's first process into
    the group before sending it its plan, so learner code never runs outside it.
    """

    def __init__(self, path: str, kind: str):
        self.path = path
        self.kind = kind

    @classmethod
    def create(cls, name: str, limit_mb: int) -> MemoryGroup | None:
        if not sys.platform.startswith("linux") or os.geteuid() != 0:
            return None
        limit = str(int(limit_mb) << 20)
        for kind, top in _cgroup_roots():
            path = os.path.join(top, name)
            try:
                os.makedirs(path, exist_ok=True)
                if kind == "cgroup v2":
                    _write(os.path.join(path, "memory.max"), limit)
                    _write(os.path.join(path, "memory.swap.max"), "0", required=False)
                else:
                    _write(os.path.join(path, "memory.limit_in_bytes"), limit)
                    _write(os.path.join(path, "memory.memsw.limit_in_bytes"), limit, required=False)
                return cls(path, kind)
            except OSError:
                try:
                    os.rmdir(path)
                except OSError:
                    pass
        return None

    def add(self, pid: int) -> None:
        _write(os.path.join(self.path, "cgroup.procs"), str(pid))

    def remove(self) -> None:
        for _ in range(50):  # the last processes may still be exiting
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError:
                import time

                time.sleep(0.1)


class RunGroup:
    """The cgroups of one run: every process of the run is in them, and all die with :meth:`destroy`.

    Created for each run, joined by the run's first process before it receives
    its plan (so every process it starts is inside), and destroyed after the run:
    every task is killed (cgroup v2: ``cgroup.kill``; v1: the freezer group is
    frozen, each task killed, then thawed), the groups are checked empty and
    removed. Members, each where writable: a group in every writable cgroup2
    mount (below the slot's memory group when that is v2, so the slot's limit
    covers it), a v1 freezer group, and a v1 memory group below the slot's v1
    memory group. ``create`` returns a group without members where nothing is
    writable (a grader that is not root); the PID namespace's death and
    :func:`kill_uid` remain.
    """

    def __init__(self, members: list[tuple[str, str]]):
        self.members = members  # (kind, path): kind "v2", "freezer" or "memory"

    @classmethod
    def create(cls, name: str, memory_group: MemoryGroup | None = None) -> RunGroup:
        members: list[tuple[str, str]] = []
        if os.geteuid() != 0 or not sys.platform.startswith("linux"):
            return cls(members)
        tops: list[tuple[str, str]] = []
        for kind, point in _cgroup_mounts():
            if kind == "v2" and memory_group is not None and memory_group.kind == "cgroup v2":
                if under(memory_group.path, point):
                    point = memory_group.path
            elif kind == "memory":
                if memory_group is None or memory_group.kind != "cgroup v1":
                    continue
                point = memory_group.path
            tops.append((kind, point))
        for kind, top in tops:
            path = os.path.join(top, name)
            try:
                os.mkdir(path)
                members.append((kind, path))
            except OSError:
                continue
        return cls(members)

    def add(self, pid: int) -> list[str]:
        """Move ``pid`` into every member; the members it could not enter."""
        failed = []
        for kind, path in self.members:
            try:
                _write(os.path.join(path, "cgroup.procs"), str(pid))
            except OSError:
                failed.append(kind)
        return failed

    def pids(self) -> set[int]:
        found: set[int] = set()
        for _kind, path in self.members:
            try:
                with open(os.path.join(path, "cgroup.procs"), encoding="ascii") as fh:
                    found.update(int(x) for x in fh.read().split())
            except (OSError, ValueError):
                pass
        return found

    def destroy(self, timeout: float = 5.0) -> list[str]:
        """Kill every task of the run, check the groups empty and remove them; what went wrong."""
        import time

        problems: list[str] = []
        for kind, path in self.members:
            if kind == "v2":
                try:
                    _write(os.path.join(path, "cgroup.kill"), "1")
                except OSError:
                    pass  # a kernel before 5.14: the loop below kills task by task
            elif kind == "freezer":
                _freeze_and_kill(path)
        end = time.monotonic() + timeout
        while True:
            left = self.pids()
            if not left:
                break
            if time.monotonic() > end:
                problems.append(f"{len(left)} processes of the run could not be killed")
                break
            for pid in left:
                try:
                    os.kill(pid, 9)
                except OSError:
                    pass
            time.sleep(0.005)
        for kind, path in reversed(self.members):
            for _ in range(200):
                try:
                    os.rmdir(path)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.005)  # the last tasks are still exiting
            else:
                problems.append(f"the run's {kind} cgroup could not be removed")
        self.members = []
        return problems


def _freeze_and_kill(path: str) -> None:
    """cgroup v1: freeze the group (no task can fork while it is killed), kill each task, thaw."""
    import time

    state = os.path.join(path, "freezer.state")
    try:
        _write(state, "FROZEN")
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            with open(state, encoding="ascii") as fh:
                if fh.read().strip() == "FROZEN":
                    break
            time.sleep(0.002)
        with open(os.path.join(path, "cgroup.procs"), encoding="ascii") as fh:
            for pid in fh.read().split():
                try:
                    os.kill(int(pid), 9)
                except (OSError, ValueError):
                    pass
    except OSError:
        pass
    finally:
        try:
            _write(state, "THAWED")  # a frozen task does not die until thawed
        except OSError:
            pass


def _cgroup_mounts() -> list[tuple[str, str]]:
    """Writable cgroup mounts that a run's group can live in: every cgroup2 mount ("v2"),
    the v1 freezer hierarchy ("freezer") and the v1 memory hierarchy ("memory")."""
    found: list[tuple[str, str]] = []
    for entry in _writable_cgroup_mounts():
        if entry.fs_type == "cgroup2":
            found.append(("v2", entry.point))
        elif "freezer" in entry.super_options:
            found.append(("freezer", entry.point))
        elif "memory" in entry.super_options:
            found.append(("memory", entry.point))
    return found


def _writable_cgroup_mounts() -> list[MountEntry]:
    """The cgroup mounts (v1 and v2) of this mount namespace that this process may write to;
    none where ``/proc/self/mountinfo`` cannot be read."""
    try:
        entries = mountinfo_entries()
    except OSError:
        return []
    return [e for e in entries if e.fs_type in ("cgroup", "cgroup2") and os.access(e.point, os.W_OK)]


def sweep_memory_groups() -> None:
    """Remove the groups (slot and run groups) of graders that ended without cleaning up
    (``kill -9``): their tasks are killed first, then the folders removed bottom-up."""
    if os.geteuid() != 0:
        return
    tops = {top for _kind, top in _cgroup_roots()} | {top for _kind, top in _cgroup_mounts()}
    for top in tops:
        try:
            names = os.listdir(top)
        except OSError:
            continue
        for name in names:
            parts = name.split("-")
            if name.startswith("coursetools-grade-") and len(parts) > 2 and parts[2].isdigit():
                if not os.path.exists(f"/proc/{parts[2]}"):
                    _remove_tree(os.path.join(top, name))


def _remove_tree(path: str) -> None:
    for entry in os.scandir(path):
        if entry.is_dir(follow_symlinks=False):
            _remove_tree(entry.path)
    try:
        with open(os.path.join(path, "cgroup.procs"), encoding="ascii") as fh:
            for pid in fh.read().split():
                os.kill(int(pid), 9)
    except (OSError, ValueError):
        pass
    try:
        os.rmdir(path)
    except OSError:
        pass


def _write(path: str, text: str, required: bool = True) -> None:
    try:
        with open(path, "w", encoding="ascii") as fh:
            fh.write(text)
    except OSError:
        if required:
            raise


def _cgroup_roots() -> list[tuple[str, str]]:
    """Writable cgroup folders that offer the memory controller: v2 first, then v1."""
    found: list[tuple[str, str]] = []
    for entry in _writable_cgroup_mounts():
        if entry.fs_type == "cgroup2":
            try:
                with open(os.path.join(entry.point, "cgroup.controllers"), encoding="ascii") as fh:
                    if "memory" in fh.read().split():
                        found.insert(0, ("cgroup v2", entry.point))
            except OSError:
                pass
        elif "memory" in entry.super_options:
            found.append(("cgroup v1", entry.point))
    return found


def kill_uid(uid: int) -> None:
    """SIGKILL every process of ``uid`` (what a submission left behind: setsid, daemons).

    A forked helper takes the uid and calls ``kill(-1, SIGKILL)``, which reaches
    exactly the processes that uid may signal: its own. Root only; a no-op otherwise.
    """
    if os.geteuid() != 0 or not sys.platform.startswith("linux"):
        return
    if not _uid_processes(uid):
        return  # the usual case after a run's cgroup was killed: no fork of the grader needed
    for _ in range(3):  # a fork that raced with the kill: try again
        pid = os.fork()
        if pid == 0:
            try:
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)
                os.kill(-1, 9)
            except BaseException:  # noqa: BLE001, S110 - nothing left to kill
                pass
            os._exit(0)
        os.waitpid(pid, 0)
        if not _uid_processes(uid):
            return


def _uid_processes(uid: int) -> list[int]:
    """Live processes of ``uid`` (zombies, already dead and waiting to be reaped, are not counted)."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid != uid:
                    continue
                with open(os.path.join(entry.path, "stat"), "rb") as fh:
                    state = fh.read().rsplit(b")", 1)[1].split()[0]
                if state not in (b"Z", b"X"):
                    found.append(int(entry.name))
            except (OSError, IndexError):
                pass
    return found


Confinement = Literal["namespaces", "userns", "none"]  # what probe() finds


def probe() -> Confinement:
    """How children can be isolated here: ``"namespaces"``, ``"userns"`` or ``"none"``."""
    if not sys.platform.startswith("linux"):
        return "none"
    unshare = shutil.which("unshare")
    if not unshare:
        return "none"
    prefixes = [[unshare, *UNSHARE_FLAGS]]
    kinds: list[Confinement] = ["namespaces"]
    if os.geteuid() != 0:
        prefixes = [[unshare, "--user", "--map-root-user", *UNSHARE_FLAGS]]
        kinds = ["userns"]
    for prefix, kind in zip(prefixes, kinds, strict=True):
        try:
            proc = subprocess.run([*prefix, "true"], capture_output=True, timeout=20)
        except (OSError, subprocess.SubprocessError):
            continue
        if proc.returncode == 0:
            return kind
    return "none"


def describe(mode: str, uid_base: int | None, jobs: int, memory_groups: str | None, needed: list[str]) -> str:
    """What the isolation of a run amounts to, in words, for the grader's summary line.

    A grader that is not root still grades, with the isolation it can get: the
    namespaces of ``unshare --user`` (``userns``) or none; it says what that lacks.
    """
    text = [mode]
    if mode == "none":
        text.append("no namespaces: submissions see the file system, the network and IPC as their user does")
    root = os.geteuid() == 0
    if root and uid_base is not None and (mode == "namespaces" or (mode == "none" and traversable(needed))):
        text.append(f"a uid per job slot ({uid_base}-{uid_base + jobs - 1})")
    elif root:
        text.append("submissions stay root: the interpreter is not readable by other users")
    else:
        text.append("the grader is not root: submissions run as its own user (no uid per submission)")
        if mode not in ("namespaces", "userns"):
            text.append("a process that leaves its process group outlives grading")
    text.append(
        f"memory limited per submission ({memory_groups})"
        if memory_groups
        else "memory limited per process only (RLIMIT_AS): no writable memory cgroup"
    )
    return "; ".join(text)


def command(mode: str, argv: list[str]) -> list[str]:
    """The command line that starts ``argv`` isolated according to ``mode`` (see :func:`probe`)."""
    prefix: list[str] = []
    setpriv = shutil.which("setpriv") if sys.platform.startswith("linux") else None
    if setpriv:
        prefix = [setpriv, "--pdeathsig", "KILL", "--"]
    if mode == "namespaces":
        prefix += [shutil.which("unshare") or "unshare", *UNSHARE_FLAGS, "--"]
    elif mode == "userns":
        prefix += [shutil.which("unshare") or "unshare", "--user", "--map-root-user", *UNSHARE_FLAGS, "--"]
    return prefix + argv
