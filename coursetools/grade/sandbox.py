"""Isolation of a submission's processes: namespaces, an allow-listed root, limits, privileges.

Three parts:

* the grader (parent) side, :func:`probe` and :func:`command`, decides how the
  sandbox is started: under ``setpriv --pdeathsig KILL unshare --mount --net
  --ipc --pid --fork --kill-child --mount-proc`` where that works (Linux, root or
  unprivileged user namespaces), else as a plain child process; :class:`RunGroup`
  puts every process of a run in its own cgroups and kills them all after it,
  and :func:`kill_uid` kills what is left on the sandbox uid;
* the sandbox's trusted parent, :func:`enter`, builds a new root from an
  allow-list (:func:`build_root`: a tmpfs with read-only bind mounts of what
  grading needs, a private home) before any learner code;
* the learner's process, :func:`confine`: resource limits, the sandbox uid,
  no capabilities, ``no_new_privs`` and a seccomp filter (:func:`seccomp_program`).

Everything the platform refuses is recorded in the ``isolation`` report that the
harness sends back, and the grader shows it; a namespace mode whose root cannot
be built stops the run instead of running less isolated (issue 24).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import resource
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, NamedTuple

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
PR_SET_NO_NEW_PRIVS = 38

_FLAG_NAMES = {
    "nosuid": MS_NOSUID,
    "nodev": MS_NODEV,
    "noexec": MS_NOEXEC,
    "noatime": MS_NOATIME,
    "nodiratime": MS_NODIRATIME,
    "relatime": MS_RELATIME,
    "strictatime": MS_STRICTATIME,
}
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
                if _under(memory_group.path, point):
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


class _MountEntry(NamedTuple):
    """One line of ``/proc/self/mountinfo``."""

    point: str  # where it is mounted, unescaped
    fs_type: str  # "cgroup2", "cgroup", "tmpfs", ...
    options: list[str]  # this mount's options ("ro", "nosuid", ...)
    super_options: list[str]  # the file system's options (a v1 cgroup hierarchy's controllers)


def _mountinfo_entries() -> list[_MountEntry]:
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
        entries.append(_MountEntry(_unescape(fields[4]), tail[0], fields[5].split(","), super_options))
    return entries


def _cgroup_mounts() -> list[tuple[str, str]]:
    """Writable cgroup mounts that a run's group can live in: every cgroup2 mount ("v2"),
    the v1 freezer hierarchy ("freezer") and the v1 memory hierarchy ("memory")."""
    try:
        entries = _mountinfo_entries()
    except OSError:
        return []
    found: list[tuple[str, str]] = []
    for entry in entries:
        if entry.fs_type == "cgroup2":
            found.append(("v2", entry.point))
        elif entry.fs_type == "cgroup":
            if "freezer" in entry.super_options:
                found.append(("freezer", entry.point))
            elif "memory" in entry.super_options:
                found.append(("memory", entry.point))
    return [(k, p) for k, p in found if os.access(p, os.W_OK)]


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
    try:
        entries = _mountinfo_entries()
    except OSError:
        return []
    found: list[tuple[str, str]] = []
    for entry in entries:
        if entry.fs_type == "cgroup2":
            try:
                with open(os.path.join(entry.point, "cgroup.controllers"), encoding="ascii") as fh:
                    if "memory" in fh.read().split():
                        found.insert(0, ("cgroup v2", entry.point))
            except OSError:
                pass
        elif entry.fs_type == "cgroup" and "memory" in entry.super_options:
            found.append(("cgroup v1", entry.point))
    return [(k, p) for k, p in found if os.access(p, os.W_OK)]


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


# --------------------------------------------------------------------------- grader side


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
    if root and uid_base is not None and (mode == "namespaces" or (mode == "none" and _traversable(needed))):
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


# --------------------------------------------------------------------------- child side


def _libc():
    return ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)


def _mount(libc, source, target, fstype, flags, data=None) -> None:
    enc = [None if s is None else os.fsencode(s) for s in (source, target, fstype, data)]
    if libc.mount(enc[0], enc[1], enc[2], ctypes.c_ulong(flags), enc[3]) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {target}: {os.strerror(err)}")


def _unescape(path: str) -> str:
    return path.encode().decode("unicode_escape") if "\\" in path else path


def _mounts() -> list[tuple[str, int]]:
    """Mount points of this mount namespace with the flags to preserve on a remount."""
    found = []
    for entry in _mountinfo_entries():
        flags = 0
        for opt in entry.options:
            flags |= _FLAG_NAMES.get(opt, 0)
        found.append((entry.point, flags))
    return found


def _under(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


def set_pdeathsig() -> None:
    """Ask Linux to SIGKILL this process when the grader dies (a no-op elsewhere)."""
    if sys.platform.startswith("linux"):
        try:
            _libc().prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0)
        except (OSError, AttributeError):
            pass


def _open_up(libc, needed: list[str], stage: str, report: dict) -> None:
    """Make the folders the Python interpreter lives in traversable for the sandbox uid.

    A folder such as ``/root`` (mode 0700) that lies on the way to the
    interpreter is covered, inside this mount namespace only, by a tmpfs of
    mode 0755 into which the one needed child folder is bind-mounted back; the
    rest of the folder stays invisible.
    """
    for _ in range(8):
        blocked: dict[str, set[str]] = {}
        for path in needed:
            parts = Path(path).parts
            for i in range(1, len(parts) - 1):
                folder = str(Path(*parts[: i + 1]))
                try:
                    mode = os.stat(folder).st_mode
                except OSError:
                    break
                if not mode & 0o001:
                    blocked.setdefault(folder, set()).add(parts[i + 1])
                    break
        if not blocked:
            return
        for folder, children in blocked.items():
            staged = []
            for k, child in enumerate(sorted(children)):
                spot = os.path.join(stage, f"stage{len(report['opened'])}-{k}")
                os.makedirs(spot, exist_ok=True)
                src = os.path.join(folder, child)
                if os.path.isdir(src):
                    _mount(libc, src, spot, None, MS_BIND | MS_REC)
                    staged.append((child, spot))
            _mount(libc, "tmpfs", folder, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64k")
            for child, spot in staged:
                os.makedirs(os.path.join(folder, child), exist_ok=True)
                _mount(libc, spot, os.path.join(folder, child), None, MS_MOVE)
                os.rmdir(spot)
            report["opened"].append(folder)


# What a sandbox's root holds besides the interpreter and the packages (issue 24): the
# system's libraries and programs, a few files of /etc, device nodes, the CPU topology
# (torch's cpuinfo reads it). Nothing else of the host exists there: no /tmp, no /run,
# no home folders, no other checkout, no socket.
SYSTEM_DIRS = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin")
ETC_FILES = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/localtime",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/hosts",
)
DEV_NODES = ("null", "zero", "full", "random", "urandom")
SYS_DIRS = ("/sys/devices/system/cpu", "/sys/devices/system/node")
HOME = "/home/student"
MNT_DETACH = 2


@dataclass(frozen=True)
class SandboxConfig:
    """What the grader asks of one run's sandbox (sent in the run's plan, read by the harness).

    ``mode`` (from :func:`probe`), ``scratch`` (the host folder the new root is mounted on),
    ``scratch_mb`` (its size), ``hide`` (more folders the run must not see), ``needed``
    (folders the interpreter must read), ``uid`` (the sandbox uid; None: keep this one), and
    the learner's limits ``memory_mb``, ``nproc``, ``fsize_mb``, ``cpu_s`` (None or 0: unset).
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


def enter(settings: SandboxConfig) -> dict:
    """Confine the sandbox's trusted parent as ``settings`` asks; return what was achieved.

    In a namespace mode the process gets a new root built from an allow-list
    (:func:`build_root`): a tmpfs holding read-only bind mounts of exactly what
    grading needs and a private writable home folder, which becomes the working
    directory. Without namespaces the scratch folder is the working directory.
    The learner's limits, uid, capabilities and system-call filter are set later,
    in the learner's own process (:func:`confine`): this process stays the
    trusted parent that holds the grader's channel.

    ``settings``: :class:`SandboxConfig`. A namespace mode that cannot build its root raises
    OSError: a submission never runs with less isolation than its report says.
    """
    report: dict = {
        "mode": settings.mode,
        "network": False,
        "readonly": False,
        "root": [],
        "hidden": [],
        "opened": [],
        "uid": _host_uid(),  # as the host sees it (in a user namespace, uid 0 is the grader's own uid)
        "limits": [],
        "seccomp": False,
        "errors": [],
    }
    scratch = settings.scratch
    linux = sys.platform.startswith("linux")
    in_ns = report["mode"] in ("namespaces", "userns") and linux
    if in_ns:
        report["network"] = True  # a new network namespace: only a loopback, which is down
        build_root(settings, report)
        report["readonly"] = True
        os.chdir(HOME)
    else:
        os.makedirs(scratch, exist_ok=True)
        os.chdir(scratch)
    return report


def build_root(settings: SandboxConfig, report: dict) -> None:
    """Make this mount namespace's root a fresh tmpfs with only what grading needs.

    On the (host) folder ``settings.scratch``: a tmpfs that becomes ``/`` by
    ``pivot_root``, into which the system folders (:data:`SYSTEM_DIRS`, or their
    symbolic links), a few files of ``/etc``, the ``needed`` folders (the
    interpreter, the virtual environment, the course's packages) are bind-mounted
    read-only at their own paths; ``/proc`` (this PID namespace's), a few device
    nodes, a private ``/dev/shm``, and a writable tmpfs home (:data:`HOME`, also
    ``/tmp``) of ``scratch_mb``. ``attnlib/checks`` is left out: the harness has
    imported the checker's machinery before (the check modules never enter the
    sandbox). The old root is detached, so ``/proc/self/mountinfo`` names only
    these mounts.
    """
    libc = _libc()
    _mount(libc, None, "/", None, MS_REC | MS_PRIVATE)
    new = os.path.realpath(settings.scratch)
    os.makedirs(new, exist_ok=True)
    _mount(libc, "tmpfs", new, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m,nr_inodes=4096")
    binds: list[str] = []

    def bind(src: str, recursive: bool = True) -> None:
        target = new + src
        if os.path.isdir(src) and not os.path.islink(src):
            os.makedirs(target, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            if not os.path.lexists(target):
                with open(target, "wb"):
                    pass
        _mount(libc, src, target, None, MS_BIND | (MS_REC if recursive else 0))
        binds.append(src)

    for top in SYSTEM_DIRS:
        if os.path.islink(top):
            os.symlink(os.readlink(top), new + top)
        elif os.path.isdir(top):
            bind(top)
    os.makedirs(new + "/etc", exist_ok=True)
    for path in ETC_FILES:
        if os.path.islink(path):
            os.symlink(os.readlink(path), new + path)
        elif os.path.isfile(path):
            bind(path, recursive=False)
    needed = sorted({os.path.realpath(p) for p in settings.needed}, key=len)
    for path in needed:
        if not os.path.exists(path) or any(_under(path, b) for b in binds):
            continue
        name = os.path.basename(path)
        if name == "attnlib" and os.path.isdir(os.path.join(path, "checks")):
            # the package without its check modules: each entry but checks/ on its own
            os.makedirs(new + path, exist_ok=True)
            for entry in sorted(os.listdir(path)):
                if entry != "checks":
                    bind(os.path.join(path, entry))
            continue
        bind(path)
    for path in SYS_DIRS:
        if os.path.isdir(path):
            try:
                bind(path)
            except OSError as exc:
                report["errors"].append(str(exc))
    # this PID namespace's /proc (mounted by unshare --mount-proc or the zygote)
    os.makedirs(new + "/proc", exist_ok=True)
    _mount(libc, "/proc", new + "/proc", None, MS_BIND | MS_REC)
    os.makedirs(new + "/dev", exist_ok=True)
    _mount(libc, "tmpfs", new + "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k")
    for node in DEV_NODES:
        if os.path.exists("/dev/" + node):
            bind("/dev/" + node, recursive=False)
    for name, target in (
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ):
        os.symlink(target, f"{new}/dev/{name}")
    os.makedirs(new + "/dev/shm")
    _mount(libc, "tmpfs", new + "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=16m")
    size = int(settings.scratch_mb)
    os.makedirs(new + HOME)
    _mount(libc, "tmpfs", new + HOME, "tmpfs", MS_NOSUID | MS_NODEV, f"mode=0755,size={size}m")
    if not os.path.exists(new + "/tmp"):
        os.makedirs(new + "/tmp")
        _mount(libc, new + HOME, new + "/tmp", None, MS_BIND)
    # else: the checkout (or the venv) lives under /tmp: the sandbox's /tmp then holds only the
    # folders on the way to it (read-only), nothing else of the host's /tmp
    os.makedirs(new + "/.old")
    os.chdir(new)
    if libc.syscall(_PIVOT_ROOT.get(_machine(), -1), b".", b".old") != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"pivot_root: {os.strerror(err)}")
    os.chdir("/")
    if libc.umount2(b"/.old", MNT_DETACH) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"detaching the old root: {os.strerror(err)}")
    os.rmdir("/.old")
    # everything read-only but the home folder (and /tmp, the same), /dev/shm, /proc
    writable = {HOME, "/tmp", "/dev/shm", "/proc"}
    for point, flags in _mounts():
        if point in writable or _under(point, "/proc"):
            continue
        try:
            _mount(libc, None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY | flags)
        except OSError as exc:
            if point == "/":
                raise
            report["errors"].append(str(exc))
    report["root"] = sorted(set(binds))
    # what the grader asked to hide is simply not there (the host's /tmp: a fresh one)
    wanted = [
        *settings.hide,
        *(os.path.join(p, "checks") for p in needed if p.endswith("/attnlib")),
    ]
    report["hidden"] = sorted({h for h in wanted if h == "/tmp" or not os.path.exists(h)})


def _machine() -> str:
    return os.uname().machine


_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}


def confine(settings: SandboxConfig, report: dict) -> None:
    """Confine the learner's process (a child of the trusted parent), before any learner code.

    Resource limits; the sandbox uid when the grader is root (then the home
    folder is handed to it); no capabilities at all (in a user namespace the
    process would otherwise keep root's there); ``no_new_privs``; and a seccomp
    filter (:func:`install_seccomp`) that refuses ``socket()`` of every family,
    ``ptrace``, access to other processes' memory, mounts and new namespaces.
    What was achieved is added to ``report``.
    """
    linux = sys.platform.startswith("linux")
    _limits(settings, report)
    home = os.getcwd()
    uid = settings.uid
    if uid is not None and os.getuid() == 0 and _real_root():
        if _traversable(list(settings.needed)):
            try:
                os.chown(home, uid, uid)
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)
                report["uid"] = uid
                # a change of credentials clears the parent-death signal: arm it again
                set_pdeathsig()
            except OSError as exc:
                report["errors"].append(f"could not drop privileges: {exc}")
        else:
            report["errors"].append("stayed root: the interpreter is not readable by other users")
    if linux:
        libc = _libc()
        try:
            drop_capabilities(libc)
        except OSError as exc:
            report["errors"].append(str(exc))
        libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        # a forked child does not inherit the parent-death signal, and a change of uid clears
        # it: arm it here in every mode (in userns mode the uid never changes)
        set_pdeathsig()
        try:
            install_seccomp(libc)
            report["seccomp"] = True
        except OSError as exc:
            report["errors"].append(str(exc))


PR_CAPBSET_DROP = 24
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
PR_SET_DUMPABLE = 4


def drop_capabilities(libc) -> None:
    """Drop every capability: bounding set, ambient set, then effective, permitted, inheritable."""
    for cap in range(64):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() == errno.EINVAL:
            break  # past the last capability this kernel knows
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()
    if libc.capset(header, data) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"capset: {os.strerror(err)}")


def set_dumpable(value: bool) -> None:
    """``PR_SET_DUMPABLE``: a process that is not dumpable cannot be traced or read through
    ``/proc/<pid>/mem`` by a process of the same uid without ``CAP_SYS_PTRACE``."""
    if sys.platform.startswith("linux"):
        _libc().prctl(PR_SET_DUMPABLE, int(value), 0, 0, 0)


# --------------------------------------------------------------------------- seccomp

_SECCOMP_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
# system calls refused to learner code, by architecture: socket() of every family (a
# socketpair stays possible), tracing and other processes' memory, mounts, namespaces,
# the kernel's keyring, BPF, perf, userfaultfd, io_uring, handles to files by number
_SECCOMP_DENY = {
    "x86_64": {
        "socket": 41,
        "ptrace": 101,
        "process_vm_readv": 310,
        "process_vm_writev": 311,
        "mount": 165,
        "umount2": 166,
        "pivot_root": 155,
        "chroot": 161,
        "unshare": 272,
        "setns": 308,
        "keyctl": 250,
        "add_key": 248,
        "request_key": 249,
        "bpf": 321,
        "perf_event_open": 298,
        "userfaultfd": 323,
        "io_uring_setup": 425,
        "open_by_handle_at": 304,
        "name_to_handle_at": 303,
        "kcmp": 312,
        "pidfd_getfd": 438,
        "fsopen": 430,
        "fsmount": 432,
        "open_tree": 428,
        "move_mount": 429,
        "mount_setattr": 442,
        "init_module": 175,
        "finit_module": 313,
        "kexec_load": 246,
        "acct": 163,
        "swapon": 167,
        "reboot": 169,
        "syslog": 103,
    },
    "aarch64": {
        "socket": 198,
        "ptrace": 117,
        "process_vm_readv": 270,
        "process_vm_writev": 271,
        "mount": 40,
        "umount2": 39,
        "pivot_root": 41,
        "chroot": 51,
        "unshare": 97,
        "setns": 268,
        "keyctl": 219,
        "add_key": 217,
        "request_key": 218,
        "bpf": 280,
        "perf_event_open": 241,
        "userfaultfd": 282,
        "io_uring_setup": 425,
        "open_by_handle_at": 265,
        "name_to_handle_at": 264,
        "kcmp": 272,
        "pidfd_getfd": 438,
        "fsopen": 430,
        "fsmount": 432,
        "open_tree": 428,
        "move_mount": 429,
        "mount_setattr": 442,
        "init_module": 105,
        "finit_module": 273,
        "kexec_load": 104,
        "acct": 89,
        "swapon": 224,
        "reboot": 142,
        "syslog": 116,
    },
}
_CLONE = {"x86_64": 56, "aarch64": 220}
_CLONE3 = 435
# clone() flags that make a new namespace (user, mount, PID, network, IPC, UTS, cgroup, time)
_CLONE_NEW = 0x10000000 | 0x00020000 | 0x20000000 | 0x40000000 | 0x08000000 | 0x04000000 | 0x02000000 | 0x80
_SECCOMP_RET_ALLOW = 0x7FFF0000
_SECCOMP_RET_ERRNO = 0x00050000
_SECCOMP_RET_KILL_PROCESS = 0x80000000
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2


class _SockFilter(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    ]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def seccomp_program(machine: str | None = None) -> list[tuple[int, int, int, int]]:
    """The BPF program of the learner's seccomp filter, as ``(code, jt, jf, k)`` rows.

    Another architecture than the one named is killed (a 32-bit entry into a
    64-bit kernel reads other numbers); on x86_64 the x32 calls (bit 30) are
    refused; each call of :data:`_SECCOMP_DENY` returns ``EPERM``; ``clone``
    with a namespace flag returns ``EPERM``; ``clone3`` (whose flags a filter
    cannot read) returns ``ENOSYS``, so that the C library falls back to ``clone``.
    """
    machine = machine or _machine()
    if machine not in _SECCOMP_ARCH:
        raise OSError(errno.ENOSYS, f"no seccomp filter for {machine}")
    ld_w_abs, jeq, jset, jge, ret = 0x20, 0x15, 0x45, 0x35, 0x06
    eperm = _SECCOMP_RET_ERRNO | errno.EPERM
    prog = [
        (ld_w_abs, 0, 0, 4),  # seccomp_data.arch
        (jeq, 1, 0, _SECCOMP_ARCH[machine]),
        (ret, 0, 0, _SECCOMP_RET_KILL_PROCESS),
        (ld_w_abs, 0, 0, 0),  # seccomp_data.nr
    ]
    if machine == "x86_64":
        prog += [(jge, 0, 1, 0x40000000), (ret, 0, 0, eperm)]
    for nr in sorted(set(_SECCOMP_DENY[machine].values())):
        prog += [(jeq, 0, 1, nr), (ret, 0, 0, eperm)]
    prog += [(jeq, 0, 1, _CLONE3), (ret, 0, 0, _SECCOMP_RET_ERRNO | errno.ENOSYS)]
    prog += [
        (jeq, 0, 3, _CLONE[machine]),
        (ld_w_abs, 0, 0, 16),  # the low 32 bits of args[0]: clone's flags
        (jset, 0, 1, _CLONE_NEW),
        (ret, 0, 0, eperm),
        (ret, 0, 0, _SECCOMP_RET_ALLOW),
    ]
    return prog


def install_seccomp(libc=None) -> None:
    """Install :func:`seccomp_program` on this process (and every process it starts)."""
    libc = libc or _libc()
    rows = seccomp_program()
    array = (_SockFilter * len(rows))(*[_SockFilter(*row) for row in rows])
    prog = _SockFprog(len(rows), array)
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"seccomp: {os.strerror(err)}")


def _host_uid() -> int:
    """This process's uid as the host sees it: through ``/proc/self/uid_map`` in a user namespace."""
    uid = os.getuid()
    try:
        with open("/proc/self/uid_map", encoding="ascii") as fh:
            for line in fh:
                inside, outside, count = (int(x) for x in line.split())
                if inside <= uid < inside + count:
                    return outside + uid - inside
    except (OSError, ValueError):
        pass
    return uid


def _real_root() -> bool:
    """True when uid 0 here is the host's root (no user namespace maps it elsewhere)."""
    try:
        with open("/proc/self/uid_map", encoding="ascii") as fh:
            first = fh.read().split()
        return first[:2] == ["0", "0"]
    except OSError:
        return True


def _traversable(paths) -> bool:
    for path in paths:
        parts = Path(os.path.realpath(path)).parts
        for i in range(1, len(parts)):
            try:
                if not os.stat(str(Path(*parts[: i + 1]))).st_mode & 0o001:
                    return False
            except OSError:
                return False
    return True


def _user_process_count() -> int:
    uid = os.getuid()
    count = 0
    try:
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                try:
                    if entry.stat().st_uid == uid:
                        count += 1
                except OSError:
                    pass
    except OSError:
        return 0
    return count


def _limits(settings: SandboxConfig, report: dict) -> None:
    mb = 1 << 20
    wanted = []
    if settings.memory_mb:
        wanted.append(("RLIMIT_AS", int(settings.memory_mb) * mb))
    if settings.fsize_mb:
        wanted.append(("RLIMIT_FSIZE", int(settings.fsize_mb) * mb))
    if settings.cpu_s:
        wanted.append(("RLIMIT_CPU", int(settings.cpu_s)))
    wanted.append(("RLIMIT_CORE", 0))
    nproc = settings.nproc
    if nproc:
        dropping = settings.uid is not None and os.getuid() == 0
        # without a uid of its own, the limit counts every process of this user
        wanted.append(("RLIMIT_NPROC", int(nproc) + (0 if dropping else _user_process_count())))
    for name, value in wanted:
        which = getattr(resource, name, None)
        if which is None:
            continue
        try:
            soft, hard = resource.getrlimit(which)
            if hard != resource.RLIM_INFINITY:
                value = min(value, hard)
            resource.setrlimit(which, (value, value))
            report["limits"].append(name)
        except (ValueError, OSError) as exc:
            report["errors"].append(f"{name}: {exc}")
